// Which device each rank decodes on (daemon/engine/rank_devices.h): GPU
// ranks in device-UUID order, never by CUDA ordinal. Runs in every build
// with made-up device lists; ListCudaDevices() itself is checked on a GPU
// (scripts/gpu/check.sh).
#include "daemon/engine/rank_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/engine/cuda_devices.h"

namespace vaed::engine {
namespace {

using ::testing::HasSubstr;

constexpr char kA[] = "GPU-0a000000-0000-0000-0000-000000000000";
constexpr char kB[] = "GPU-5b000000-0000-0000-0000-000000000000";
constexpr char kC[] = "GPU-ff000000-0000-0000-0000-000000000000";

CudaDevice Device(int ordinal, const char* uuid) {
  return {.ordinal = ordinal,
          .uuid = *ParseDeviceUuid(uuid, "test"),
          .name = "NVIDIA H200",
          .total_bytes = uint64_t{141} << 30};
}

// As a daemon started with CUDA_VISIBLE_DEVICES=2,0,1 would see them:
// ordinals do not follow the UUIDs.
std::vector<CudaDevice> Visible() { return {Device(0, kC), Device(1, kA), Device(2, kB)}; }

std::vector<std::string> Uuids(const std::vector<CudaDevice>& devices) {
  std::vector<std::string> out;
  for (const CudaDevice& d : devices) out.push_back(FormatDeviceUuid(d.uuid));
  return out;
}

TEST(RankDevicesTest, WithoutAListRanksTakeTheSmallestUuidsInUuidOrder) {
  auto two = AssignRankDevices(Visible(), {}, 2);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_THAT(Uuids(*two), ::testing::ElementsAre(kA, kB));
  EXPECT_EQ((*two)[0].ordinal, 1);
  EXPECT_EQ((*two)[1].ordinal, 2);
  auto all = AssignRankDevices(Visible(), {}, 3);
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(Uuids(*all), ::testing::ElementsAre(kA, kB, kC));
}

TEST(RankDevicesTest, AListIsMatchedByUuidAndNumberedInUuidOrder) {
  // Listed in another order and spelled differently: still UUID order.
  auto r = AssignRankDevices(Visible(), {"ff000000000000000000000000000000", kA}, 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Uuids(*r), ::testing::ElementsAre(kA, kC));
  EXPECT_EQ((*r)[1].ordinal, 0);
}

TEST(RankDevicesTest, AUuidNotVisibleIsRefusedListingTheVisibleDevices) {
  auto r = AssignRankDevices({Device(0, kA)}, {kB}, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().field(), "executor.devices[0]");
  EXPECT_THAT(r.status().message(), HasSubstr("not a device visible to vaed"));
  EXPECT_THAT(r.status().message(), HasSubstr(std::string("0 ") + kA + " (NVIDIA H200)"));
}

TEST(RankDevicesTest, MoreRanksThanVisibleDevicesIsRefusedNamingGroupRanks) {
  auto r = AssignRankDevices(Visible(), {}, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "group.ranks");
  EXPECT_THAT(r.status().message(), HasSubstr("only 3 CUDA devices are visible"));
  auto none = AssignRankDevices({}, {}, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("visible: none"));
}

TEST(RankDevicesTest, ConfiguredListsAreCheckedWithoutADevice) {
  auto bad = ParseConfiguredDevices({kA, "cuda:1"}, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "executor.devices[1]");
  auto twice = ParseConfiguredDevices({kA, "GPU-0A000000-0000-0000-0000-000000000000"}, 2);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("listed twice"));
  auto count = ParseConfiguredDevices({kA, kB}, 3);
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().field(), "executor.devices");
  EXPECT_THAT(count.status().message(), HasSubstr("group.ranks is 3"));
  EXPECT_TRUE(ParseConfiguredDevices({}, 5).ok());
}

// Regression: the executor gave local rank r's NCCL
// communicator CUDA device r, while its models sit on its UUID-ordered
// device, so with CUDA_VISIBLE_DEVICES=2,0,1 (or a configured subset) every
// collective met tensors on another device. The communicator's device now
// comes from here: the rank's own device.
TEST(RankDevicesTest, RegressionNcclDeviceOfARankIsItsUuidOrderedDeviceNotItsIndex) {
  auto assigned = AssignRankDevices(Visible(), {kC, kA}, 2);
  ASSERT_TRUE(assigned.ok()) << assigned.status().ToString();
  std::vector<RankDevice> ranks;
  for (const CudaDevice& d : *assigned) ranks.push_back({.is_cuda = true, .cuda = d});
  EXPECT_EQ(CudaOrdinalOfRank(ranks, 0), 1);  // kA is visible as ordinal 1
  EXPECT_EQ(CudaOrdinalOfRank(ranks, 1), 0);  // kC is visible as ordinal 0
  EXPECT_EQ(CudaOrdinalOfRank(ranks, 2), -1);  // no such rank
  EXPECT_EQ(CudaOrdinalOfRank({RankDevice{}}, 0), -1);  // a CPU rank
}

TEST(RankDevicesTest, CpuRanksNeedNoDevice) {
  auto r = ResolveRankDevices(DeviceKind::kCpu, {}, 3);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  for (const RankDevice& d : *r) {
    EXPECT_FALSE(d.is_cuda);
    EXPECT_EQ(d.Describe(), "cpu");
  }
}

// The models of a rank are built on this device (ModelRegistry::Create):
// the ordinal this process sees, never the UUID order.
TEST(RankDevicesTest, TorchDeviceIsTheCpuOrTheOrdinalThisProcessSees) {
  EXPECT_EQ(RankDevice{}.TorchDevice(), c10::Device(c10::DeviceType::CPU));
  const RankDevice gpu{.is_cuda = true, .cuda = Device(2, kB)};
  EXPECT_EQ(gpu.TorchDevice(), c10::Device(c10::DeviceType::CUDA, 2));
  EXPECT_EQ(gpu.TorchDevice().str(), "cuda:2");
}

TEST(RankDevicesTest, CudaRanksInACpuBuildAreRefusedNamingExecutorDevice) {
  if (CudaDevicesAvailable()) GTEST_SKIP() << "a GPU build";
  auto r = ResolveRankDevices(DeviceKind::kCuda, {}, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().field(), "executor.device");
  EXPECT_THAT(r.status().message(), HasSubstr("needs a GPU build"));
}

}  // namespace
}  // namespace vaed::engine
