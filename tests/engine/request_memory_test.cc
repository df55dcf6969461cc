// What one request may use (daemon/engine/request_memory.h): the budget or
// the host's memory, minus the resident weights, and the sentence that a
// refusal quotes.
#include "daemon/engine/request_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vaed::engine {
namespace {

using ::testing::HasSubstr;

TEST(RequestMemoryTest, BudgetMinusResidentWeights) {
  const RequestMemory m = RequestMemoryOf(1024ull << 20, 256ull << 20, 64ull << 30);
  EXPECT_TRUE(m.known);
  EXPECT_EQ(m.bytes, 768ull << 20);
  EXPECT_THAT(m.source, HasSubstr("executor.memory_budget_mib = 1024 MiB"));
  EXPECT_THAT(m.source, HasSubstr("minus 0.2 GiB of resident weights"));
}

// Regression: a 40 MiB budget was reported as "more than
// the 0.0 GiB a request may use".
TEST(RequestMemoryTest, RegressionASmallLimitIsReportedInMiB) {
  RequestMemory m;
  m.known = true;
  m.bytes = 40ull << 20;
  m.source = "executor.memory_budget_mib = 40 MiB";
  const Status s = CheckRequestMemory(300ull << 20, "output 300.0 MiB", {1, 24, 2, 4, 4}, m);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("needs about 300.0 MiB to decode"));
  EXPECT_THAT(s.message(), HasSubstr("more than the 40.0 MiB a request may use"));
  EXPECT_THAT(CheckRequestMemory(3ull << 30, "t", {1}, RequestMemory{true, 2ull << 30, "b"})
                  .message(),
              HasSubstr("needs about 3.0 GiB to decode (t; an estimate), more than the 2.0 GiB"));
}

TEST(RequestMemoryTest, HostTotalWithoutABudget) {
  const RequestMemory m = RequestMemoryOf(0, 1ull << 30, 24ull << 30);
  EXPECT_TRUE(m.known);
  EXPECT_EQ(m.bytes, 23ull << 30);
  EXPECT_THAT(m.source, HasSubstr("the host's 24.0 GiB (MemTotal"));
}

TEST(RequestMemoryTest, UnknownWithoutBudgetOrHostFigure) {
  EXPECT_FALSE(RequestMemoryOf(0, 1ull << 30, 0).known);
}

TEST(RequestMemoryTest, NothingLeftWhenWeightsFillTheBudget) {
  const RequestMemory m = RequestMemoryOf(1ull << 30, 2ull << 30, 0);
  EXPECT_TRUE(m.known);
  EXPECT_EQ(m.bytes, 0u);
}

TEST(RequestMemoryTest, HostTotalIsReadFromProc) {
  EXPECT_GT(HostMemoryTotalBytes(), 64ull << 20);  // any machine this runs on
}

// GPU ranks: the smallest device's total minus the weights on it, named.
TEST(RequestMemoryTest, GpuRanksAreBoundedByTheSmallestDevice) {
  const RequestMemory m = DeviceRequestMemory({{"cuda:0 GPU-a", 140ull << 30, 10ull << 30},
                                               {"cuda:1 GPU-b", 80ull << 30, 10ull << 30}});
  EXPECT_TRUE(m.known);
  EXPECT_EQ(m.bytes, 70ull << 30);
  EXPECT_EQ(m.source, "the device memory of cuda:1 GPU-b, 80.0 GiB minus 10.0 GiB of resident "
                      "weights");
}

TEST(RequestMemoryTest, GpuRanksWithAnUnreadableDeviceRefuseNothing) {
  EXPECT_FALSE(DeviceRequestMemory({}).known);
  EXPECT_FALSE(DeviceRequestMemory({{"cuda:0 GPU-a", 140ull << 30, 1}, {"cuda:1 GPU-b", 0, 1}})
                   .known);
}

}  // namespace
}  // namespace vaed::engine
