// Regression tests of bugs found and fixed in the H3 video planners
// (daemon/models/h3/video_tiling.h, video_vae.h): absurd latent shapes that
// overflowed the planning arithmetic or exhausted memory. Each test names
// its bug, the commit that fixed it and what failed before;
// tests/regressions/README.md lists them all.
//
// Built into the h3_tiling_test binary (tests/models/CMakeLists.txt), which
// links LibTorch already, so that the regression_test binary stays
// torch-free.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "daemon/models/h3/video_tiling.h"

namespace vaed::models::h3 {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// Bug (review): T + kTokenDrop overflowed int64 for T = INT64_MAX, and
// T = 1e9 built a plan of 2e8 windows before anything said no. Fixed in
// f0aa91a: PlanTemporal and OutputPixelFrames bound T first. (Was
// H3TilingTest.PlanTemporalRejectsHugeLatentFramesNamingValueAndBound.)
TEST(RegressionTest, H3PlanTemporalRejectsHugeLatentFramesNamingValueAndBound) {
  for (int64_t t : {kMaxPlannedLatentFrames + 1, int64_t{1'000'000'000}, kInt64Max - 2,
                    kInt64Max}) {
    SCOPED_TRACE("T = " + std::to_string(t));
    Result<TemporalPlan> plan = PlanTemporal(t);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr("T = " + std::to_string(t)));
    EXPECT_THAT(plan.status().message(),
                HasSubstr("3 <= T <= " + std::to_string(kMaxPlannedLatentFrames)));
    Result<int64_t> frames = OutputPixelFrames(t);
    ASSERT_FALSE(frames.ok());
    EXPECT_EQ(frames.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(frames.status().message(), plan.status().message());
  }
}

// Bug (review): height_latent * 16 overflowed; 2^60 + 16 latent cells
// wrapped to 256 px and were planned as one 256-px tile. Fixed in f0aa91a:
// PlanTileGrid bounds the latent extents before scaling them to pixels.
// (Was H3TilingTest.PlanTileGridRejectsHugeLatentExtentsBeforeScalingToPixels.)
TEST(RegressionTest, H3PlanTileGridRejectsHugeLatentExtentsBeforeScalingToPixels) {
  const int64_t wraps_to_256_px = (int64_t{1} << 60) + 16;
  for (int64_t h : {kMaxAxisExtentLatent + 1, wraps_to_256_px, kInt64Max, kInt64Min}) {
    SCOPED_TRACE("height_latent " + std::to_string(h));
    Result<TileGrid> grid = PlanTileGrid(h, 16);
    ASSERT_FALSE(grid.ok());
    EXPECT_EQ(grid.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(grid.status().message(), HasSubstr("height (latent cells " + std::to_string(h)));
    EXPECT_THAT(grid.status().message(), HasSubstr(std::to_string(kMaxAxisExtentLatent)));
  }
  for (int64_t w : {kMaxAxisExtentLatent + 1, wraps_to_256_px, kInt64Max, kInt64Min}) {
    SCOPED_TRACE("width_latent " + std::to_string(w));
    Result<TileGrid> grid = PlanTileGrid(16, w);
    ASSERT_FALSE(grid.ok());
    EXPECT_EQ(grid.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(grid.status().message(), HasSubstr("width (latent cells " + std::to_string(w)));
  }
  Result<TileGrid> grid = PlanTileGrid(kMaxAxisExtentLatent, 1);
  ASSERT_TRUE(grid.ok()) << grid.status().ToString();
  EXPECT_EQ(grid->rows.extent_px, kMaxAxisExtentPx);
  EXPECT_EQ(grid->num_tiles(), 87'381);
}

}  // namespace
}  // namespace vaed::models::h3
