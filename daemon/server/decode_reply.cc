#include "daemon/server/decode_reply.h"

#include <algorithm>

#include "vaed/wire.h"

namespace vaed::server {

namespace {

void FillSanity(const models::OutputStats& stats, v1::OutputSanity* out) {
  out->set_nonfinite(static_cast<uint64_t>(stats.nonfinite));
  out->set_constant(stats.constant);
  out->set_rms(stats.rms);
  out->set_peak_abs(stats.peak_abs);
  out->set_clipped_fraction(stats.clipped_fraction);
}

void FillTiling(const models::TilingReport& tiling, v1::TilingInfo* t) {
  t->set_tile_rows(static_cast<uint32_t>(tiling.tile_rows));
  t->set_tile_cols(static_cast<uint32_t>(tiling.tile_cols));
  t->set_windows(static_cast<uint32_t>(tiling.windows));
  t->set_decoder_calls(static_cast<uint32_t>(tiling.decoder_calls));
  t->set_max_tiles_per_call(static_cast<uint32_t>(tiling.max_tiles_per_call));
  t->set_stacked(tiling.stacked);
  t->set_stack_decision(tiling.stack_decision);
  t->set_planned_tiles_per_call(static_cast<uint32_t>(tiling.planned_tiles_per_call));
  t->set_final_tiles_per_call(static_cast<uint32_t>(tiling.final_tiles_per_call));
  for (const models::Fallback& f : tiling.fallbacks) t->add_fallbacks(f.detail);
  t->set_plan_decision(tiling.plan_decision);
  t->set_planned_calls(static_cast<uint32_t>(tiling.planned_calls));
  t->set_eager_calls(static_cast<uint32_t>(tiling.eager_calls));
  t->set_estimated_peak_bytes(tiling.estimated_peak_bytes);
}

void FillGroupReport(const engine::GroupReport& group, v1::GroupReport* out) {
  out->set_name(group.name);
  out->set_size(static_cast<uint32_t>(group.size));
  out->set_generation(group.generation);
  for (const engine::RankFigures& f : group.ranks) {
    v1::RankReport* r = out->add_ranks();
    r->set_rank(f.rank);
    r->set_tiles(static_cast<uint32_t>(f.tiles));
    r->set_decode_seconds(f.decode_seconds);
    r->set_started_unix(f.started_unix);
    r->set_finished_unix(f.finished_unix);
  }
  out->set_imbalance(group.imbalance);
  out->set_fallback(group.fallback);
}

void FillDecodeResult(const engine::DecodeJob& job, const engine::DecodeResult& result,
                      v1::DecodeReply* out) {
  FillDecodeGeometry(*job.model, job.video, job.audio, job.av, out);
  if (result.group) FillGroupReport(*result.group, out->mutable_group());
  out->set_warm(result.warm);
  out->set_peak_rss_bytes(result.peak_rss_bytes);
  out->set_peak_tensor_bytes(result.peak_tensor_bytes);
  out->set_memory_budget_bytes(result.memory_budget_bytes);
  out->set_host_copies(result.host_copies);
  out->set_host_copy_bytes(result.host_copy_bytes);
  out->set_peak_device_bytes(result.peak_device_bytes);
  out->set_outputs_ready_event(result.outputs_ready_event);
  if (result.video_sanity) {
    out->set_nonfinite_outputs(static_cast<uint64_t>(result.video_sanity->nonfinite));
    FillSanity(*result.video_sanity, out->mutable_video_sanity());
  }
  if (result.audio_sanity) FillSanity(*result.audio_sanity, out->mutable_audio()->mutable_sanity());
  if (result.report.tiling.tiled) FillTiling(result.report.tiling, out->mutable_tiling());
  for (const auto& [component, seconds] : result.report.timings.entries()) {
    v1::Timing* t = out->add_timings();
    t->set_component(component);
    t->set_seconds(seconds);
  }
}

}  // namespace

engine::OutputFormat ToEngineFormat(v1::OutputFormat format) {
  switch (format) {
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW:
      return engine::OutputFormat::kFloat32Nchw;
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT:
      return engine::OutputFormat::kFloat32NchwUnit;
    default:
      return engine::OutputFormat::kUint8Nhwc;
  }
}

void FillDecodeGeometry(const models::VaeModel& model,
                        const std::optional<engine::VideoPart>& video,
                        const std::optional<engine::AudioPart>& audio,
                        const engine::RequestFacts& av, v1::DecodeReply* out) {
  out->set_model(model.info().name);
  out->set_compute_dtype(model.info().compute_dtype);
  out->set_demo_weights(model.info().demo_weights);
  out->set_fps(av.fps);
  out->set_independent_lengths(av.independent_lengths);
  out->set_latent_space(av.latent_space == models::LatentSpace::kDenormalized
                            ? v1::LATENT_SPACE_DENORMALIZED
                            : v1::LATENT_SPACE_NORMALIZED);
  out->set_profile(av.profile);
  out->set_compile_decision(av.compile_decision);
  out->set_stack_decision(av.stack_decision);
  for (const std::string& k : av.output_changing) out->add_output_changing(k);
  out->set_expected_audio_latent_frames(
      static_cast<uint64_t>(std::max<int64_t>(0, av.expected_audio_latent_frames)));
  if (video) {
    for (int64_t d : video->latent.shape) out->add_latent_shape(d);
    out->set_latent_dtype(ToProto(video->latent.dtype));
    for (int64_t d : video->output.shape) out->add_output_shape(d);
    out->set_output_dtype(ToProto(video->output.dtype));
    out->set_output_bytes(video->output.size);
    out->set_frames(static_cast<uint32_t>(video->plan.frames));
    if (video->plan.windows > 0) {
      // The grid known before decoding; a decode's own report replaces it
      // (FillDecodeResult: FillTiling).
      v1::TilingInfo* t = out->mutable_tiling();
      t->set_tile_rows(static_cast<uint32_t>(video->plan.tile_rows));
      t->set_tile_cols(static_cast<uint32_t>(video->plan.tile_cols));
      t->set_windows(static_cast<uint32_t>(video->plan.windows));
    }
    out->set_height_px(static_cast<uint32_t>(video->plan.height_px));
    out->set_width_px(static_cast<uint32_t>(video->plan.width_px));
    out->set_video_seconds(static_cast<double>(video->plan.frames) / av.fps);
  }
  if (audio) {
    v1::AudioInfo* a = out->mutable_audio();
    for (int64_t d : audio->latent.shape) a->add_latent_shape(d);
    for (int64_t d : audio->output.shape) a->add_output_shape(d);
    a->set_output_bytes(audio->output.size);
    a->set_channels(static_cast<uint32_t>(audio->plan.channels));
    a->set_latent_frames(static_cast<uint64_t>(audio->plan.latent_frames));
    a->set_samples(static_cast<uint64_t>(audio->plan.samples));
    a->set_sample_rate_hz(static_cast<uint32_t>(audio->plan.sample_rate_hz));
    a->set_seconds(static_cast<double>(audio->plan.samples) /
                   static_cast<double>(audio->plan.sample_rate_hz));
  }
}

v1::Reply FinishedReply(const engine::DecodeJob& job, const Result<engine::DecodeResult>& result) {
  v1::Reply reply;
  reply.set_request_id(job.request_id);
  if (result.ok()) {
    FillDecodeResult(job, *result, reply.mutable_decode());
  } else {
    *reply.mutable_error() = ToProtoError(WithStreamedSoFar(job, result.status()));
  }
  return reply;
}

Status WithStreamedSoFar(const engine::DecodeJob& job, const Status& status) {
  if (!job.stream_output) return status;
  const uint64_t frames = job.streamed->video_frames.load();
  const uint64_t samples = job.streamed->audio_samples.load();
  std::string said;
  if (frames > 0) said = "output frames [0, " + std::to_string(frames) + ") are final";
  if (samples > 0) {
    said += (said.empty() ? "" : ", ") + std::string("audio samples [0, ") +
            std::to_string(samples) + ") are final";
  }
  if (said.empty()) said = "no part of the output was final";
  // WithContext keeps the status's typed fields (reason, field, retry).
  return status.WithContext("streamed: " + said).WithFinalOutput(frames, samples);
}

v1::Reply FinalRangeReply(const engine::DecodeJob& job, const engine::FinalRangeEvent& e) {
  v1::Reply message;
  message.set_request_id(job.request_id);
  v1::FinalRange* r = message.mutable_final_range();
  r->set_stage(e.stage);
  r->set_unit(e.unit);
  r->set_begin(static_cast<uint64_t>(e.begin));
  r->set_end(static_cast<uint64_t>(e.end));
  r->set_total(static_cast<uint64_t>(e.total));
  r->set_ready_event(e.ready_event);
  return message;
}

v1::Reply ProgressReply(const engine::DecodeJob& job, const engine::ProgressEvent& e) {
  v1::Reply message;
  message.set_request_id(job.request_id);
  v1::Progress* p = message.mutable_progress();
  p->set_stage(e.stage);
  p->set_done(static_cast<uint32_t>(e.done));
  p->set_total(static_cast<uint32_t>(e.total));
  p->set_unit(e.unit);
  p->set_fraction(e.fraction);
  p->set_elapsed_seconds(e.elapsed_seconds);
  p->set_eta_seconds(e.eta_seconds);
  p->set_tiles_done(static_cast<uint32_t>(e.tiles_done));
  p->set_tiles_total(static_cast<uint32_t>(e.tiles_total));
  return message;
}

void FillExecutorStatus(const engine::ExecutorStatus& executor, v1::StatusReply* status) {
  status->set_ranks(static_cast<uint32_t>(executor.ranks));
  for (const engine::ExecutorStatus::Group& g : executor.groups) {
    v1::GroupStatus* out = status->add_groups();
    out->set_name(g.name);
    out->set_size(static_cast<uint32_t>(g.size));
    for (int r : g.ranks) out->add_ranks(static_cast<uint32_t>(r));
    out->set_generation(g.generation);
    out->set_state(g.state);
    out->set_runs(g.runs);
    out->set_failures(g.failures);
    out->set_last_failure(g.last_failure);
    out->set_last_imbalance(g.last_imbalance);
  }
  for (const engine::ExecutorStatus::Rank& r : executor.rank_status) {
    v1::RankStatus* out = status->add_rank_status();
    out->set_rank(static_cast<uint32_t>(r.rank));
    out->set_busy_seconds(r.busy_seconds);
    out->set_tiles(r.tiles);
    out->set_last_imbalance(r.last_imbalance);
    out->set_device(r.device.is_cuda ? "cuda" : "cpu");
    if (!r.device.is_cuda) continue;
    out->set_device_name(r.device.cuda.name);
    out->set_device_uuid(FormatDeviceUuid(r.device.cuda.uuid));
    out->set_device_memory_used_bytes(r.device_memory.used_bytes);
    out->set_device_memory_total_bytes(r.device_memory.total_bytes);
  }
}

}  // namespace vaed::server
