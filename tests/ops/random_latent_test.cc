#include "ops/common/random_latent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace vaed::ops {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseShapeTest, AcceptsCommaAndXSeparators) {
  auto a = ParseShape("16,32,34,80");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_THAT(*a, ElementsAre(16, 32, 34, 80));
  auto b = ParseShape("1x32x64x64");
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(*b, ElementsAre(1, 32, 64, 64));
  auto c = ParseShape("7");
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(*c, ElementsAre(7));
}

TEST(ParseShapeTest, RejectsMalformedDimsNamingThem) {
  for (const char* bad : {"", "1,,2", "1,2,", "a,2", "1,-2", "0,3", "1, 2", "2.5"}) {
    auto r = ParseShape(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("shape '"));
  }
}

TEST(ParseShapeTest, RejectsElementCountOverflow) {
  auto r = ParseShape("4294967296,4294967296");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("too many elements"));
}

TEST(ParseShapeTest, RejectsMoreThanEightDims) {
  EXPECT_FALSE(ParseShape("1,1,1,1,1,1,1,1,1").ok());
  EXPECT_TRUE(ParseShape("1,1,1,1,1,1,1,1").ok());
}

TEST(RandomNormalLatentTest, SameSeedGivesSameValues) {
  EXPECT_EQ(RandomNormalLatent(1001, 7), RandomNormalLatent(1001, 7));
}

TEST(RandomNormalLatentTest, DifferentSeedsGiveDifferentValues) {
  EXPECT_NE(RandomNormalLatent(64, 0), RandomNormalLatent(64, 1));
}

TEST(RandomNormalLatentTest, OddCountIsFilledCompletely) {
  const auto v = RandomNormalLatent(3, 5);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(RandomNormalLatent(4, 5)[2], v[2]);  // same stream, last value filled
}

TEST(RandomNormalLatentTest, IsApproximatelyStandardNormalAndFinite) {
  const auto v = RandomNormalLatent(200000, 42);
  double sum = 0, sum_sq = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  const double mean = sum / static_cast<double>(v.size());
  const double var = sum_sq / static_cast<double>(v.size()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
}

}  // namespace
}  // namespace vaed::ops
