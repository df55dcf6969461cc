#include "ops/vaectl/progress_format.h"

#include <gtest/gtest.h>

#include <string>

namespace vaed::vaectl {
namespace {

client::Progress VideoWindow(uint32_t done, uint32_t total, double fraction) {
  client::Progress p;
  p.stage = "video";
  p.unit = "window";
  p.done = done;
  p.total = total;
  p.tiles_done = done * 4;
  p.tiles_total = total * 4;
  p.fraction = fraction;
  p.elapsed_seconds = 1.2;
  p.eta_seconds = 1.2;
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
  client::Progress p;
  p.stage = "audio";
  p.unit = "audio";
  p.done = 1;
  p.total = 1;
  p.fraction = 1.0;
  p.elapsed_seconds = 0.5;
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
