#include "daemon_access.h"

#include <fcntl.h>
#include <sys/acl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace vaed::client {

Status CheckSocketFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == EACCES) {
      return PermissionDenied("cannot reach the control socket " + path +
                              ": permission denied on its directory (run as a member of the "
                              "daemon's socket group, e.g. group vaed)");
    }
    return Unavailable("vaed is not running: no control socket at " + path +
                       " (start it with `vaed` or `systemctl start vaed`)");
  }
  if (!S_ISSOCK(st.st_mode)) return Unavailable(path + " exists but is not a socket");
  return Status::Ok();
}

void GrantDaemonAccess(const std::string& name, const std::string& socket) {
  struct stat sock {};
  if (::stat(socket.c_str(), &sock) != 0) return;
  if (sock.st_uid == 0 || sock.st_uid == ::geteuid()) return;
  const std::string text = "u::rw-,u:" + std::to_string(sock.st_uid) + ":rw-,g::---,m::rw-,o::---";
  const int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) return;
  acl_t acl = ::acl_from_text(text.c_str());
  const bool granted = acl != nullptr && ::acl_set_fd(fd, acl) == 0;
  if (acl != nullptr) ::acl_free(acl);
  if (!granted) {
    struct stat seg {};
    if (::fstat(fd, &seg) == 0 && seg.st_gid != sock.st_gid) {
      (void)::fchown(fd, static_cast<uid_t>(-1), sock.st_gid);
    }
    (void)::fchmod(fd, 0660);
  }
  ::close(fd);
}

}  // namespace vaed::client
