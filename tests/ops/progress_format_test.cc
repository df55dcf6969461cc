#include "ops/vaectl/progress_format.h"

#include <gtest/gtest.h>

namespace vaed::vaectl {
namespace {

v1::Progress VideoWindow(uint32_t done, uint32_t total, double fraction) {
  v1::Progress p;
  p.set_stage("video");
  p.set_unit("window");
  p.set_done(done);
  p.set_total(total);
  p.set_tiles_done(done * 4);
  p.set_tiles_total(total * 4);
  p.set_fraction(fraction);
  p.set_elapsed_seconds(1.2);
  p.set_eta_seconds(1.2);
  return p;
}

TEST(ParseProgressModeTest, AutoIsABarOnlyOnATerminalWithoutJson) {
  EXPECT_EQ(*ParseProgressMode("auto", true, false), ProgressMode::kBar);
  EXPECT_EQ(*ParseProgressMode("auto", false, false), ProgressMode::kNone);
  EXPECT_EQ(*ParseProgressMode("auto", true, true), ProgressMode::kNone);
  EXPECT_EQ(*ParseProgressMode("lines", false, true), ProgressMode::kLines);
  EXPECT_EQ(*ParseProgressMode("bar", false, false), ProgressMode::kBar);
  EXPECT_EQ(*ParseProgressMode("none", true, false), ProgressMode::kNone);
}

TEST(ParseProgressModeTest, RejectsUnknownModesNamingTheFlag) {
  auto mode = ParseProgressMode("fancy", true, false);
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mode.status().message().find("--progress 'fancy'"), std::string::npos);
}

TEST(FormatProgressLineTest, NamesStageUnitTilesAndTimes) {
  EXPECT_EQ(FormatProgressLine(VideoWindow(2, 4, 0.5)),
            "progress  50%  video window 2/4 (8/16 tiles)  1.20 s elapsed, ETA 1.20 s");
}

TEST(FormatProgressLineTest, AudioHasNoUnitCountAndDoneHasNoEta) {
  v1::Progress p;
  p.set_stage("audio");
  p.set_unit("audio");
  p.set_done(1);
  p.set_total(1);
  p.set_fraction(1.0);
  p.set_elapsed_seconds(0.5);
  EXPECT_EQ(FormatProgressLine(p), "progress 100%  audio  500.0 ms elapsed");
}

TEST(FormatProgressBarTest, FillsCellsInProportion) {
  EXPECT_EQ(FormatProgressBar(VideoWindow(1, 4, 0.25), 8),
            "[##------]  25% video window 1/4 (4/16 tiles)  1.20 s elapsed, ETA 1.20 s");
}

TEST(FormatProgressBarTest, ClampsTheFractionAndTheWidth) {
  EXPECT_EQ(FormatProgressBar(VideoWindow(4, 4, 1.5), 0).substr(0, 8), "[#] 100%");
}

}  // namespace
}  // namespace vaed::vaectl
