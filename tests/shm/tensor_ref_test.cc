#include "vaed/tensor_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace vaed {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

TEST(ContiguousBytesTest, MultipliesElementsByDTypeSize) {
  Result<uint64_t> r = ContiguousBytes(DType::kFloat32, {16, 32, 34, 80}, "latent");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 16u * 32 * 34 * 80 * 4);
  Result<uint64_t> u8 = ContiguousBytes(DType::kUInt8, {2, 3}, "frames");
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ(*u8, 6u);
}

TEST(ContiguousBytesTest, ScalarIsOneElement) {
  Result<uint64_t> r = ContiguousBytes(DType::kBFloat16, {}, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2u);
}

TEST(ContiguousBytesTest, ZeroDimGivesZeroBytes) {
  Result<uint64_t> r = ContiguousBytes(DType::kFloat32, {4, 0, kI64Max}, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
}

TEST(ContiguousBytesTest, RejectsElementCountOverflowingInt64) {
  Result<uint64_t> r = ContiguousBytes(DType::kUInt8, {kI64Max / 2 + 1, 2}, "latent");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("latent"));
}

TEST(ContiguousBytesTest, RejectsByteCountOverflowingUint64) {
  // 2^62 elements fit in int64, but 2^62 * 4 bytes = 2^64 does not fit in uint64.
  Result<uint64_t> r = ContiguousBytes(DType::kFloat32, {int64_t{1} << 62}, "output");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("output"));
}

TEST(ContiguousBytesTest, AcceptsLargestByteCountThatFits) {
  Result<uint64_t> r = ContiguousBytes(DType::kFloat32, {(int64_t{1} << 62) - 1}, "output");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, ((uint64_t{1} << 62) - 1) * 4);
}

TEST(ContiguousBytesTest, RejectsNegativeDimNamingIt) {
  Result<uint64_t> r = ContiguousBytes(DType::kFloat32, {16, -1, 4}, "latent");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("latent.shape[1] is -1"));
}

TEST(ContiguousBytesTest, RejectsUnknownDType) {
  Result<uint64_t> r = ContiguousBytes(DType::kUnknown, {4}, "latent");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CheckByteRangeTest, AcceptsExactFit) {
  EXPECT_TRUE(CheckByteRange(96, 4, 100, "t").ok());
  EXPECT_TRUE(CheckByteRange(0, 100, 100, "t").ok());
}

TEST(CheckByteRangeTest, AcceptsEmptyRangeAtEnd) {
  EXPECT_TRUE(CheckByteRange(100, 0, 100, "t").ok());
}

TEST(CheckByteRangeTest, RejectsOffsetPastEnd) {
  Status s = CheckByteRange(101, 0, 100, "latent");
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("latent"));
  EXPECT_THAT(s.message(), HasSubstr("101"));
}

TEST(CheckByteRangeTest, RejectsRangeOneBytePastEnd) {
  EXPECT_EQ(CheckByteRange(97, 4, 100, "t").code(), StatusCode::kOutOfRange);
}

TEST(CheckByteRangeTest, RejectsOffsetPlusSizeThatWrapsUint64) {
  // 8 + (2^64 - 4) wraps to 4, which a naive `offset + size <= region` accepts.
  EXPECT_EQ(CheckByteRange(8, kU64Max - 3, 100, "t").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(CheckByteRange(kU64Max, 2, 100, "t").code(), StatusCode::kOutOfRange);
}

TEST(CheckByteRangeTest, AcceptsWholeUint64Region) {
  EXPECT_TRUE(CheckByteRange(kU64Max - 1, 1, kU64Max, "t").ok());
}

TEST(ParseDTypeTest, AcceptsVaedAndSafetensorsNames) {
  EXPECT_EQ(*ParseDType("float32"), DType::kFloat32);
  EXPECT_EQ(*ParseDType("BF16"), DType::kBFloat16);
  EXPECT_EQ(*ParseDType("U8"), DType::kUInt8);
}

TEST(ParseDTypeTest, RejectsUnknownName) {
  EXPECT_EQ(ParseDType("float64").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vaed
