// The operator's decode-profile policy: config table [profiles]. What each
// profile does to a request is decode_options.h's. Kept free of LibTorch so
// that the config code does not compile against it.
//
// Thread-safety: plain values and pure functions.
#ifndef VAED_DAEMON_SERVER_PROFILE_OPTIONS_H_
#define VAED_DAEMON_SERVER_PROFILE_OPTIONS_H_

#include <string>
#include <vector>

#include "daemon/models/named_enum.h"
#include "vaed/status.h"

namespace vaed::server {

// The decode profiles (what each does to a request: decode_options.h).
enum class Profile { kSafe, kOptimized, kDiagnostic, kStudent };
inline constexpr models::NameTable<Profile, 4> kProfileNames = {{
    {Profile::kSafe, "safe"},
    {Profile::kOptimized, "optimized"},
    {Profile::kDiagnostic, "diagnostic"},
    {Profile::kStudent, "student"},
}};

// "safe", "optimized", ... (replies, logs, metrics labels, messages).
inline std::string ProfileName(Profile profile) {
  return std::string(models::NameOf(kProfileNames, profile));
}

// The operator's profile policy (config table [profiles]).
struct ProfileOptions {
  // Used when a request names no profile. Must be in `allowed`.
  Profile default_profile = Profile::kSafe;
  // Profiles requests may ask for; student only makes sense where a model
  // has a student decoder.
  std::vector<Profile> allowed = {Profile::kSafe, Profile::kOptimized, Profile::kDiagnostic};
};

// kInvalidArgument naming the key when the list is empty or has
// duplicates, or the default is not allowed.
Status ValidateProfileOptions(const ProfileOptions& options);

// "safe, optimized" (for messages).
std::string JoinProfiles(const std::vector<Profile>& profiles);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_PROFILE_OPTIONS_H_
