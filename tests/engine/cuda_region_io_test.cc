// The CPU-runnable half of daemon/engine/cuda_region_io.h: RegionTensor's
// view (offset, dtype, shape, no copy) of memory lent by a client, on a CPU
// device here (on a GPU rank the same view gets a CUDA device). The device
// copies themselves are unrun without a device.
#include "daemon/engine/cuda_region_io.h"

#include <gtest/gtest.h>

#include <vector>

namespace vaed::engine {
namespace {

TEST(CudaRegionIoTest, RegionTensorViewsTheBytesAtTheOffsetWithoutCopying) {
  std::vector<float> memory(64);
  for (size_t i = 0; i < memory.size(); ++i) memory[i] = static_cast<float>(i);
  const TensorRef ref{7, 16 * sizeof(float), 12 * sizeof(float), DType::kFloat32, {3, 4}};
  torch::Tensor view = RegionTensor(memory.data(), ref, torch::kCPU);
  EXPECT_EQ(view.sizes().vec(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(view.scalar_type(), torch::kFloat);
  EXPECT_EQ(view[0][0].item<float>(), 16.0f);
  EXPECT_EQ(view[2][3].item<float>(), 27.0f);
  view[1][1] = -1.0f;  // a view: writes land in the lent memory
  EXPECT_EQ(memory[16 + 5], -1.0f);
}

TEST(CudaRegionIoTest, RegionTensorKeepsTheDtype) {
  std::vector<uint8_t> memory(32, 9);
  const TensorRef ref{1, 8, 24, DType::kUInt8, {2, 3, 4}};
  torch::Tensor view = RegionTensor(memory.data(), ref, torch::kCPU);
  EXPECT_EQ(view.scalar_type(), torch::kUInt8);
  EXPECT_EQ(view.numel(), 24);
  EXPECT_EQ(view.sum().item<int64_t>(), 24 * 9);
}

}  // namespace
}  // namespace vaed::engine
