// Moving request tensors between client host regions and a rank's device
// (daemon/engine/region_io.h): CPU ranks copy nothing and count nothing; a
// rank on another device gets the latent copied there, counted as a host
// copy. `meta` stands for a GPU: a device every LibTorch build has.
#include "daemon/engine/region_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/shm/scratch_segment.h"

namespace vaed::engine {
namespace {

using ::testing::HasSubstr;

TEST(RegionIoTest, ACpuRankUsesTheHostLatentAsIsAndCountsNoCopy) {
  const torch::Tensor host = torch::arange(24, torch::kFloat).view({2, 3, 4});
  HostCopies copies;
  auto on_rank = ToRankDevice(host, torch::kCPU, "latent", &copies);
  ASSERT_TRUE(on_rank.ok()) << on_rank.status().ToString();
  EXPECT_EQ(on_rank->data_ptr(), host.data_ptr()) << "a CPU rank must not copy the latent";
  auto back = ToHost(*on_rank, "output", &copies);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->data_ptr(), host.data_ptr());
  EXPECT_EQ(copies.count, 0u);
  EXPECT_EQ(copies.bytes, 0u);
}

TEST(RegionIoTest, ALatentForAnotherDeviceIsCopiedThereAndCounted) {
  const torch::Tensor host = torch::zeros({2, 3, 4}, torch::kFloat);
  HostCopies copies;
  auto on_rank = ToRankDevice(host, torch::Device(torch::kMeta), "latent", &copies);
  ASSERT_TRUE(on_rank.ok()) << on_rank.status().ToString();
  EXPECT_EQ(on_rank->device(), torch::Device(torch::kMeta));
  EXPECT_EQ(on_rank->sizes().vec(), host.sizes().vec());
  EXPECT_EQ(copies.count, 1u);
  EXPECT_EQ(copies.bytes, 2u * 3 * 4 * sizeof(float));
  auto audio =
      ToRankDevice(torch::zeros({1, 32, 5}), torch::Device(torch::kMeta), "audio_latent", &copies);
  ASSERT_TRUE(audio.ok()) << audio.status().ToString();
  EXPECT_EQ(copies.count, 2u);
  EXPECT_EQ(copies.bytes, (24u + 160u) * sizeof(float));
}

// A device tensor must come back through ToHost() first: its data pointer
// is not host memory.
TEST(RegionIoTest, CopyOutRefusesATensorThatIsNotInHostMemory) {
  shm_test::ScratchSegment segment("region-io", shm_test::PageBytes());
  ASSERT_TRUE(segment.ok());
  auto region = HostRegion::Open(segment.name(), shm_test::PageBytes());
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  const torch::Tensor on_device =
      torch::empty({4}, torch::TensorOptions().dtype(torch::kFloat).device(torch::kMeta));
  const TensorRef ref{
      .region_id = 1, .offset = 0, .size = 16, .dtype = DType::kFloat32, .shape = {4}};
  const Status s = CopyOut(on_device, ref, **region, "output");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("decoded output is on meta"));
  // The host tensor goes through.
  const torch::Tensor host = torch::full({4}, 2.5f);
  ASSERT_TRUE(CopyOut(host, ref, **region, "output").ok());
  float written[4];
  std::memcpy(written, (*region)->data(), sizeof(written));
  EXPECT_EQ(written[3], 2.5f);
}

}  // namespace
}  // namespace vaed::engine
