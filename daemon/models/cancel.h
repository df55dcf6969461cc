// Cancellation of a running decode: a request's deadline, its client going
// away or being quarantined, or shutdown.
//
// A decode cannot be interrupted inside a decoder call; models call
// ThrowIfCancelled() between units of work (H3: before every tile call;
// TAEF2: before every frame batch), so a cancelled request stops within one
// tile call, not after the whole decode. The executor also checks before it
// starts a request and before it writes the output.
//
// Thread-safety: Cancel() may be called from any thread while the executor
// thread calls Check(); the deadline is set once before the job is queued.
#ifndef VAED_DAEMON_MODELS_CANCEL_H_
#define VAED_DAEMON_MODELS_CANCEL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "vaed/mutex.h"
#include "vaed/status.h"

namespace vaed::models {

class CancelToken {
 public:
  using Clock = std::chrono::steady_clock;

  CancelToken() = default;
  // A deadline `deadline_ms` milliseconds after `received` (DecodeOptions.
  // deadline_ms; 0 = none). Call before the token is shared.
  CancelToken(Clock::time_point received, uint32_t deadline_ms);

  // Stops the work with `why` (kCancelled, e.g. "client 3 was quarantined").
  // The first reason wins; later calls are ignored. Thread-safe.
  void Cancel(Status why);

  // OK while the work may go on; otherwise the Cancel() reason, or
  // kDeadlineExceeded "deadline_ms N passed (T s after the request was
  // received) <where>; the decode was cancelled". `where` says how far the
  // work got, e.g. "before tile call 4 (3 done)".
  Status Check(std::string_view where) const;

  bool has_deadline() const { return deadline_ms_ > 0; }
  uint32_t deadline_ms() const { return deadline_ms_; }

 private:
  Clock::time_point received_{};
  uint32_t deadline_ms_ = 0;
  std::atomic<bool> cancelled_{false};
  mutable Mutex mu_;
  Status reason_ VAED_GUARDED_BY(mu_);
};

// Thrown by ThrowIfCancelled() out of model code that reports errors by
// exception (tile loops), and by the models when a streamed-output
// hand-over (DecodeSettings::final_frames) fails: the decode stops with
// `status`. CurrentTorchErrorStatus() turns it back into that Status, so
// its code (kCancelled / kDeadlineExceeded / the hand-over's) survives.
class DecodeCancelled : public std::exception {
 public:
  explicit DecodeCancelled(Status status) : status_(std::move(status)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Throws DecodeCancelled when `token` (may be null: never cancelled) says
// stop. `where` is only formatted into the message.
void ThrowIfCancelled(const CancelToken* token, std::string_view where);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_CANCEL_H_
