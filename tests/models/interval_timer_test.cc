// Component timings (daemon/models/interval_timer.h): the host clock on the
// CPU, and on a device the registered DeviceIntervals backend (CUDA event
// pairs in a GPU build; a fake here, with `meta` standing for a GPU).
#include "daemon/models/interval_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

namespace vaed::models {
namespace {

TEST(IntervalTimerTest, TheCpuSumsClosedIntervalsOnTheHostClock) {
  IntervalTimer t(torch::Device(torch::kCPU));
  EXPECT_FALSE(t.on_device());
  t.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t.Stop();
  const double first = t.Seconds();
  EXPECT_GE(first, 0.015);
  t.Stop();  // no open interval: nothing changes
  EXPECT_EQ(t.Seconds(), first);
  t.Start();  // left open (an error): not counted
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(t.Seconds(), first);
}

// What a CUDA backend does, without a device: counts the marks and answers
// a fixed figure.
struct FakeIntervals : DeviceIntervals {
  int* starts;
  int* stops;
  FakeIntervals(int* a, int* b) : starts(a), stops(b) {}
  void Start() noexcept override { ++*starts; }
  void Stop() noexcept override { ++*stops; }
  double Seconds() noexcept override { return 1.5; }
};

TEST(IntervalTimerTest, ADeviceUsesTheRegisteredBackendAndTheHostClockWithoutOne) {
  const torch::Device meta(torch::kMeta);
  EXPECT_FALSE(IntervalTimer(meta).on_device());  // no backend registered
  int starts = 0, stops = 0;
  SetDeviceIntervalsFactory([&](const torch::Device& d) -> std::unique_ptr<DeviceIntervals> {
    EXPECT_EQ(d, torch::Device(torch::kMeta));
    return std::make_unique<FakeIntervals>(&starts, &stops);
  });
  IntervalTimer t(meta);
  EXPECT_TRUE(t.on_device());
  t.Start();
  t.Stop();
  t.Stop();  // closes nothing: not passed on
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(stops, 1);
  EXPECT_EQ(t.Seconds(), 1.5);
  EXPECT_FALSE(IntervalTimer(torch::Device(torch::kCPU)).on_device());  // never for the CPU
  SetDeviceIntervalsFactory(nullptr);
}

}  // namespace
}  // namespace vaed::models
