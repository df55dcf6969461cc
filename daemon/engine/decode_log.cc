#include "daemon/engine/decode_log.h"

#include <spdlog/spdlog.h>

#include <string>

namespace vaed::engine {

namespace {

// Each decision once per shape bucket: the model's own (tiled models) or
// the one made without it (auto on an untiled model). Keyed by the mode
// asked (off/on/auto) and what was decided (stacked or not, tiles per
// call, plans or not), not by the reason's figures (the headroom changes
// every time).
void LogDecisionOnce(const DecodeJob& job, const models::TilingReport& tiling,
                     DecodeHistory* history) {
  const models::ModelInfo& info = job.model->info();
  const std::string& decision = tiling.tiled ? tiling.stack_decision : job.av.stack_decision;
  if (decision.empty()) return;
  const std::string key = info.name + "/" + job.video->plan.shape_bucket + " " +
                          decision.substr(0, decision.find(':')) +
                          (tiling.stacked ? " stacked " : " sequential ") +
                          std::to_string(tiling.max_tiles_per_call) +
                          (tiling.planned_calls > 0 ? " planned" : " eager") +
                          (tiling.tiled ? "" : " " + decision);
  if (!history->FirstDecision(key)) return;
  spdlog::info("decode: model {} bucket {} profile {}: tiles {} ({}); compile {}; {}", info.name,
               job.video->plan.shape_bucket, job.av.profile,
               tiling.stacked ? "stacked" : "sequential", decision, job.av.compile_decision,
               tiling.plan_decision.empty() ? "no plans" : tiling.plan_decision);
}

std::string Geometry(const DecodeJob& job, const models::TilingReport& tiling) {
  std::string what;
  if (job.video) {
    const models::DecodePlan& p = job.video->plan;
    what = "latent " + ShapeToString(job.video->latent.shape) + " -> " +
           std::to_string(p.frames) + "x" + std::to_string(p.height_px) + "x" +
           std::to_string(p.width_px);
    if (tiling.tiled) {
      what += " tiles " + std::to_string(tiling.tile_rows) + "x" +
              std::to_string(tiling.tile_cols) + " windows " + std::to_string(tiling.windows) +
              " calls " + std::to_string(tiling.decoder_calls) + " (" + tiling.stack_decision +
              ")";
    }
  }
  if (job.audio) {
    what += std::string(what.empty() ? "" : "; ") + "audio_latent " +
            ShapeToString(job.audio->latent.shape) + " -> " +
            std::to_string(job.audio->plan.channels) + "x" +
            std::to_string(job.audio->plan.samples) + " samples";
  }
  return what;
}

void WarnAboutOutput(const DecodeJob& job, const DecodeResult& result) {
  if (const auto& v = result.video_sanity; v && (v->nonfinite > 0 || v->constant)) {
    spdlog::warn("decode: request {}: video output has {} non-finite values{}", job.request_id,
                 v->nonfinite, v->constant ? " and is constant" : "");
  }
  if (const auto& a = result.audio_sanity; a && (a->nonfinite > 0 || a->constant)) {
    spdlog::warn("decode: request {}: audio output has {} non-finite values{}", job.request_id,
                 a->nonfinite, a->constant ? " and is constant (silent or railed)" : "");
  }
}

}  // namespace

void LogFinishedDecode(const DecodeJob& job, const DecodeResult& result, double seconds,
                       DecodeHistory* history) {
  const models::ModelInfo& info = job.model->info();
  const models::TilingReport& tiling = result.report.tiling;
  if (job.video) LogDecisionOnce(job, tiling, history);
  spdlog::debug("decode: request {} client {} model {} {} {} {} in {:.3f} s{}", job.request_id,
                job.client_id, info.name, Geometry(job, tiling), info.compute_dtype,
                result.warm ? "warm" : "cold", seconds,
                info.demo_weights ? " [DEMO weights]" : "");
  for (const models::Fallback& f : tiling.fallbacks) {
    spdlog::warn("decode: request {} client {}: fallback: {}", job.request_id, job.client_id,
                 f.detail);
  }
  WarnAboutOutput(job, result);
}

}  // namespace vaed::engine
