// The heartbeat thread: keeps an idle client known to the daemon, and
// marks the connection broken when the daemon stops answering, so that the
// next call reconnects. Its owner is the Client: Connect() starts it, the
// destructor stops and joins it. Nothing thrown inside it leaves it.
#include <system_error>

#include "client_impl.h"
#include "exception_status.h"
#include "fault_points.h"

namespace vaed::client {

namespace {
using std::chrono::milliseconds;
}  // namespace

Status Client::Impl::StartHeartbeats() {
  if (!options.heartbeats || heartbeat_interval_ms.load() == 0) return Status::Ok();
  try {
    internal::FaultPoint("client.start_heartbeat");
    heartbeat = std::thread([this] { HeartbeatLoop(); });
  } catch (...) {
    // std::system_error (EAGAIN: no threads left) or an injected fault.
    return StatusFromCurrentException("starting the heartbeat thread");
  }
  return Status::Ok();
}

void Client::Impl::StopHeartbeats() noexcept {
  {
    MutexLock lock(&hb_mu);
    hb_stop = true;
  }
  hb_cv.notify_all();
  if (heartbeat.joinable()) heartbeat.join();
}

void Client::Impl::HeartbeatLoop() noexcept {
  MutexLock lock(&hb_mu);
  uint32_t missed = 0;
  for (;;) {
    const uint32_t ms = heartbeat_interval_ms.load();
    const milliseconds interval(ms > 0 ? ms : 1000);
    const auto wake = std::chrono::steady_clock::now() + interval;
    while (!hb_stop && hb_cv.wait_until(hb_mu, wake) == std::cv_status::no_timeout) {
    }
    if (hb_stop) return;
    // A request in flight already shows the daemon we are alive, and
    // watches its liveness itself. mu is unlocked below: nothing between
    // throws (BeatOnce's exceptions are caught).
    if (!mu.try_lock()) continue;
    // No beat when the daemon asked for none (ms == 0), or when the
    // connection is broken and the next call reconnects.
    if (ms != 0 && !(broken && MayReconnect())) {
      try {
        BeatOnce(interval, &missed);
      } catch (...) {
        // Out of memory (or an injected fault) in this thread: there is no
        // caller to tell, so the next call finds the connection broken and
        // starts over on a fresh one.
        broken = true;
      }
    }
    mu.unlock();
  }
}

void Client::Impl::BeatOnce(milliseconds interval, uint32_t* missed) {
  internal::FaultPoint("client.heartbeat");
  v1::Request req;
  req.set_request_id(next_request_id++);
  req.set_client_id(client_id.load());
  req.mutable_heartbeat();
  Result<v1::Reply> reply = Exchange(req.SerializeAsString(), req.request_id(),
                                     static_cast<int>(interval.count()), /*ping=*/false);
  if (!reply.ok()) {
    // Never reconnect from here: that could hold the destructor for
    // reconnect_timeout_ms. Mark it for the next call instead.
    if (++*missed >= Liveness()) broken = true;
    return;
  }
  *missed = 0;
  if (IsUnknownClient(reply)) broken = true;
}

}  // namespace vaed::client
