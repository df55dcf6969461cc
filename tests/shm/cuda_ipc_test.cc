// CUDA IPC registrations in every build: the argument checks that need no
// CUDA, and the CPU build's refusal. GPU builds also run
// cuda_ipc_device_test.cc.
#include "vaed/cuda_ipc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace vaed {
namespace {

constexpr char kUuid[] = "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf";

TEST(CudaIpcTest, OpenRejectsHandleOfWrongSizeNamingTheField) {
  auto r = CudaIpcMapping::Open(std::string(63, '\0'), 16, kUuid);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "register_region.cuda.ipc_handle");
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("has 63 bytes"));
}

TEST(CudaIpcTest, OpenRejectsMalformedUuidNamingTheField) {
  auto r = CudaIpcMapping::Open(std::string(64, '\0'), 16, "GPU-not-a-uuid");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "register_region.cuda.device_uuid");
}

TEST(CudaIpcTest, OpenRejectsZeroClaimedBytesNamingTheField) {
  auto r = CudaIpcMapping::Open(std::string(64, '\0'), 0, kUuid);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "register_region.cuda.size_bytes");
}

TEST(CudaIpcTest, ArgumentChecksReturnTheParsedUuid) {
  auto r = CheckCudaIpcArguments(std::string(64, '\0'), 16, kUuid);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FormatDeviceUuid(*r), kUuid);
}

// A well-formed registration in a CPU build: refused as unavailable.
TEST(CudaIpcTest, ACpuBuildRefusesWellFormedRegistrations) {
  if (CudaIpcAvailable()) GTEST_SKIP() << "a GPU build (cuda_ipc_device_test.cc covers it)";
  auto r = CudaIpcMapping::Open(std::string(64, '\0'), 16, kUuid);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "CUDA IPC regions need a GPU build (VAED_WITH_CUDA=ON)");
}

}  // namespace
}  // namespace vaed
