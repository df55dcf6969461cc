#include "daemon/models/interval_timer.h"

#include <mutex>
#include <utility>

namespace vaed::models {
namespace {

std::mutex g_factory_mu;
DeviceIntervalsFactory& Factory() {
  static DeviceIntervalsFactory factory;
  return factory;
}

}  // namespace

void SetDeviceIntervalsFactory(DeviceIntervalsFactory factory) {
  std::lock_guard<std::mutex> lock(g_factory_mu);
  Factory() = std::move(factory);
}

IntervalTimer::IntervalTimer(const torch::Device& device) {
  if (device.is_cpu()) return;
  std::lock_guard<std::mutex> lock(g_factory_mu);
  if (Factory()) device_ = Factory()(device);
}

void IntervalTimer::Start() {
  open_ = true;
  if (device_) {
    device_->Start();
  } else {
    started_ = std::chrono::steady_clock::now();
  }
}

void IntervalTimer::Stop() {
  if (!open_) return;
  open_ = false;
  if (device_) {
    device_->Stop();
  } else {
    host_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
}

double IntervalTimer::Seconds() const { return device_ ? device_->Seconds() : host_seconds_; }

}  // namespace vaed::models
