#include "daemon/server/outcome_recorder.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "daemon/server/logging.h"
#include "vaed/wire.h"

namespace vaed::server {

namespace {

nlohmann::json ShapeJson(const google::protobuf::RepeatedField<int64_t>& shape) {
  return nlohmann::json(std::vector<int64_t>(shape.begin(), shape.end()));
}

}  // namespace

const char* OutcomeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
    case StatusCode::kProtocolError:
    case StatusCode::kPermissionDenied:
      return "validation_error";
    case StatusCode::kQuarantined:
      return "quarantined";
    case StatusCode::kBusy:
      return "busy";
    case StatusCode::kDeadlineExceeded:
      return "deadline";
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kClientFault:
      return "client_fault";
    default:
      return "error";
  }
}

std::vector<const char*> FallbackOutcomes(const engine::DecodeResult& result) {
  bool oom = false, compile = false;
  bool collective = result.group && !result.group->fallback.empty();
  for (const models::Fallback& f : result.report.tiling.fallbacks) {
    oom = oom || f.kind == models::FallbackKind::kOutOfMemory;
    compile = compile || f.kind == models::FallbackKind::kCompile;
    collective = collective || f.kind == models::FallbackKind::kCollective;
  }
  std::vector<const char*> out;
  if (oom) out.push_back("oom_fallback");
  if (compile) out.push_back("compile_fallback");
  if (collective) out.push_back("collective_fallback");
  return out;
}

void OutcomeRecorder::ExpectJob(uint64_t client_id, uint64_t request_id, std::string model) {
  if (job_models_.size() >= 65536) job_models_.clear();  // bounded, never expected
  job_models_[{client_id, request_id}] = std::move(model);
}

void OutcomeRecorder::RecordJob(const engine::DecodeJob& job, const ClientState* client,
                                const Result<engine::DecodeResult>& result,
                                const v1::Reply& reply) {
  auto it = job_models_.find({job.client_id, job.request_id});
  if (it == job_models_.end()) return;
  Record(it->second, client, reply,
         result.ok() ? FallbackOutcomes(*result) : std::vector<const char*>{});
  job_models_.erase(it);
}

void OutcomeRecorder::Record(const std::string& model, const ClientState* client,
                             const v1::Reply& reply, const std::vector<const char*>& fallbacks) {
  // Bounded label values: a configured model, else "unknown".
  std::string label = model.empty() ? registry_->default_model() : model;
  if (registry_->Find(label) == nullptr) label = "unknown";
  const Status status = reply.has_error() ? FromProtoError(reply.error()) : Status::Ok();
  const char* outcome = reply.has_decode() ? "ok" : OutcomeName(status.code());
  ++outcomes_[outcome];
  ++(reply.has_decode() ? served_ : failed_);
  nlohmann::json record = {{"request_id", reply.request_id()}, {"model", label},
                           {"outcome", outcome}};
  if (client != nullptr) {
    record["client_id"] = client->id;
    record["client"] = client->name;
    record["pid"] = client->pid;
  }
  if (!reply.has_decode()) {
    if (metrics_ != nullptr) metrics_->CountOutcome(label, outcome);
    record["error"] = status.ToString();
    uint64_t suppressed = 0;
    if (refusal_limit_.Admit(RefusalRateLimit::Clock::now(), &suppressed)) {
      if (suppressed > 0) record["suppressed"] = suppressed;
      LogDecodeRecord(record);
    }
    return;
  }
  const v1::DecodeReply& d = reply.decode();
  peak_rss_bytes_ = std::max<uint64_t>(peak_rss_bytes_, d.peak_rss_bytes());
  for (const char* f : fallbacks) ++outcomes_[f];
  const std::string stack =
      d.has_tiling() ? (d.tiling().max_tiles_per_call() > 1 ? "stacked" : "sequential")
                     : "untiled";
  const uint32_t group_size = d.has_group() && d.group().size() > 0 ? d.group().size() : 1;
  if (metrics_ != nullptr) Observe(label, d, stack, group_size, fallbacks);
  if (d.latent_shape_size() > 0) {
    record["latent_shape"] = ShapeJson(d.latent_shape());
    record["output_shape"] = ShapeJson(d.output_shape());
  }
  if (d.has_audio()) {
    record["audio_latent_shape"] = ShapeJson(d.audio().latent_shape());
    record["audio_output_shape"] = ShapeJson(d.audio().output_shape());
  }
  record["mode"] = d.profile();
  record["warm"] = d.warm();
  record["stack"] = stack;
  record["stack_decision"] = d.has_tiling() ? d.tiling().stack_decision() : d.stack_decision();
  record["compile"] = d.compile_decision();
  record["group_size"] = group_size;
  if (!fallbacks.empty()) {
    record["fallbacks"] = std::vector<std::string>(fallbacks.begin(), fallbacks.end());
  }
  nlohmann::json timings = nlohmann::json::object();
  for (const v1::Timing& t : d.timings()) timings[t.component()] = t.seconds();
  record["timings"] = std::move(timings);
  LogDecodeRecord(record);
}

void OutcomeRecorder::Observe(const std::string& label, const v1::DecodeReply& d,
                              const std::string& stack, uint32_t group_size,
                              const std::vector<const char*>& fallbacks) {
  DecodeLabels labels;
  labels.model = label;
  labels.profile = d.profile();
  // The only label a client chooses (through its latent's size): the
  // first kMaxResolutionLabels sizes keep their own value, later ones are
  // "other", so that clients cannot fold the bounded labels of everyone's
  // series (metrics.h) into "other".
  constexpr size_t kMaxResolutionLabels = 16;
  std::string resolution =
      d.frames() > 0 ? std::to_string(d.height_px()) + "x" + std::to_string(d.width_px())
                     : "audio";
  if (resolution_labels_.count(resolution) == 0) {
    if (resolution_labels_.size() < kMaxResolutionLabels) {
      resolution_labels_.insert(resolution);
    } else {
      resolution = "other";
    }
  }
  labels.resolution = std::move(resolution);
  labels.stack = stack;
  labels.group_size = group_size;
  std::vector<std::pair<std::string, double>> timings;
  for (const v1::Timing& t : d.timings()) timings.emplace_back(t.component(), t.seconds());
  metrics_->ObserveDecode(labels, timings);
  for (const char* f : fallbacks) metrics_->CountOutcome(label, f);
}

void OutcomeRecorder::Publish(const v1::StatusReply& s) {
  if (metrics_ == nullptr) return;
  metrics_->SetGauge("vaed_up", 1);
  metrics_->SetGauge("vaed_healthy", s.healthy() ? 1 : 0);
  metrics_->SetGauge("vaed_uptime_seconds", s.uptime_seconds());
  metrics_->SetGauge("vaed_queue_depth", s.queue_depth());
  metrics_->SetGauge("vaed_in_flight", s.in_flight());
  metrics_->SetGauge("vaed_clients", s.clients());
  metrics_->SetGauge("vaed_quarantined_clients", s.quarantined_size());
  metrics_->SetGauge("vaed_resident_weight_bytes", static_cast<double>(s.resident_weight_bytes()));
  metrics_->SetGauge("vaed_plan_cache_entries", s.plan_cache_entries());
  metrics_->SetGauge("vaed_peak_rss_bytes", static_cast<double>(s.peak_rss_bytes()));
  for (const v1::GroupStatus& g : s.groups()) {
    metrics_->SetGauge("vaed_group_generation", static_cast<double>(g.generation()), "group",
                       g.name());
  }
  for (const v1::RankStatus& r : s.rank_status()) {
    const std::string rank = std::to_string(r.rank());
    metrics_->SetCounter("vaed_rank_busy_seconds_total", r.busy_seconds(), "rank", rank);
    metrics_->SetCounter("vaed_rank_tiles_total", static_cast<double>(r.tiles()), "rank", rank);
  }
  metrics_->SetCounter("vaed_client_faults_total", static_cast<double>(s.client_faults()));
  metrics_->SetCounter("vaed_protocol_errors_total", static_cast<double>(s.protocol_errors()));
  metrics_->SetCounter("vaed_rejected_connections_total",
                       static_cast<double>(s.rejected_connections()));
}

}  // namespace vaed::server
