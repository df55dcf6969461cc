#include "daemon/models/cancel.h"

#include <cstdio>

namespace vaed::models {

CancelToken::CancelToken(Clock::time_point received, uint32_t deadline_ms)
    : received_(received), deadline_ms_(deadline_ms) {}

void CancelToken::Cancel(Status why) {
  MutexLock lock(&mu_);
  if (cancelled_.load(std::memory_order_relaxed)) return;
  reason_ = std::move(why);
  cancelled_.store(true, std::memory_order_release);
}

Status CancelToken::Check(std::string_view where) const {
  if (cancelled_.load(std::memory_order_acquire)) {
    MutexLock lock(&mu_);
    return reason_.WithContext(where.empty() ? "cancelled" : "cancelled " + std::string(where));
  }
  if (deadline_ms_ == 0) return Status::Ok();
  const auto now = Clock::now();
  if (now - received_ < std::chrono::milliseconds(deadline_ms_)) return Status::Ok();
  char elapsed[32];
  std::snprintf(elapsed, sizeof(elapsed), "%.3f",
                std::chrono::duration<double>(now - received_).count());
  return DeadlineExceeded("options.deadline_ms " + std::to_string(deadline_ms_) + " passed (" +
                          elapsed + " s after the request was received)" +
                          (where.empty() ? "" : " " + std::string(where)) +
                          "; the decode was cancelled");
}

void ThrowIfCancelled(const CancelToken* token, std::string_view where) {
  if (token == nullptr) return;
  Status s = token->Check(where);
  if (!s.ok()) throw DecodeCancelled(std::move(s));
}

}  // namespace vaed::models
