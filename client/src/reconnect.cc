// Getting back to a daemon that went away (the zguide's Paranoid Pirate):
// fresh connections with back-off, the regions registered again under the
// ids the user already holds, and CallLocked(), which sends a request and
// resends it once after a reconnect.
#include <algorithm>
#include <thread>

#include "client_impl.h"
#include "daemon_access.h"
#include "exception_status.h"

namespace vaed::client {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Hello back-off while reconnecting (the zguide's Paranoid Pirate values).
constexpr milliseconds kReconnectBackoffStart{100};
constexpr milliseconds kReconnectBackoffCap{2000};

}  // namespace

Status Client::Impl::ReregisterRegions() {
  for (auto& [user_id, region] : regions) {
    v1::Request req;
    req.set_request_id(next_request_id++);
    req.set_client_id(client_id.load());
    // A CUDA region is sent again with its IPC handle: the allocation is
    // still this process's (the caller keeps it until UnregisterRegion).
    if (region.registration.has_host()) {
      GrantDaemonAccess(region.registration.host().name(), options.socket);
    }
    *req.mutable_register_region() = region.registration;
    Result<v1::Reply> reply = Exchange(req.SerializeAsString(), req.request_id(),
                                       options.connect_timeout_ms, /*ping=*/true);
    if (!reply.ok()) return reply.status();
    if (IsUnknownClient(reply)) return Unavailable("the daemon forgot this client again");
    if (Status s = CheckReply(*reply, v1::Reply::kRegisterRegion, "register_region"); !s.ok()) {
      region.daemon_id = 0;
      region.lost =
          s.WithContext("region_id " + std::to_string(user_id) + " (" + region.Describe() +
                        ") could not be registered again after reconnecting to vaed");
      continue;
    }
    region.daemon_id = reply->register_region().region_id();
    region.lost = Status::Ok();
  }
  return Status::Ok();
}

Status Client::Impl::Reconnect() {
  const auto start = Clock::now();
  const milliseconds budget(options.reconnect_timeout_ms);
  milliseconds backoff = kReconnectBackoffStart;
  Status last;
  int attempts = 0;
  for (;;) {
    const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    if (elapsed >= budget) break;
    // Each attempt waits its back-off for a connection (or sleeps it when
    // there is no socket file), then gives up on that socket.
    const milliseconds wait = std::min(backoff, budget - elapsed);
    const auto attempt_end = Clock::now() + wait;
    ++attempts;
    Status s = CheckSocketFile(options.socket);
    if (s.ok()) {
      // A daemon that took the connection gets connect_timeout_ms (within
      // the budget) to answer.
      const auto left = budget - std::chrono::duration_cast<milliseconds>(Clock::now() - start);
      int reply_ms = static_cast<int>(std::max<int64_t>(1, left.count()));
      if (options.connect_timeout_ms > 0) reply_ms = std::min(reply_ms, options.connect_timeout_ms);
      s = HelloOnFreshSocket(static_cast<int>(std::max<int64_t>(1, wait.count())), reply_ms);
    }
    if (s.ok()) s = ReregisterRegions();
    if (s.ok()) {
      ++reconnects;
      return Status::Ok();
    }
    if (s.code() != StatusCode::kUnavailable) {
      broken = true;
      return s.WithContext("reconnecting to vaed at " + options.socket);
    }
    last = s;
    std::this_thread::sleep_until(attempt_end);
    backoff = std::min(backoff * 2, kReconnectBackoffCap);
  }
  broken = true;
  return Unavailable(
      "vaed at " + options.socket + " went away and did not come back within " +
      std::to_string(options.reconnect_timeout_ms) + " ms (" + std::to_string(attempts) +
      " Hello attempts; last: " + (last.ok() ? std::string("none") : last.message()) + ")");
}

Result<v1::Reply> Client::Impl::CallLocked(const Builder& build, int timeout_ms) {
  try {
    return CallLockedOrThrow(build, timeout_ms);
  } catch (...) {
    // `build` or the bookkeeping around the exchange threw (Exchange()
    // itself never does); nothing was left half-sent.
    return StatusFromCurrentException("preparing a request to vaed at ", options.socket);
  }
}

Result<v1::Reply> Client::Impl::CallLockedOrThrow(const Builder& build, int timeout_ms) {
  VAED_RETURN_IF_ERROR(CheckProcess());
  if (broken && MayReconnect()) VAED_RETURN_IF_ERROR(Reconnect());
  for (int attempt = 0;; ++attempt) {
    v1::Request req;
    VAED_RETURN_IF_ERROR(build(&req));
    req.set_request_id(next_request_id++);
    req.set_client_id(client_id.load());
    Result<v1::Reply> reply =
        Exchange(req.SerializeAsString(), req.request_id(), timeout_ms, /*ping=*/true);
    if (IsUnknownClient(reply)) broken = true;
    // Gone, or it forgot us. A failure inside this library (Exchange()'s
    // kResourceExhausted / kInternal) also leaves `broken` set, but is not
    // retried: the daemon may still be running the request.
    const bool lost_daemon =
        broken && (reply.ok() || reply.status().code() == StatusCode::kUnavailable);
    // A streamed decode that delivered part of its output is not retried
    // (the retry would write that part again): it fails now, without
    // waiting for the daemon to come back.
    if (!lost_daemon || !MayReconnect() || attempt > 0 || streamed.delivered_any()) {
      return reply;  // a broken connection is mended by the next call
    }
    VAED_RETURN_IF_ERROR(Reconnect());
  }
}

Result<v1::Reply> Client::Impl::Call(const Builder& build, int timeout_ms) {
  VAED_RETURN_IF_ERROR(CheckProcess());  // before the lock: a fork may have copied it held
  MutexLock lock(&mu);
  return CallLocked(build, timeout_ms);
}

Result<uint64_t> Client::Impl::DaemonRegionId(uint64_t user_id, std::string_view field) const {
  auto it = regions.find(user_id);
  if (it == regions.end()) {
    for (const auto& [id, region] : regions) {
      if (region.daemon_id == user_id) {
        return NotFound(std::string(field) + " " + std::to_string(user_id) +
                        " is not a region registered by this client");
      }
    }
    return user_id;
  }
  if (!it->second.lost.ok()) return it->second.lost.WithContext(field);
  return it->second.daemon_id;
}

}  // namespace vaed::client
