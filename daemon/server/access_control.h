// Who may talk to the daemon (DESIGN.md §4 item 1).
//
// Two layers:
//  1. The file system: the control socket lives in a directory that admits
//     only its group (mode 0750, no access for others) and the socket file
//     is 0660, both with group server.socket_group. A process outside the
//     group cannot reach the socket at all.
//  2. Peer credentials: when a connection is made, the control loop reads
//     the uid/gid/pid the kernel recorded (SO_PEERCRED; peer.h) from
//     ZeroMQ's connect notice and refuses peers that server.allowed_uids /
//     server.allowed_groups do not admit: the connection gets one
//     PERMISSION_DENIED reply and is closed; nothing it sends is read.
//
// Thread-safety: AccessPolicy is immutable after Create(); const methods
// are safe from any thread.
#ifndef VAED_DAEMON_SERVER_ACCESS_CONTROL_H_
#define VAED_DAEMON_SERVER_ACCESS_CONTROL_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/server/peer.h"
#include "vaed/status.h"

namespace vaed::server {

// A group given by name or as a decimal gid. kInvalidArgument naming
// `field` when no such group exists.
Result<gid_t> ResolveGroup(const std::string& name_or_gid, std::string_view field);

class AccessPolicy {
 public:
  // `allowed_uids` / `allowed_groups` (names or gids) from the config; both
  // empty admits every peer that can reach the socket. uid 0 and the
  // daemon's own uid are always admitted (they can bypass any check) and
  // are admins, as are `admin_uids`. Errors: an unknown group, naming
  // server.allowed_groups[i].
  static Result<AccessPolicy> Create(const std::vector<uint32_t>& allowed_uids,
                                     const std::vector<std::string>& allowed_groups,
                                     const std::vector<uint32_t>& admin_uids);

  // OK, or kPermissionDenied: "peer uid U gid G pid P is not admitted:
  // uid not in server.allowed_uids [..] and no group in
  // server.allowed_groups [..]". Supplementary groups are those of the
  // uid's passwd entry (getgrouplist).
  Status Admit(const PeerCredentials& peer) const;

  // May run admin requests (ReleaseQuarantine).
  bool IsAdmin(const PeerCredentials& peer) const;

  // True when allowed_uids or allowed_groups is set.
  bool restricted() const { return !uids_.empty() || !gids_.empty(); }

 private:
  std::set<uint32_t> uids_;
  std::set<gid_t> gids_;
  std::set<uint32_t> admin_uids_;
  std::string uids_text_, groups_text_;  // for the error message
  uint32_t self_uid_ = 0;
};

// Creates the socket's directory when missing (mode 0750, group `group` if
// set); an existing one must be a real directory (not a symlink) that
// grants nothing to other users. Errors: kFailedPrecondition naming the
// directory, its mode and the fix; kIoError when it cannot be created.
Status PrepareSocketDirectory(const std::string& socket_path, std::optional<gid_t> group);

// Gives the bound socket file mode 0660 and group `group` (if set).
Status SecureSocketFile(const std::string& socket_path, std::optional<gid_t> group);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_ACCESS_CONTROL_H_
