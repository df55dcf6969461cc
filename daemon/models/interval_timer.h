// Seconds of work inside marked intervals: the component timings of a
// decode, timed by CUDA events on a GPU rank.
//
// On the CPU the work is done when a call returns, so the host's steady
// clock around each interval measures it. On a device the host only queues
// the work, and a host clock would time the queuing: there each interval is
// an event pair recorded on the thread's current stream (the rank's), and
// Seconds() adds their elapsed times, waiting for the last one. The video
// decoder reads its timers once, when its decode has been queued and a
// report is wanted: the rank thread then waits for its own stream, once per
// request, before it queues the formatting (no worker thread waits; the
// rank's stream itself may wait on a worker's inputs_ready_event); no wait
// sits between tile calls, so the host keeps queuing ahead of the device. The device half is a DeviceIntervals backend that the engine registers once
// per process (engine/torch_cuda.h UseCudaEventTimings, LibTorch with CUDA
// only); without one, device intervals fall back to the host clock.
//
// Ownership: an IntervalTimer owns its backend (and so its events).
// Thread-safety: one thread at a time (the rank's);
// SetDeviceIntervalsFactory() before any decode.
#ifndef VAED_DAEMON_MODELS_INTERVAL_TIMER_H_
#define VAED_DAEMON_MODELS_INTERVAL_TIMER_H_

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>

namespace vaed::models {

// A device's intervals (event pairs). Start()/Stop() never throw and never
// wait; Seconds() waits for the last Stop() and returns the sum of the
// closed intervals, 0 for any it cannot read (noexcept: timings must not
// fail a decode).
class DeviceIntervals {
 public:
  virtual ~DeviceIntervals() = default;
  virtual void Start() noexcept = 0;
  virtual void Stop() noexcept = 0;
  virtual double Seconds() noexcept = 0;
};

// Makes DeviceIntervals for a non-CPU device; may return null (host clock).
using DeviceIntervalsFactory =
    std::function<std::unique_ptr<DeviceIntervals>(const torch::Device&)>;

// Process-wide; replaces any earlier factory (null: none). Not
// synchronised with timers being created: call at start-up.
void SetDeviceIntervalsFactory(DeviceIntervalsFactory factory);

class IntervalTimer {
 public:
  // Host clock: the CPU, or a device without a registered backend.
  IntervalTimer() = default;
  explicit IntervalTimer(const torch::Device& device);
  IntervalTimer(IntervalTimer&&) noexcept = default;
  IntervalTimer& operator=(IntervalTimer&&) noexcept = default;

  // Opens an interval (a second Start() restarts the open one).
  void Start();
  // Closes the open interval; nothing without one.
  void Stop();
  // Seconds of every closed interval (an interval left open by an error
  // does not count). See above for when a device timer waits.
  double Seconds() const;
  bool on_device() const { return device_ != nullptr; }

 private:
  std::unique_ptr<DeviceIntervals> device_;  // null: host clock
  std::chrono::steady_clock::time_point started_{};
  bool open_ = false;
  double host_seconds_ = 0;
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_INTERVAL_TIMER_H_
