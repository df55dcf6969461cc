#include "daemon/server/profile_options.h"

#include <algorithm>
#include <set>

namespace vaed::server {

std::string JoinProfiles(const std::vector<std::string>& profiles) {
  std::string s;
  for (const std::string& p : profiles) s += (s.empty() ? "" : ", ") + p;
  return s;
}

Status ValidateProfileOptions(const ProfileOptions& o) {
  if (o.allowed.empty()) {
    return InvalidArgument("profiles.allowed is empty; allow at least one of " +
                           JoinProfiles(KnownProfiles()));
  }
  std::set<std::string> seen;
  for (const std::string& p : o.allowed) {
    if (std::find(KnownProfiles().begin(), KnownProfiles().end(), p) == KnownProfiles().end()) {
      return InvalidArgument("profiles.allowed lists '" + p + "'; profiles are " +
                             JoinProfiles(KnownProfiles()));
    }
    if (!seen.insert(p).second) {
      return InvalidArgument("profiles.allowed lists '" + p + "' twice");
    }
  }
  if (std::find(o.allowed.begin(), o.allowed.end(), o.default_profile) == o.allowed.end()) {
    return InvalidArgument("profiles.default '" + o.default_profile +
                           "' is not in profiles.allowed (" + JoinProfiles(o.allowed) + ")");
  }
  return Status::Ok();
}

}  // namespace vaed::server
