#include "daemon/server/startup_checks.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "daemon/server/access_control.h"

namespace vaed::server {
namespace {

// True when a process accepts connections on the Unix socket `path`.
bool SocketIsServed(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool served = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return served;
}

Status CheckReadableFile(const std::string& path, const std::string& key) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) {
    return FailedPrecondition(key + " '" + path + "' does not exist").WithField(key);
  }
  if (!std::filesystem::is_regular_file(st)) {
    return FailedPrecondition(key + " '" + path + "' is not a regular file").WithField(key);
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return FailedPrecondition(key + " '" + path + "' is not readable by this process (uid " +
                              std::to_string(::geteuid()) + "): " + std::strerror(errno))
        .WithField(key);
  }
  return Status::Ok();
}

}  // namespace

Status CheckSocketPath(const std::string& path, std::optional<gid_t> group) {
  VAED_RETURN_IF_ERROR(PrepareSocketDirectory(path, group));
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::symlink_status(path, ec);
  if (!std::filesystem::exists(st)) return Status::Ok();
  // ZeroMQ would unlink whatever is at the path: never a file, directory
  // or link of someone else's, and never a socket a live daemon serves.
  if (!std::filesystem::is_socket(st)) {
    return FailedPrecondition("server.socket " + path +
                              " exists and is not a socket; refusing to replace it")
        .WithField("server.socket");
  }
  if (SocketIsServed(path)) {
    return FailedPrecondition("another process is already serving " + path +
                              " (is vaed running? see `vaectl status`)")
        .WithField("server.socket");
  }
  return Status::Ok();
}

Status CheckModelFiles(const DaemonOptions& options) {
  for (size_t i = 0; i < options.models.entries.size(); ++i) {
    const models::ModelConfig& m = options.models.entries[i];
    const std::string entry = "models.entry[" + std::to_string(i) + "].";
    const std::vector<std::pair<const char*, const std::string*>> files = {
        {"weights", &m.weights_path},  // the TOML keys (config_keys.cc)
        {"config", &m.config_path},
        {"audio_weights", &m.audio_weights_path},
        {"audio_config", &m.audio_config_path}};
    for (const auto& [key, path] : files) {
      if (path->empty()) continue;
      VAED_RETURN_IF_ERROR(CheckReadableFile(*path, entry + key));
    }
  }
  return Status::Ok();
}

Status CheckBeforeLoading(const DaemonOptions& options) {
  std::optional<gid_t> group;
  if (!options.server.socket_group.empty()) {
    VAED_ASSIGN_OR_RETURN(group, ResolveGroup(options.server.socket_group, "server.socket_group"));
  }
  VAED_RETURN_IF_ERROR(AccessPolicy::Create(options.server.allowed_uids,
                                            options.server.allowed_groups,
                                            options.server.admin_uids)
                           .status());
  VAED_RETURN_IF_ERROR(CheckSocketPath(options.server.socket, group));
  return CheckModelFiles(options);
}

}  // namespace vaed::server
