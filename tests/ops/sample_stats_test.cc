#include "ops/common/sample_stats.h"

#include <gtest/gtest.h>

namespace vaed::ops {
namespace {

TEST(MedianTest, OddCountIsTheMiddleValue) {
  EXPECT_DOUBLE_EQ(Median({3.0}), 3.0);
  EXPECT_DOUBLE_EQ(Median({5.0, 1.0, 3.0}), 3.0);
}

TEST(MedianTest, EvenCountIsTheMeanOfTheTwoMiddleValues) {
  EXPECT_DOUBLE_EQ(Median({4.0, 1.0}), 2.5);
  EXPECT_DOUBLE_EQ(Median({1.0, 9.0, 2.0, 4.0}), 3.0);
}

}  // namespace
}  // namespace vaed::ops
