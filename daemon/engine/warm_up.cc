#include "daemon/engine/warm_up.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

#include "daemon/engine/output_format.h"
#include "daemon/engine/region_io.h"
#include "daemon/models/postprocess.h"
#include "daemon/models/torch_status.h"
#include "vaed/tensor_ref.h"

namespace vaed::engine {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Seed of the synthetic latent: fixed, so every start-up (and every rank)
// decodes the same values.
constexpr uint64_t kLatentSeed = 20261201;

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f s", s);
  return buf;
}

// A normal(0, 1) float32 latent on `device`, the distribution of a DiT's
// normalised latent (zeros would decode a constant picture, a case requests
// do not send). Drawn on the host, so every rank and device decodes the same
// values, then copied to the rank's device as a request's latent is.
Result<torch::Tensor> SyntheticLatent(const std::vector<int64_t>& shape,
                                      const torch::Device& device) {
  return models::RunTorch("making the warm-up latent", [&]() -> Result<torch::Tensor> {
    at::Generator gen = at::detail::createCPUGenerator(kLatentSeed);
    return torch::randn(shape, gen, torch::TensorOptions().dtype(torch::kFloat32)).to(device);
  });
}

// One pass: what a request's decode runs between copying the latent in and
// copying the output out (decode_run.h steps 1-3), the output dropped.
// Returns the pass's part of the log line.
Result<std::string> RunPass(models::VaeModel& model, const torch::Tensor& latent,
                            const WarmUpPass& pass) {
  const auto t0 = SteadyClock::now();
  VAED_RETURN_IF_ERROR(CheckLatentFinite(latent, "latent"));
  models::DecodeReport report;
  VAED_ASSIGN_OR_RETURN(torch::Tensor raw, model.Decode(latent, pass.settings, &report));
  VAED_RETURN_IF_ERROR(models::SummarizeValues(raw, 0).status());
  VAED_RETURN_IF_ERROR(FormatVideo(model, raw, OutputFormat::kUint8Nhwc).status());
  const models::TilingReport& t = report.tiling;
  std::string out = pass.what + " " + Seconds(SecondsSince(t0));
  std::string how = t.stack_decision;
  if (!t.plan_decision.empty()) how += (how.empty() ? "" : "; ") + t.plan_decision;
  for (const models::Fallback& f : t.fallbacks) how += (how.empty() ? "" : "; ") + f.detail;
  if (!how.empty()) out += " (" + how + ")";
  return out;
}

// Every pass of `w` on `model`; the log line's text after the shape.
Result<std::string> WarmUpShape(models::VaeModel& model, const WarmUp& w) {
  VAED_ASSIGN_OR_RETURN(const torch::Tensor latent,
                        SyntheticLatent(w.shape.latent_shape, model.device()));
  std::string passes;
  for (const WarmUpPass& pass : w.passes) {
    Result<std::string> done = RunPass(model, latent, pass);
    if (!done.ok()) return done.status().WithContext(pass.what);
    passes += (passes.empty() ? "" : "; ") + *done;
  }
  return passes;
}

}  // namespace

Status WarmUpRank(int global_rank, const std::vector<models::VaeModel*>& models,
                  const std::vector<WarmUp>& warm_ups, DecodeHistory* history) {
  if (warm_ups.empty()) return Status::Ok();
  const auto t0 = SteadyClock::now();
  for (const WarmUp& w : warm_ups) {
    const std::string what = "warm-up of model '" + w.shape.model + "' " + w.shape.field + " = \"" +
                             w.shape.canvas + "\" on rank " + std::to_string(global_rank);
    if (w.model_index >= models.size()) {
      return Internal(what + ": the rank has no model " + std::to_string(w.model_index))
          .WithField(w.shape.field);
    }
    models::VaeModel& model = *models[w.model_index];
    // The plan gives the bucket the history records (and refuses a latent
    // the model does not take, as for a request).
    Result<models::DecodePlan> plan = model.Plan(DType::kFloat32, w.shape.latent_shape);
    if (!plan.ok()) return plan.status().WithContext(what).WithField(w.shape.field);
    const auto started = SteadyClock::now();
    Result<std::string> passes = WarmUpShape(model, w);
    if (!passes.ok()) {
      return passes.status()
          .WithContext(what +
                       " failed; the daemon does not start with a warm shape it cannot "
                       "decode (remove the entry, or give the decode the memory it "
                       "needs)")
          .WithField(w.shape.field);
    }
    history->RecordDecodes({{global_rank, HistoryBucket(w.shape.model, plan->shape_bucket)}});
    spdlog::info("warm-up: rank {}: model '{}' {} \"{}\" (latent {}) in {}: {}", global_rank,
                 w.shape.model, w.shape.field, w.shape.canvas, ShapeToString(w.shape.latent_shape),
                 Seconds(SecondsSince(started)), *passes);
  }
  for (const models::VaeModel* m : models) {
    const std::optional<models::PlanCacheSnapshot> cache = m->plan_cache();
    if (cache && cache->stats.evictions > 0) {
      spdlog::warn(
          "warm-up: rank {}: model '{}': {} compiled plan(s) evicted during the warm-up: "
          "its warm shapes need more buckets than plan_cache_capacity {}; requests "
          "build them again",
          global_rank, m->info().name, cache->stats.evictions, cache->capacity);
    }
  }
  spdlog::info("warm-up: rank {}: {} warm shape(s) in {}", global_rank, warm_ups.size(),
               Seconds(SecondsSince(t0)));
  return Status::Ok();
}

}  // namespace vaed::engine
