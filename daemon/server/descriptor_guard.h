// The guard against connection storms. ZeroMQ's I/O thread accepts
// connections without bound, faster than the control loop can refuse and
// close them, and libzmq aborts the process when accept() fails with
// EMFILE. So a watcher thread counts the open descriptors every 2 ms and
// raises a flag; the control loop, which checks it each turn (Check()),
// stops listening (unbinds the control socket: new connects fail, the
// client library retries) while pause_at() or more are open, and listens
// again at resume_at() or fewer. The guard decides; the control loop
// unbinds, binds and drops the connections.
//
// Thresholds, from the open-files limit (RLIMIT_NOFILE; 2^20 when
// unlimited): pause_at = limit - max(512, limit / 4), the room left for
// what the I/O thread accepts before it processes the unbind; resume_at =
// pause_at - min(pause_at / 2, headroom / 2).
//
// Thread-safety: Start(), Stop() and Check() from the owner's thread (the
// control loop's); high() from any thread. The watcher thread is owned,
// stopped and joined by Stop() (and the destructor).
#ifndef VAED_DAEMON_SERVER_DESCRIPTOR_GUARD_H_
#define VAED_DAEMON_SERVER_DESCRIPTOR_GUARD_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

namespace vaed::server {

class DescriptorGuard {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Reads the open-files limit; starts no thread.
  DescriptorGuard();
  ~DescriptorGuard() { Stop(); }
  DescriptorGuard(const DescriptorGuard&) = delete;
  DescriptorGuard& operator=(const DescriptorGuard&) = delete;

  // Starts the watcher thread (once).
  void Start();
  // Stops and joins it; idempotent.
  void Stop();

  // True while the watcher has seen pause_at() or more descriptors open
  // since the last Check() (the control loop stops reading meanwhile).
  bool high() const { return high_.load(std::memory_order_relaxed); }

  enum class Step {
    kNone,    // nothing to change
    kPause,   // accepting, and pause_at() or more open: stop listening
    kResume,  // paused, and resume_at() or fewer open: listen again
  };
  // What the control loop should do now, `accepting` being whether it
  // listens. Counts the descriptors (into *open) when the watcher raised
  // its flag, and every 50 ms while paused; clears the flag.
  Step Check(bool accepting, TimePoint now, size_t* open);

  size_t pause_at() const { return pause_at_; }
  size_t resume_at() const { return resume_at_; }

 private:
  void Watch();

  size_t pause_at_ = 0, resume_at_ = 0;
  std::atomic<bool> high_{false};  // set by the watcher thread
  std::atomic<bool> stop_{false};
  std::thread watcher_;
  TimePoint last_check_{};
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_DESCRIPTOR_GUARD_H_
