// The public calls of vaed::client::Client (vaed/client.h). Each runs the
// request cycle of Client::Impl (client_impl.h) and turns what escapes it
// into a Status at this edge: no call throws, except Decode(), which hands
// back what the user's progress callback threw.
#include "vaed/client.h"

#include <exception>
#include <utility>

#include "client_impl.h"
#include "daemon_access.h"
#include "decode_request.h"
#include "exception_status.h"

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
    VAED_RETURN_IF_ERROR(CheckSocketFile(options.socket));
    auto impl = std::make_unique<Impl>(options);
    {
      MutexLock lock(&impl->mu);
      VAED_RETURN_IF_ERROR(
          impl->HelloOnFreshSocket(options.connect_timeout_ms, options.connect_timeout_ms));
    }
    VAED_RETURN_IF_ERROR(impl->StartHeartbeats());
    return std::unique_ptr<Client>(new Client(std::move(impl)));
  });
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
const v1::HelloReply& Client::hello() const { return *impl_->hello.load(); }
uint64_t Client::reconnects() const { return impl_->reconnects.load(); }

Result<uint64_t> Client::RegisterRegion(const SharedRegion& region) {
  return Guarded("vaed Client::RegisterRegion", [&]() -> Result<uint64_t> {
    VAED_RETURN_IF_ERROR(impl_->CheckProcess());
    if (region.data() == nullptr) {
      return FailedPrecondition("register_region: the SharedRegion is empty (moved from)");
    }
    // Under one lock with the call, so a reconnect by another thread cannot
    // slip between the registration and its bookkeeping.
    MutexLock lock(&impl_->mu);
    auto build = [&](v1::Request* req) {
      GrantDaemonAccess(region.name(), impl_->options.socket);
      v1::HostShmRegion* host = req->mutable_register_region()->mutable_host();
      host->set_name(region.name());
      host->set_size_bytes(region.size());
      return Status::Ok();
    };
    VAED_ASSIGN_OR_RETURN(v1::Reply reply,
                          impl_->CallLocked(build, impl_->options.request_timeout_ms));
    VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kRegisterRegion, "register_region"));
    const uint64_t daemon_id = reply.register_region().region_id();
    // The daemon's id is the user's, unless a region registered before a
    // daemon restart already holds that value.
    uint64_t user_id = daemon_id;
    if (impl_->regions.count(user_id) != 0) user_id = impl_->next_synthetic_region_id++;
    impl_->regions[user_id] = Impl::Region{region.name(), region.size(), daemon_id, Status::Ok()};
    return user_id;
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

Result<v1::DecodeReply> Client::PlanDecode(const std::string& model, DType latent_dtype,
                                           const std::vector<int64_t>& latent_shape,
                                           OutputFormat format) {
  return Guarded("vaed Client::PlanDecode", [&]() -> Result<v1::DecodeReply> {
    DecodeRequest request;
    request.model = model;
    request.latent.dtype = latent_dtype;
    request.latent.shape = latent_shape;
    request.format = format;
    return PlanDecode(request);
  });
}

Result<v1::DecodeReply> Client::PlanDecode(const DecodeRequest& request) {
  return Guarded("vaed Client::PlanDecode", [&] {
    auto build = [&](v1::Request* req) {
      return BuildDecode(request, /*plan_only=*/true, nullptr, req->mutable_decode());
    };
    return impl_->CallForBody(build, v1::Reply::kDecode, "plan decode", &v1::Reply::decode);
  });
}

Result<v1::DecodeReply> Client::Decode(const DecodeRequest& request) {
  // What request.progress threw, taken out of the Impl under its lock and
  // rethrown here, after the lock is released.
  std::exception_ptr progress_error;
  Result<v1::DecodeReply> decoded =
      Guarded("vaed Client::Decode", [&]() -> Result<v1::DecodeReply> {
        VAED_RETURN_IF_ERROR(impl_->CheckProcess());
        Impl* impl = impl_.get();
        MutexLock lock(&impl->mu);
        impl->on_progress = request.progress ? &request.progress : nullptr;
        Result<v1::Reply> called = impl->CallLocked(
            [&](v1::Request* req) {
              // Runs under impl->mu, per attempt: ids map to the current daemon.
              VAED_RETURN_IF_ERROR(BuildDecode(
                  request, /*plan_only=*/false,
                  [impl](uint64_t id, std::string_view field)
                      VAED_REQUIRES(impl->mu) { return impl->DaemonRegionId(id, field); },
                  req->mutable_decode()));
              if (request.progress) req->mutable_decode()->mutable_options()->set_progress(true);
              return Status::Ok();
            },
            impl->options.request_timeout_ms);
        impl->on_progress = nullptr;
        progress_error = std::exchange(impl->progress_error, nullptr);
        VAED_ASSIGN_OR_RETURN(v1::Reply reply, std::move(called));
        VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kDecode, "decode"));
        return reply.decode();
      });
  if (progress_error) std::rethrow_exception(progress_error);
  return decoded;
}

Result<v1::StatusReply> Client::GetStatus() {
  return Guarded("vaed Client::GetStatus", [&] {
    auto build = [](v1::Request* req) {
      req->mutable_status();
      return Status::Ok();
    };
    return impl_->CallForBody(build, v1::Reply::kStatus, "status", &v1::Reply::status);
  });
}

Result<v1::ReleaseQuarantineReply> Client::ReleaseQuarantine(const std::string& client) {
  return Guarded("vaed Client::ReleaseQuarantine", [&] {
    auto build = [&](v1::Request* req) {
      req->mutable_release_quarantine()->set_client(client);
      return Status::Ok();
    };
    return impl_->CallForBody(build, v1::Reply::kReleaseQuarantine, "release_quarantine",
                              &v1::Reply::release_quarantine);
  });
}

Result<v1::Reply> Client::SendRaw(const std::string& bytes) {
  return Guarded("vaed Client::SendRaw", [&]() -> Result<v1::Reply> {
    VAED_RETURN_IF_ERROR(impl_->CheckProcess());
    MutexLock lock(&impl_->mu);
    if (impl_->broken && impl_->MayReconnect()) VAED_RETURN_IF_ERROR(impl_->Reconnect());
    // Match the reply by the message's own request id when it has one.
    uint64_t expect_id = 0;
    v1::Request parsed;
    if (parsed.ParseFromString(bytes)) expect_id = parsed.request_id();
    return impl_->Exchange(bytes, expect_id, impl_->options.request_timeout_ms, /*ping=*/true);
  });
}

}  // namespace vaed::client
