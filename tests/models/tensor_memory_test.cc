// Tests of the tensor memory counters (daemon/models/tensor_memory.h): the
// peak marks are per thread, the live bytes process-wide.
#include "daemon/models/tensor_memory.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <thread>

namespace vaed::models {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Allocates `bytes` of CPU tensor memory and frees it again.
void AllocateAndFree(int64_t bytes) {
  torch::Tensor t = torch::empty({bytes}, torch::TensorOptions().dtype(torch::kByte));
  ASSERT_EQ(t.nbytes(), static_cast<size_t>(bytes));
}

class TensorMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(InstallTensorMemoryTracking()); }
};

// Regression: the peak mark was one process-wide value, so a
// request starting on another rank (another thread) reset it and the
// request already running reported a peak below what it had allocated.
TEST_F(TensorMemoryTest, ConcurrentResetDoesNotLowerAnotherThreadsPeak) {
  ResetPeakTensorBytes();
  const uint64_t base = LiveTensorBytes();
  AllocateAndFree(64 * kMiB);
  std::thread other_rank([] { ResetPeakTensorBytes(); });
  other_rank.join();
  EXPECT_GE(PeakTensorBytes(), base + 64 * kMiB);
}

// A fresh mark (a thread's first peak call, or a reset) starts at the live
// bytes: it does not carry what was freed before it.
TEST_F(TensorMemoryTest, MarkStartsAtTheLiveBytes) {
  AllocateAndFree(32 * kMiB);
  uint64_t first_peak = 0;
  std::thread other_rank([&] { first_peak = PeakTensorBytes(); });
  other_rank.join();
  EXPECT_LT(first_peak, LiveTensorBytes() + 32 * kMiB);
  ResetPeakTensorBytes();
  EXPECT_LT(PeakTensorBytes(), LiveTensorBytes() + 32 * kMiB);
}

// The live bytes are process-wide: a thread's peak counts tensors other
// threads allocated while it measured.
TEST_F(TensorMemoryTest, PeakCountsTensorsOfOtherThreads) {
  ResetPeakTensorBytes();
  const uint64_t base = LiveTensorBytes();
  std::thread other_rank([] { AllocateAndFree(48 * kMiB); });
  other_rank.join();
  EXPECT_GE(PeakTensorBytes(), base + 48 * kMiB);
}

TEST_F(TensorMemoryTest, ScopedPeakMeasuresItsSpanAndKeepsTheEnclosingPeak) {
  ResetPeakTensorBytes();
  const uint64_t base = LiveTensorBytes();
  AllocateAndFree(40 * kMiB);
  {
    ScopedTensorPeak span;
    AllocateAndFree(8 * kMiB);
    EXPECT_GE(span.Peak(), span.start_live() + 8 * kMiB);
    EXPECT_LT(span.Peak(), span.start_live() + 40 * kMiB);
  }
  EXPECT_GE(PeakTensorBytes(), base + 40 * kMiB);
}

}  // namespace
}  // namespace vaed::models
