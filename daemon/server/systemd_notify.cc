#include "daemon/server/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <algorithm>

namespace vaed::server {

SystemdNotifier::SystemdNotifier() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0) {
    watchdog_interval_ = std::chrono::microseconds(usec);
  }
}

void SystemdNotifier::Ready(const std::string& status) {
  sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
  last_ping_ = std::chrono::steady_clock::now();
}

void SystemdNotifier::Stopping(const std::string& status) {
  sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status.c_str());
}

void SystemdNotifier::SetStatus(const std::string& status) {
  sd_notifyf(0, "STATUS=%s", status.c_str());
}

void SystemdNotifier::MaybePingWatchdog() {
  if (!watchdog_enabled()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ping_ >= watchdog_interval_ / 2) {
    sd_notify(0, "WATCHDOG=1");
    last_ping_ = now;
  }
}

std::chrono::milliseconds SystemdNotifier::poll_budget() const {
  constexpr std::chrono::milliseconds kDefault{500};
  if (!watchdog_enabled()) return kDefault;
  return std::min(kDefault, std::chrono::duration_cast<std::chrono::milliseconds>(
                                watchdog_interval_ / 4));
}

}  // namespace vaed::server
