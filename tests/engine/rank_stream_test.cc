// A rank's device work (daemon/engine/rank_stream.h) without a device: a
// CPU rank's RankStream orders nothing and refuses what only a device can
// do, naming the field; a RequestFence waits once, on release or, failing
// that, when destroyed; AfterFence keeps what the daemon must act on.
#include "daemon/engine/rank_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace vaed::engine {
namespace {

using ::testing::HasSubstr;

// Counts the calls that reach the device.
class CountingDevice final : public DeviceQueue {
 public:
  explicit CountingDevice(int* fences) : fences_(fences) {}
  void* stream() const override { return nullptr; }
  Status WaitForClientEvent(uint64_t, const std::string&) override { return Status::Ok(); }
  Result<std::string> RecordEvent() override { return std::string(64, 'e'); }
  Status Synchronize() override {
    ++*fences_;
    return Status::Ok();
  }

 private:
  int* fences_;
};

TEST(RankStreamTest, ACpuRanksStreamOrdersNothingAndRefusesEvents) {
  RankStream cpu;
  EXPECT_FALSE(cpu.on_device());
  EXPECT_EQ(cpu.cuda_stream(), nullptr);
  EXPECT_TRUE(cpu.Fence().ok());
  const Status wait = cpu.WaitForInputs(1, std::string(64, 'e'), 3);
  EXPECT_EQ(wait.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(wait.field(), "inputs_ready_event");
  EXPECT_THAT(wait.message(), HasSubstr("rank 3 is not a CUDA rank"));
  EXPECT_EQ(cpu.RecordOutputsReady(3).status().code(), StatusCode::kFailedPrecondition);
}

TEST(RankStreamTest, AMalformedEventNeverReachesTheDevice) {
  RankStream stream(std::make_unique<CountingDevice>(nullptr));
  const Status s = stream.WaitForInputs(1, std::string(10, 'e'), 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("inputs_ready_event"));
}

TEST(RequestFenceTest, WaitsOnceWhenReleasedAndNotAgainWhenDestroyed) {
  int fences = 0;
  RankStream stream(std::make_unique<CountingDevice>(&fences));
  {
    RequestFence fence(stream);
    EXPECT_EQ(fences, 0);
    EXPECT_TRUE(fence.Release().ok());
    EXPECT_EQ(fences, 1);
    EXPECT_TRUE(fence.Release().ok());  // released already: no second wait
  }
  EXPECT_EQ(fences, 1);
}

TEST(RequestFenceTest, WaitsWhenDestroyedUnreleasedAsOnAnExceptionsPath) {
  int fences = 0;
  RankStream stream(std::make_unique<CountingDevice>(&fences));
  try {
    RequestFence fence(stream);
    throw std::runtime_error("the run threw");
  } catch (const std::runtime_error&) {
    EXPECT_EQ(fences, 1);  // before the handler answers
  }
}

TEST(AfterFenceTest, AStickyFenceErrorWinsAndAnyOtherKeepsTheRunsError) {
  const Status sticky = Internal("fence: illegal address").WithReason(ErrorReason::kStickyDevice);
  const Status plain = Internal("fence: something");
  const Result<int> failed = Cancelled("deadline");
  EXPECT_EQ(*AfterFence(Result<int>(7), Status::Ok()), 7);
  EXPECT_EQ(AfterFence(Result<int>(7), plain).status().message(), "fence: something");
  EXPECT_EQ(AfterFence(failed, plain).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(AfterFence(failed, sticky).status().reason(), ErrorReason::kStickyDevice);
}

}  // namespace
}  // namespace vaed::engine
