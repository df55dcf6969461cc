// The public calls of vaed::client::Client (vaed/client.h) and their
// protocol-level forms (ClientProtocol, vaed/client_protocol.h). Each runs
// the request cycle of Client::Impl (client_impl.h) and turns what escapes
// it into a Status at this edge: no call throws, except Decode(), which
// hands back what the user's progress callback threw. A Client call is its
// ClientProtocol call with the reply copied into vaed/replies.h's type
// (reply_conversion.h).
#include "vaed/client.h"

#include <cstdlib>
#include <exception>
#include <utility>

#include "client_impl.h"
#include "cuda_driver.h"
#include "cuda_export.h"
#include "daemon_access.h"
#include "decode_request.h"
#include "exception_status.h"
#include "reply_conversion.h"
#include "vaed/client_protocol.h"

namespace vaed::client {

namespace {

// Runs the body of public call `call`; what it throws (out of memory, a
// bug) comes back as a Status naming the call.
template <typename Body>
auto Guarded(std::string_view call, Body&& body) noexcept -> decltype(body()) {
  try {
    return body();
  } catch (...) {
    return StatusFromCurrentException(call);
  }
}

}  // namespace

template <typename Body>
Result<Body> Client::Impl::CallForBody(const Builder& build, v1::Reply::BodyCase expected,
                                       std::string_view what,
                                       const Body& (v1::Reply::*body)() const) {
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, Call(build, options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, expected, what));
  return (reply.*body)();
}

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  return Guarded("vaed Client::Connect", [&]() -> Result<std::unique_ptr<Client>> {
    if (options.reconnect_timeout_ms < 0) {
      return InvalidArgument("ClientOptions.reconnect_timeout_ms is " +
                             std::to_string(options.reconnect_timeout_ms) +
                             "; must be >= 0 (0 = never reconnect)");
    }
    if (options.wait_heartbeat_interval_ms <= 0) {
      return InvalidArgument("ClientOptions.wait_heartbeat_interval_ms is " +
                             std::to_string(options.wait_heartbeat_interval_ms) + "; must be > 0");
    }
    ClientOptions resolved = options;
    resolved.socket = SocketPath(options.socket);
    VAED_RETURN_IF_ERROR(CheckSocketFile(resolved.socket));
    auto impl = std::make_unique<Impl>(resolved);
    {
      MutexLock lock(&impl->mu);
      VAED_RETURN_IF_ERROR(
          impl->HelloOnFreshSocket(options.connect_timeout_ms, options.connect_timeout_ms));
    }
    VAED_RETURN_IF_ERROR(impl->StartHeartbeats());
    return std::unique_ptr<Client>(new Client(std::move(impl)));
  });
}

std::string Client::SocketPath(const std::string& requested) {
  if (!requested.empty()) return requested;
  const char* from_environment = std::getenv(kSocketEnvironmentVariable);
  if (from_environment != nullptr && *from_environment != '\0') return from_environment;
  return kDefaultSocket;
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  if (::getpid() != impl_->owner_pid) {
    // A forked child: the heartbeat thread, the socket and the ZeroMQ
    // context belong to the parent; joining, closing or destroying them
    // here would hang or corrupt them. The memory stays with the child.
    (void)impl_.release();
    return;
  }
  impl_->StopHeartbeats();
  try {
    MutexLock lock(&impl_->mu);
    // Best effort: the daemon also notices our exit. Pointless when it is
    // gone or no longer knows us.
    if (impl_->broken || !impl_->socket) return;
    v1::Request bye;
    bye.set_request_id(impl_->next_request_id++);
    bye.set_client_id(impl_->client_id.load());
    bye.mutable_goodbye();
    (void)impl_->Exchange(bye.SerializeAsString(), bye.request_id(), 500, /*ping=*/false);
  } catch (...) {
    // Out of memory while saying Goodbye: skip it, as for a daemon gone.
  }
}

uint64_t Client::client_id() const { return impl_->client_id.load(); }
const HelloReply& Client::hello() const { return impl_->hello.load()->reply; }
uint64_t Client::reconnects() const { return impl_->reconnects.load(); }

std::string Client::Impl::Region::Describe() const {
  if (registration.has_cuda()) {
    return "CUDA allocation of " + std::to_string(registration.cuda().size_bytes()) + " bytes on " +
           registration.cuda().device_uuid();
  }
  return "'" + registration.host().name() + "'";
}

Result<uint64_t> Client::Impl::RegisterLocked(const v1::RegisterRegion& registration) {
  auto build = [&](v1::Request* req) {
    if (registration.has_host()) GrantDaemonAccess(registration.host().name(), options.socket);
    *req->mutable_register_region() = registration;
    return Status::Ok();
  };
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, CallLocked(build, options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kRegisterRegion, "register_region"));
  const uint64_t daemon_id = reply.register_region().region_id();
  // The daemon's id is the user's, unless a region registered before a
  // daemon restart already holds that value.
  uint64_t user_id = daemon_id;
  if (regions.count(user_id) != 0) user_id = next_synthetic_region_id++;
  regions[user_id] = Region{registration, daemon_id, Status::Ok()};
  return user_id;
}

Result<uint64_t> Client::RegisterRegion(const SharedRegion& region) {
  return Guarded("vaed Client::RegisterRegion", [&]() -> Result<uint64_t> {
    VAED_RETURN_IF_ERROR(impl_->CheckProcess());
    if (region.data() == nullptr) {
      return FailedPrecondition("register_region: the SharedRegion is empty (moved from)");
    }
    v1::RegisterRegion registration;
    registration.mutable_host()->set_name(region.name());
    registration.mutable_host()->set_size_bytes(region.size());
    // Under one lock with the call, so a reconnect by another thread cannot
    // slip between the registration and its bookkeeping.
    MutexLock lock(&impl_->mu);
    return impl_->RegisterLocked(registration);
  });
}

Result<CudaRegion> Client::RegisterCudaRegion(const void* device_ptr, uint64_t bytes) {
  return Guarded("vaed Client::RegisterCudaRegion", [&]() -> Result<CudaRegion> {
    VAED_RETURN_IF_ERROR(impl_->CheckProcess());
    // Before the driver is loaded: a CPU-only daemon needs nothing of CUDA
    // from this process, and its users may have no driver at all.
    if (hello().cuda_devices.empty()) {
      return FailedPrecondition(
                 "register_cuda_region: this daemon has no CUDA ranks (its Hello lists no "
                 "cuda_devices: a CPU build, or executor.device = \"cpu\"); pass host memory "
                 "(a SharedRegion) instead")
          .WithField("register_region.cuda");
    }
    VAED_ASSIGN_OR_RETURN(const internal::CudaDriver* driver, internal::CudaDriver::Get());
    VAED_ASSIGN_OR_RETURN(internal::CudaExport exported,
                          internal::ExportCudaAllocation(*driver, device_ptr, bytes,
                                                         "register_cuda_region.device_ptr"));
    v1::RegisterRegion registration;
    v1::CudaIpcRegion* cuda = registration.mutable_cuda();
    cuda->set_ipc_handle(exported.ipc_handle);
    cuda->set_size_bytes(exported.allocation_bytes);
    cuda->set_device_uuid(exported.device_uuid);
    MutexLock lock(&impl_->mu);
    VAED_ASSIGN_OR_RETURN(uint64_t id, impl_->RegisterLocked(registration));
    return CudaRegion{id, exported.offset_bytes, exported.allocation_bytes, exported.device_uuid};
  });
}

Status Client::UnregisterRegion(uint64_t region_id) {
  return Guarded("vaed Client::UnregisterRegion", [&]() -> Status {
    VAED_RETURN_IF_ERROR(impl_->CheckProcess());
    MutexLock lock(&impl_->mu);
    auto it = impl_->regions.find(region_id);
    if (it != impl_->regions.end() && !it->second.lost.ok()) {
      impl_->regions.erase(it);  // the daemon does not have it
      return Status::Ok();
    }
    const bool ours = it != impl_->regions.end();
    // The daemon answers only once no decode uses the region any more
    // (e.g. one that timed out here and still runs): wait as long as a
    // Decode would, not a short control-request timeout.
    Result<v1::Reply> reply = impl_->CallLocked(
        [&](v1::Request* req) VAED_REQUIRES(impl_->mu) {  // CallLocked() calls it under mu
          VAED_ASSIGN_OR_RETURN(uint64_t id,
                                impl_->DaemonRegionId(region_id, "unregister_region.region_id"));
          req->mutable_unregister_region()->set_region_id(id);
          return Status::Ok();
        },
        impl_->options.request_timeout_ms);
    Status s = reply.ok() ? CheckReply(*reply, v1::Reply::kUnregisterRegion, "unregister_region")
                          : reply.status();
    if (!ours) return s;
    if (auto now = impl_->regions.find(region_id);
        now != impl_->regions.end() && !now->second.lost.ok()) {
      impl_->regions.erase(now);  // lost in a reconnect during this call
      return Status::Ok();
    }
    // Forget it unless the daemon refused for another reason than not
    // having it: it is gone, or will not be re-registered.
    const bool refused = reply.ok() && !s.ok() && s.code() != StatusCode::kNotFound;
    if (!refused) impl_->regions.erase(region_id);
    if (s.code() == StatusCode::kNotFound) return Status::Ok();
    return s;
  });
}

Result<internal::CudaStreamSync*> Client::Impl::CudaSync() {
  if (!cuda_sync) {
    VAED_ASSIGN_OR_RETURN(const internal::CudaDriver* driver, internal::CudaDriver::Get());
    cuda_sync = std::make_unique<internal::CudaStreamSync>(*driver);
  }
  return cuda_sync.get();
}

bool Client::Impl::IsCudaRegion(uint64_t user_id) const {
  auto it = regions.find(user_id);
  return it != regions.end() && it->second.is_cuda();
}

bool Client::Impl::NamesCudaRegion(const DecodeRequest& request) const {
  for (const TensorView* t :
       {&request.latent, &request.output, &request.audio_latent, &request.audio_output}) {
    if (IsSet(*t) && IsCudaRegion(t->region_id)) return true;
  }
  return false;
}

Result<v1::DecodeReply> ClientProtocol::PlanDecode(Client& client, const std::string& model,
                                                   DType latent_dtype,
                                                   const std::vector<int64_t>& latent_shape,
                                                   OutputFormat format) {
  return Guarded("vaed Client::PlanDecode", [&]() -> Result<v1::DecodeReply> {
    DecodeRequest request;
    request.model = model;
    request.latent.dtype = latent_dtype;
    request.latent.shape = latent_shape;
    request.format = format;
    return PlanDecode(client, request);
  });
}

Result<v1::DecodeReply> ClientProtocol::PlanDecode(Client& client, const DecodeRequest& request) {
  return Guarded("vaed Client::PlanDecode", [&]() -> Result<v1::DecodeReply> {
    auto build = [&](v1::Request* req) {
      return BuildDecode(request, /*plan_only=*/true, nullptr, req->mutable_decode());
    };
    VAED_ASSIGN_OR_RETURN(
        v1::DecodeReply plan,
        client.impl_->CallForBody(build, v1::Reply::kDecode, "plan decode", &v1::Reply::decode));
    VAED_RETURN_IF_ERROR(CheckLatentSpaceHonoured(request, plan));
    return plan;
  });
}

Result<v1::DecodeReply> ClientProtocol::Decode(Client& client, const DecodeRequest& request) {
  // What request.progress threw, taken out of the Impl under its lock and
  // rethrown here, after the lock is released.
  std::exception_ptr progress_error;
  Result<v1::DecodeReply> decoded =
      Guarded("vaed Client::Decode", [&]() -> Result<v1::DecodeReply> {
        VAED_RETURN_IF_ERROR(client.impl_->CheckProcess());
        Client::Impl* impl = client.impl_.get();
        MutexLock lock(&impl->mu);
        // A CUDA region (latent or output): the daemon's stream waits for
        // the work enqueued on the caller's stream before it reads or
        // writes one (recorded once; a retry sends the same event).
        std::string inputs_ready;
        if (impl->NamesCudaRegion(request)) {
          VAED_ASSIGN_OR_RETURN(internal::CudaStreamSync * sync, impl->CudaSync());
          VAED_ASSIGN_OR_RETURN(inputs_ready, sync->RecordInputsReady(request.cuda_stream));
        }
        impl->on_progress = request.progress ? &request.progress : nullptr;
        impl->streamed = {.callback = request.final_range ? &request.final_range : nullptr,
                          .cuda_stream = request.cuda_stream,
                          .video_frames = 0,
                          .audio_samples = 0,
                          .error = Status::Ok()};
        Result<v1::Reply> called = impl->CallLocked(
            [&](v1::Request* req) {
              // Runs under impl->mu, per attempt: ids map to the current daemon.
              VAED_RETURN_IF_ERROR(BuildDecode(
                  request, /*plan_only=*/false,
                  [impl](uint64_t id, std::string_view field)
                      VAED_REQUIRES(impl->mu) { return impl->DaemonRegionId(id, field); },
                  req->mutable_decode()));
              if (request.progress) req->mutable_decode()->mutable_options()->set_progress(true);
              if (request.final_range) {
                req->mutable_decode()->mutable_options()->set_stream_output(true);
              }
              if (!inputs_ready.empty())
                req->mutable_decode()->set_inputs_ready_event(inputs_ready);
              return Status::Ok();
            },
            impl->options.request_timeout_ms);
        impl->on_progress = nullptr;
        progress_error = std::exchange(impl->progress_error, nullptr);
        const Client::Impl::FinalRangeDelivery streamed = std::exchange(impl->streamed, {});
        if (!called.ok() && request.final_range && called.status().final_frames() == 0 &&
            called.status().final_samples() == 0) {
          // Failed in this library or the connection: what was delivered
          // (CallLocked does not retry once a part was delivered).
          Status failed = called.status();
          if (streamed.delivered_any()) {
            failed = failed.WithContext(
                "streamed decode not retried (a retry would write the "
                "delivered part of the output again)");
          }
          return failed.WithFinalOutput(streamed.video_frames, streamed.audio_samples);
        }
        VAED_RETURN_IF_ERROR(streamed.error);
        VAED_ASSIGN_OR_RETURN(v1::Reply reply, std::move(called));
        VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kDecode, "decode"));
        if (!reply.decode().outputs_ready_event().empty()) {
          // CUDA outputs: ordered on the caller's stream, not on the host.
          VAED_ASSIGN_OR_RETURN(internal::CudaStreamSync * sync, impl->CudaSync());
          VAED_RETURN_IF_ERROR(
              sync->WaitOutputsReady(request.cuda_stream, reply.decode().outputs_ready_event()));
        }
        VAED_RETURN_IF_ERROR(CheckLatentSpaceHonoured(request, reply.decode()));
        return reply.decode();
      });
  if (progress_error) std::rethrow_exception(progress_error);
  return decoded;
}

Result<v1::StatusReply> ClientProtocol::GetStatus(Client& client) {
  return Guarded("vaed Client::GetStatus", [&] {
    auto build = [](v1::Request* req) {
      req->mutable_status();
      return Status::Ok();
    };
    return client.impl_->CallForBody(build, v1::Reply::kStatus, "status", &v1::Reply::status);
  });
}

Result<v1::ReleaseQuarantineReply> ClientProtocol::ReleaseQuarantine(Client& client,
                                                                     const std::string& target) {
  return Guarded("vaed Client::ReleaseQuarantine", [&] {
    auto build = [&](v1::Request* req) {
      req->mutable_release_quarantine()->set_client(target);
      return Status::Ok();
    };
    return client.impl_->CallForBody(build, v1::Reply::kReleaseQuarantine, "release_quarantine",
                                     &v1::Reply::release_quarantine);
  });
}

Result<v1::Reply> ClientProtocol::SendRaw(Client& client, const std::string& bytes) {
  return Guarded("vaed ClientProtocol::SendRaw", [&]() -> Result<v1::Reply> {
    VAED_RETURN_IF_ERROR(client.impl_->CheckProcess());
    MutexLock lock(&client.impl_->mu);
    if (client.impl_->broken && client.impl_->MayReconnect())
      VAED_RETURN_IF_ERROR(client.impl_->Reconnect());
    // Match the reply by the message's own request id when it has one.
    uint64_t expect_id = 0;
    v1::Request parsed;
    if (parsed.ParseFromString(bytes)) expect_id = parsed.request_id();
    return client.impl_->Exchange(bytes, expect_id, client.impl_->options.request_timeout_ms,
                                  /*ping=*/true);
  });
}

const v1::HelloReply& ClientProtocol::Hello(const Client& client) {
  return client.impl_->hello.load()->message;
}

namespace {

// A protocol reply copied into the client's own type; running out of
// memory while copying comes back as a Status naming `call`.
template <typename Message>
auto Copied(std::string_view call, Result<Message> message)
    -> Result<decltype(FromProtocol(*message))> {
  if (!message.ok()) return message.status();
  return Guarded(
      call, [&]() -> Result<decltype(FromProtocol(*message))> { return FromProtocol(*message); });
}

}  // namespace

Result<DecodeReply> Client::PlanDecode(const std::string& model, DType latent_dtype,
                                       const std::vector<int64_t>& latent_shape,
                                       OutputFormat format) {
  return Copied("vaed Client::PlanDecode",
                ClientProtocol::PlanDecode(*this, model, latent_dtype, latent_shape, format));
}

Result<DecodeReply> Client::PlanDecode(const DecodeRequest& request) {
  return Copied("vaed Client::PlanDecode", ClientProtocol::PlanDecode(*this, request));
}

Result<DecodeReply> Client::Decode(const DecodeRequest& request) {
  // Not guarded as a whole: what request.progress threw passes through.
  return Copied("vaed Client::Decode", ClientProtocol::Decode(*this, request));
}

Result<StatusReply> Client::GetStatus() {
  return Copied("vaed Client::GetStatus", ClientProtocol::GetStatus(*this));
}

Result<ReleaseQuarantineReply> Client::ReleaseQuarantine(const std::string& client) {
  return Copied("vaed Client::ReleaseQuarantine", ClientProtocol::ReleaseQuarantine(*this, client));
}

}  // namespace vaed::client
