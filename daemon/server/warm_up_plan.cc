#include "daemon/server/warm_up_plan.h"

#include <algorithm>
#include <string>
#include <utility>

#include "daemon/server/decode_options.h"

namespace vaed::server {

namespace {

// The settings of a request under `profile` that sets no option.
Result<models::DecodeSettings> ProfileSettings(const models::ModelInfo& info,
                                               Profile profile,
                                               const ProfileOptions& policy) {
  v1::DecodeOptions requested;
  requested.set_profile(ProfileName(profile));
  VAED_ASSIGN_OR_RETURN(const ResolvedOptions resolved,
                        ResolveDecodeOptions(info, requested, policy));
  models::DecodeSettings settings;
  settings.stack_tiling = resolved.stack_tiling;
  settings.compile = resolved.compile;
  settings.tiling = resolved.tiling;
  return settings;
}

bool SchedulesWithAuto(const models::DecodeSettings& s, models::StackTiling model_default) {
  return s.stack_tiling == models::StackTiling::kAuto ||
         (s.stack_tiling == models::StackTiling::kDefault &&
          model_default == models::StackTiling::kAuto);
}

bool Allowed(const ProfileOptions& policy, Profile profile) {
  return std::find(policy.allowed.begin(), policy.allowed.end(), profile) != policy.allowed.end();
}

// The passes of one warm shape of `model` (warm_up_plan.h).
Result<std::vector<engine::WarmUpPass>> PassesOf(const models::ModelInfo& info,
                                                 const models::WarmShape& shape,
                                                 const ProfileOptions& policy) {
  std::vector<engine::WarmUpPass> passes;
  VAED_ASSIGN_OR_RETURN(models::DecodeSettings main,
                        ProfileSettings(info, policy.default_profile, policy));
  const bool main_eager = main.compile == models::CompileMode::kOff;
  if (!main_eager) main.compile = models::CompileMode::kOn;
  passes.push_back({.what = "profile " + ProfileName(policy.default_profile), .settings = main});
  if (main_eager && info.caps.compiled_plans) {
    for (const Profile profile : {Profile::kOptimized, Profile::kDiagnostic}) {
      if (!Allowed(policy, profile)) continue;
      VAED_ASSIGN_OR_RETURN(models::DecodeSettings plans, ProfileSettings(info, profile, policy));
      if (plans.compile == models::CompileMode::kOff) continue;
      plans.compile = models::CompileMode::kOn;
      passes.push_back(
          {.what = "compiled plans (profile " + ProfileName(profile) + ")", .settings = plans});
      break;
    }
  }
  if (SchedulesWithAuto(passes.front().settings, shape.default_stack_tiling)) {
    models::DecodeSettings measure;  // eager, one tile per call
    measure.stack_tiling = models::StackTiling::kOff;
    passes.insert(passes.begin(),
                  {.what = "tile peaks for stack_tiling auto", .settings = measure});
  }
  return passes;
}

// The shape's plan and its estimated peak against what a request may use.
Status FitsARequest(const models::VaeModel& model, const models::WarmShape& shape,
                    const engine::RequestMemory& memory) {
  VAED_ASSIGN_OR_RETURN(models::DecodePlan plan, model.Plan(DType::kFloat32, shape.latent_shape));
  return engine::CheckRequestMemory(plan.peak_bytes_estimate, plan.peak_bytes_terms,
                                    shape.latent_shape, memory);
}

}  // namespace

Result<std::vector<engine::WarmUp>> PlanWarmUps(const models::ModelRegistry& registry,
                                                const ProfileOptions& profiles,
                                                const engine::RequestMemory& memory) {
  const std::vector<const models::VaeModel*> models = registry.models();
  std::vector<engine::WarmUp> out;
  for (const models::WarmShape& shape : registry.warm_shapes()) {
    const auto it = std::find_if(models.begin(), models.end(), [&](const models::VaeModel* m) {
      return m->info().name == shape.model;
    });
    if (it == models.end()) {
      return Internal("warm shape " + shape.field + " names model '" + shape.model +
                      "', which the registry does not hold")
          .WithField(shape.field);
    }
    if (Status fits = FitsARequest(**it, shape, memory); !fits.ok()) {
      return fits.WithContext("warm-up of model '" + shape.model + "' " + shape.field + " = \"" +
                              shape.canvas + "\" (checked before any warm-up decode)")
          .WithField(shape.field);
    }
    Result<std::vector<engine::WarmUpPass>> passes = PassesOf((*it)->info(), shape, profiles);
    if (!passes.ok()) {
      return passes.status()
          .WithContext("warm-up of model '" + shape.model + "' " + shape.field)
          .WithField(shape.field);
    }
    out.push_back({.shape = shape,
                   .model_index = static_cast<size_t>(it - models.begin()),
                   .passes = std::move(passes).value()});
  }
  return out;
}

}  // namespace vaed::server
