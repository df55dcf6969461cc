#include "daemon/server/request_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "daemon/server/decode_reply.h"
#include "daemon/server/logging.h"
#include "daemon/server/printable_name.h"
#include "vaed/wire.h"

namespace vaed::server {

using std::chrono::milliseconds;

namespace {

// The regions a job uses: the distinct region ids its tensors name
// (client_registry.h: a region in use is not dropped under a decode).
std::vector<uint64_t> RegionIdsOf(const engine::DecodeJob& job) {
  std::vector<uint64_t> ids;
  if (job.video) ids.insert(ids.end(), {job.video->latent.region_id, job.video->output.region_id});
  if (job.audio) ids.insert(ids.end(), {job.audio->latent.region_id, job.audio->output.region_id});
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

v1::Reply UnregisteredReply(uint64_t request_id) {
  v1::Reply reply;
  reply.set_request_id(request_id);
  reply.mutable_unregister_region();
  return reply;
}

}  // namespace

RequestHandler::RequestHandler(const DaemonOptions& options, models::ModelRegistry* registry,
                               JobSink* sink, const AccessPolicy* access, PidAlive pid_alive,
                               engine::RuntimeFacts facts)
    : options_(options),
      facts_(std::move(facts)),
      registry_(registry),
      sink_(sink),
      started_(Clock::now()),
      clients_(std::move(pid_alive)),
      faults_(QuarantinePolicy{.fault_threshold = options.quarantine.fault_threshold,
                               .window = milliseconds(options.quarantine.window_ms),
                               .base_duration = milliseconds(options.quarantine.duration_ms),
                               .max_duration = milliseconds(options.quarantine.max_duration_ms)},
              &clients_, sink, access),
      admission_(options_, facts_.request_memory, registry, &clients_),
      outcomes_(registry) {}

PeerIdentity RequestHandler::IdentityOf(const Incoming& in) const {
  if (in.peer) return {in.peer->uid, in.peer->pid};
  return {std::numeric_limits<uint32_t>::max(), 0};
}

std::optional<v1::Reply> RequestHandler::Handle(const Incoming& in, Clock::time_point now) {
  decode_.reset();
  message_kind_ = MessageKind::kUnparsable;
  std::optional<v1::Reply> reply = HandleMessage(in, now);
  // Decode refusals are the outcome recorder's decode records.
  if (!decode_ && reply && reply->has_error()) LogRefusal(in, *reply);
  if (decode_) {
    if (reply) {
      // A plan answered is not a decode answered; a plan refused is.
      if (!decode_->plan_only || reply->has_error()) {
        outcomes_.Record(decode_->model, clients_.Find(decode_->client_id), *reply);
      }
    } else {
      // A job: its outcome comes with the sink's answer (OnJobDone).
      outcomes_.ExpectJob(decode_->client_id, decode_->request_id, decode_->model);
    }
  }
  return reply;
}

std::string RequestHandler::MessageKindName() const {
  switch (message_kind_) {
    case MessageKind::kOversized:
      return "oversized";
    case MessageKind::kUnparsable:
      return "unparsable";
    case MessageKind::kParsed:
      break;
  }
  const google::protobuf::FieldDescriptor* body =
      v1::Request::descriptor()->FindFieldByNumber(request_body_);
  return body != nullptr ? body->name() : "no_body";
}

void RequestHandler::LogRefusal(const Incoming& in, const v1::Reply& reply) {
  uint64_t suppressed = 0;
  if (!outcomes_.refusal_limit().Admit(RefusalRateLimit::Clock::now(), &suppressed)) return;
  const Status s = FromProtoError(reply.error());
  const PeerIdentity who = IdentityOf(in);
  nlohmann::json record = {{"request", MessageKindName()},
                           {"outcome", OutcomeName(s.code())},
                           {"uid", who.uid},
                           {"pid", who.pid},
                           {"error", s.ToString()}};
  if (reply.request_id() != 0) record["request_id"] = reply.request_id();
  if (suppressed > 0) record["suppressed"] = suppressed;
  LogRefusalRecord(record);
}

v1::Reply RequestHandler::Refuse(const PeerIdentity& who, const std::string& client_name,
                                 const Status& s, std::optional<FaultKind> kind,
                                 Clock::time_point now, v1::Reply reply) {
  *reply.mutable_error() = ToProtoError(s);
  faults_.Count(who, client_name, s, kind, now);
  return reply;
}

std::optional<v1::Reply> RequestHandler::Gate(const Incoming& in, Clock::time_point now,
                                              v1::Request* req) {
  const PeerIdentity who = IdentityOf(in);
  // A quarantined process gets QUARANTINED for everything but the few
  // requests it may still send (whatever else it sends, parsable or not).
  const uint64_t message_bytes = in.oversized_bytes > 0 ? in.oversized_bytes : in.payload.size();
  const bool well_formed = message_bytes <= options_.server.max_message_bytes;
  const bool parsed =
      well_formed && req->ParseFromArray(in.payload.data(), static_cast<int>(in.payload.size()));
  if (!well_formed) message_kind_ = MessageKind::kOversized;
  if (parsed) {
    message_kind_ = MessageKind::kParsed;
    request_body_ = req->body_case();
  }
  if (parsed && req->body_case() == v1::Request::kDecode) {
    decode_ = DecodeInFlight{req->decode().model(), req->client_id(), req->request_id(),
                             req->decode().plan_only()};
  }
  if (!parsed || !AllowedInQuarantine(req->body_case())) {
    if (Status q = faults_.Check(who, now); !q.ok()) {
      ++counters_.quarantine_rejections;
      v1::Reply reply;
      if (parsed) reply.set_request_id(req->request_id());
      *reply.mutable_error() = ToProtoError(q);
      return reply;
    }
  }
  if (!well_formed) {
    ++counters_.protocol_errors;
    return Refuse(who, "",
                  ProtocolError("message of " + std::to_string(message_bytes) +
                                " bytes exceeds server.max_message_bytes (" +
                                std::to_string(options_.server.max_message_bytes) +
                                "); tensors travel in registered regions, not in messages"),
                  FaultKind::kProtocol, now, v1::Reply());
  }
  if (!parsed) {
    ++counters_.protocol_errors;
    return Refuse(who, "",
                  ProtocolError("message of " + std::to_string(in.payload.size()) +
                                " bytes is not a valid vaed.v1.Request"),
                  FaultKind::kProtocol, now, v1::Reply());
  }
  return std::nullopt;
}

std::optional<v1::Reply> RequestHandler::HandleMessage(const Incoming& in, Clock::time_point now) {
  v1::Request req;
  if (std::optional<v1::Reply> refused = Gate(in, now, &req)) return refused;
  const PeerIdentity who = IdentityOf(in);
  v1::Reply reply;
  reply.set_request_id(req.request_id());

  if (req.body_case() == v1::Request::kHello) {
    HandleHello(in, req, now, &reply);
    if (reply.has_error()) {
      const Status s = FromProtoError(reply.error());
      faults_.Count(who, req.hello().client_name(), s,
                    s.code() == StatusCode::kResourceExhausted ? std::optional(FaultKind::kQuota)
                                                               : std::nullopt,
                    now);
    }
    return reply;
  }
  if (req.body_case() == v1::Request::BODY_NOT_SET) {
    ++counters_.protocol_errors;
    return Refuse(who, "",
                  ProtocolError("request " + std::to_string(req.request_id()) +
                                " has no body (or a body this daemon does not know)"),
                  FaultKind::kProtocol, now, std::move(reply));
  }
  if (req.body_case() == v1::Request::kReleaseQuarantine) {
    // Admin requests are authorized by peer credentials, not by a client id.
    if (Status s = faults_.Release(in.peer, req.release_quarantine(), now, &reply); !s.ok()) {
      return Refuse(who, "", s, std::nullopt, now, std::move(reply));
    }
    return reply;
  }

  auto client = clients_.Authenticate(req.client_id(), in.routing_id);
  if (!client.ok()) {
    if (client.status().code() == StatusCode::kProtocolError) ++counters_.protocol_errors;
    // An unknown id is not counted (a client the daemon dropped, or one of
    // a restarted daemon, asks once and says Hello again); another
    // connection's id is a protocol fault.
    return Refuse(who, "", client.status(), std::nullopt, now, std::move(reply));
  }
  ClientState* c = *client;
  c->last_seen = now;
  return HandleClientRequest(in, c, req, now, std::move(reply));
}

std::optional<v1::Reply> RequestHandler::HandleClientRequest(const Incoming& in, ClientState* c,
                                                             const v1::Request& req,
                                                             Clock::time_point now,
                                                             v1::Reply reply) {
  Status s;
  std::optional<FaultKind> kind;
  switch (req.body_case()) {
    case v1::Request::kRegisterRegion:
      s = HandleRegister(c, req.register_region(), &reply, &kind);
      break;
    case v1::Request::kUnregisterRegion: {
      const uint64_t region_id = req.unregister_region().region_id();
      auto unregistered = clients_.Unregister(c, region_id, req.request_id());
      if (unregistered.ok() && *unregistered == ClientRegistry::Unregistered::kDeferred) {
        // Answered by OnJobDone() once the last decode using it has ended.
        spdlog::debug("client {} unregisters region {}, which decodes still use: answered when "
                      "they end",
                      c->id, region_id);
        return std::nullopt;
      }
      s = unregistered.ok() ? Status::Ok() : unregistered.status();
      if (s.ok()) reply.mutable_unregister_region();
      kind = FaultKind::kRegion;
      break;
    }
    case v1::Request::kDecode: {
      auto deferred = HandleDecode(c, in.routing_id, req, now, &reply, &kind);
      if (deferred.ok() && *deferred) return std::nullopt;  // the sink replies
      s = deferred.ok() ? Status::Ok() : deferred.status();
      // Logged and counted once, by the outcome recorder (Handle()).
      if (!s.ok() && s.code() == StatusCode::kBusy) ++counters_.busy_rejections;
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
  if (s.ok()) return reply;
  // `c` may be unusable after a quarantine; the count looks clients up.
  const std::string name = c->name;
  return Refuse(IdentityOf(in), name, s, kind, now, std::move(reply));
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
  for (const engine::RankDevice& d : facts_.rank_devices) {
    if (d.is_cuda) h->add_cuda_devices(FormatDeviceUuid(d.cuda.uuid));
  }
}

Status RequestHandler::CheckRegionLimits(const ClientState& client, uint64_t bytes,
                                         const std::string& field,
                                         std::optional<FaultKind>* kind) const {
  if (clients_.region_count() >= options_.server.max_regions) {
    // Every region holds a file descriptor or a device mapping: a cap for
    // the whole daemon (not this client's fault alone, so not counted).
    *kind = std::nullopt;
    return ResourceExhausted("vaed holds " + std::to_string(clients_.region_count()) +
                             " regions (server.max_regions = " +
                             std::to_string(options_.server.max_regions) +
                             "); retry when clients release some");
  }
  if (client.regions.size() >= options_.server.max_regions_per_client) {
    *kind = FaultKind::kQuota;
    return ResourceExhausted("client " + std::to_string(client.id) + " already has " +
                             std::to_string(client.regions.size()) +
                             " regions registered (server.max_regions_per_client = " +
                             std::to_string(options_.server.max_regions_per_client) +
                             "); unregister one first");
  }
  const uint64_t limit = options_.server.max_region_bytes_per_client;
  if (bytes > limit - std::min(limit, client.region_bytes)) {
    *kind = FaultKind::kQuota;
    return ResourceExhausted(field + " " + std::to_string(bytes) + " would take client " +
                             std::to_string(client.id) + " past " + std::to_string(limit) +
                             " mapped bytes (server.max_region_bytes_per_client; " +
                             std::to_string(client.region_bytes) + " registered)");
  }
  return Status::Ok();
}

Status RequestHandler::RegisterHostRegion(ClientState* client, const v1::HostShmRegion& host,
                                          v1::Reply* reply, std::optional<FaultKind>* kind) {
  *kind = FaultKind::kRegion;
  const std::string& name = host.name();
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
  VAED_RETURN_IF_ERROR(
      CheckRegionLimits(*client, host.size_bytes(), "register_region.host.size_bytes", kind));
  *kind = FaultKind::kRegion;
  VAED_ASSIGN_OR_RETURN(std::unique_ptr<HostRegion> region,
                        HostRegion::Open(name, host.size_bytes()));
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

Status RequestHandler::RegisterCudaRegion(ClientState* client, const v1::CudaIpcRegion& cuda,
                                          v1::Reply* reply, std::optional<FaultKind>* kind) {
  VAED_ASSIGN_OR_RETURN(const engine::CudaDevice device,
                        CudaRegionDevice(cuda, facts_.rank_devices));
  *kind = FaultKind::kRegion;
  if (const ClientState* holder = clients_.CudaHandleHolder(cuda.ipc_handle(), client->identity)) {
    return PermissionDenied("register_region.cuda.ipc_handle is registered by another process "
                            "(client " +
                            std::to_string(holder->id) +
                            "); one allocation is never lent to vaed by two processes")
        .WithField("register_region.cuda.ipc_handle");
  }
  VAED_RETURN_IF_ERROR(
      CheckRegionLimits(*client, cuda.size_bytes(), "register_region.cuda.size_bytes", kind));
  *kind = FaultKind::kRegion;
  VAED_ASSIGN_OR_RETURN(std::shared_ptr<CudaRegion> region,
                        cuda_mappings_.Register(cuda, device));
  const uint64_t mapped = region->size();
  const uint64_t id = clients_.AddRegion(client, std::move(region));
  spdlog::debug("client {} registered CUDA region {} on {} ({} bytes, cuda:{})", client->id, id,
                cuda.device_uuid(), mapped, device.ordinal);
  reply->mutable_register_region()->set_region_id(id);
  reply->mutable_register_region()->set_mapped_bytes(mapped);
  *kind = std::nullopt;
  return Status::Ok();
}

Status RequestHandler::HandleRegister(ClientState* client, const v1::RegisterRegion& req,
                                      v1::Reply* reply, std::optional<FaultKind>* kind) {
  switch (req.kind_case()) {
    case v1::RegisterRegion::kHost:
      return RegisterHostRegion(client, req.host(), reply, kind);
    case v1::RegisterRegion::kCuda:
      return RegisterCudaRegion(client, req.cuda(), reply, kind);
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
  VAED_ASSIGN_OR_RETURN(Admission admitted,
                        admission_.Admit(*client, routing_id, req, now, kind));
  if (admitted.planned) {
    *reply->mutable_decode() = std::move(*admitted.planned);
    return false;
  }
  const std::vector<uint64_t> regions = RegionIdsOf(*admitted.job);
  VAED_RETURN_IF_ERROR(sink_->Submit(std::move(admitted.job)));
  ++client->in_flight;
  clients_.AcquireRegions(client, regions);
  return true;
}

v1::Reply RequestHandler::OnJobProgress(const engine::DecodeJob& job,
                                        const engine::ProgressEvent& event,
                                        Clock::time_point now) {
  if (ClientState* c = clients_.Find(job.client_id)) c->last_seen = now;
  return ProgressReply(job, event);
}

v1::Reply RequestHandler::OnJobFinalRange(const engine::DecodeJob& job,
                                          const engine::FinalRangeEvent& event,
                                          Clock::time_point now) {
  if (ClientState* c = clients_.Find(job.client_id)) c->last_seen = now;
  return FinalRangeReply(job, event);
}

RequestHandler::JobReplies RequestHandler::OnJobDone(const engine::DecodeJob& job,
                                                     const Result<engine::DecodeResult>& result,
                                                     Clock::time_point now) {
  JobReplies out{.decode = FinishedReply(job, result), .unregistered = {}};
  ClientState* c = clients_.Find(job.client_id);
  outcomes_.RecordJob(job, c, result, out.decode);
  if (c != nullptr) {
    if (c->in_flight > 0) --c->in_flight;
    // The silence timeout counts from the last exchange, and a reply is
    // one: a decode longer than client_timeout_ms must not make its client
    // look silent the moment it completes.
    c->last_seen = now;
    // The job is over (the engine touches its regions no more): the
    // unregisters that waited for it are answered after its reply.
    for (uint64_t request_id : clients_.ReleaseRegions(c, RegionIdsOf(job))) {
      out.unregistered.push_back(UnregisteredReply(request_id));
    }
  }
  if (result.ok()) return out;
  const Status& s = result.status();
  if (s.code() == StatusCode::kDeadlineExceeded) ++counters_.deadline_exceeded;
  // Faults the executor found: a segment that faulted, non-finite latents.
  // (Last: a quarantine drops the client, `c` with it.)
  if (c != nullptr &&
      (s.code() == StatusCode::kClientFault || s.code() == StatusCode::kInvalidArgument)) {
    const PeerIdentity who = c->identity;
    faults_.Count(who, c->name, s, std::nullopt, now);
  }
  return out;
}

void RequestHandler::OnReplyDropped(const std::string& routing_id, Clock::time_point now) {
  ++counters_.dropped_replies;
  for (const ClientState* c : std::as_const(clients_).All()) {
    if (c->routing_id != routing_id) continue;
    const PeerIdentity who = c->identity;
    const std::string name = c->name;
    faults_.Count(who, name,
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
  if (outcomes_.metrics() != nullptr && now - metrics_published_ >= std::chrono::seconds(1)) {
    metrics_published_ = now;
    v1::StatusReply status;
    FillStatus(&status, now);
    outcomes_.Publish(status);
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

void RequestHandler::FillStatus(v1::StatusReply* status, Clock::time_point now) const {
  BuildStatus({.options = options_,
               .registry = *registry_,
               .sink = *sink_,
               .clients = clients_,
               .quarantine = faults_.book(),
               .outcomes = outcomes_,
               .counters = counters_,
               .started = started_,
               .health = health_},
              now, status);
}

}  // namespace vaed::server
