// The operator's decode-profile policy: config table [profiles]. What each
// profile does to a request is decode_options.h's. Kept free of LibTorch so
// that the config code does not compile against it.
//
// Thread-safety: plain values and pure functions.
#ifndef VAED_DAEMON_SERVER_PROFILE_OPTIONS_H_
#define VAED_DAEMON_SERVER_PROFILE_OPTIONS_H_

#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::server {

// The profile names, in documentation order.
inline const std::vector<std::string>& KnownProfiles() {
  static const std::vector<std::string> kProfiles = {"safe", "optimized", "diagnostic", "student"};
  return kProfiles;
}

// The operator's profile policy (config table [profiles]).
struct ProfileOptions {
  // Used when a request names no profile. Must be in `allowed`.
  std::string default_profile = "safe";
  // Profiles requests may ask for; "student" only makes sense where a model
  // has a student decoder.
  std::vector<std::string> allowed = {"safe", "optimized", "diagnostic"};
};

// kInvalidArgument naming the key when a name is not a known profile, the
// list is empty or has duplicates, or the default is not allowed.
Status ValidateProfileOptions(const ProfileOptions& options);

// "safe, optimized" (for messages).
std::string JoinProfiles(const std::vector<std::string>& profiles);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_PROFILE_OPTIONS_H_
