#include "daemon/server/refusal_rate_limit.h"

namespace vaed::server {

bool RefusalRateLimit::Admit(Clock::time_point now, uint64_t* suppressed) {
  if (!started_ || now - window_start_ >= window_) {
    started_ = true;
    window_start_ = now;
    logged_in_window_ = 0;
  }
  if (logged_in_window_ >= burst_) {
    ++suppressed_since_logged_;
    ++suppressed_total_;
    return false;
  }
  ++logged_in_window_;
  *suppressed = suppressed_since_logged_;
  suppressed_since_logged_ = 0;
  return true;
}

}  // namespace vaed::server
