#include "daemon/server/profile_options.h"

#include <algorithm>
#include <set>

namespace vaed::server {

std::string JoinProfiles(const std::vector<Profile>& profiles) {
  std::string s;
  for (Profile p : profiles) s += (s.empty() ? "" : ", ") + ProfileName(p);
  return s;
}

Status ValidateProfileOptions(const ProfileOptions& o) {
  if (o.allowed.empty()) {
    return InvalidArgument("profiles.allowed is empty; allow at least one of " +
                           models::JoinedNames(kProfileNames));
  }
  std::set<Profile> seen;
  for (Profile p : o.allowed) {
    if (!seen.insert(p).second) {
      return InvalidArgument("profiles.allowed lists '" + ProfileName(p) + "' twice");
    }
  }
  if (std::find(o.allowed.begin(), o.allowed.end(), o.default_profile) == o.allowed.end()) {
    return InvalidArgument("profiles.default '" + ProfileName(o.default_profile) +
                           "' is not in profiles.allowed (" + JoinProfiles(o.allowed) + ")");
  }
  return Status::Ok();
}

}  // namespace vaed::server
