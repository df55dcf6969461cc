// Per-request decode options resolved against the daemon's profiles and the
// model's capabilities (DESIGN.md §2.5, §3).
//
// Profiles (DecodeOptions.profile; "" = the daemon's default, config
// `profiles.default`, "safe" unless configured):
//   safe        the default fallback: tiles sequential unless the request
//               explicitly asks for stacking (stacking never changes the
//               bytes), no compiled plans, no output-changing knobs.
//   optimized   production: the model's configured stack_tiling default
//               (auto = the model decides, with its reason in the reply),
//               compiled plans by shape bucket where the model has them
//               (compile AUTO; same bytes as eager).
//   diagnostic  benchmarking: any option the model supports, and the
//               output-changing knobs (options.tiling on models with
//               "tunable_tiling"), each listed in the reply's
//               output_changing.
//   student     research decoders: rejected unless the model has a student
//               decoder artifact configured (capability "student").
// The operator limits which profiles requests may use (`profiles.allowed`).
//
// Options are checked against capabilities, never model names: an explicit
// request for something the model does not support (stack_tiling ON on an
// untiled model, compile ON without a compiled-plan backend) is an error
// naming the model, the option and the reason; AUTO resolves to the safe
// choice and says why.
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_SERVER_DECODE_OPTIONS_H_
#define VAED_DAEMON_SERVER_DECODE_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "daemon/models/vae_model.h"
#include "daemon/server/profile_options.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

// What a request will run with.
struct ResolvedOptions {
  Profile profile = Profile::kSafe;
  models::StackTiling stack_tiling = models::StackTiling::kOff;
  // Set when the request's stack_tiling resolved without the model, e.g.
  // "auto: off (model 'taef2' (kind taef2) does not decode in tiles)"; the
  // model states its own decision otherwise (TilingInfo.stack_decision).
  std::string stack_decision;
  models::CompileMode compile = models::CompileMode::kOff;
  std::string compile_decision;  // e.g. "off (profile safe)"
  models::FaultInjection faults;  // options.inject_faults (tests)
  std::optional<models::TilingOverride> tiling;  // options.tiling (diagnostic)
  std::vector<std::string> output_changing;      // knobs that change the output
};

// Resolves `requested` for `model`. `model_stack_default` is the model's
// configured stack_tiling (used by optimized and diagnostic). Errors
// (kInvalidArgument): unknown or disallowed profile, student without an
// artifact, explicit stack_tiling ON/AUTO on a model without stacked tiles,
// explicit compile ON on a model without compiled plans (or under safe),
// (stack_tiling AUTO on a model without stacked tiles resolves to off,
// saying why, as compile AUTO does),
// unknown enum values, inject_faults when `allow_fault_injection` is false
// or naming an unknown fault. Messages name "options.<field>", the model
// and the reason. Compile: unset means off under safe and AUTO under
// optimized/diagnostic (where the model has compiled plans).
Result<ResolvedOptions> ResolveDecodeOptions(const models::ModelInfo& model,
                                             const v1::DecodeOptions& requested,
                                             const ProfileOptions& policy,
                                             bool allow_fault_injection = false);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_DECODE_OPTIONS_H_
