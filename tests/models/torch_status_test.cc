// Tests of the LibTorch error adapter (daemon/models/torch_status.h).
#include "daemon/models/torch_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <new>
#include <stdexcept>

namespace vaed::models {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(TorchStatusTest, FailedAllocationIsResourceExhausted) {
  Status s;
  try {
    // 4 PiB: more than any address space allows, so the allocator fails.
    torch::Tensor t = torch::empty({int64_t{1} << 50}, torch::kFloat);
    ADD_FAILURE() << "allocation unexpectedly succeeded";
  } catch (...) {
    s = CurrentTorchErrorStatus("decode");
  }
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_THAT(s.message(), StartsWith("decode: "));
  EXPECT_THAT(s.message(), HasSubstr("can't allocate memory"));
}

TEST(TorchStatusTest, OtherTorchErrorIsInternalWithoutBacktrace) {
  Status s;
  try {
    torch::Tensor t = torch::zeros({2, 3}).view({7});
  } catch (...) {
    s = CurrentTorchErrorStatus("reshape");
  }
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), StartsWith("reshape: shape '[7]' is invalid"));
  EXPECT_THAT(s.message(), Not(HasSubstr("frame #")));  // no C++ backtrace
}

// CUDA error codes (as LibTorch >= 2.8 reports them, c10::AcceleratorError)
// are classified by number, not text: out of memory feeds the failure
// ladder, context-killing errors make the daemon restart, the rest are
// plain internal errors.
TEST(TorchStatusTest, CudaErrorCodesAreClassifiedByNumber) {
  auto status_of = [](int code) {
    return RunTorch("decode", [code]() -> Status {
      throw c10::AcceleratorError({__func__, __FILE__, __LINE__}, code, "CUDA error");
    });
  };
  EXPECT_EQ(status_of(2).reason(), ErrorReason::kOutOfMemory);
  EXPECT_EQ(status_of(2).code(), StatusCode::kResourceExhausted);
  for (int sticky : {214, 220, 700, 702, 709, 710, 714, 715, 716, 717, 718, 719}) {
    EXPECT_EQ(status_of(sticky).reason(), ErrorReason::kStickyDevice) << sticky;
    EXPECT_EQ(status_of(sticky).code(), StatusCode::kInternal) << sticky;
  }
  for (int other : {1, 98, 100, 400, 701, 999}) {
    EXPECT_EQ(status_of(other).reason(), ErrorReason::kNone) << other;
  }
}

TEST(TorchStatusTest, StandardExceptionsAreTranslated) {
  Status s;
  try {
    throw std::bad_alloc();
  } catch (...) {
    s = CurrentTorchErrorStatus("x");
  }
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  try {
    throw std::runtime_error("boom");
  } catch (...) {
    s = CurrentTorchErrorStatus("x");
  }
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "x: boom");
  try {
    throw 42;
  } catch (...) {
    s = CurrentTorchErrorStatus("x");
  }
  EXPECT_EQ(s.message(), "x: unknown exception");
}

}  // namespace
}  // namespace vaed::models
