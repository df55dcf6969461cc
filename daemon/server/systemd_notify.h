// sd_notify integration: READY=1 once models are warm and the socket is
// bound, WATCHDOG=1 from the control loop while it is healthy, STOPPING=1 on
// shutdown. Without systemd (no NOTIFY_SOCKET in the environment, which is
// systemd's protocol, not a vaed setting) every call is a no-op.
//
// Thread-safety: call from the control-loop thread only.
#ifndef VAED_DAEMON_SERVER_SYSTEMD_NOTIFY_H_
#define VAED_DAEMON_SERVER_SYSTEMD_NOTIFY_H_

#include <chrono>
#include <string>

namespace vaed::server {

class SystemdNotifier {
 public:
  // Reads the watchdog interval systemd set (WatchdogSec=), if any.
  SystemdNotifier();

  void Ready(const std::string& status);
  void Stopping(const std::string& status);
  void SetStatus(const std::string& status);
  // Sends WATCHDOG=1 if at least half the watchdog interval has passed
  // since the last ping. Cheap to call from every loop turn.
  void MaybePingWatchdog();

  bool watchdog_enabled() const { return watchdog_interval_.count() > 0; }
  // How long the control loop may block between pings.
  std::chrono::milliseconds poll_budget() const;

 private:
  std::chrono::microseconds watchdog_interval_{0};
  std::chrono::steady_clock::time_point last_ping_{};
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_SYSTEMD_NOTIFY_H_
