// What the operating system says about reaching the daemon: whether its
// control socket is there, and letting the daemon (and only it) open a
// segment this process created. Internal to the client library.
//
// Thread-safety: no shared state; safe from any thread.
#ifndef VAED_CLIENT_SRC_DAEMON_ACCESS_H_
#define VAED_CLIENT_SRC_DAEMON_ACCESS_H_

#include <string>

#include "vaed/status.h"

namespace vaed::client {

// OK when `path` is a socket. Otherwise kUnavailable naming what is there
// instead (nothing: "vaed is not running"; another kind of file), or
// kPermissionDenied when its directory may not be searched.
Status CheckSocketFile(const std::string& path);

// Lets the daemon, and only the daemon, open segment `name` (created mode
// 0600). The daemon runs as the owner of the control socket file `socket`.
// Same uid as this process, or root: nothing to do. Another uid: a POSIX
// ACL grants read-write to exactly that uid (user:<uid>:rw-, mask rw-), so
// members of the daemon's group cannot open each other's segments through
// /dev/shm. When the ACL cannot be set (e.g. ENOTSUP: a file system
// without ACLs) the segment gets the socket's group and mode 0660 instead
// (this process is in that group to reach the socket). Best effort, no
// error: when both fail, the daemon's registration error says what is
// wrong.
void GrantDaemonAccess(const std::string& name, const std::string& socket);

}  // namespace vaed::client

#endif  // VAED_CLIENT_SRC_DAEMON_ACCESS_H_
