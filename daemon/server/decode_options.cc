#include "daemon/server/decode_options.h"

#include <algorithm>
#include <set>

namespace vaed::server {

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string ModelText(const models::ModelInfo& m) {
  return "model '" + m.name + "' (kind " + m.kind + ")";
}

}  // namespace

Status ValidateProfileOptions(const ProfileOptions& o) {
  if (o.allowed.empty()) {
    return InvalidArgument("profiles.allowed is empty; allow at least one of " +
                           Join(KnownProfiles()));
  }
  std::set<std::string> seen;
  for (const std::string& p : o.allowed) {
    if (!Contains(KnownProfiles(), p)) {
      return InvalidArgument("profiles.allowed lists '" + p + "'; profiles are " +
                             Join(KnownProfiles()));
    }
    if (!seen.insert(p).second) {
      return InvalidArgument("profiles.allowed lists '" + p + "' twice");
    }
  }
  if (!Contains(o.allowed, o.default_profile)) {
    return InvalidArgument("profiles.default '" + o.default_profile +
                           "' is not in profiles.allowed (" + Join(o.allowed) + ")");
  }
  return Status::Ok();
}

Result<ResolvedOptions> ResolveDecodeOptions(const models::ModelInfo& model,
                                             const v1::DecodeOptions& requested,
                                             const ProfileOptions& policy) {
  ResolvedOptions out;
  out.profile = requested.profile().empty() ? policy.default_profile : requested.profile();
  if (!Contains(KnownProfiles(), out.profile)) {
    return InvalidArgument("options.profile '" + out.profile + "' is unknown (profiles: " +
                           Join(KnownProfiles()) + ")");
  }
  if (!Contains(policy.allowed, out.profile)) {
    return InvalidArgument("options.profile '" + out.profile +
                           "' is not allowed by this daemon (profiles.allowed: " +
                           Join(policy.allowed) + ")");
  }
  if (out.profile == "student" && !model.caps.student) {
    return InvalidArgument("options.profile 'student' needs a student decoder artifact for " +
                           ModelText(model) + "; none is configured");
  }

  // Stacked tiles: an explicit request needs the capability; otherwise the
  // profile decides (safe: sequential; optimized/diagnostic: the model's
  // configured default).
  switch (requested.stack_tiling()) {
    case v1::STACK_TILING_UNSPECIFIED:
      out.stack_tiling =
          out.profile == "safe" ? models::StackTiling::kOff : models::StackTiling::kDefault;
      break;
    case v1::STACK_TILING_OFF:
      out.stack_tiling = models::StackTiling::kOff;
      break;
    case v1::STACK_TILING_ON:
    case v1::STACK_TILING_AUTO:
      if (!model.caps.stack_tiling) {
        return InvalidArgument("options.stack_tiling is " +
                               v1::StackTiling_Name(requested.stack_tiling()) + "; " +
                               ModelText(model) +
                               " does not support stacked tiles: it does not decode in tiles");
      }
      out.stack_tiling = requested.stack_tiling() == v1::STACK_TILING_ON
                             ? models::StackTiling::kOn
                             : models::StackTiling::kAuto;
      break;
    default:
      return InvalidArgument("options.stack_tiling " + std::to_string(requested.stack_tiling()) +
                             " is unknown (expected OFF, ON or AUTO)");
  }

  // Compiled plans: no backend exists yet, so ON is refused where the model
  // declares none, and AUTO runs eager saying why.
  switch (requested.compile()) {
    case v1::COMPILE_UNSPECIFIED:
    case v1::COMPILE_OFF:
      out.compile_decision = requested.compile() == v1::COMPILE_OFF
                                 ? "off (requested)"
                                 : "off (profile " + out.profile + ")";
      break;
    case v1::COMPILE_ON:
      if (!model.caps.compiled_plans) {
        return InvalidArgument("options.compile is COMPILE_ON; " + ModelText(model) +
                               " has no compiled-plan backend in this build (decodes run "
                               "eager); use COMPILE_AUTO or leave it unset");
      }
      if (out.profile == "safe") {
        return InvalidArgument("options.compile is COMPILE_ON but profile 'safe' runs eager; "
                               "use profile optimized or diagnostic");
      }
      out.compile = true;
      out.compile_decision = "on (requested)";
      break;
    case v1::COMPILE_AUTO:
      out.compile_decision = model.caps.compiled_plans && out.profile != "safe"
                                 ? "auto: compiled plans"
                                 : "auto: eager (" + (model.caps.compiled_plans
                                                          ? std::string("profile safe")
                                                          : "no compiled-plan backend for " +
                                                                ModelText(model)) +
                                       ")";
      out.compile = model.caps.compiled_plans && out.profile != "safe";
      break;
    default:
      return InvalidArgument("options.compile " + std::to_string(requested.compile()) +
                             " is unknown (expected COMPILE_OFF, COMPILE_ON or COMPILE_AUTO)");
  }
  return out;
}

}  // namespace vaed::server
