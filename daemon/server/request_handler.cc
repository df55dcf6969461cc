#include "daemon/server/request_handler.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "daemon/models/av_sync.h"
#include "daemon/server/decode_options.h"
#include "daemon/server/decode_reply.h"
#include "daemon/server/logging.h"
#include "vaed/wire.h"

namespace vaed::server {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// Client-chosen names end up in logs and replies: printable ASCII only, so a
// client cannot forge log lines or corrupt the journal.
Status CheckPrintableName(const std::string& name, const std::string& field) {
  constexpr size_t kMaxName = 128;
  if (name.size() > kMaxName) {
    return InvalidArgument(field + " is " + std::to_string(name.size()) + " bytes; at most " +
                           std::to_string(kMaxName) + " are allowed");
  }
  for (unsigned char ch : name) {
    if (ch < 0x20 || ch > 0x7e) {
      return InvalidArgument(field + " contains byte " + std::to_string(ch) +
                             "; only printable ASCII (0x20-0x7e) is allowed");
    }
  }
  return Status::Ok();
}

// The tensor layout a request's output must have.
struct OutputLayout {
  DType dtype;
  std::vector<int64_t> shape;
};

Result<OutputLayout> ExpectedOutput(const models::DecodePlan& plan, v1::OutputFormat format) {
  switch (format) {
    case v1::OUTPUT_FORMAT_UNSPECIFIED:
    case v1::OUTPUT_FORMAT_UINT8_NHWC:
      return OutputLayout{DType::kUInt8,
                          {plan.frames, plan.height_px, plan.width_px, plan.channels}};
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW:
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT:
      return OutputLayout{DType::kFloat32,
                          {plan.frames, plan.channels, plan.height_px, plan.width_px}};
    default:
      return InvalidArgument("output_format " + std::to_string(format) +
                             " is unknown (expected UINT8_NHWC, FLOAT32_NCHW or "
                             "FLOAT32_NCHW_UNIT)");
  }
}

std::string FormatName(v1::OutputFormat format) {
  switch (format) {
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW:
      return "float32 NCHW (raw)";
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT:
      return "float32 NCHW ([0, 1])";
    default:
      return "uint8 NHWC";
  }
}

// Byte ranges [a, a+n) and [b, b+m) intersect (both already bounds-checked,
// so no sum overflows).
bool Overlaps(uint64_t a, uint64_t n, uint64_t b, uint64_t m) {
  return n > 0 && m > 0 && a < b + m && b < a + n;
}

// Checks that `ref` lies inside `region` and that the client has not shrunk
// the segment since it was registered.
Status CheckRegionRange(const HostRegion& region, const TensorRef& ref, const std::string& what) {
  VAED_RETURN_IF_ERROR(region.CheckRange(ref.offset, ref.size, what));
  VAED_ASSIGN_OR_RETURN(uint64_t now_bytes, region.CurrentSegmentBytes());
  if (now_bytes < ref.offset + ref.size) {
    return OutOfRange(what + ": region '" + region.name() + "' now holds only " +
                      std::to_string(now_bytes) + " bytes (fstat) but was registered with " +
                      std::to_string(region.size()) + "; the segment shrank");
  }
  return Status::Ok();
}

// A request's frame rate: AvSync.fps, or the model's, or kDefaultFps.
Result<double> FpsFor(const models::ModelInfo& model, double requested) {
  if (requested == 0) return model.native_fps > 0 ? model.native_fps : models::kDefaultFps;
  constexpr double kMaxFps = 1000;
  if (!std::isfinite(requested) || requested < 0 || requested > kMaxFps) {
    return InvalidArgument("av_sync.fps is " + std::to_string(requested) +
                           "; must be a frame rate in (0, 1000] frames per second, or 0 for "
                           "the model's rate");
  }
  return requested;
}

// Fault kind by error code, for errors that are the client's doing; nullopt
// for the others (daemon-side, capacity, deadlines, unknown_client).
std::optional<FaultKind> FaultKindOf(StatusCode code) {
  switch (code) {
    case StatusCode::kProtocolError:
      return FaultKind::kProtocol;
    case StatusCode::kClientFault:
      return FaultKind::kMemory;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kVersionMismatch:
    case StatusCode::kPermissionDenied:
      return FaultKind::kValidation;
    default:
      return std::nullopt;
  }
}

// The position of `model` in `registry` (config order): every rank's
// registry holds its own instance at that index (decode_job.h).
size_t ModelIndex(const models::ModelRegistry& registry, const models::VaeModel* model) {
  const std::vector<const models::VaeModel*> all = registry.models();
  return static_cast<size_t>(std::find(all.begin(), all.end(), model) - all.begin());
}

// Requests a quarantined process may still send: they cost nothing and let
// it stay connected, see its state and leave.
bool AllowedInQuarantine(v1::Request::BodyCase body) {
  return body == v1::Request::kHeartbeat || body == v1::Request::kGoodbye ||
         body == v1::Request::kStatus;
}

void FillQuarantineEntry(const QuarantineSnapshot& q, v1::QuarantineEntry* out) {
  out->set_uid(q.identity.uid);
  out->set_pid(q.identity.pid);
  out->set_client_name(q.client_name);
  out->set_offences(q.offences);
  out->set_remaining_ms(static_cast<uint64_t>(q.remaining.count()));
  out->set_duration_ms(static_cast<uint64_t>(q.duration.count()));
  out->set_last_fault(q.last_fault);
  out->set_faults_in_window(q.faults_in_window);
}

}  // namespace

RequestHandler::RequestHandler(const DaemonOptions& options, models::ModelRegistry* registry,
                               JobSink* sink, const AccessPolicy* access, PidAlive pid_alive)
    : options_(options),
      layout_(engine::MakeGroupLayout(options.group).ok()
                  ? *engine::MakeGroupLayout(options.group)
                  : *parallel::GroupLayout::Plan(parallel::GroupLayoutOptions{})),
      registry_(registry),
      sink_(sink),
      access_(access),
      started_(Clock::now()),
      clients_(std::move(pid_alive)),
      quarantine_(
          QuarantinePolicy{.fault_threshold = options.quarantine.fault_threshold,
                           .window = milliseconds(options.quarantine.window_ms),
                           .base_duration = milliseconds(options.quarantine.duration_ms),
                           .max_duration = milliseconds(options.quarantine.max_duration_ms)}) {}

PeerIdentity RequestHandler::IdentityOf(const Incoming& in) const {
  if (in.peer) return {in.peer->uid, in.peer->pid};
  return {std::numeric_limits<uint32_t>::max(), 0};
}

void RequestHandler::CountFault(const PeerIdentity& who, const std::string& client_name,
                                const Status& status, std::optional<FaultKind> kind,
                                Clock::time_point now) {
  if (status.ok()) return;
  if (!kind) kind = FaultKindOf(status.code());
  if (!kind) return;
  std::string name = client_name;
  if (name.empty()) {
    // Garbage carries no client id; name the process by a Hello of it.
    for (const ClientState* c : std::as_const(clients_).All()) {
      if (c->identity == who) {
        name = c->name;
        break;
      }
    }
  }
  if (quarantine_.RecordFault(who, *kind, name, status.message(), now)) {
    ApplyQuarantine(who, now);
  }
}

void RequestHandler::ApplyQuarantine(const PeerIdentity& who, Clock::time_point now) {
  const Status state = quarantine_.Check(who, now);
  spdlog::warn("quarantine: {}", state.message());
  // Its queued and running decodes end with the quarantine's own status
  // (code and retry-after).
  const Status why = state;
  std::vector<uint64_t> ids;
  for (const ClientState* c : std::as_const(clients_).All()) {
    if (c->identity == who) ids.push_back(c->id);
  }
  quarantine_.NoteClients(who, ids);
  // Its clients are dropped: regions unmapped, work cancelled. Until the
  // quarantine ends every request of the process is refused; afterwards its
  // client library sees unknown_client and says Hello again, re-registering
  // its regions (as after a daemon restart).
  for (ClientState* c : clients_.All()) {
    if (c->identity != who) continue;
    const size_t cancelled = sink_->CancelClient(c->id, why);
    spdlog::warn("quarantine: client {} ('{}') dropped: unmapped {} regions, cancelled {} decodes",
                 c->id, c->name, c->regions.size(), cancelled);
    clients_.Remove(c->id);
  }
}

std::optional<v1::Reply> RequestHandler::Handle(const Incoming& in, Clock::time_point now) {
  decode_.reset();
  std::optional<v1::Reply> reply = HandleMessage(in, now);
  if (decode_) {
    if (reply) {
      FinishDecode(decode_->model, clients_.Find(decode_->client_id), *reply);
    } else {
      // A job: its outcome comes with the sink's answer (OnJobDone).
      if (job_models_.size() >= 65536) job_models_.clear();  // bounded, never expected
      job_models_[{decode_->client_id, decode_->request_id}] = decode_->model;
    }
  }
  return reply;
}

namespace {

// The outcome label of a Decode answered with `code` (metrics.h).
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

// The fallbacks a successful decode took, once each, by their typed kinds
// (models::FallbackKind): "oom_fallback" (the failure ladder stepped down,
// or plans were released, after out of memory), "compile_fallback" (a
// compiled plan failed to build or run and the bucket went eager),
// "collective_fallback" (the VAE group failed or was unavailable and the
// output rank decoded alone).
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

nlohmann::json ShapeJson(const google::protobuf::RepeatedField<int64_t>& shape) {
  return nlohmann::json(std::vector<int64_t>(shape.begin(), shape.end()));
}

}  // namespace

void RequestHandler::FinishDecode(const std::string& model, const ClientState* client,
                                  const v1::Reply& reply,
                                  const std::vector<const char*>& fallbacks) {
  // Bounded label values: a configured model, else "unknown".
  std::string label = model.empty() ? registry_->default_model() : model;
  if (registry_->Find(label) == nullptr) label = "unknown";
  const Status status = reply.has_error() ? FromProtoError(reply.error()) : Status::Ok();
  const char* outcome = reply.has_decode() ? "ok" : OutcomeName(status.code());
  ++outcomes_[outcome];
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
    LogDecodeRecord(record);
    return;
  }
  const v1::DecodeReply& d = reply.decode();
  peak_rss_bytes_ = std::max<uint64_t>(peak_rss_bytes_, d.peak_rss_bytes());
  for (const char* f : fallbacks) ++outcomes_[f];
  std::vector<std::pair<std::string, double>> timings;
  nlohmann::json timing_json = nlohmann::json::object();
  for (const v1::Timing& t : d.timings()) {
    timings.emplace_back(t.component(), t.seconds());
    timing_json[t.component()] = t.seconds();
  }
  const std::string stack =
      d.has_tiling() ? (d.tiling().max_tiles_per_call() > 1 ? "stacked" : "sequential")
                     : "untiled";
  const uint32_t group_size = d.has_group() && d.group().size() > 0 ? d.group().size() : 1;
  if (metrics_ != nullptr) {
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
    metrics_->ObserveDecode(labels, timings);
    for (const char* f : fallbacks) metrics_->CountOutcome(label, f);
  }
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
  record["timings"] = std::move(timing_json);
  LogDecodeRecord(record);
}

void RequestHandler::PublishMetrics(Clock::time_point now) {
  v1::StatusReply s;
  FillStatus(&s, now);
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

std::optional<v1::Reply> RequestHandler::HandleMessage(const Incoming& in, Clock::time_point now) {
  const PeerIdentity who = IdentityOf(in);
  v1::Reply reply;
  auto fail = [&](const Status& s, std::optional<FaultKind> kind,
                  const std::string& client_name) -> std::optional<v1::Reply> {
    *reply.mutable_error() = ToProtoError(s);
    CountFault(who, client_name, s, kind, now);
    return reply;
  };

  // A quarantined process gets QUARANTINED for everything but the few
  // requests it may still send (whatever else it sends, parsable or not).
  const uint64_t message_bytes = in.oversized_bytes > 0 ? in.oversized_bytes : in.payload.size();
  const bool well_formed = message_bytes <= options_.server.max_message_bytes;
  v1::Request req;
  const bool parsed =
      well_formed && req.ParseFromArray(in.payload.data(), static_cast<int>(in.payload.size()));
  if (parsed && req.body_case() == v1::Request::kDecode && !req.decode().plan_only()) {
    decode_ = DecodeInFlight{req.decode().model(), req.client_id(), req.request_id()};
  }
  if (!parsed || !AllowedInQuarantine(req.body_case())) {
    if (Status q = quarantine_.Check(who, now); !q.ok()) {
      ++quarantine_rejections_;
      if (parsed) reply.set_request_id(req.request_id());
      if (parsed && req.body_case() == v1::Request::kDecode) ++requests_failed_;
      *reply.mutable_error() = ToProtoError(q);
      return reply;
    }
  }

  if (!well_formed) {
    ++protocol_errors_;
    return fail(ProtocolError("message of " + std::to_string(message_bytes) +
                              " bytes exceeds server.max_message_bytes (" +
                              std::to_string(options_.server.max_message_bytes) +
                              "); tensors travel in registered regions, not in messages"),
                FaultKind::kProtocol, "");
  }
  if (!parsed) {
    ++protocol_errors_;
    spdlog::debug("protocol error: {} bytes that are not a vaed.v1.Request from {}",
                  in.payload.size(), who.ToString());
    return fail(ProtocolError("message of " + std::to_string(in.payload.size()) +
                              " bytes is not a valid vaed.v1.Request"),
                FaultKind::kProtocol, "");
  }
  reply.set_request_id(req.request_id());

  if (req.body_case() == v1::Request::kHello) {
    HandleHello(in, req, now, &reply);
    if (reply.has_error()) {
      const Status s = FromProtoError(reply.error());
      CountFault(who, req.hello().client_name(), s,
                 s.code() == StatusCode::kResourceExhausted ? std::optional(FaultKind::kQuota)
                                                            : std::nullopt,
                 now);
    }
    return reply;
  }
  if (req.body_case() == v1::Request::BODY_NOT_SET) {
    ++protocol_errors_;
    return fail(ProtocolError("request " + std::to_string(req.request_id()) +
                              " has no body (or a body this daemon does not know)"),
                FaultKind::kProtocol, "");
  }
  if (req.body_case() == v1::Request::kReleaseQuarantine) {
    // Admin requests are authorized by peer credentials, not by a client id.
    if (Status s = HandleReleaseQuarantine(in, req.release_quarantine(), now, &reply); !s.ok()) {
      return fail(s, std::nullopt, "");
    }
    return reply;
  }

  auto client = clients_.Authenticate(req.client_id(), in.routing_id);
  if (!client.ok()) {
    if (req.body_case() == v1::Request::kDecode) ++requests_failed_;
    if (client.status().code() == StatusCode::kProtocolError) ++protocol_errors_;
    // An unknown id is not counted (a client the daemon dropped, or one of
    // a restarted daemon, asks once and says Hello again); another
    // connection's id is a protocol fault.
    return fail(client.status(), std::nullopt, "");
  }
  ClientState* c = *client;
  c->last_seen = now;

  Status s;
  std::optional<FaultKind> kind;
  switch (req.body_case()) {
    case v1::Request::kRegisterRegion:
      s = HandleRegister(c, req.register_region(), &reply, &kind);
      break;
    case v1::Request::kUnregisterRegion:
      s = clients_.RemoveRegion(c, req.unregister_region().region_id());
      if (s.ok()) reply.mutable_unregister_region();
      kind = FaultKind::kRegion;
      break;
    case v1::Request::kDecode: {
      auto deferred = HandleDecode(c, in.routing_id, req, now, &reply, &kind);
      if (deferred.ok() && *deferred) return std::nullopt;  // the sink replies
      s = deferred.ok() ? Status::Ok() : deferred.status();
      if (!s.ok()) {
        ++requests_failed_;
        if (s.code() == StatusCode::kBusy) ++busy_rejections_;
        spdlog::info("decode request {} of client {} rejected: {}", req.request_id(), c->id,
                     s.ToString());
      }
      break;
    }
    case v1::Request::kStatus:
      FillStatus(reply.mutable_status(), now);
      break;
    case v1::Request::kHeartbeat:
      reply.mutable_heartbeat();
      break;
    case v1::Request::kGoodbye: {
      const size_t cancelled = sink_->CancelClient(
          c->id, Cancelled("client " + std::to_string(c->id) + " said goodbye"));
      spdlog::info("client {} ('{}') said goodbye; unmapping {} regions, cancelling {} decodes",
                   c->id, c->name, c->regions.size(), cancelled);
      clients_.Remove(c->id);
      reply.mutable_goodbye();
      return reply;
    }
    default:
      s = ProtocolError("unexpected request body");
  }
  if (!s.ok()) {
    const std::string name = c->name;
    *reply.mutable_error() = ToProtoError(s);
    // `c` may be unusable after a quarantine; CountFault looks clients up.
    CountFault(who, name, s, kind, now);
  }
  return reply;
}

void RequestHandler::HandleHello(const Incoming& in, const v1::Request& req, Clock::time_point now,
                                 v1::Reply* reply) {
  const v1::Hello& hello = req.hello();
  if (Status s = CheckPrintableName(hello.client_name(), "hello.client_name"); !s.ok()) {
    *reply->mutable_error() = ToProtoError(s);
    return;
  }
  if (hello.protocol_version() != kProtocolVersion) {
    *reply->mutable_error() = ToProtoError(VersionMismatch(
        "client speaks vaed protocol version " + std::to_string(hello.protocol_version()) +
        ", this daemon speaks version " + std::to_string(kProtocolVersion)));
    return;
  }
  // A second Hello on one connection starts a new session: the old client
  // goes (its work is cancelled), so one connection holds one client.
  for (const ClientState* old : std::as_const(clients_).All()) {
    if (old->routing_id != in.routing_id) continue;
    const uint64_t id = old->id;
    sink_->CancelClient(
        id, Cancelled("client " + std::to_string(id) + " said Hello again on its connection"));
    clients_.Remove(id);
    break;
  }
  const PeerIdentity who = IdentityOf(in);
  size_t of_process = 0;
  for (const ClientState* c : std::as_const(clients_).All()) of_process += c->identity == who;
  if (of_process >= options_.server.max_clients_per_process) {
    *reply->mutable_error() = ToProtoError(ResourceExhausted(
        "client process " + who.ToString() + " already has " + std::to_string(of_process) +
        " clients (server.max_clients_per_process = " +
        std::to_string(options_.server.max_clients_per_process) + "); close one first"));
    return;
  }
  // Without SO_PEERCRED (not on Linux IPC) the claimed pid is all there is.
  const PeerCredentials peer = in.peer.value_or(PeerCredentials{
      std::numeric_limits<uint32_t>::max(), std::numeric_limits<uint32_t>::max(), hello.pid()});
  ClientState* c = clients_.Add(in.routing_id, hello.client_name(), peer, hello.pid(), now);
  // Faults are keyed by what the messages carry; a connection without
  // credentials is the one shared identity {uid -1, pid 0} (IdentityOf),
  // whatever pid its Hello claims (which liveness still uses).
  c->identity = IdentityOf(in);
  if (in.peer && hello.pid() != in.peer->pid) {
    spdlog::info("client {} connected: '{}' pid {} (claims pid {}: another pid namespace?) uid {}",
                 c->id, c->name, c->pid, hello.pid(), peer.uid);
  } else {
    spdlog::info("client {} connected: '{}' pid {} uid {}", c->id, c->name, c->pid, peer.uid);
  }
  v1::HelloReply* h = reply->mutable_hello();
  h->set_client_id(c->id);
  h->set_protocol_version(kProtocolVersion);
  h->set_daemon_version(VAED_VERSION);
  h->set_heartbeat_interval_ms(options_.server.heartbeat_interval_ms);
  h->set_client_timeout_ms(options_.server.client_timeout_ms);
  h->set_heartbeat_liveness(options_.server.heartbeat_liveness);
  h->set_max_in_flight(options_.server.max_in_flight_per_client);
}

Status RequestHandler::HandleRegister(ClientState* client, const v1::RegisterRegion& req,
                                      v1::Reply* reply, std::optional<FaultKind>* kind) {
  switch (req.kind_case()) {
    case v1::RegisterRegion::kHost: {
      *kind = FaultKind::kRegion;
      const std::string& name = req.host().name();
      VAED_RETURN_IF_ERROR(ValidateRegionName(name).WithContext("register_region.host.name"));
      const std::string& prefix = options_.server.region_prefix;
      if (!prefix.empty() && name.compare(0, prefix.size(), prefix) != 0) {
        return InvalidArgument("register_region.host.name '" + name +
                               "' does not start with the required prefix '" + prefix +
                               "' (server.region_prefix)");
      }
      if (const ClientState* holder = clients_.RegionNameHolder(name, client->identity)) {
        return PermissionDenied(
            "register_region.host.name '" + name + "' is registered by another process (client " +
            std::to_string(holder->id) + "); a segment is never shared between client processes");
      }
      if (clients_.region_count() >= options_.server.max_regions) {
        // Every region holds a file descriptor: a cap for the whole daemon
        // (not this client's fault alone, so not counted against it).
        return ResourceExhausted("vaed holds " + std::to_string(clients_.region_count()) +
                                 " regions (server.max_regions = " +
                                 std::to_string(options_.server.max_regions) +
                                 "); retry when clients release some");
      }
      if (client->regions.size() >= options_.server.max_regions_per_client) {
        *kind = FaultKind::kQuota;
        return ResourceExhausted("client " + std::to_string(client->id) + " already has " +
                                 std::to_string(client->regions.size()) +
                                 " regions registered (server.max_regions_per_client = " +
                                 std::to_string(options_.server.max_regions_per_client) +
                                 "); unregister one first");
      }
      const uint64_t limit = options_.server.max_region_bytes_per_client;
      if (req.host().size_bytes() > limit - std::min(limit, client->region_bytes)) {
        *kind = FaultKind::kQuota;
        return ResourceExhausted("register_region.host.size_bytes " +
                                 std::to_string(req.host().size_bytes()) + " would take client " +
                                 std::to_string(client->id) + " past " + std::to_string(limit) +
                                 " mapped bytes (server.max_region_bytes_per_client; " +
                                 std::to_string(client->region_bytes) + " registered)");
      }
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<HostRegion> region,
                            HostRegion::Open(name, req.host().size_bytes()));
      // Only segments the client's own uid owns: a client cannot make the
      // daemon read or write another user's memory.
      if (client->identity.uid != std::numeric_limits<uint32_t>::max() &&
          region->owner_uid() != client->identity.uid) {
        return PermissionDenied(
            "region '" + name + "' is owned by uid " + std::to_string(region->owner_uid()) +
            " but client " + std::to_string(client->id) + " runs as uid " +
            std::to_string(client->identity.uid) + "; a client may register only segments it owns");
      }
      const uint64_t mapped = region->size();
      const uint64_t id = clients_.AddRegion(client, std::move(region));
      spdlog::debug("client {} registered region {} '{}' ({} bytes)", client->id, id, name, mapped);
      reply->mutable_register_region()->set_region_id(id);
      reply->mutable_register_region()->set_mapped_bytes(mapped);
      *kind = std::nullopt;
      return Status::Ok();
    }
    case v1::RegisterRegion::kCuda:
      return FailedPrecondition(
          "register_region.cuda: CUDA IPC regions need a GPU build of vaed (VAED_WITH_CUDA=ON) "
          "with a GPU executor; this daemon decodes on CPU from host shm regions");
    default:
      return InvalidArgument("register_region needs either host or cuda");
  }
}

Result<bool> RequestHandler::HandleDecode(ClientState* client, const std::string& routing_id,
                                          const v1::Request& req, Clock::time_point now,
                                          v1::Reply* reply, std::optional<FaultKind>* kind) {
  if (!health_.empty()) {
    return Unavailable("the daemon is unhealthy (" + health_ + ") and is restarting");
  }
  const v1::Decode& d = req.decode();
  VAED_RETURN_IF_ERROR(CheckPrintableName(d.model(), "model"));
  VAED_RETURN_IF_ERROR(CheckPrintableName(d.options().profile(), "options.profile"));
  VAED_ASSIGN_OR_RETURN(models::VaeModel * model, registry_->Get(d.model()));
  const models::ModelInfo& info = model->info();
  const std::string model_name = info.name;
  VAED_ASSIGN_OR_RETURN(ResolvedOptions options,
                        ResolveDecodeOptions(info, d.options(), options_.profiles,
                                             options_.executor.allow_fault_injection));
  if (d.options().group_size() != 0) {
    // Qualified? (How many ranks it finally gets depends on its tiles; the
    // executor decides with group.few_tiles.)
    VAED_RETURN_IF_ERROR(parallel::ChooseGroupSize(layout_,
                                                   static_cast<int>(d.options().group_size()),
                                                   INT64_MAX, parallel::FewTiles::kPad)
                             .status());
  }

  // Plans first: the latents' dtypes and shapes decide everything else.
  if (!d.has_latent() && !d.has_audio_latent()) {
    return InvalidArgument(
        "latent or audio_latent is required (latent: video or image, "
        "audio_latent: audio; both for a joint request)");
  }
  engine::RequestFacts av;
  VAED_ASSIGN_OR_RETURN(av.fps, FpsFor(info, d.av_sync().fps()));
  av.independent_lengths = d.av_sync().independent_lengths();

  std::optional<engine::VideoPart> video;
  if (d.has_latent()) {
    engine::VideoPart v;
    v.latent.dtype = FromProto(d.latent().dtype());
    v.latent.shape.assign(d.latent().shape().begin(), d.latent().shape().end());
    VAED_ASSIGN_OR_RETURN(v.plan, model->Plan(v.latent.dtype, v.latent.shape));
    VAED_ASSIGN_OR_RETURN(OutputLayout expected, ExpectedOutput(v.plan, d.output_format()));
    v.output.dtype = expected.dtype;
    v.output.shape = expected.shape;
    VAED_ASSIGN_OR_RETURN(v.output.size, ContiguousBytes(expected.dtype, expected.shape, "output"));
    v.format = ToEngineFormat(d.output_format());
    video = std::move(v);
  } else {
    if (d.has_output()) {
      return InvalidArgument(
          "output is set but latent is not; an audio-only request writes "
          "only audio_output");
    }
    if (d.options().stack_tiling() != v1::STACK_TILING_UNSPECIFIED) {
      return InvalidArgument(
          "options.stack_tiling is set but the request has no video latent "
          "(stack tiling schedules video tiles)");
    }
  }

  std::optional<engine::AudioPart> audio;
  if (d.has_audio_latent()) {
    engine::AudioPart a;
    a.latent.dtype = FromProto(d.audio_latent().dtype());
    a.latent.shape.assign(d.audio_latent().shape().begin(), d.audio_latent().shape().end());
    VAED_ASSIGN_OR_RETURN(a.plan, model->PlanAudio(a.latent.dtype, a.latent.shape));
    a.output.dtype = DType::kFloat32;
    a.output.shape = {a.plan.channels, a.plan.samples};
    VAED_ASSIGN_OR_RETURN(a.output.size,
                          ContiguousBytes(a.output.dtype, a.output.shape, "audio_output"));
    audio = std::move(a);
  } else if (d.has_audio_output()) {
    return InvalidArgument("audio_output is set but audio_latent is not");
  }

  // The A/V length rule (AvSync).
  if (video && info.caps.audio) {
    av.expected_audio_latent_frames =
        models::AudioLatentFramesForVideo(video->plan.frames, av.fps, info.audio_latent_rate_hz);
  }
  if (video && audio && !av.independent_lengths) {
    VAED_RETURN_IF_ERROR(models::CheckAvLengths(
        {.video_frames = video->plan.frames,
         .fps = av.fps,
         .audio_latent_frames = audio->plan.latent_frames,
         .audio_latent_rate_hz = info.audio_latent_rate_hz,
         .samples_per_latent = audio->plan.samples / audio->plan.latent_frames,
         .sample_rate_hz = audio->plan.sample_rate_hz}));
  }

  av.profile = options.profile;
  av.compile_decision = options.compile_decision;
  av.stack_decision = options.stack_decision;
  av.output_changing = options.output_changing;
  if (d.plan_only()) {
    v1::DecodeReply* p = reply->mutable_decode();
    FillDecodeGeometry(*model, video, audio, av, p);
    p->set_planned_only(true);
    return false;
  }

  // Resolve every tensor reference against the client's regions. `placed`
  // collects them for the overlap check. Failures here are region faults.
  *kind = FaultKind::kRegion;
  struct Placed {
    std::string field;
    const TensorRef* ref;
    const HostRegion* region;
    bool written;
  };
  std::vector<Placed> placed;
  // The client's region `ref` names, with `ref`'s bytes inside it now.
  auto locate = [&](const TensorRef& ref,
                    const std::string& field) -> Result<std::shared_ptr<HostRegion>> {
    VAED_ASSIGN_OR_RETURN(std::shared_ptr<HostRegion> region,
                          clients_.FindRegion(*client, ref.region_id, field + ".region_id"));
    VAED_RETURN_IF_ERROR(CheckRegionRange(*region, ref, field));
    return region;
  };
  if (video) {
    VAED_ASSIGN_OR_RETURN(video->latent, FromProto(d.latent(), "latent"));
    if (!d.has_output()) return InvalidArgument("output is required unless plan_only is set");
    VAED_ASSIGN_OR_RETURN(TensorRef output, FromProto(d.output(), "output"));
    if (output.dtype != video->output.dtype || output.shape != video->output.shape) {
      return InvalidArgument(
          "output is " + std::string(DTypeName(output.dtype)) + " " + ShapeToString(output.shape) +
          "; model '" + model_name + "' writes " + FormatName(d.output_format()) + " " +
          std::string(DTypeName(video->output.dtype)) + " " + ShapeToString(video->output.shape) +
          " for latent " + ShapeToString(video->latent.shape));
    }
    video->output = std::move(output);
    VAED_ASSIGN_OR_RETURN(video->latent_region, locate(video->latent, "latent"));
    VAED_ASSIGN_OR_RETURN(video->output_region, locate(video->output, "output"));
    placed.push_back({"latent", &video->latent, video->latent_region.get(), false});
    placed.push_back({"output", &video->output, video->output_region.get(), true});
  }
  if (audio) {
    VAED_ASSIGN_OR_RETURN(audio->latent, FromProto(d.audio_latent(), "audio_latent"));
    if (!d.has_audio_output()) {
      return InvalidArgument("audio_output is required unless plan_only is set");
    }
    VAED_ASSIGN_OR_RETURN(TensorRef output, FromProto(d.audio_output(), "audio_output"));
    if (output.dtype != audio->output.dtype || output.shape != audio->output.shape) {
      return InvalidArgument("audio_output is " + std::string(DTypeName(output.dtype)) + " " +
                             ShapeToString(output.shape) + "; model '" + model_name +
                             "' writes float32 [channels, samples] " +
                             ShapeToString(audio->output.shape) + " for audio_latent " +
                             ShapeToString(audio->latent.shape));
    }
    audio->output = std::move(output);
    VAED_ASSIGN_OR_RETURN(audio->latent_region, locate(audio->latent, "audio_latent"));
    VAED_ASSIGN_OR_RETURN(audio->output_region, locate(audio->output, "audio_output"));
    placed.push_back({"audio_latent", &audio->latent, audio->latent_region.get(), false});
    placed.push_back({"audio_output", &audio->output, audio->output_region.get(), true});
  }
  // What the daemon writes must not overlap anything else of the request,
  // also through two registrations (region ids) of one segment.
  for (size_t i = 0; i < placed.size(); ++i) {
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const TensorRef& a = *placed[i].ref;
      const TensorRef& b = *placed[j].ref;
      if ((placed[i].written || placed[j].written) &&
          placed[i].region->SameSegment(*placed[j].region) &&
          Overlaps(a.offset, a.size, b.offset, b.size)) {
        const std::string& writer = placed[i].written ? placed[i].field : placed[j].field;
        const std::string& other = placed[i].written ? placed[j].field : placed[i].field;
        const TensorRef& w = placed[i].written ? a : b;
        const TensorRef& o = placed[i].written ? b : a;
        return InvalidArgument(writer + " bytes [" + std::to_string(w.offset) + ", " +
                               std::to_string(w.offset + w.size) + ") overlap " + other +
                               " bytes [" + std::to_string(o.offset) + ", " +
                               std::to_string(o.offset + o.size) + ") in " +
                               (a.region_id == b.region_id
                                    ? "region " + std::to_string(a.region_id)
                                    : "segment '" + placed[i].region->name() + "' (regions " +
                                          std::to_string(a.region_id) + " and " +
                                          std::to_string(b.region_id) + " map the same segment)"));
      }
    }
  }

  // Per-client in-flight limit: a quota fault (a well-behaved client waits
  // for its replies).
  if (client->in_flight >= options_.server.max_in_flight_per_client) {
    *kind = FaultKind::kQuota;
    constexpr uint32_t kRetryMs = 100;
    return Busy("client " + std::to_string(client->id) + " already has " +
                    std::to_string(client->in_flight) +
                    " decodes queued or running (server.max_in_flight_per_client = " +
                    std::to_string(options_.server.max_in_flight_per_client) +
                    "); wait for a reply first",
                kRetryMs);
  }
  *kind = std::nullopt;

  auto job = std::make_unique<engine::DecodeJob>();
  job->routing_id = routing_id;
  job->client_id = client->id;
  job->request_id = req.request_id();
  job->model = model;
  job->model_index = ModelIndex(*registry_, model);
  job->settings.stack_tiling = options.stack_tiling;
  job->settings.compile = options.compile;
  job->settings.faults = options.faults;
  job->settings.tiling = options.tiling;
  job->requested_group_size = d.options().group_size();
  job->progress = d.options().progress();
  job->video = std::move(video);
  job->audio = std::move(audio);
  job->av = av;
  job->received = now;
  job->cancel = std::make_shared<models::CancelToken>(now, d.options().deadline_ms());
  VAED_RETURN_IF_ERROR(sink_->Submit(std::move(job)));
  ++client->in_flight;
  return true;
}

Status RequestHandler::HandleReleaseQuarantine(const Incoming& in, const v1::ReleaseQuarantine& req,
                                               Clock::time_point now, v1::Reply* reply) {
  const PeerCredentials peer =
      in.peer.value_or(PeerCredentials{std::numeric_limits<uint32_t>::max(), 0, 0});
  if (!access_->IsAdmin(peer)) {
    return PermissionDenied("release_quarantine needs an admin peer (uid 0, the daemon's uid " +
                            std::to_string(geteuid()) +
                            ", or server.admin_uids); this peer is "
                            "uid " +
                            std::to_string(peer.uid));
  }
  VAED_RETURN_IF_ERROR(CheckPrintableName(req.client(), "release_quarantine.client"));
  const std::string& what = req.client();
  if (what.empty()) {
    return InvalidArgument(
        "release_quarantine.client is empty; give a client id, pid:N, uid:N, "
        "a client name, or 'all'");
  }
  // A client id names the process it belonged to when it was quarantined
  // (or belongs to now).
  std::optional<uint64_t> client_id;
  std::optional<PeerIdentity> by_id;
  if (std::all_of(what.begin(), what.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
      what.size() < 19) {
    client_id = std::stoull(what);
    if (const ClientState* c = clients_.Find(*client_id)) by_id = c->identity;
  }
  auto field = [&](std::string_view prefix) -> std::optional<uint64_t> {
    if (what.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
    const std::string digits = what.substr(prefix.size());
    if (digits.empty() || digits.size() > 10 ||
        !std::all_of(digits.begin(), digits.end(),
                     [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return std::nullopt;
    }
    return std::stoull(digits);
  };
  const std::optional<uint64_t> pid = field("pid:");
  const std::optional<uint64_t> uid = field("uid:");
  if ((what.rfind("pid:", 0) == 0 && !pid) || (what.rfind("uid:", 0) == 0 && !uid)) {
    return InvalidArgument("release_quarantine.client '" + what +
                           "' is malformed: pid:N and uid:N take a decimal number");
  }
  const std::vector<QuarantineSnapshot> released = quarantine_.Release(
      [&](const QuarantineSnapshot& q) {
        if (what == "all") return true;
        if (by_id && q.identity == *by_id) return true;
        if (client_id &&
            std::find(q.client_ids.begin(), q.client_ids.end(), *client_id) != q.client_ids.end()) {
          return true;
        }
        if (pid && static_cast<uint64_t>(q.identity.pid) == *pid) return true;
        if (uid && q.identity.uid == *uid) return true;
        return q.client_name == what;
      },
      now);
  for (const QuarantineSnapshot& q : released) {
    spdlog::warn("quarantine: released {} ('{}') by request of uid {}", q.identity.ToString(),
                 q.client_name, peer.uid);
    FillQuarantineEntry(q, reply->mutable_release_quarantine()->add_released());
  }
  if (released.empty()) {
    return NotFound("release_quarantine.client '" + what +
                    "' matches no quarantined client (see `vaectl quarantine list`)");
  }
  return Status::Ok();
}

v1::Reply RequestHandler::OnJobProgress(const engine::DecodeJob& job,
                                        const engine::ProgressEvent& event,
                                        Clock::time_point now) {
  if (ClientState* c = clients_.Find(job.client_id)) c->last_seen = now;
  return ProgressReply(job, event);
}

v1::Reply RequestHandler::OnJobDone(const engine::DecodeJob& job,
                                    const Result<engine::DecodeResult>& result,
                                    Clock::time_point now) {
  v1::Reply reply = FinishedReply(job, result);
  ClientState* c = clients_.Find(job.client_id);
  if (auto it = job_models_.find({job.client_id, job.request_id}); it != job_models_.end()) {
    FinishDecode(it->second, c, reply,
                 result.ok() ? FallbackOutcomes(*result) : std::vector<const char*>{});
    job_models_.erase(it);
  }
  if (c != nullptr) {
    if (c->in_flight > 0) --c->in_flight;
    // The silence timeout counts from the last exchange, and a reply is
    // one: a decode longer than client_timeout_ms must not make its client
    // look silent the moment it completes.
    c->last_seen = now;
  }
  if (result.ok()) {
    ++requests_served_;
    return reply;
  }
  ++requests_failed_;
  const Status& s = result.status();
  if (s.code() == StatusCode::kDeadlineExceeded) ++deadline_exceeded_;
  // Faults the executor found: a segment that faulted, non-finite latents.
  if (c != nullptr &&
      (s.code() == StatusCode::kClientFault || s.code() == StatusCode::kInvalidArgument)) {
    const PeerIdentity who = c->identity;
    CountFault(who, c->name, s, std::nullopt, now);
  }
  return reply;
}

void RequestHandler::OnReplyDropped(const std::string& routing_id, Clock::time_point now) {
  ++dropped_replies_;
  for (const ClientState* c : std::as_const(clients_).All()) {
    if (c->routing_id != routing_id) continue;
    const PeerIdentity who = c->identity;
    const std::string name = c->name;
    CountFault(who, name,
               ResourceExhausted("a reply was dropped: the client does not read its replies "
                                 "(server.send_hwm queued)"),
               FaultKind::kQuota, now);
    return;
  }
}

bool RequestHandler::HasClientOn(const std::string& routing_id) const {
  for (const ClientState* c : clients_.All()) {
    if (c->routing_id == routing_id) return true;
  }
  return false;
}

void RequestHandler::OnDisconnected(const std::string& routing_id) {
  for (ClientState* c : clients_.All()) {
    if (c->routing_id != routing_id) continue;
    const size_t cancelled = sink_->CancelClient(
        c->id, Cancelled("client " + std::to_string(c->id) + " closed its connection"));
    spdlog::info("client {} ('{}', pid {}) closed its connection; unmapping {} regions, {} "
                 "decodes cancelled",
                 c->id, c->name, c->pid, c->regions.size(), cancelled);
    clients_.Remove(c->id);
  }
}

void RequestHandler::Tick(Clock::time_point now) {
  if (metrics_ != nullptr && now - metrics_published_ >= std::chrono::seconds(1)) {
    metrics_published_ = now;
    PublishMetrics(now);
  }
  for (const auto& e : clients_.FindExpired(now, milliseconds(options_.server.client_timeout_ms))) {
    const ClientState* c = clients_.Find(e.client_id);
    const size_t cancelled = sink_->CancelClient(
        e.client_id,
        Cancelled("client " + std::to_string(e.client_id) + " went away: " + e.reason));
    spdlog::info(
        "client {} ('{}', pid {}) dropped: {}; unmapping {} regions, {} decodes "
        "cancelled",
        e.client_id, c ? c->name : "?", c ? c->pid : 0, e.reason, c ? c->regions.size() : 0,
        cancelled);
    clients_.Remove(e.client_id);
  }
}

void RequestHandler::FillStatus(v1::StatusReply* s, Clock::time_point now) const {
  s->set_daemon_version(VAED_VERSION);
  sink_->FillGroups(s);
  s->set_uptime_seconds(std::chrono::duration<double>(now - started_).count());
  s->set_healthy(health_.empty());
  s->set_health(health_.empty() ? "ok" : health_);
  for (const models::VaeModel* m : registry_->models()) {
    const models::ModelInfo& i = m->info();
    v1::ModelInfo* out = s->add_models();
    out->set_name(i.name);
    out->set_kind(i.kind);
    out->set_weights_path(i.weights_path);
    out->set_weights_sha256(i.weights_sha256);
    out->set_demo_weights(i.demo_weights);
    out->set_resident_bytes(i.resident_bytes);
    out->set_description(i.description);
    out->set_compute_dtype(i.compute_dtype);
    for (const std::string& c : i.caps.Names()) out->add_capabilities(c);
    out->set_audio_weights_path(i.audio_weights_path);
    out->set_audio_weights_sha256(i.audio_weights_sha256);
    out->set_audio_sample_rate_hz(static_cast<uint32_t>(i.audio_sample_rate_hz));
    out->set_audio_latent_rate_hz(i.audio_latent_rate_hz);
    out->set_native_fps(i.native_fps);
    if (std::optional<models::PlanCacheSnapshot> cache = m->plan_cache()) {
      v1::PlanCacheInfo* pc = out->mutable_plan_cache();
      pc->set_capacity(static_cast<uint32_t>(cache->capacity));
      for (const std::string& b : cache->buckets) pc->add_buckets(b);
      for (const auto& [bucket, reason] : cache->eager_only) {
        v1::PlanCacheInfo::EagerOnly* e = pc->add_eager_only();
        e->set_bucket(bucket);
        e->set_reason(reason);
      }
      pc->set_hits(cache->stats.hits);
      pc->set_builds(cache->stats.builds);
      pc->set_build_failures(cache->stats.build_failures);
      pc->set_evictions(cache->stats.evictions);
      pc->set_eager_calls(cache->stats.eager_calls);
      pc->set_plan_bytes(cache->plan_bytes);
    }
  }
  s->set_default_model(registry_->default_model());
  uint64_t weight_bytes = 0;
  uint32_t plans = 0;
  for (const v1::ModelInfo& m : s->models()) {
    weight_bytes += m.resident_bytes();
    plans += static_cast<uint32_t>(m.plan_cache().buckets_size());
  }
  // Every local rank holds its own copy of the models.
  s->set_resident_weight_bytes(weight_bytes * std::max<uint32_t>(1, s->ranks()));
  s->set_plan_cache_entries(plans * std::max<uint32_t>(1, s->ranks()));
  s->set_peak_rss_bytes(peak_rss_bytes_);
  s->set_in_flight(static_cast<uint32_t>(sink_->running()));
  for (const auto& [outcome, count] : outcomes_) {
    v1::OutcomeCount* o = s->add_outcomes();
    o->set_outcome(outcome);
    o->set_count(count);
  }
  if (metrics_ != nullptr) {
    for (const ComponentSummary& c : metrics_->Components()) {
      v1::ComponentStats* out = s->add_components();
      out->set_component(c.component);
      out->set_count(c.count);
      out->set_sum_seconds(c.sum_seconds);
      out->set_p50_seconds(c.p50_seconds);
      out->set_p95_seconds(c.p95_seconds);
    }
  }
  s->set_metrics_url(metrics_url_);
  s->set_clients(static_cast<uint32_t>(clients_.client_count()));
  s->set_regions(static_cast<uint32_t>(clients_.region_count()));
  s->set_requests_served(requests_served_);
  s->set_requests_failed(requests_failed_);
  s->set_protocol_errors(protocol_errors_);
  s->set_queue_depth(static_cast<uint32_t>(sink_->queue_depth()));
  s->set_intra_op_threads(static_cast<uint32_t>(options_.executor.intra_op_threads));
  s->set_socket(options_.server.socket);
  s->set_pid(getpid());
  s->set_default_profile(options_.profiles.default_profile);
  for (const std::string& p : options_.profiles.allowed) s->add_allowed_profiles(p);
  s->set_client_faults(quarantine_.total_faults());
  s->set_quarantine_rejections(quarantine_rejections_);
  s->set_busy_rejections(busy_rejections_);
  s->set_deadline_exceeded(deadline_exceeded_);
  s->set_rejected_connections(rejected_connections_);
  s->set_quarantines(quarantine_.quarantines());
  for (const QuarantineSnapshot& q : quarantine_.Active(now)) {
    FillQuarantineEntry(q, s->add_quarantined());
  }
  // The listing is bounded: a status reply must stay a small message.
  constexpr size_t kMaxListedClients = 256;
  for (const ClientState* c : clients_.All()) {
    if (static_cast<size_t>(s->client_list_size()) >= kMaxListedClients) break;
    v1::ClientEntry* e = s->add_client_list();
    e->set_client_id(c->id);
    e->set_name(c->name);
    e->set_uid(c->identity.uid);
    e->set_pid(c->pid);
    e->set_regions(static_cast<uint32_t>(c->regions.size()));
    e->set_region_bytes(c->region_bytes);
    e->set_in_flight(c->in_flight);
    e->set_faults_in_window(quarantine_.FaultsInWindow(c->identity, now));
    e->set_idle_seconds(std::chrono::duration<double>(now - c->last_seen).count());
  }
}

}  // namespace vaed::server
