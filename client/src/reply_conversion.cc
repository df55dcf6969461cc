#include "reply_conversion.h"

#include "vaed/wire.h"

namespace vaed::client {
namespace {

// A repeated scalar or string field as a vector.
template <typename T, typename Repeated>
std::vector<T> Copied(const Repeated& field) {
  return std::vector<T>(field.begin(), field.end());
}

// A repeated message field, each element converted by `convert`.
template <typename T, typename Repeated, typename Convert>
std::vector<T> Converted(const Repeated& field, Convert convert) {
  std::vector<T> out;
  out.reserve(field.size());
  for (const auto& element : field) out.push_back(convert(element));
  return out;
}

Timing ToTiming(const v1::Timing& m) { return {m.component(), m.seconds()}; }

OutputSanity ToSanity(const v1::OutputSanity& m) {
  return {m.nonfinite(), m.constant(), m.rms(), m.peak_abs(), m.clipped_fraction()};
}

AudioInfo ToAudio(const v1::AudioInfo& m) {
  AudioInfo a;
  a.latent_shape = Copied<int64_t>(m.latent_shape());
  a.output_shape = Copied<int64_t>(m.output_shape());
  a.output_bytes = m.output_bytes();
  a.channels = m.channels();
  a.latent_frames = m.latent_frames();
  a.samples = m.samples();
  a.sample_rate_hz = m.sample_rate_hz();
  a.seconds = m.seconds();
  if (m.has_sanity()) a.sanity = ToSanity(m.sanity());
  return a;
}

TilingInfo ToTiling(const v1::TilingInfo& m) {
  TilingInfo t;
  t.tile_rows = m.tile_rows();
  t.tile_cols = m.tile_cols();
  t.windows = m.windows();
  t.decoder_calls = m.decoder_calls();
  t.max_tiles_per_call = m.max_tiles_per_call();
  t.stacked = m.stacked();
  t.stack_decision = m.stack_decision();
  t.planned_tiles_per_call = m.planned_tiles_per_call();
  t.final_tiles_per_call = m.final_tiles_per_call();
  t.fallbacks = Copied<std::string>(m.fallbacks());
  t.plan_decision = m.plan_decision();
  t.planned_calls = m.planned_calls();
  t.eager_calls = m.eager_calls();
  t.estimated_peak_bytes = m.estimated_peak_bytes();
  return t;
}

RankReport ToRankReport(const v1::RankReport& m) {
  return {m.rank(), m.tiles(), m.decode_seconds(), m.started_unix(), m.finished_unix()};
}

GroupReport ToGroupReport(const v1::GroupReport& m) {
  return {m.name(),       m.size(),
          m.generation(), Converted<RankReport>(m.ranks(), ToRankReport),
          m.imbalance(),  m.fallback()};
}

PlanCacheInfo ToPlanCache(const v1::PlanCacheInfo& m) {
  PlanCacheInfo p;
  p.capacity = m.capacity();
  p.buckets = Copied<std::string>(m.buckets());
  p.eager_only = Converted<PlanCacheInfo::EagerOnly>(
      m.eager_only(), [](const v1::PlanCacheInfo::EagerOnly& e) {
        return PlanCacheInfo::EagerOnly{e.bucket(), e.reason()};
      });
  p.hits = m.hits();
  p.builds = m.builds();
  p.build_failures = m.build_failures();
  p.evictions = m.evictions();
  p.eager_calls = m.eager_calls();
  p.plan_bytes = m.plan_bytes();
  return p;
}

ModelInfo ToModel(const v1::ModelInfo& m) {
  ModelInfo i;
  i.name = m.name();
  i.kind = m.kind();
  i.weights_path = m.weights_path();
  i.weights_sha256 = m.weights_sha256();
  i.demo_weights = m.demo_weights();
  i.resident_bytes = m.resident_bytes();
  i.description = m.description();
  i.compute_dtype = m.compute_dtype();
  i.capabilities = Copied<std::string>(m.capabilities());
  i.audio_weights_path = m.audio_weights_path();
  i.audio_weights_sha256 = m.audio_weights_sha256();
  i.audio_sample_rate_hz = m.audio_sample_rate_hz();
  i.audio_latent_rate_hz = m.audio_latent_rate_hz();
  i.native_fps = m.native_fps();
  if (m.has_plan_cache()) i.plan_cache = ToPlanCache(m.plan_cache());
  i.weights_verification = m.weights_verification();
  return i;
}

GroupStatus ToGroupStatus(const v1::GroupStatus& m) {
  return {m.name(),       m.size(),         Copied<uint32_t>(m.ranks()),
          m.generation(), m.state(),        m.runs(),
          m.failures(),   m.last_failure(), m.last_imbalance()};
}

QuarantineEntry ToQuarantine(const v1::QuarantineEntry& m) {
  return {m.uid(),          m.pid(),         m.client_name(), m.offences(),
          m.remaining_ms(), m.duration_ms(), m.last_fault(),  m.faults_in_window()};
}

ClientEntry ToClientEntry(const v1::ClientEntry& m) {
  return {m.client_id(),   m.name(),         m.uid(),       m.pid(),
          m.regions(),     m.region_bytes(), m.in_flight(), m.faults_in_window(),
          m.idle_seconds()};
}

ComponentStats ToComponent(const v1::ComponentStats& m) {
  return {m.component(), m.count(), m.sum_seconds(), m.p50_seconds(), m.p95_seconds()};
}

OutcomeCount ToOutcome(const v1::OutcomeCount& m) { return {m.outcome(), m.count()}; }

RankStatus ToRankStatus(const v1::RankStatus& m) {
  return {m.rank(),
          m.busy_seconds(),
          m.tiles(),
          m.last_imbalance(),
          m.device(),
          m.device_name(),
          m.device_uuid(),
          m.device_memory_used_bytes(),
          m.device_memory_total_bytes()};
}

}  // namespace

HelloReply FromProtocol(const v1::HelloReply& m) {
  return {m.client_id(),         m.protocol_version(),
          m.daemon_version(),    m.heartbeat_interval_ms(),
          m.client_timeout_ms(), m.heartbeat_liveness(),
          m.max_in_flight(),     Copied<std::string>(m.cuda_devices())};
}

DecodeReply FromProtocol(const v1::DecodeReply& m) {
  DecodeReply r;
  r.model = m.model();
  r.latent_shape = Copied<int64_t>(m.latent_shape());
  r.latent_dtype = FromProto(m.latent_dtype());
  r.output_shape = Copied<int64_t>(m.output_shape());
  r.output_dtype = FromProto(m.output_dtype());
  r.output_bytes = m.output_bytes();
  r.frames = m.frames();
  r.height_px = m.height_px();
  r.width_px = m.width_px();
  r.warm = m.warm();
  r.timings = Converted<Timing>(m.timings(), ToTiming);
  r.compute_dtype = m.compute_dtype();
  r.demo_weights = m.demo_weights();
  r.planned_only = m.planned_only();
  r.nonfinite_outputs = m.nonfinite_outputs();
  if (m.has_tiling()) r.tiling = ToTiling(m.tiling());
  r.peak_rss_bytes = m.peak_rss_bytes();
  if (m.has_audio()) r.audio = ToAudio(m.audio());
  if (m.has_video_sanity()) r.video_sanity = ToSanity(m.video_sanity());
  r.fps = m.fps();
  r.video_seconds = m.video_seconds();
  r.expected_audio_latent_frames = m.expected_audio_latent_frames();
  r.independent_lengths = m.independent_lengths();
  r.profile = m.profile();
  r.compile_decision = m.compile_decision();
  r.peak_tensor_bytes = m.peak_tensor_bytes();
  r.memory_budget_bytes = m.memory_budget_bytes();
  r.stack_decision = m.stack_decision();
  r.output_changing = Copied<std::string>(m.output_changing());
  if (m.has_group()) r.group = ToGroupReport(m.group());
  r.outputs_ready_event = m.outputs_ready_event();
  r.host_copies = m.host_copies();
  r.host_copy_bytes = m.host_copy_bytes();
  r.peak_device_bytes = m.peak_device_bytes();
  r.latent_space = static_cast<LatentSpace>(m.latent_space());
  return r;
}

StatusReply FromProtocol(const v1::StatusReply& m) {
  StatusReply s;
  s.daemon_version = m.daemon_version();
  s.uptime_seconds = m.uptime_seconds();
  s.healthy = m.healthy();
  s.models = Converted<ModelInfo>(m.models(), ToModel);
  s.default_model = m.default_model();
  s.clients = m.clients();
  s.regions = m.regions();
  s.requests_served = m.requests_served();
  s.requests_failed = m.requests_failed();
  s.protocol_errors = m.protocol_errors();
  s.queue_depth = m.queue_depth();
  s.intra_op_threads = m.intra_op_threads();
  s.socket = m.socket();
  s.pid = m.pid();
  s.default_profile = m.default_profile();
  s.allowed_profiles = Copied<std::string>(m.allowed_profiles());
  s.client_faults = m.client_faults();
  s.quarantine_rejections = m.quarantine_rejections();
  s.busy_rejections = m.busy_rejections();
  s.deadline_exceeded = m.deadline_exceeded();
  s.rejected_connections = m.rejected_connections();
  s.quarantines = m.quarantines();
  s.quarantined = Converted<QuarantineEntry>(m.quarantined(), ToQuarantine);
  s.client_list = Converted<ClientEntry>(m.client_list(), ToClientEntry);
  s.health = m.health();
  s.ranks = m.ranks();
  s.groups = Converted<GroupStatus>(m.groups(), ToGroupStatus);
  s.components = Converted<ComponentStats>(m.components(), ToComponent);
  s.outcomes = Converted<OutcomeCount>(m.outcomes(), ToOutcome);
  s.in_flight = m.in_flight();
  s.resident_weight_bytes = m.resident_weight_bytes();
  s.plan_cache_entries = m.plan_cache_entries();
  s.peak_rss_bytes = m.peak_rss_bytes();
  s.rank_status = Converted<RankStatus>(m.rank_status(), ToRankStatus);
  s.metrics_url = m.metrics_url();
  return s;
}

ReleaseQuarantineReply FromProtocol(const v1::ReleaseQuarantineReply& m) {
  return {Converted<QuarantineEntry>(m.released(), ToQuarantine)};
}

Progress FromProtocol(const v1::Progress& m) {
  return {m.stage(),           m.done(),        m.total(),      m.unit(),       m.fraction(),
          m.elapsed_seconds(), m.eta_seconds(), m.tiles_done(), m.tiles_total()};
}

FinalRange FromProtocol(const v1::FinalRange& m) {
  return {m.stage(), m.unit(), m.begin(), m.end(), m.total(), m.ready_event()};
}

}  // namespace vaed::client
