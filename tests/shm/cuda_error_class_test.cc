// The one classification of CUDA error codes (vaed/cuda_error_class.h).
// GPU builds also check, at compile time, that each named code is the
// runtime's number (shm/memory/src/cuda_status.cc).
#include "vaed/cuda_error_class.h"

#include <gtest/gtest.h>

namespace vaed {
namespace {

TEST(CudaErrorClassTest, ContextLosingCodesAreSticky) {
  for (int code : {214, 220, 700, 702, 709, 710, 714, 715, 716, 717, 718, 719}) {
    EXPECT_TRUE(IsStickyCudaErrorCode(code)) << code;
    EXPECT_EQ(CudaErrorCodeReason(code), ErrorReason::kStickyDevice) << code;
  }
}

TEST(CudaErrorClassTest, OutOfMemoryFeedsTheFailureLadderAndTheRestIsPlain) {
  EXPECT_EQ(CudaErrorCodeReason(cuda_code::kMemoryAllocation), ErrorReason::kOutOfMemory);
  EXPECT_FALSE(IsStickyCudaErrorCode(cuda_code::kMemoryAllocation));
  // Success, invalid value, not ready, no device, invalid handle, peer
  // access already enabled, not permitted, an unknown code.
  for (int code : {0, 1, 600, 100, 400, 704, 800, 999}) {
    EXPECT_FALSE(IsStickyCudaErrorCode(code)) << code;
    EXPECT_EQ(CudaErrorCodeReason(code), ErrorReason::kNone) << code;
  }
}

// One status code per cause, for the runtime's and the driver's errors
// alike (the client's driver check and the daemon's runtime adapter both
// use it).
TEST(CudaErrorClassTest, StatusCodesFollowTheCause) {
  EXPECT_EQ(CudaErrorCodeStatus(cuda_code::kMemoryAllocation), StatusCode::kResourceExhausted);
  for (int code : {1, 17, 101, 205, 400}) {
    EXPECT_EQ(CudaErrorCodeStatus(code), StatusCode::kInvalidArgument) << code;
  }
  // The environment's state (201: no usable context) is never a client's
  // invalid argument: a decode failing with one is not counted against it.
  for (int code : {3, 4, 34, 35, 46, 100, 201, 217, 800, 801, 803, 804}) {
    EXPECT_EQ(CudaErrorCodeStatus(code), StatusCode::kFailedPrecondition) << code;
  }
  for (int code : {700, 719, 999}) {
    EXPECT_EQ(CudaErrorCodeStatus(code), StatusCode::kInternal) << code;
  }
}

}  // namespace
}  // namespace vaed
