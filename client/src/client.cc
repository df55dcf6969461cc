#include "vaed/client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "vaed/wire.h"
#include "vaed/zmq_status.h"

namespace vaed::client {

struct Client::Impl {
  ClientOptions options;
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  std::mutex mu;  // serializes request/reply pairs on `socket`
  uint64_t next_request_id = 1;  // guarded by mu
  uint64_t client_id = 0;
  v1::HelloReply hello;

  std::mutex hb_mu;
  std::condition_variable hb_cv;
  bool hb_stop = false;  // guarded by hb_mu
  std::thread heartbeat;

  // Sends `req` (request_id and client_id are filled here) and waits up to
  // `timeout_ms` (0 = forever) for the reply with the same request id.
  // Replies to earlier, timed-out requests are discarded.
  Result<v1::Reply> Call(v1::Request req, int timeout_ms) {
    std::lock_guard<std::mutex> lock(mu);
    req.set_request_id(next_request_id++);
    req.set_client_id(client_id);
    std::string bytes;
    req.SerializeToString(&bytes);
    return SendAndWait(bytes, req.request_id(), timeout_ms);
  }

  // Precondition: mu held. `expect_id` 0 accepts any reply.
  Result<v1::Reply> SendAndWait(const std::string& bytes, uint64_t expect_id, int timeout_ms) {
    try {
      socket.send(zmq::buffer(bytes), zmq::send_flags::none);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
      for (;;) {
        long wait_ms = -1;
        if (timeout_ms > 0) {
          wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
          if (wait_ms <= 0) break;
        }
        zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
        if (!(item.revents & ZMQ_POLLIN)) continue;
        zmq::message_t msg;
        if (!socket.recv(msg, zmq::recv_flags::dontwait)) continue;
        v1::Reply reply;
        if (!reply.ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
          return ProtocolError("the daemon sent " + std::to_string(msg.size()) +
                               " bytes that are not a vaed.v1.Reply");
        }
        if (expect_id != 0 && reply.request_id() != expect_id && reply.request_id() != 0) {
          continue;  // a late reply to a request that timed out
        }
        return reply;
      }
    } catch (const zmq::error_t& e) {
      return ZmqErrorStatus(e, "talking to vaed at " + options.socket);
    }
    return Unavailable("no reply from vaed at " + options.socket + " within " +
                       std::to_string(timeout_ms) + " ms (is the daemon running and healthy? "
                       "see `vaectl status`)");
  }

  void HeartbeatLoop(std::chrono::milliseconds interval) {
    std::unique_lock<std::mutex> lock(hb_mu);
    while (!hb_cv.wait_for(lock, interval, [&] { return hb_stop; })) {
      // A request in flight already shows the daemon we are alive.
      std::unique_lock<std::mutex> call_lock(mu, std::try_to_lock);
      if (!call_lock.owns_lock()) continue;
      v1::Request req;
      req.set_request_id(next_request_id++);
      req.set_client_id(client_id);
      req.mutable_heartbeat();
      std::string bytes;
      req.SerializeToString(&bytes);
      (void)SendAndWait(bytes, req.request_id(), static_cast<int>(interval.count()));
    }
  }
};

namespace {

// Turns an error reply into its Status; checks the body otherwise.
Status CheckReply(const v1::Reply& reply, v1::Reply::BodyCase expected, std::string_view what) {
  if (reply.has_error()) return FromProtoError(reply.error());
  if (reply.body_case() != expected) {
    return ProtocolError(std::string(what) + ": the daemon answered with body " +
                         std::to_string(reply.body_case()) + " instead of " +
                         std::to_string(expected));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  struct stat st{};
  if (::stat(options.socket.c_str(), &st) != 0) {
    return Unavailable("vaed is not running: no control socket at " + options.socket +
                       " (start it with `vaed` or `systemctl start vaed`)");
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Unavailable(options.socket + " exists but is not a socket");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  try {
    impl->socket.set(zmq::sockopt::linger, 0);
    impl->socket.connect("ipc://" + options.socket);
  } catch (const zmq::error_t& e) {
    return ZmqErrorStatus(e, "connecting to ipc://" + options.socket);
  }
  v1::Request hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_client_name(options.client_name);
  hello.mutable_hello()->set_pid(static_cast<int32_t>(getpid()));
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl->Call(hello, options.connect_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kHello, "hello"));
  impl->hello = reply.hello();
  impl->client_id = reply.hello().client_id();
  if (options.heartbeats && impl->hello.heartbeat_interval_ms() > 0) {
    const auto interval = std::chrono::milliseconds(impl->hello.heartbeat_interval_ms());
    impl->heartbeat = std::thread([raw = impl.get(), interval] { raw->HeartbeatLoop(interval); });
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  {
    std::lock_guard<std::mutex> lock(impl_->hb_mu);
    impl_->hb_stop = true;
  }
  impl_->hb_cv.notify_all();
  if (impl_->heartbeat.joinable()) impl_->heartbeat.join();
  v1::Request bye;
  bye.mutable_goodbye();
  (void)impl_->Call(bye, 500);  // best effort: the daemon also notices our exit
}

uint64_t Client::client_id() const { return impl_->client_id; }
const v1::HelloReply& Client::hello() const { return impl_->hello; }

Result<uint64_t> Client::RegisterRegion(const SharedRegion& region) {
  v1::Request req;
  v1::HostShmRegion* host = req.mutable_register_region()->mutable_host();
  host->set_name(region.name());
  host->set_size_bytes(region.size());
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl_->Call(req, impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kRegisterRegion, "register_region"));
  return reply.register_region().region_id();
}

Status Client::UnregisterRegion(uint64_t region_id) {
  v1::Request req;
  req.mutable_unregister_region()->set_region_id(region_id);
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl_->Call(req, impl_->options.request_timeout_ms));
  return CheckReply(reply, v1::Reply::kUnregisterRegion, "unregister_region");
}

namespace {

// The wire form of `request`; plan-only requests carry dtypes and shapes.
void BuildDecode(const DecodeRequest& request, bool plan_only, v1::Decode* d) {
  d->set_model(request.model);
  d->set_plan_only(plan_only);
  d->set_output_format(static_cast<v1::OutputFormat>(request.format));
  d->mutable_options()->set_stack_tiling(static_cast<v1::StackTiling>(request.stack_tiling));
  d->mutable_options()->set_profile(request.profile);
  d->mutable_options()->set_compile(static_cast<v1::Compile>(request.compile));
  for (const std::string& f : request.inject_faults) d->mutable_options()->add_inject_faults(f);
  if (request.tiling) {
    d->mutable_options()->mutable_tiling()->set_tile_latent(request.tiling->tile_latent);
    d->mutable_options()->mutable_tiling()->set_overlap_latent(request.tiling->overlap_latent);
  }
  if (request.fps != 0 || request.independent_lengths) {
    d->mutable_av_sync()->set_fps(request.fps);
    d->mutable_av_sync()->set_independent_lengths(request.independent_lengths);
  }
  auto fill = [&](const TensorView& view, v1::TensorRef* out) {
    if (plan_only) {
      out->set_dtype(ToProto(view.dtype));
      for (int64_t x : view.shape) out->add_shape(x);
      return;
    }
    TensorRef ref{view.region_id, view.offset, 0, view.dtype, view.shape};
    // The byte size is derived here; the daemon checks it again.
    auto bytes = ContiguousBytes(view.dtype, view.shape, "tensor");
    ref.size = bytes.ok() ? *bytes : 0;
    ToProto(ref, out);
  };
  if (IsSet(request.latent)) fill(request.latent, d->mutable_latent());
  if (IsSet(request.audio_latent)) fill(request.audio_latent, d->mutable_audio_latent());
  if (!plan_only) {
    if (IsSet(request.output)) fill(request.output, d->mutable_output());
    if (IsSet(request.audio_output)) fill(request.audio_output, d->mutable_audio_output());
  }
}

}  // namespace

Result<v1::DecodeReply> Client::PlanDecode(const std::string& model, DType latent_dtype,
                                           const std::vector<int64_t>& latent_shape,
                                           OutputFormat format) {
  DecodeRequest request;
  request.model = model;
  request.latent.dtype = latent_dtype;
  request.latent.shape = latent_shape;
  request.format = format;
  return PlanDecode(request);
}

Result<v1::DecodeReply> Client::PlanDecode(const DecodeRequest& request) {
  v1::Request req;
  BuildDecode(request, /*plan_only=*/true, req.mutable_decode());
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl_->Call(req, impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kDecode, "plan decode"));
  return reply.decode();
}

Result<v1::DecodeReply> Client::Decode(const DecodeRequest& request) {
  v1::Request req;
  BuildDecode(request, /*plan_only=*/false, req.mutable_decode());
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl_->Call(req, impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kDecode, "decode"));
  return reply.decode();
}

Result<v1::StatusReply> Client::GetStatus() {
  v1::Request req;
  req.mutable_status();
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl_->Call(req, impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kStatus, "status"));
  return reply.status();
}

Result<v1::Reply> Client::SendRaw(const std::string& bytes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->SendAndWait(bytes, 0, impl_->options.request_timeout_ms);
}

}  // namespace vaed::client
