#include "daemon/server/decode_options.h"

#include <algorithm>
#include <utility>

namespace vaed::server {

namespace {

// inject_faults "slow_tiles": the wait before every unit of work.
constexpr int kSlowUnitMs = 50;

bool Contains(const std::vector<Profile>& v, Profile x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string ModelText(const models::ModelInfo& m) {
  return "model '" + m.name + "' (kind " + m.kind + ")";
}

// options.profile: known, allowed here, and "student" only with an artifact.
Status ResolveProfile(const models::ModelInfo& model, const v1::DecodeOptions& requested,
                      const ProfileOptions& policy, ResolvedOptions* out) {
  if (requested.profile().empty()) {
    out->profile = policy.default_profile;
  } else if (const std::optional<Profile> named =
                 models::ParseName(kProfileNames, requested.profile())) {
    out->profile = *named;
  } else {
    return InvalidArgument("options.profile '" + requested.profile() +
                           "' is unknown (profiles: " + models::JoinedNames(kProfileNames) + ")");
  }
  if (!Contains(policy.allowed, out->profile)) {
    return InvalidArgument("options.profile '" + ProfileName(out->profile) +
                           "' is not allowed by this daemon (profiles.allowed: " +
                           JoinProfiles(policy.allowed) + ")");
  }
  if (out->profile == Profile::kStudent && !model.caps.student) {
    return InvalidArgument("options.profile 'student' needs a student decoder artifact for " +
                           ModelText(model) + "; none is configured");
  }
  return Status::Ok();
}

// Stacked tiles: an explicit request needs the capability; otherwise the
// profile decides (safe: sequential; optimized/diagnostic: the model's
// configured default).
Status ResolveStackTiling(const models::ModelInfo& model, const v1::DecodeOptions& requested,
                          ResolvedOptions* out) {
  switch (requested.stack_tiling()) {
    case v1::STACK_TILING_UNSPECIFIED:
      out->stack_tiling =
          out->profile == Profile::kSafe ? models::StackTiling::kOff : models::StackTiling::kDefault;
      return Status::Ok();
    case v1::STACK_TILING_OFF:
      out->stack_tiling = models::StackTiling::kOff;
      return Status::Ok();
    case v1::STACK_TILING_ON:
      if (!model.caps.stack_tiling) {
        return InvalidArgument("options.stack_tiling is STACK_TILING_ON; " + ModelText(model) +
                               " does not support stacked tiles: it does not decode in tiles");
      }
      out->stack_tiling = models::StackTiling::kOn;
      return Status::Ok();
    case v1::STACK_TILING_AUTO:
      // AUTO picks the safe path where stacking does not exist.
      if (!model.caps.stack_tiling) {
        out->stack_tiling = models::StackTiling::kOff;
        out->stack_decision = "auto: off (" + ModelText(model) + " does not decode in tiles)";
        return Status::Ok();
      }
      out->stack_tiling = models::StackTiling::kAuto;
      return Status::Ok();
    default:
      return InvalidArgument("options.stack_tiling " + std::to_string(requested.stack_tiling()) +
                             " is unknown (expected OFF, ON or AUTO)");
  }
}

// Compiled plans: safe runs eager; optimized/diagnostic use plans where the
// model has a backend (AUTO); an explicit ON needs the capability.
Status ResolveCompile(const models::ModelInfo& model, const v1::DecodeOptions& requested,
                      ResolvedOptions* out) {
  switch (requested.compile()) {
    case v1::COMPILE_UNSPECIFIED:
      if (out->profile == Profile::kSafe) {
        out->compile_decision = "off (profile safe)";
      } else if (model.caps.compiled_plans) {
        out->compile = models::CompileMode::kAuto;
        out->compile_decision =
            "auto: compiled plans by shape bucket (profile " + ProfileName(out->profile) + ")";
      } else {
        out->compile_decision = "off: no compiled-plan backend for " + ModelText(model);
      }
      return Status::Ok();
    case v1::COMPILE_OFF:
      out->compile_decision = "off (requested)";
      return Status::Ok();
    case v1::COMPILE_ON:
      if (!model.caps.compiled_plans) {
        return InvalidArgument("options.compile is COMPILE_ON; " + ModelText(model) +
                               " has no compiled-plan backend in this build (decodes run "
                               "eager); use COMPILE_AUTO or leave it unset");
      }
      if (out->profile == Profile::kSafe) {
        return InvalidArgument("options.compile is COMPILE_ON but profile 'safe' runs eager; "
                               "use profile optimized or diagnostic");
      }
      out->compile = models::CompileMode::kOn;
      out->compile_decision = "on (requested)";
      return Status::Ok();
    case v1::COMPILE_AUTO:
      if (model.caps.compiled_plans && out->profile != Profile::kSafe) {
        out->compile = models::CompileMode::kAuto;
        out->compile_decision = "auto: compiled plans by shape bucket";
      } else {
        out->compile_decision = "auto: eager (" + (model.caps.compiled_plans
                                                       ? std::string("profile safe")
                                                       : "no compiled-plan backend for " +
                                                             ModelText(model)) +
                                ")";
      }
      return Status::Ok();
    default:
      return InvalidArgument("options.compile " + std::to_string(requested.compile()) +
                             " is unknown (expected COMPILE_OFF, COMPILE_ON or COMPILE_AUTO)");
  }
}

// options.tiling, an output-changing knob: diagnostic only, and only where
// the model can.
Status ResolveTiling(const models::ModelInfo& model, const v1::DecodeOptions& requested,
                     ResolvedOptions* out) {
  if (!requested.has_tiling()) return Status::Ok();
  const v1::DecodeOptions::Tiling& t = requested.tiling();
  if (!model.caps.tunable_tiling) {
    return InvalidArgument(
        "options.tiling is set; " + ModelText(model) +
        (model.caps.tiled ? " tiles as its model semantics (tile size and overlap are fixed)"
                          : " has no tiled decode"));
  }
  if (out->profile != Profile::kDiagnostic) {
    return InvalidArgument("options.tiling changes the output; only profile 'diagnostic' "
                           "allows it (this request runs under '" +
                           ProfileName(out->profile) + "')");
  }
  if (t.tile_latent() < 8 || t.tile_latent() > 4096) {
    return InvalidArgument("options.tiling.tile_latent is " + std::to_string(t.tile_latent()) +
                           "; must be in [8, 4096] latent cells");
  }
  if (t.overlap_latent() >= t.tile_latent()) {
    return InvalidArgument("options.tiling.overlap_latent is " +
                           std::to_string(t.overlap_latent()) + "; must be below tile_latent (" +
                           std::to_string(t.tile_latent()) + ")");
  }
  out->tiling = models::TilingOverride{t.tile_latent(), t.overlap_latent()};
  out->output_changing.push_back(
      "tiling: tiled decode, " + std::to_string(t.tile_latent()) + "-cell tiles, " +
      std::to_string(t.overlap_latent()) + "-cell overlap (output differs from the untiled "
      "decode)");
  return Status::Ok();
}

// options.inject_faults (tests only): each named fault counted.
Status ResolveFaults(const v1::DecodeOptions& requested, bool allow_fault_injection,
                     models::FaultInjection* out) {
  if (requested.inject_faults_size() == 0) return Status::Ok();
  if (!allow_fault_injection) {
    return InvalidArgument("options.inject_faults is set but this daemon does not allow fault "
                           "injection (executor.allow_fault_injection = false)");
  }
  // Each known fault and the counter it arms (slow_tiles sets a duration).
  static constexpr std::pair<const char*, int models::FaultInjection::*> kCounted[] = {
      {"oom_stacked", &models::FaultInjection::oom_stacked},
      {"oom_sequential", &models::FaultInjection::oom_sequential},
      {"plan_build", &models::FaultInjection::plan_build},
      {"tile_exception", &models::FaultInjection::tile_exception},
      {"later_unit_exception", &models::FaultInjection::later_unit_exception},
      {"device_fatal", &models::FaultInjection::device_fatal},
      {"collective_failure", &models::FaultInjection::collective_failure},
      {"rank_exception", &models::FaultInjection::rank_exception},
      {"member_exception", &models::FaultInjection::member_exception},
      {"watcher_exception", &models::FaultInjection::watcher_exception},
      {"member_device_fatal", &models::FaultInjection::member_device_fatal},
  };
  for (const std::string& f : requested.inject_faults()) {
    if (f == "slow_tiles") {
      out->slow_unit_ms = kSlowUnitMs;
      continue;
    }
    bool known = false;
    for (const auto& [name, counter] : kCounted) {
      if (f == name) {
        out->*counter += 1;
        known = true;
      }
    }
    if (!known) {
      return InvalidArgument("options.inject_faults lists '" + f.substr(0, 64) +
                             "'; known faults are oom_stacked, oom_sequential, plan_build, "
                             "tile_exception, later_unit_exception, device_fatal, slow_tiles, "
                             "collective_failure, rank_exception, member_exception, "
                             "watcher_exception, member_device_fatal");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ResolvedOptions> ResolveDecodeOptions(const models::ModelInfo& model,
                                             const v1::DecodeOptions& requested,
                                             const ProfileOptions& policy,
                                             bool allow_fault_injection) {
  ResolvedOptions out;
  VAED_RETURN_IF_ERROR(ResolveProfile(model, requested, policy, &out));
  VAED_RETURN_IF_ERROR(ResolveStackTiling(model, requested, &out));
  VAED_RETURN_IF_ERROR(ResolveCompile(model, requested, &out));
  VAED_RETURN_IF_ERROR(ResolveTiling(model, requested, &out));
  VAED_RETURN_IF_ERROR(ResolveFaults(requested, allow_fault_injection, &out.faults));
  return out;
}

}  // namespace vaed::server
