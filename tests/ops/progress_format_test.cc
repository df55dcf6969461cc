#include "ops/vaectl/progress_format.h"

#include <gtest/gtest.h>

#include <string>

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

// The mode `--progress name` means (the name parsed as the flag parses it).
ProgressMode Mode(const std::string& name, bool stderr_is_tty, bool json) {
  return ResolveProgressMode(ops::FromName(ProgressChoiceNames(), name).value(), stderr_is_tty, json);
}

TEST(ResolveProgressModeTest, AutoIsABarOnlyOnATerminalWithoutJson) {
  EXPECT_EQ(Mode("auto", true, false), ProgressMode::kBar);
  EXPECT_EQ(Mode("auto", false, false), ProgressMode::kNone);
  EXPECT_EQ(Mode("auto", true, true), ProgressMode::kNone);
  EXPECT_EQ(Mode("lines", false, true), ProgressMode::kLines);
  EXPECT_EQ(Mode("bar", false, false), ProgressMode::kBar);
  EXPECT_EQ(Mode("none", true, false), ProgressMode::kNone);
}

// The flag's error for "fancy" is checked in vaectl_cli_test.cc.
TEST(ProgressChoiceNamesTest, KnowsNoOtherModes) {
  EXPECT_FALSE(ops::FromName(ProgressChoiceNames(), "fancy").has_value());
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
