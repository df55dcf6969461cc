// The H3 video decode planner against the spec's worked geometries and the
// plans recorded from the official code (golden/h3/video_cases.json).
#include "daemon/models/h3/video_tiling.h"
#include "tests/common/test_paths.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vaed::models::h3 {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Geometry {
  int64_t extent_px;
  std::vector<int64_t> starts;
  std::vector<int64_t> overlaps;
};

// spec/h3_vae.md §2.3 "Worked geometries" table, verbatim.
const std::vector<Geometry>& SpecGeometries() {
  static const std::vector<Geometry> kTable = {
      {224, {0}, {}},
      {384, {0, 128}, {128}},
      {480, {0, 112, 224}, {144, 144}},
      {576, {0, 160, 320}, {96, 96}},
      {672, {0, 128, 272, 416}, {128, 112, 112}},
      {704, {0, 144, 288, 448}, {112, 112, 96}},
      {768, {0, 160, 336, 512}, {96, 80, 80}},
      {864, {0, 144, 288, 448, 608}, {112, 112, 96, 96}},
      {1024, {0, 192, 384, 576, 768}, {64, 64, 64, 64}},
      {1280, {0, 160, 320, 496, 672, 848, 1024}, {96, 96, 80, 80, 80, 80}},
      {1344, {0, 176, 352, 528, 704, 896, 1088}, {80, 80, 80, 80, 64, 64}},
  };
  return kTable;
}

TEST(H3TilingTest, SplitAxisMatchesSpecWorkedGeometries) {
  for (const Geometry& g : SpecGeometries()) {
    SCOPED_TRACE("extent " + std::to_string(g.extent_px));
    Result<AxisTiles> axis = SplitAxis(g.extent_px);
    ASSERT_TRUE(axis.ok()) << axis.status().ToString();
    EXPECT_THAT(axis->start_px, ElementsAreArray(g.starts));
    EXPECT_THAT(axis->overlap_px, ElementsAreArray(g.overlaps));
    // Every tile but a single short one is 256 px, and the last ends at the edge.
    const int64_t last = axis->tiles() - 1;
    EXPECT_EQ(axis->start_px[last] + axis->length_px[last], g.extent_px);
    if (axis->tiles() > 1) {
      for (int64_t len : axis->length_px) EXPECT_EQ(len, kTilePx);
    }
  }
}

TEST(H3TilingTest, TileCountsMatchPublishedCanvases) {
  // spec §2.3: 1344x768 -> 28 tiles, 1024x576 -> 15, 672x384 -> 8,
  // 384x224 -> 2, 1280x704 -> 28; §1.3: 480x864 -> 15.
  struct Canvas { int64_t w, h, tiles; };
  for (const Canvas& c : std::vector<Canvas>{
           {1344, 768, 28}, {1024, 576, 15}, {672, 384, 8}, {384, 224, 2}, {1280, 704, 28},
           {864, 480, 15}}) {
    Result<TileGrid> grid = PlanTileGrid(c.h / 16, c.w / 16);
    ASSERT_TRUE(grid.ok()) << grid.status().ToString();
    EXPECT_EQ(grid->num_tiles(), c.tiles) << c.w << "x" << c.h;
  }
}

TEST(H3TilingTest, GridTilesAreRowMajorWithLatentSlices) {
  // §1.3 walk-through: 480x864 -> rows [0:16],[7:23],[14:30];
  // cols [0:16],[9:25],[18:34],[28:44],[38:54].
  Result<TileGrid> grid = PlanTileGrid(30, 54);
  ASSERT_TRUE(grid.ok());
  ASSERT_EQ(grid->num_tiles(), 15);
  const std::vector<int64_t> row_starts = {0, 7, 14};
  const std::vector<int64_t> col_starts = {0, 9, 18, 28, 38};
  for (int64_t idx = 0; idx < grid->num_tiles(); ++idx) {
    TileRect t = grid->tile(idx);
    EXPECT_EQ(t.row, idx / 5);
    EXPECT_EQ(t.col, idx % 5);
    EXPECT_EQ(t.y_latent, row_starts[t.row]);
    EXPECT_EQ(t.x_latent, col_starts[t.col]);
    EXPECT_EQ(t.height_latent, 16);
    EXPECT_EQ(t.width_latent, 16);
  }
}

TEST(H3TilingTest, SplitAxisRejectsBadArguments) {
  EXPECT_THAT(SplitAxis(0).status().message(), HasSubstr("extent_px"));
  EXPECT_THAT(SplitAxis(256, 0).status().message(), HasSubstr("tile_px"));
  EXPECT_THAT(SplitAxis(512, 256, 256).status().message(), HasSubstr("overlap_min_px"));
  EXPECT_THAT(PlanTileGrid(0, 16).status().message(), HasSubstr("height"));
  EXPECT_THAT(PlanTileGrid(16, -1).status().message(), HasSubstr("width"));
}

TEST(H3TilingTest, FrameCountRuleClosedFormForT3To200) {
  // golden README §7: frames = 17*floor((T-2)/5) + 5 + [0,4,8,12,13][(T-2) mod 5].
  const int64_t kExtra[5] = {0, 4, 8, 12, 13};
  for (int64_t t = 3; t <= 200; ++t) {
    Result<int64_t> frames = OutputPixelFrames(t);
    ASSERT_TRUE(frames.ok()) << t;
    EXPECT_EQ(*frames, 17 * ((t - 2) / 5) + 5 + kExtra[(t - 2) % 5]) << "T=" << t;
  }
  // Published examples (spec §2.2, §1.3).
  for (auto [t, f] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 9}, {5, 17}, {6, 18}, {7, 22}, {12, 39}, {13, 43}, {31, 103}, {33, 111},
           {37, 124}, {62, 209}, {107, 362}}) {
    EXPECT_EQ(*OutputPixelFrames(t), f) << "T=" << t;
  }
}

TEST(H3TilingTest, RejectsTwoOrFewerLatentFramesStatingTheRule) {
  for (int64_t t : {-1, 0, 1, 2}) {
    Result<TemporalPlan> plan = PlanTemporal(t);
    ASSERT_FALSE(plan.ok()) << t;
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr("T = " + std::to_string(t)));
    EXPECT_THAT(plan.status().message(), HasSubstr("T >= 3"));
    EXPECT_THAT(plan.status().message(), HasSubstr("17k+5"));
  }
}

TEST(H3TilingTest, WindowsOfThirtyThreeLatentFrames) {
  // spec §2.2: T=33 pads 4 tokens (33..36); token 35 counts 1 frame, the
  // others 4: 13 frames dropped from 124.
  Result<TemporalPlan> plan = PlanTemporal(33);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pad_latent_frames, 4);
  EXPECT_EQ(plan->num_windows(), 7);
  EXPECT_EQ(plan->assembled_pixel_frames, 124);
  EXPECT_EQ(plan->pad_pixel_frames, 13);
  EXPECT_EQ(plan->output_pixel_frames, 111);
  EXPECT_EQ(plan->windows.back().stream_begin_latent, 30);
  EXPECT_EQ(plan->windows.back().stream_end_latent, 37);
  EXPECT_EQ(plan->windows.back().padding_latent_frames, 4);
}

// ------------------------------------------------- absurd inputs (review)
// (The two that overflowed before f0aa91a are regression tests in
// tests/regressions/h3_planner_regressions_test.cc.)

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

TEST(H3TilingTest, PlanTemporalRejectsNegativeLatentFramesStatingTheRule) {
  for (int64_t t : {int64_t{-1'000'000'000}, kInt64Min, kInt64Min + 1}) {
    SCOPED_TRACE("T = " + std::to_string(t));
    Result<TemporalPlan> plan = PlanTemporal(t);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr("T = " + std::to_string(t)));
    EXPECT_THAT(plan.status().message(), HasSubstr("T >= 3"));
    EXPECT_EQ(OutputPixelFrames(t).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(H3TilingTest, PlanTemporalAcceptsItsBoundAndOutputPixelFramesAgrees) {
  // golden README §7 closed form at T = kMaxPlannedLatentFrames.
  const int64_t kExtra[5] = {0, 4, 8, 12, 13};
  const int64_t t = kMaxPlannedLatentFrames;
  Result<TemporalPlan> plan = PlanTemporal(t);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->num_windows(), 209'715);
  EXPECT_EQ(plan->output_pixel_frames, 17 * ((t - 2) / 5) + 5 + kExtra[(t - 2) % 5]);
  EXPECT_EQ(plan->windows.back().stream_end_latent, plan->padded_latent_frames);
  ASSERT_TRUE(OutputPixelFrames(t).ok());
  EXPECT_EQ(*OutputPixelFrames(t), plan->output_pixel_frames);
  // OutputPixelFrames() no longer builds the plan: same answer everywhere.
  for (int64_t small = 3; small <= 200; ++small) {
    EXPECT_EQ(*OutputPixelFrames(small), PlanTemporal(small)->output_pixel_frames) << small;
  }
}

TEST(H3TilingTest, SplitAxisRejectsHugeExtentsNamingTheBound) {
  for (int64_t extent : {kMaxAxisExtentPx + 1, kInt64Max, kInt64Min}) {
    SCOPED_TRACE("extent " + std::to_string(extent));
    Result<AxisTiles> axis = SplitAxis(extent);
    ASSERT_FALSE(axis.ok());
    EXPECT_EQ(axis.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(axis.status().message(), HasSubstr("extent_px is " + std::to_string(extent)));
    EXPECT_THAT(axis.status().message(), HasSubstr(std::to_string(kMaxAxisExtentPx)));
  }
  // The bound itself splits normally: 87,381 official tiles, ending at the edge.
  Result<AxisTiles> axis = SplitAxis(kMaxAxisExtentPx);
  ASSERT_TRUE(axis.ok()) << axis.status().ToString();
  EXPECT_EQ(axis->tiles(), 87'381);
  EXPECT_EQ(axis->start_px.back() + axis->length_px.back(), kMaxAxisExtentPx);
}

TEST(H3TilingTest, SplitAxisRejectsSplitsNeedingTooManyTiles) {
  // Tile 2 px with overlap 1 px advances 1 px per tile: one tile per pixel.
  Result<AxisTiles> axis = SplitAxis(kMaxAxisExtentPx, 2, 1);
  ASSERT_FALSE(axis.ok());
  EXPECT_EQ(axis.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(axis.status().message(), HasSubstr("needs 16777215 tiles"));
  EXPECT_THAT(axis.status().message(), HasSubstr(std::to_string(kMaxTilesPerAxis)));
  // Exactly kMaxTilesPerAxis tiles is accepted.
  axis = SplitAxis(kMaxAxisExtentPx, 17, 1);
  ASSERT_TRUE(axis.ok()) << axis.status().ToString();
  EXPECT_EQ(axis->tiles(), kMaxTilesPerAxis);
  // A huge tile (no product of it is formed) is one tile of the axis.
  axis = SplitAxis(1000, kInt64Max, kInt64Max - 1);
  ASSERT_TRUE(axis.ok()) << axis.status().ToString();
  EXPECT_EQ(axis->tiles(), 1);
  EXPECT_EQ(axis->length_px[0], 1000);
}

// ---------------------------------------------------------------- golden

std::string GoldenPath(const std::string& name) {
  return std::string(VAED_SHARED_DIR) + "/golden/h3/" + name;
}

nlohmann::json LoadCases() {
  std::ifstream f(GoldenPath("video_cases.json"));
  return nlohmann::json::parse(f);
}

TEST(H3TilingTest, FrameCountRuleMatchesOfficialPlannerForT1To40) {
  if (!std::filesystem::exists(GoldenPath("video_cases.json"))) {
    GTEST_SKIP() << "shared golden data absent: " << GoldenPath("video_cases.json");
  }
  const nlohmann::json rule = LoadCases().at("_frame_count_rule_official_planner");
  ASSERT_EQ(rule.size(), 40u);
  for (const auto& [key, v] : rule.items()) {
    const int64_t t = std::stoll(key);
    Result<TemporalPlan> plan = PlanTemporal(t);
    if (v.at("frames").get<int64_t>() <= 0) {
      EXPECT_FALSE(plan.ok()) << "T=" << t << " is rejected by the official code";
      continue;
    }
    ASSERT_TRUE(plan.ok()) << "T=" << t << ": " << plan.status().ToString();
    EXPECT_EQ(plan->pad_latent_frames, v.at("pad_tokens").get<int64_t>()) << "T=" << t;
    EXPECT_EQ(plan->num_windows(), v.at("windows").get<int64_t>()) << "T=" << t;
    EXPECT_EQ(plan->output_pixel_frames, v.at("frames").get<int64_t>()) << "T=" << t;
  }
}

TEST(H3TilingTest, PlansMatchEveryGoldenCase) {
  if (!std::filesystem::exists(GoldenPath("video_cases.json"))) {
    GTEST_SKIP() << "shared golden data absent: " << GoldenPath("video_cases.json");
  }
  const nlohmann::json cases = LoadCases();
  int checked = 0;
  for (const auto& [name, c] : cases.items()) {
    if (!c.contains("latent_shape") || !c.contains("tiles")) continue;
    SCOPED_TRACE(name);
    const std::vector<int64_t> shape = c.at("latent_shape").get<std::vector<int64_t>>();
    Result<TemporalPlan> plan = PlanTemporal(shape[2]);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const nlohmann::json& fp = c.at("frame_plan");
    EXPECT_EQ(plan->assembled_pixel_frames, fp.at("total_frames_before_pad_drop").get<int64_t>());
    EXPECT_EQ(plan->pad_pixel_frames, fp.at("pad_frames_dropped").get<int64_t>());
    EXPECT_EQ(plan->output_pixel_frames, fp.at("output_frames").get<int64_t>());
    EXPECT_EQ(plan->pad_latent_frames, fp.at("pad_tokens").get<int64_t>());
    EXPECT_EQ(plan->padded_latent_frames, fp.at("padded_latent_T").get<int64_t>());
    ASSERT_EQ(plan->num_windows(), fp.at("num_windows").get<int64_t>());
    for (const nlohmann::json& w : c.at("windows")) {
      const TemporalWindow& mine = plan->windows[w.at("window").get<size_t>()];
      const auto range = w.at("latent_range_padded_stream").get<std::vector<int64_t>>();
      EXPECT_EQ(mine.stream_begin_latent, range[0]);
      EXPECT_EQ(mine.stream_end_latent, range[1]);
      EXPECT_EQ(mine.padding_latent_frames, w.at("padding_tokens_in_window").get<int64_t>());
      const auto main_out = w.at("main_out_frames").get<std::vector<int64_t>>();
      EXPECT_EQ(mine.main_out_begin, main_out[0]);
      EXPECT_EQ(main_out[1] - main_out[0], kMainPixelFrames);
      EXPECT_EQ(w.at("main_src_frames").get<std::vector<int64_t>>(),
                (std::vector<int64_t>{kMainBeginFrame, kMainEndFrame}));
      EXPECT_EQ(w.at("overlap_src_frames").get<std::vector<int64_t>>(),
                (std::vector<int64_t>{kTailBeginFrame, kWindowPixelFrames}));
    }
    Result<TileGrid> grid = PlanTileGrid(shape[3], shape[4]);
    ASSERT_TRUE(grid.ok()) << grid.status().ToString();
    const nlohmann::json& tiles = c.at("tiles");
    EXPECT_EQ(grid->num_tiles(), tiles.at("num_tiles").get<int64_t>());
    for (const auto& [axis_name, axis] :
         std::vector<std::pair<std::string, const AxisTiles*>>{{"y", &grid->rows},
                                                               {"x", &grid->cols}}) {
      const nlohmann::json& a = tiles.at(axis_name);
      EXPECT_EQ(axis->extent_px, a.at("canvas_px").get<int64_t>()) << axis_name;
      EXPECT_EQ(axis->start_px, a.at("tile_start_px").get<std::vector<int64_t>>()) << axis_name;
      EXPECT_EQ(axis->length_px, a.at("tile_len_px").get<std::vector<int64_t>>()) << axis_name;
      EXPECT_EQ(axis->overlap_px, a.at("overlaps_px").get<std::vector<int64_t>>()) << axis_name;
      const auto slices = a.at("latent_slices").get<std::vector<std::vector<int64_t>>>();
      ASSERT_EQ(static_cast<int64_t>(slices.size()), axis->tiles());
      for (int64_t i = 0; i < axis->tiles(); ++i) {
        EXPECT_EQ(axis->start_latent(i), slices[i][0]);
        EXPECT_EQ(axis->end_latent(i), slices[i][1]);
      }
    }
    // Decoder calls: one per tile per window (sequential path).
    EXPECT_EQ(grid->num_tiles() * plan->num_windows(), c.at("decoder_calls").get<int64_t>());
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

}  // namespace
}  // namespace vaed::models::h3
