#include "daemon/server/control_loop.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "daemon/models/av_sync.h"
#include "daemon/server/decode_options.h"
#include "vaed/wire.h"
#include "vaed/zmq_status.h"

namespace vaed::server {

namespace {

constexpr const char* kReplyEndpoint = "inproc://vaed-executor-replies";

// True when a process accepts connections on the Unix socket `path`.
bool SocketIsServed(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool served = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return served;
}

// Client-chosen names end up in logs and replies: printable ASCII only, so a
// client cannot forge log lines or corrupt the journal.
Status CheckPrintableName(const std::string& name, const std::string& field) {
  constexpr size_t kMaxName = 128;
  if (name.size() > kMaxName) {
    return InvalidArgument(field + " is " + std::to_string(name.size()) +
                           " bytes; at most " + std::to_string(kMaxName) + " are allowed");
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

}  // namespace

Result<std::unique_ptr<ControlLoop>> ControlLoop::Create(const DaemonOptions& options,
                                                         models::ModelRegistry* registry,
                                                         int stop_fd, PidAlive pid_alive) {
  std::unique_ptr<ControlLoop> loop(
      new ControlLoop(options, registry, stop_fd, std::move(pid_alive)));
  VAED_RETURN_IF_ERROR(loop->Bind());
  VAED_ASSIGN_OR_RETURN(loop->executor_,
                        engine::Executor::Create(options.executor, &loop->context_,
                                                 kReplyEndpoint));
  return loop;
}

ControlLoop::ControlLoop(const DaemonOptions& options, models::ModelRegistry* registry,
                         int stop_fd, PidAlive pid_alive)
    : options_(options),
      registry_(registry),
      stop_fd_(stop_fd),
      started_(std::chrono::steady_clock::now()),
      context_(1),
      router_(context_, zmq::socket_type::router),
      replies_(context_, zmq::socket_type::pull),
      clients_(std::move(pid_alive)) {}

ControlLoop::~ControlLoop() {
  if (executor_) executor_->Stop();
  // Unlink our socket file so a stale path does not look served; never
  // another daemon's (Bind() may have failed because it is served).
  if (bound_) {
    std::error_code ec;
    std::filesystem::remove(options_.server.socket, ec);
  }
}

Status ControlLoop::Bind() {
  const std::string& path = options_.server.socket;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError("creating socket directory '" + dir.string() + "': " + ec.message());
    ::chmod(dir.c_str(), 0750);
  }
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    // ZeroMQ would unlink whatever is at the path: never a file, directory
    // or link of someone else's, and never a socket a live daemon serves.
    if (!std::filesystem::is_socket(std::filesystem::symlink_status(path, ec))) {
      return FailedPrecondition("server.socket " + path +
                                " exists and is not a socket; refusing to replace it");
    }
    if (SocketIsServed(path)) {
      return FailedPrecondition("another process is already serving " + path +
                                " (is vaed running? see `vaectl status`)");
    }
    std::filesystem::remove(path, ec);
  }
  try {
    router_.set(zmq::sockopt::linger, 500);
    router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options_.server.max_message_bytes));
    router_.set(zmq::sockopt::rcvhwm, 1000);
    router_.set(zmq::sockopt::sndhwm, 1000);
    router_.bind("ipc://" + path);
    replies_.set(zmq::sockopt::linger, 0);
    replies_.bind(kReplyEndpoint);
  } catch (const zmq::error_t& e) {
    return ZmqErrorStatus(e, "binding control socket ipc://" + path);
  }
  // Clients in the daemon's group may connect (the directory's mode decides
  // who reaches the socket at all).
  ::chmod(path.c_str(), 0660);
  bound_ = true;
  return Status::Ok();
}

Status ControlLoop::Run() {
  std::string models;
  for (const models::VaeModel* m : registry_->models()) {
    models += (models.empty() ? "" : ", ") + m->info().name +
              (m->info().demo_weights ? " (DEMO weights)" : "");
  }
  spdlog::info("vaed {} serving ipc://{} (pid {}), models: {}", VAED_VERSION,
               options_.server.socket, getpid(), models);
  notifier_.Ready("serving " + options_.server.socket);

  bool stop = false;
  while (!stop) {
    zmq::pollitem_t items[] = {
        {router_.handle(), 0, ZMQ_POLLIN, 0},
        {replies_.handle(), 0, ZMQ_POLLIN, 0},
        {nullptr, stop_fd_, ZMQ_POLLIN, 0},
    };
    try {
      zmq::poll(items, 3, notifier_.poll_budget());
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return ZmqErrorStatus(e, "polling the control socket");
    }
    if (items[2].revents & ZMQ_POLLIN) stop = true;
    if (items[1].revents & ZMQ_POLLIN) ForwardExecutorReplies();
    if (items[0].revents & ZMQ_POLLIN) {
      // Bounded batch so executor replies and stop requests are not starved.
      for (int i = 0; i < 64; ++i) {
        zmq::message_t routing, payload;
        try {
          if (!router_.recv(routing, zmq::recv_flags::dontwait)) break;
          std::string extra;
          bool more = routing.more();
          if (more) {
            (void)router_.recv(payload, zmq::recv_flags::none);
            more = payload.more();
          }
          size_t extra_frames = 0;
          while (more) {
            zmq::message_t skip;
            (void)router_.recv(skip, zmq::recv_flags::none);
            more = skip.more();
            ++extra_frames;
          }
          if (extra_frames > 0) {
            ++protocol_errors_;
            v1::Reply reply;
            *reply.mutable_error() = ToProtoError(ProtocolError(
                "a request is exactly one frame; got " + std::to_string(extra_frames + 1)));
            SendReply(routing.to_string(), reply);
            continue;
          }
          HandleMessage(routing.to_string(), payload.to_string());
        } catch (const zmq::error_t& e) {
          spdlog::error("{}", ZmqErrorStatus(e, "receiving a request").ToString());
          break;
        }
      }
    }
    DropExpiredClients();
    notifier_.MaybePingWatchdog();
  }

  spdlog::info("vaed: stop requested; cancelling queued decodes");
  notifier_.Stopping("stopping");
  executor_->Stop();
  ForwardExecutorReplies();
  spdlog::info("vaed: stopped (served {} decodes, {} failed)", requests_served_,
               requests_failed_);
  return Status::Ok();
}

void ControlLoop::SendReply(const std::string& routing_id, const v1::Reply& reply) {
  std::string bytes;
  reply.SerializeToString(&bytes);
  try {
    router_.send(zmq::buffer(routing_id), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    spdlog::warn("{}", ZmqErrorStatus(e, "sending a reply").ToString());
  }
}

void ControlLoop::ForwardExecutorReplies() {
  for (;;) {
    zmq::message_t routing, client, payload;
    try {
      if (!replies_.recv(routing, zmq::recv_flags::dontwait)) return;
      (void)replies_.recv(client, zmq::recv_flags::none);
      (void)replies_.recv(payload, zmq::recv_flags::none);
    } catch (const zmq::error_t& e) {
      spdlog::error("{}", ZmqErrorStatus(e, "receiving an executor reply").ToString());
      return;
    }
    uint64_t client_id = 0;
    std::memcpy(&client_id, client.data(), std::min(client.size(), sizeof(client_id)));
    if (ClientState* c = clients_.Find(client_id)) {
      if (c->in_flight > 0) --c->in_flight;
      // The silence timeout counts from the last exchange, and a reply is
      // one: a decode longer than client_timeout_ms must not make its
      // client look silent the moment it completes.
      c->last_seen = std::chrono::steady_clock::now();
    }
    v1::Reply reply;
    if (reply.ParseFromArray(payload.data(), static_cast<int>(payload.size())) &&
        reply.has_decode()) {
      ++requests_served_;
    } else {
      ++requests_failed_;
    }
    try {
      router_.send(routing, zmq::send_flags::sndmore);
      router_.send(payload, zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::warn("{}", ZmqErrorStatus(e, "forwarding a decode reply").ToString());
    }
  }
}

void ControlLoop::DropExpiredClients() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_reap_ < std::chrono::milliseconds(250)) return;
  last_reap_ = now;
  for (const auto& e :
       clients_.FindExpired(now, std::chrono::milliseconds(options_.server.client_timeout_ms))) {
    const ClientState* c = clients_.Find(e.client_id);
    const size_t cancelled = executor_->CancelClient(e.client_id);
    spdlog::info("client {} ('{}', pid {}) dropped: {}; unmapping {} regions, {} queued decodes "
                 "cancelled", e.client_id, c ? c->name : "?", c ? c->pid : 0, e.reason,
                 c ? c->regions.size() : 0, cancelled);
    clients_.Remove(e.client_id);
  }
}

void ControlLoop::HandleMessage(const std::string& routing_id, const std::string& payload) {
  v1::Request req;
  v1::Reply reply;
  if (!req.ParseFromString(payload)) {
    ++protocol_errors_;
    spdlog::warn("protocol error: {} bytes that are not a vaed.v1.Request", payload.size());
    *reply.mutable_error() = ToProtoError(
        ProtocolError("message of " + std::to_string(payload.size()) +
                      " bytes is not a valid vaed.v1.Request"));
    SendReply(routing_id, reply);
    return;
  }
  reply.set_request_id(req.request_id());

  if (req.body_case() == v1::Request::kHello) {
    HandleHello(routing_id, req, &reply);
    SendReply(routing_id, reply);
    return;
  }
  if (req.body_case() == v1::Request::BODY_NOT_SET) {
    ++protocol_errors_;
    *reply.mutable_error() =
        ToProtoError(ProtocolError("request " + std::to_string(req.request_id()) +
                                   " has no body (or a body this daemon does not know)"));
    SendReply(routing_id, reply);
    return;
  }

  auto client = clients_.Authenticate(req.client_id(), routing_id);
  if (!client.ok()) {
    if (req.body_case() == v1::Request::kDecode) ++requests_failed_;
    *reply.mutable_error() = ToProtoError(client.status());
    SendReply(routing_id, reply);
    return;
  }
  ClientState* c = *client;
  c->last_seen = std::chrono::steady_clock::now();

  Status s;
  switch (req.body_case()) {
    case v1::Request::kRegisterRegion:
      s = HandleRegister(c, req.register_region(), &reply);
      break;
    case v1::Request::kUnregisterRegion:
      s = clients_.RemoveRegion(c, req.unregister_region().region_id());
      if (s.ok()) reply.mutable_unregister_region();
      break;
    case v1::Request::kDecode: {
      auto deferred = HandleDecode(c, routing_id, req, &reply);
      if (deferred.ok() && *deferred) return;  // the executor replies
      s = deferred.ok() ? Status::Ok() : deferred.status();
      if (!s.ok()) {
        ++requests_failed_;
        spdlog::info("decode request {} of client {} rejected: {}", req.request_id(), c->id,
                     s.ToString());
      }
      break;
    }
    case v1::Request::kStatus:
      FillStatus(reply.mutable_status());
      break;
    case v1::Request::kHeartbeat:
      reply.mutable_heartbeat();
      break;
    case v1::Request::kGoodbye:
      spdlog::info("client {} ('{}') said goodbye; unmapping {} regions", c->id, c->name,
                   c->regions.size());
      clients_.Remove(c->id);
      reply.mutable_goodbye();
      break;
    default:
      s = ProtocolError("unexpected request body");
  }
  if (!s.ok()) *reply.mutable_error() = ToProtoError(s);
  SendReply(routing_id, reply);
}

void ControlLoop::HandleHello(const std::string& routing_id, const v1::Request& req,
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
  ClientState* c = clients_.Add(routing_id, hello.client_name(), hello.pid(),
                                std::chrono::steady_clock::now());
  spdlog::info("client {} connected: '{}' pid {}", c->id, c->name, c->pid);
  v1::HelloReply* h = reply->mutable_hello();
  h->set_client_id(c->id);
  h->set_protocol_version(kProtocolVersion);
  h->set_daemon_version(VAED_VERSION);
  h->set_heartbeat_interval_ms(options_.server.heartbeat_interval_ms);
  h->set_client_timeout_ms(options_.server.client_timeout_ms);
}

Status ControlLoop::HandleRegister(ClientState* client, const v1::RegisterRegion& req,
                                   v1::Reply* reply) {
  switch (req.kind_case()) {
    case v1::RegisterRegion::kHost: {
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<HostRegion> region,
                            HostRegion::Open(req.host().name(), req.host().size_bytes()));
      const uint64_t mapped = region->size();
      const std::string name = region->name();
      const uint64_t id = clients_.AddRegion(client, std::move(region));
      spdlog::debug("client {} registered region {} '{}' ({} bytes)", client->id, id, name,
                    mapped);
      reply->mutable_register_region()->set_region_id(id);
      reply->mutable_register_region()->set_mapped_bytes(mapped);
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

namespace {

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

}  // namespace

Result<bool> ControlLoop::HandleDecode(ClientState* client, const std::string& routing_id,
                                       const v1::Request& req, v1::Reply* reply) {
  const v1::Decode& d = req.decode();
  VAED_RETURN_IF_ERROR(CheckPrintableName(d.model(), "model"));
  VAED_RETURN_IF_ERROR(CheckPrintableName(d.options().profile(), "options.profile"));
  VAED_ASSIGN_OR_RETURN(models::VaeModel * model, registry_->Get(d.model()));
  const models::ModelInfo& info = model->info();
  const std::string model_name = info.name;
  VAED_ASSIGN_OR_RETURN(ResolvedOptions options,
                        ResolveDecodeOptions(info, d.options(), options_.profiles,
                                             options_.executor.allow_fault_injection));

  // Plans first: the latents' dtypes and shapes decide everything else.
  if (!d.has_latent() && !d.has_audio_latent()) {
    return InvalidArgument("latent or audio_latent is required (latent: video or image, "
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
    VAED_ASSIGN_OR_RETURN(v.output.size,
                          ContiguousBytes(expected.dtype, expected.shape, "output"));
    v.format = d.output_format();
    video = std::move(v);
  } else {
    if (d.has_output()) {
      return InvalidArgument("output is set but latent is not; an audio-only request writes "
                             "only audio_output");
    }
    if (d.options().stack_tiling() != v1::STACK_TILING_UNSPECIFIED) {
      return InvalidArgument("options.stack_tiling is set but the request has no video latent "
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
    av.expected_audio_latent_frames = models::AudioLatentFramesForVideo(
        video->plan.frames, av.fps, info.audio_latent_rate_hz);
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
    engine::FillDecodeGeometry(*model, video, audio, av, p);
    p->set_planned_only(true);
    return false;
  }

  // Resolve every tensor reference against the client's regions. `ranges`
  // collects them for the overlap check.
  struct Placed {
    std::string field;
    const TensorRef* ref;
    bool written;
  };
  std::vector<Placed> placed;
  if (video) {
    VAED_ASSIGN_OR_RETURN(video->latent, FromProto(d.latent(), "latent"));
    if (!d.has_output()) return InvalidArgument("output is required unless plan_only is set");
    VAED_ASSIGN_OR_RETURN(TensorRef output, FromProto(d.output(), "output"));
    if (output.dtype != video->output.dtype || output.shape != video->output.shape) {
      return InvalidArgument("output is " + std::string(DTypeName(output.dtype)) + " " +
                             ShapeToString(output.shape) + "; model '" + model_name +
                             "' writes " + FormatName(d.output_format()) + " " +
                             std::string(DTypeName(video->output.dtype)) + " " +
                             ShapeToString(video->output.shape) + " for latent " +
                             ShapeToString(video->latent.shape));
    }
    video->output = std::move(output);
    VAED_ASSIGN_OR_RETURN(video->latent_region, clients_.FindRegion(*client,
                                                                    video->latent.region_id,
                                                                    "latent.region_id"));
    VAED_ASSIGN_OR_RETURN(video->output_region, clients_.FindRegion(*client,
                                                                    video->output.region_id,
                                                                    "output.region_id"));
    VAED_RETURN_IF_ERROR(CheckRegionRange(*video->latent_region, video->latent, "latent"));
    VAED_RETURN_IF_ERROR(CheckRegionRange(*video->output_region, video->output, "output"));
    placed.push_back({"latent", &video->latent, false});
    placed.push_back({"output", &video->output, true});
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
    VAED_ASSIGN_OR_RETURN(audio->latent_region,
                          clients_.FindRegion(*client, audio->latent.region_id,
                                              "audio_latent.region_id"));
    VAED_ASSIGN_OR_RETURN(audio->output_region,
                          clients_.FindRegion(*client, audio->output.region_id,
                                              "audio_output.region_id"));
    VAED_RETURN_IF_ERROR(
        CheckRegionRange(*audio->latent_region, audio->latent, "audio_latent"));
    VAED_RETURN_IF_ERROR(
        CheckRegionRange(*audio->output_region, audio->output, "audio_output"));
    placed.push_back({"audio_latent", &audio->latent, false});
    placed.push_back({"audio_output", &audio->output, true});
  }
  // What the daemon writes must not overlap anything else of the request.
  for (size_t i = 0; i < placed.size(); ++i) {
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const TensorRef& a = *placed[i].ref;
      const TensorRef& b = *placed[j].ref;
      if ((placed[i].written || placed[j].written) && a.region_id == b.region_id &&
          Overlaps(a.offset, a.size, b.offset, b.size)) {
        const std::string& writer = placed[i].written ? placed[i].field : placed[j].field;
        const std::string& other = placed[i].written ? placed[j].field : placed[i].field;
        const TensorRef& w = placed[i].written ? a : b;
        const TensorRef& o = placed[i].written ? b : a;
        return InvalidArgument(writer + " bytes [" + std::to_string(w.offset) + ", " +
                               std::to_string(w.offset + w.size) + ") overlap " + other +
                               " bytes [" + std::to_string(o.offset) + ", " +
                               std::to_string(o.offset + o.size) + ") in region " +
                               std::to_string(a.region_id));
      }
    }
  }

  auto job = std::make_unique<engine::DecodeJob>();
  job->routing_id = routing_id;
  job->client_id = client->id;
  job->request_id = req.request_id();
  job->model = model;
  job->settings.stack_tiling = options.stack_tiling;
  job->settings.compile = options.compile;
  job->settings.faults = options.faults;
  job->settings.tiling = options.tiling;
  job->video = std::move(video);
  job->audio = std::move(audio);
  job->av = av;
  job->received = std::chrono::steady_clock::now();
  VAED_RETURN_IF_ERROR(executor_->Submit(std::move(job)));
  ++client->in_flight;
  return true;
}

void ControlLoop::FillStatus(v1::StatusReply* s) const {
  s->set_daemon_version(VAED_VERSION);
  s->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  s->set_healthy(true);
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
  s->set_clients(static_cast<uint32_t>(clients_.client_count()));
  s->set_regions(static_cast<uint32_t>(clients_.region_count()));
  s->set_requests_served(requests_served_);
  s->set_requests_failed(requests_failed_);
  s->set_protocol_errors(protocol_errors_);
  s->set_queue_depth(static_cast<uint32_t>(executor_->queue_depth()));
  s->set_intra_op_threads(static_cast<uint32_t>(options_.executor.intra_op_threads));
  s->set_socket(options_.server.socket);
  s->set_pid(getpid());
  s->set_default_profile(options_.profiles.default_profile);
  for (const std::string& p : options_.profiles.allowed) s->add_allowed_profiles(p);
}

}  // namespace vaed::server
