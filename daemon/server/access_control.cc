#include "daemon/server/access_control.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>

namespace vaed::server {

namespace {

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// The uid's groups from its passwd entry (primary + supplementary); empty
// when the uid has no passwd entry.
std::vector<gid_t> GroupsOfUid(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return {};
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return {pw.pw_gid};
  }
  groups.resize(static_cast<size_t>(n));
  return groups;
}

}  // namespace

Result<gid_t> ResolveGroup(const std::string& name_or_gid, std::string_view field) {
  gid_t gid = 0;
  const auto [end, ec] =
      std::from_chars(name_or_gid.data(), name_or_gid.data() + name_or_gid.size(), gid);
  if (!name_or_gid.empty() && ec == std::errc() && end == name_or_gid.data() + name_or_gid.size()) {
    return gid;
  }
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  if (getgrnam_r(name_or_gid.c_str(), &gr, buf.data(), buf.size(), &found) != 0 ||
      found == nullptr) {
    return InvalidArgument(std::string(field) + " is '" + name_or_gid +
                           "'; no such group on this host (give a group name or a numeric gid)");
  }
  return gr.gr_gid;
}

Result<AccessPolicy> AccessPolicy::Create(const std::vector<uint32_t>& allowed_uids,
                                          const std::vector<std::string>& allowed_groups,
                                          const std::vector<uint32_t>& admin_uids) {
  AccessPolicy p;
  p.self_uid_ = static_cast<uint32_t>(geteuid());
  for (uint32_t u : allowed_uids) {
    p.uids_.insert(u);
    p.uids_text_ += (p.uids_text_.empty() ? "" : ", ") + std::to_string(u);
  }
  for (size_t i = 0; i < allowed_groups.size(); ++i) {
    VAED_ASSIGN_OR_RETURN(gid_t gid, ResolveGroup(allowed_groups[i], "server.allowed_groups[" +
                                                                         std::to_string(i) + "]"));
    p.gids_.insert(gid);
    p.groups_text_ += (p.groups_text_.empty() ? "" : ", ") + allowed_groups[i];
  }
  p.admin_uids_.insert(admin_uids.begin(), admin_uids.end());
  return p;
}

Status AccessPolicy::Admit(const PeerCredentials& peer) const {
  if (!restricted() || peer.uid == 0 || peer.uid == self_uid_ || uids_.count(peer.uid) > 0 ||
      gids_.count(peer.gid) > 0) {
    return Status::Ok();
  }
  if (!gids_.empty()) {
    for (gid_t g : GroupsOfUid(peer.uid)) {
      if (gids_.count(g) > 0) return Status::Ok();
    }
  }
  return PermissionDenied(
      "peer uid " + std::to_string(peer.uid) + " gid " + std::to_string(peer.gid) + " pid " +
      std::to_string(peer.pid) + " is not admitted: its uid is not in server.allowed_uids [" +
      uids_text_ + "] and none of its groups is in server.allowed_groups [" + groups_text_ + "]");
}

bool AccessPolicy::IsAdmin(const PeerCredentials& peer) const {
  return peer.uid == 0 || peer.uid == self_uid_ || admin_uids_.count(peer.uid) > 0;
}

Status PrepareSocketDirectory(const std::string& socket_path, std::optional<gid_t> group) {
  std::filesystem::path dir = std::filesystem::path(socket_path).parent_path();
  if (dir.empty()) dir = ".";  // a relative name: the working directory
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoStatus(errno, "server.socket directory " + dir.string());
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError("creating socket directory '" + dir.string() + "': " + ec.message());
    if (::chmod(dir.c_str(), 0750) != 0) {
      return ErrnoStatus(errno, "chmod 0750 " + dir.string());
    }
    if (group && ::chown(dir.c_str(), static_cast<uid_t>(-1), *group) != 0) {
      return ErrnoStatus(errno, "chgrp " + std::to_string(*group) + " " + dir.string());
    }
    return Status::Ok();
  }
  if (S_ISLNK(st.st_mode)) {
    return FailedPrecondition("server.socket directory " + dir.string() +
                              " is a symbolic link; give the real directory");
  }
  if (!S_ISDIR(st.st_mode)) {
    return FailedPrecondition("server.socket directory " + dir.string() + " is not a directory");
  }
  if ((st.st_mode & 0007) != 0) {
    return FailedPrecondition(
        "server.socket directory " + dir.string() + " has mode " + Octal(st.st_mode) +
        ", which lets every user reach the control socket; use a directory that admits only "
        "its group (e.g. /run/vaed from systemd's RuntimeDirectory=, or chmod o-rwx " +
        dir.string() + ")");
  }
  return Status::Ok();
}

Status SecureSocketFile(const std::string& socket_path, std::optional<gid_t> group) {
  if (::chmod(socket_path.c_str(), 0660) != 0) {
    return ErrnoStatus(errno, "chmod 0660 " + socket_path);
  }
  if (group && ::chown(socket_path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return ErrnoStatus(errno, "chgrp " + std::to_string(*group) + " " + socket_path);
  }
  return Status::Ok();
}

}  // namespace vaed::server
