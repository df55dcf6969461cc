// How many refusals reach the log: an operator must see every
// refusal in logs and metrics, without a flood of bad requests flooding the
// log. Every refusal is counted in the metrics and status; at most `burst`
// of them are logged per `window`, and the first one logged after a
// suppression says how many were not ("suppressed": N in its record).
//
// Thread-safety: none; the request handler's thread.
#ifndef VAED_DAEMON_SERVER_REFUSAL_RATE_LIMIT_H_
#define VAED_DAEMON_SERVER_REFUSAL_RATE_LIMIT_H_

#include <chrono>
#include <cstdint>

namespace vaed::server {

class RefusalRateLimit {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kDefaultBurst = 20;
  static constexpr Clock::duration kDefaultWindow = std::chrono::seconds(10);

  explicit RefusalRateLimit(int burst = kDefaultBurst, Clock::duration window = kDefaultWindow)
      : burst_(burst), window_(window) {}

  // Whether a refusal at `now` is logged. Windows are fixed: the first
  // refusal after a window ended starts the next. When it is logged,
  // *suppressed is set to the refusals not logged since the last logged
  // one (0 when none), and that count restarts.
  bool Admit(Clock::time_point now, uint64_t* suppressed);

  // Refusals not logged since start-up.
  uint64_t suppressed_total() const { return suppressed_total_; }

 private:
  const int burst_;
  const Clock::duration window_;
  Clock::time_point window_start_{};
  bool started_ = false;
  int logged_in_window_ = 0;
  uint64_t suppressed_since_logged_ = 0;
  uint64_t suppressed_total_ = 0;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_REFUSAL_RATE_LIMIT_H_
