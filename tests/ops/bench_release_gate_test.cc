// The release gate of vaed_bench_matrix (ops/bench/release_gate.h): its
// cells, the H3 length rules it expects, and its pass criteria on
// fabricated daemon replies. No daemon: the gate's run itself is
// vaed_bench_matrix --gate h3 (docs/benchmarks.md "Release gate").
#include "ops/bench/release_gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace vaed::bench {
namespace {

const GateCell& FindCell(GateTask task, int64_t width_px, int64_t height_px, double seconds) {
  const std::vector<GateCell>& cells = *FindGateCells("h3");
  auto it = std::find_if(cells.begin(), cells.end(), [&](const GateCell& c) {
    return c.task == task && c.width_px == width_px && c.height_px == height_px &&
           c.seconds == seconds;
  });
  if (it == cells.end()) {
    ADD_FAILURE() << "no cell " << GateTaskName(task) << " " << width_px << "x" << height_px << " "
                  << seconds << " s";
    return cells.front();
  }
  return *it;
}

// A reply that follows every rule for `want`: frames, fps, output shape,
// stereo audio by the A/V rule, no fallbacks, 100 MiB of peak tensors, no
// budget.
v1::DecodeReply RuleAbidingReply(const GateShape& want) {
  v1::DecodeReply r;
  r.set_frames(static_cast<uint32_t>(want.pixel_frames));
  r.set_fps(24);
  for (int64_t d : want.output_shape()) r.add_output_shape(d);
  r.set_expected_audio_latent_frames(static_cast<uint64_t>(want.audio_latent_frames));
  v1::AudioInfo* a = r.mutable_audio();
  a->set_channels(2);
  a->set_latent_frames(static_cast<uint64_t>(want.audio_latent_frames));
  a->set_samples(static_cast<uint64_t>(want.audio_samples));
  a->set_sample_rate_hz(32000);
  r.mutable_tiling()->set_tile_rows(3);
  r.set_peak_tensor_bytes(100ull << 20);
  return r;
}

constexpr uint64_t kGiB = 1ull << 30;

GateShape Shape1344x768Of5s() { return ShapeOf(FindCell(GateTask::kT2va, 1344, 768, 5), 1); }

// --- The cells.

TEST(ReleaseGateCellsTest, H3GateHasEveryCanvasAtEveryDurationAndTheFl2vaAndRef2vaShapes) {
  ASSERT_NE(FindGateCells("h3"), nullptr);
  const std::vector<GateCell>& cells = *FindGateCells("h3");
  EXPECT_EQ(cells.size(), 27u);
  std::set<std::tuple<int64_t, int64_t, double>> t2va;
  int fl2va = 0;
  int ref2va = 0;
  for (const GateCell& c : cells) {
    SCOPED_TRACE(CellLabel(c));
    EXPECT_EQ(c.width_px % 32, 0) << "the DiT's canvas is a multiple of 32 px";
    EXPECT_EQ(c.height_px % 32, 0);
    EXPECT_STRNE(c.source, "");
    if (c.task == GateTask::kT2va) t2va.insert({c.width_px, c.height_px, c.seconds});
    if (c.task == GateTask::kFl2va) {
      ++fl2va;
      EXPECT_GT(c.height_px, c.width_px) << "FL2VA cells are the portrait canvases";
    }
    if (c.task == GateTask::kRef2va) ++ref2va;
  }
  for (auto [w, h] : std::vector<std::pair<int64_t, int64_t>>{
           {384, 224}, {672, 384}, {1024, 576}, {1344, 768}, {2688, 1536}}) {
    for (double s : {5.0, 10.0, 20.0, 30.0}) {
      const std::tuple<int64_t, int64_t, double> key(w, h, s);
      EXPECT_EQ(t2va.count(key), 1u) << "t2va " << w << "x" << h << " " << s << " s";
    }
  }
  EXPECT_EQ(t2va.size(), 20u);
  EXPECT_EQ(fl2va, 5);
  EXPECT_EQ(ref2va, 2);
}

TEST(ReleaseGateCellsTest, OnlyThe2688x1536CanvasesRunWhereTheLimitsAllow) {
  for (const GateCell& c : *FindGateCells("h3")) {
    const bool largest = std::max(c.width_px, c.height_px) == 2688;
    EXPECT_EQ(c.optional, largest) << CellLabel(c);
  }
}

TEST(ReleaseGateCellsTest, UnknownGateHasNoCells) {
  EXPECT_EQ(FindGateCells("h4"), nullptr);
  EXPECT_EQ(GateNames(), std::vector<std::string>{"h3"});
}

TEST(ReleaseGateCellsTest, CellLabelNamesTaskCanvasAndSeconds) {
  EXPECT_EQ(CellLabel(FindCell(GateTask::kFl2va, 768, 1344, 5)), "fl2va 768x1344 5s");
}

// --- The H3 length rules (spec/h3_vae.md §2.2, §3.1; golden README §7).

TEST(H3LengthRulesTest, PixelFramesFollowTheOfficialPlanner) {
  const std::vector<std::pair<int64_t, int64_t>> cases = {
      {3, 9},     {5, 17},    {6, 18},    {7, 22},    {12, 39},   {13, 43},   {31, 103},
      {33, 111},  {37, 124},  {62, 209},  {107, 362}, {512, 1739}};
  for (auto [latent, frames] : cases) EXPECT_EQ(H3PixelFrames(latent), frames) << "T=" << latent;
  EXPECT_EQ(H3PixelFrames(2), 0);
}

TEST(H3LengthRulesTest, LatentFramesAreTheShortestOnGridLengthCoveringTheFrames) {
  EXPECT_EQ(H3LatentFramesCovering(121), 37);  // 5 s + 1 frame aligns up to 124 frames
  EXPECT_EQ(H3LatentFramesCovering(124), 37);
  EXPECT_EQ(H3LatentFramesCovering(125), 42);
  EXPECT_EQ(H3LatentFramesCovering(22), 7);
  EXPECT_EQ(H3LatentFramesCovering(23), 12);
  EXPECT_EQ(H3LatentFramesCovering(1), 7);  // the shortest clip
}

TEST(H3LengthRulesTest, AudioLatentFramesFollowTheAvRule) {
  EXPECT_EQ(H3AudioLatentFrames(22, 24), 37);
  EXPECT_EQ(H3AudioLatentFrames(124, 24), 207);
  EXPECT_EQ(H3AudioLatentFrames(209, 24), 348);
  EXPECT_EQ(H3AudioLatentFrames(362, 24), 603);
  EXPECT_EQ(H3AudioLatentFrames(243, 24), 405);
}

TEST(H3LengthRulesTest, FullScaleShapeOf1344x768At5Seconds) {
  const GateShape s = Shape1344x768Of5s();
  EXPECT_EQ(s.latent_shape(), (std::vector<int64_t>{1, 24, 37, 48, 84}));
  EXPECT_EQ(s.pixel_frames, 124);
  EXPECT_EQ(s.output_shape(), (std::vector<int64_t>{124, 768, 1344, 3}));
  EXPECT_EQ(s.audio_latent_shape(), (std::vector<int64_t>{2, 32, 207}));
  EXPECT_EQ(s.audio_samples, 165600);
}

TEST(H3LengthRulesTest, DurationsBecomeOnGridLatentLengths) {
  const std::vector<std::tuple<double, int64_t, int64_t, int64_t>> cases = {
      {5, 37, 124, 207}, {10, 72, 243, 405}, {20, 142, 481, 802}, {30, 217, 736, 1227}};
  for (auto [seconds, latent, frames, audio] : cases) {
    const GateShape s = ShapeOf(FindCell(GateTask::kT2va, 384, 224, seconds), 1);
    EXPECT_EQ(s.latent_frames, latent) << seconds << " s";
    EXPECT_EQ(s.pixel_frames, frames) << seconds << " s";
    EXPECT_EQ(s.audio_latent_frames, audio) << seconds << " s";
  }
}

TEST(H3LengthRulesTest, LoggedRef2vaGenerationHasTheShapesTheGateSends) {
  // ComfyUI-MiniMax-H3-Turbo #3: video [1, 24, 72, 40, 30], audio [1, 32, 2, 405].
  const GateShape s = ShapeOf(FindCell(GateTask::kRef2va, 480, 640, 10), 1);
  EXPECT_EQ(s.latent_shape(), (std::vector<int64_t>{1, 24, 72, 40, 30}));
  EXPECT_EQ(s.audio_latent_shape(), (std::vector<int64_t>{2, 32, 405}));
}

TEST(H3LengthRulesTest, ScaleDividesCanvasSidesAndDuration) {
  const GateShape s = ShapeOf(FindCell(GateTask::kT2va, 1344, 768, 5), 5);
  EXPECT_EQ(s.latent_shape(), (std::vector<int64_t>{1, 24, 12, 10, 17}));  // 1 s -> 25 -> 39 f
  EXPECT_EQ(s.pixel_frames, 39);
  EXPECT_EQ(s.audio_latent_frames, 65);
  const GateShape big = ShapeOf(FindCell(GateTask::kT2va, 2688, 1536, 30), 5);
  EXPECT_EQ(big.width_px(), 544);   // 168 cells / 5, rounded up
  EXPECT_EQ(big.height_px(), 320);  // 96 cells / 5, rounded up
  EXPECT_EQ(big.latent_frames, 47);
  EXPECT_EQ(big.pixel_frames, 158);
  const GateShape tiny = ShapeOf(FindCell(GateTask::kT2va, 384, 224, 5), 64);
  EXPECT_EQ(tiny.latent_shape(), (std::vector<int64_t>{1, 24, 7, 1, 1}));
}

// --- The criteria.

TEST(GateCriteriaTest, AvLengthsPassOnARuleAbidingReply) {
  const GateShape want = Shape1344x768Of5s();
  const Criterion c = CheckAvLengths(want, RuleAbidingReply(want), true);
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.figure;
  EXPECT_NE(c.figure.find("124 f"), std::string::npos) << c.figure;
  EXPECT_NE(c.figure.find("2x165600"), std::string::npos) << c.figure;
}

TEST(GateCriteriaTest, AvLengthsFailOnAFrameCountOff) {
  const GateShape want = Shape1344x768Of5s();
  v1::DecodeReply r = RuleAbidingReply(want);
  r.set_frames(123);
  const Criterion c = CheckAvLengths(want, r, true);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.figure.find("123 frames, want 124"), std::string::npos) << c.figure;
}

TEST(GateCriteriaTest, AvLengthsFailOnShortOrMissingAudio) {
  const GateShape want = Shape1344x768Of5s();
  v1::DecodeReply short_audio = RuleAbidingReply(want);
  short_audio.mutable_audio()->set_samples(static_cast<uint64_t>(want.audio_samples - 800));
  EXPECT_EQ(CheckAvLengths(want, short_audio, true).verdict, Verdict::kFail);
  v1::DecodeReply mono = RuleAbidingReply(want);
  mono.mutable_audio()->set_channels(1);
  EXPECT_EQ(CheckAvLengths(want, mono, true).verdict, Verdict::kFail);
  v1::DecodeReply none = RuleAbidingReply(want);
  none.clear_audio();
  EXPECT_EQ(CheckAvLengths(want, none, true).verdict, Verdict::kFail);
}

TEST(GateCriteriaTest, AvLengthsFailWhenTheDaemonsRuleDisagrees) {
  const GateShape want = Shape1344x768Of5s();
  v1::DecodeReply r = RuleAbidingReply(want);
  r.set_expected_audio_latent_frames(206);
  EXPECT_EQ(CheckAvLengths(want, r, true).verdict, Verdict::kFail);
}

TEST(GateCriteriaTest, AvLengthsCheckOnlyTheVideoWhenTheModelHasNoAudio) {
  const GateShape want = Shape1344x768Of5s();
  v1::DecodeReply r = RuleAbidingReply(want);
  r.clear_audio();
  const Criterion c = CheckAvLengths(want, r, false);
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.figure;
  EXPECT_NE(c.figure.find("no audio"), std::string::npos) << c.figure;
}

TEST(GateCriteriaTest, NoFallbackFailsOnLadderStepsAndGroupFallbacks) {
  const GateShape want = Shape1344x768Of5s();
  EXPECT_EQ(CheckNoFallback(RuleAbidingReply(want)).verdict, Verdict::kPass);
  v1::DecodeReply ladder = RuleAbidingReply(want);
  ladder.mutable_tiling()->add_fallbacks("4 -> 2 tiles per call: out of memory");
  const Criterion c = CheckNoFallback(ladder);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.figure.find("4 -> 2 tiles per call"), std::string::npos) << c.figure;
  v1::DecodeReply group = RuleAbidingReply(want);
  group.mutable_group()->set_fallback("collective gather failed; decoded on rank 0 alone");
  EXPECT_EQ(CheckNoFallback(group).verdict, Verdict::kFail);
}

TEST(GateCriteriaTest, MemoryIsMeasuredAgainstTheBudgetWhenThereIsOne) {
  v1::DecodeReply r = RuleAbidingReply(Shape1344x768Of5s());
  r.set_memory_budget_bytes(1 * kGiB);
  EXPECT_EQ(CheckMemory(r, {.host_total_bytes = 64 * kGiB}).verdict, Verdict::kPass);
  r.set_peak_tensor_bytes(2 * kGiB);
  const Criterion c = CheckMemory(r, {.host_total_bytes = 64 * kGiB});
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.figure.find("budget"), std::string::npos) << c.figure;
}

TEST(GateCriteriaTest, MemoryWithoutBudgetIsMeasuredAgainstTheHost) {
  v1::DecodeReply r = RuleAbidingReply(Shape1344x768Of5s());
  EXPECT_EQ(CheckMemory(r, {.host_total_bytes = 64 * kGiB}).verdict, Verdict::kPass);
  r.set_peak_tensor_bytes(65 * kGiB);
  EXPECT_EQ(CheckMemory(r, {.host_total_bytes = 64 * kGiB}).verdict, Verdict::kFail);
  EXPECT_EQ(CheckMemory(r, {}).verdict, Verdict::kFail) << "no limit known";
}

TEST(GateCriteriaTest, MemoryFailsWhenTheReplyMeasuredNoPeak) {
  v1::DecodeReply r = RuleAbidingReply(Shape1344x768Of5s());
  r.set_peak_tensor_bytes(0);
  EXPECT_EQ(CheckMemory(r, {.host_total_bytes = 64 * kGiB}).verdict, Verdict::kFail);
}

TEST(GateCriteriaTest, DevicePeakIsMeasuredAgainstTheDevice) {
  v1::DecodeReply r = RuleAbidingReply(Shape1344x768Of5s());
  r.set_peak_device_bytes(100 * kGiB);
  EXPECT_EQ(CheckMemory(r, {.host_total_bytes = 64 * kGiB, .device_total_bytes = 139 * kGiB})
                .verdict,
            Verdict::kPass);
  EXPECT_EQ(CheckMemory(r, {.host_total_bytes = 64 * kGiB, .device_total_bytes = 80 * kGiB})
                .verdict,
            Verdict::kFail);
}

TEST(GateCriteriaTest, ExactPassesOnlyWhenEveryByteEqualsEagers) {
  OutputComparison c{.is_reference = false,
                     .reference_available = true,
                     .video_bytes = 1000,
                     .video_bytes_differing = 0,
                     .audio_bytes = 400,
                     .audio_bytes_differing = 0};
  EXPECT_EQ(CheckExact(c).verdict, Verdict::kPass);
  c.video_bytes_differing = 1;
  EXPECT_EQ(CheckExact(c).verdict, Verdict::kFail);
  c.video_bytes_differing = 0;
  c.audio_bytes_differing = 4;
  EXPECT_EQ(CheckExact(c).verdict, Verdict::kFail);
  c.audio_bytes_differing = 0;
  c.reference_available = false;
  EXPECT_EQ(CheckExact(c).verdict, Verdict::kFail) << "nothing to compare with";
  EXPECT_EQ(CheckExact({.is_reference = true, .reference_available = true}).verdict,
            Verdict::kPass);
}

// --- Cells, lines and the summary.

GateCellResult PassingCell(const GateCell& cell, int64_t scale) {
  GateCellResult result;
  result.cell = cell;
  result.shape = ShapeOf(cell, scale);
  const v1::DecodeReply r = RuleAbidingReply(result.shape);
  const MemoryLimits limits{.host_total_bytes = 64 * kGiB};
  result.modes.push_back(EvaluateMode("eager", result.shape, r,
                                      {.is_reference = true, .reference_available = true}, true,
                                      limits, 1.5));
  result.modes.push_back(EvaluateMode("stacked", result.shape, r,
                                      {.reference_available = true, .video_bytes = 10}, true,
                                      limits, 1.25));
  return result;
}

TEST(GateResultsTest, OptionalCellRefusedForMemoryIsSkippedWithTheDaemonsMessage) {
  GateCellResult cell;
  cell.cell = FindCell(GateTask::kT2va, 2688, 1536, 30);
  cell.shape = ShapeOf(cell.cell, 1);
  const std::string message =
      "latent [1, 24, 217, 96, 168] needs about 83.2 GiB to decode (...; an estimate), more "
      "than the 21.9 GiB a request may use here (host MemTotal)";
  RecordPlanRefusal(ResourceExhausted(message), &cell);
  EXPECT_EQ(cell.verdict(), Verdict::kSkipped);
  EXPECT_EQ(cell.skipped, message);
  const std::string line = FormatCellLine(cell);
  EXPECT_EQ(line.rfind("SKIP  t2va 2688x1536 30s", 0), 0u) << line;
  EXPECT_NE(line.find("skipped: " + message), std::string::npos) << line;

  const GateSummary s = Summarize({PassingCell(FindCell(GateTask::kT2va, 384, 224, 5), 1), cell});
  EXPECT_EQ(s.passed, 1);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.verdict, Verdict::kPass);
  EXPECT_EQ(GateExitCode(s), 0);
}

TEST(GateResultsTest, SupportedCellRefusedForMemoryFailsTheGate) {
  GateCellResult cell;
  cell.cell = FindCell(GateTask::kT2va, 1344, 768, 30);
  cell.shape = ShapeOf(cell.cell, 1);
  RecordPlanRefusal(ResourceExhausted("needs about 20.5 GiB"), &cell);
  EXPECT_EQ(cell.verdict(), Verdict::kFail);
  const GateSummary s = Summarize({cell});
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(GateExitCode(s), 1);
}

TEST(GateResultsTest, OtherRefusalsFailEvenAnOptionalCell) {
  GateCellResult cell;
  cell.cell = FindCell(GateTask::kT2va, 2688, 1536, 5);
  cell.shape = ShapeOf(cell.cell, 1);
  RecordPlanRefusal(InvalidArgument("audio latent has 206 frames; the A/V rule wants 207"), &cell);
  EXPECT_EQ(cell.verdict(), Verdict::kFail);
}

TEST(GateResultsTest, AFailingModeFailsItsCellAndTheGate) {
  GateCellResult cell = PassingCell(FindCell(GateTask::kT2va, 1344, 768, 5), 1);
  EXPECT_EQ(cell.verdict(), Verdict::kPass);
  cell.modes.push_back(FailedMode("compiled", "internal: plan build failed"));
  EXPECT_EQ(cell.verdict(), Verdict::kFail);
  const GateSummary s = Summarize({cell});
  EXPECT_EQ(s.verdict, Verdict::kFail);
  ASSERT_EQ(s.failed_cells.size(), 1u);
  EXPECT_EQ(s.failed_cells[0], "t2va 1344x768 5s (compiled)");
  EXPECT_EQ(GateExitCode(s), 1);
  EXPECT_NE(FormatSummary("h3", s).find("FAIL"), std::string::npos);
}

TEST(GateResultsTest, AGateWithoutCellsFails) {
  EXPECT_EQ(Summarize({}).verdict, Verdict::kFail);
}

TEST(GateResultsTest, ModeLineNamesCellModeAndEveryCriterionWithItsFigure) {
  const GateCellResult cell = PassingCell(FindCell(GateTask::kT2va, 1344, 768, 5), 1);
  const std::string line = FormatModeLine(cell, cell.modes[1]);
  EXPECT_EQ(line.rfind("PASS  t2va 1344x768 5s", 0), 0u) << line;
  for (const char* part : {"stacked", "exact pass (identical to eager", "a/v pass (124 f",
                           "fallback pass (none)", "memory pass (tensors 100.0 MiB <= host",
                           "1.250 s"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " in: " << line;
  }
}

TEST(GateResultsTest, ModeLineShowsWhatAScaledCellSent) {
  const GateCellResult cell = PassingCell(FindCell(GateTask::kT2va, 1344, 768, 5), 5);
  const std::string line = FormatModeLine(cell, cell.modes[0]);
  EXPECT_NE(line.find("t2va 1344x768 5s"), std::string::npos) << line;
  EXPECT_NE(line.find("[1/5: 272x160 1s]"), std::string::npos) << line;
  EXPECT_NE(line.find("a/v pass (39 f"), std::string::npos) << line;
}

TEST(GateResultsTest, CellJsonCarriesTheScaledShapesAndEveryCriterion) {
  const GateCellResult cell = PassingCell(FindCell(GateTask::kRef2va, 480, 640, 10), 1);
  const nlohmann::json j = GateCellToJson(cell);
  EXPECT_EQ(j["task"], "ref2va");
  EXPECT_EQ(j["verdict"], "pass");
  EXPECT_EQ(j["scaled"]["latent_shape"], nlohmann::json({1, 24, 72, 40, 30}));
  ASSERT_EQ(j["modes"].size(), 2u);
  EXPECT_EQ(j["modes"][1]["criteria"]["exact"]["verdict"], "pass");
  EXPECT_EQ(j["modes"][1]["frames"], 243);
  EXPECT_TRUE(j["skipped"].is_null());
}

}  // namespace
}  // namespace vaed::bench
