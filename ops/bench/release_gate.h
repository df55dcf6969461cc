// Release gates of vaed_bench_matrix (`--gate h3`): a fixed matrix of DiT
// generation shapes (task, canvas, duration), each decoded once per decode
// mode through a daemon the benchmark starts (matrix/gate_runner.h), and
// the pass criteria every decode must meet. The cells are data
// (FindGateCells); the length rules and the criteria are pure functions of
// the daemon's replies, so tests check them on fabricated replies
// (tests/ops/bench_release_gate_test.cc). docs/benchmarks.md "Release gate"
// lists the cells, the criteria, the scale rule and how to run it.
//
// Units are in the names: canvases in pixels (_px), latent extents in
// latent cells (16 px each), pixel frames vs latent frames, seconds, audio
// latent frames (40 per second) vs samples (800 per audio latent frame, at
// 32000 Hz, per channel), bytes.
//
// Thread-safety: constant tables and pure functions.
#ifndef VAED_OPS_BENCH_RELEASE_GATE_H_
#define VAED_OPS_BENCH_RELEASE_GATE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::bench {

// The H3 rules the gate computes its expectations from (spec/h3_vae.md
// §1.1, §2.2, §3.1; docs/h3.md).
inline constexpr double kGateFps = 24.0;               // H3's native frame rate
inline constexpr int64_t kH3PixelsPerLatent = 16;      // spatial compression
inline constexpr int64_t kH3LatentChannels = 24;       // video latent channels
inline constexpr int64_t kH3AudioChannels = 2;         // stereo (left, right): what H3 generates
inline constexpr int64_t kH3AudioLatentChannels = 32;  // audio latent channels
inline constexpr double kH3AudioLatentRate = 40.0;     // audio latent frames per second
inline constexpr int64_t kH3SamplesPerAudioLatent = 800;
inline constexpr uint32_t kH3SampleRateHz = 32000;

// What a generation was asked for. The VAE sees the same kind of latents
// for all three (the conditioning stays in the DiT's token sequence); what
// differs is the canvas (docs/benchmarks.md "Release gate").
enum class GateTask {
  kT2va,    // text to video + audio
  kFl2va,   // first + last frame to video + audio
  kRef2va,  // references (images, video, audio) to video + audio
};

// "t2va", "fl2va", "ref2va".
const char* GateTaskName(GateTask task);

// One cell of a gate: a generation's canvas and duration.
struct GateCell {
  GateTask task = GateTask::kT2va;
  int64_t width_px = 0;   // multiples of 32 (the DiT's 2x2 latent patches)
  int64_t height_px = 0;
  double seconds = 0;  // asked-for duration at kGateFps
  // "Where the limits allow": the daemon may refuse the cell for memory
  // before decoding (kResourceExhausted when it plans the request); the
  // cell is then skipped with the daemon's message. A refusal of any other
  // cell fails the gate: a supported size must decode.
  bool optional = false;
  const char* source = "";  // where the shape comes from
};

// The gates there are, by name: {"h3"}.
const std::vector<std::string>& GateNames();

// The cells of gate `name`, in run order; nullptr for an unknown name. The
// table lives as long as the program.
const std::vector<GateCell>* FindGateCells(const std::string& name);

// "t2va 1344x768 5s" (width x height in pixels, seconds as asked).
std::string CellLabel(const GateCell& cell);

// --- The H3 length rules.

// Pixel frames the official planner decodes from `latent_frames`:
// 17 floor((T - 2) / 5) + 5 + [0, 4, 8, 12, 13][(T - 2) mod 5] for T >= 3
// (spec §2.2, golden README §7: 37 -> 124, 33 -> 111, 512 -> 1739); 0 for
// T < 3, which the official planner rejects.
int64_t H3PixelFrames(int64_t latent_frames);

// The shortest on-grid latent length T = 5n + 2 (n >= 1) whose 17n + 5
// pixel frames cover `pixel_frames` (the pipelines' pad mode, spec §1.3:
// 121 -> 37, 124 frames; 22 and fewer -> 7, 22 frames).
int64_t H3LatentFramesCovering(int64_t pixel_frames);

// Audio latent frames that go with `pixel_frames` video frames at `fps`:
// round_half_even(pixel_frames / fps * 40), the A/V length rule (spec §3.1,
// docs/h3.md: 22 -> 37, 124 -> 207, 209 -> 348). Precondition: fps > 0.
int64_t H3AudioLatentFrames(int64_t pixel_frames, double fps);

// A cell as the gate sends it, after the scale rule (ShapeOf).
struct GateShape {
  int64_t scale = 1;          // 1 = the cell as listed
  int64_t height_latent = 0;  // latent cells
  int64_t width_latent = 0;
  double seconds = 0;                  // the cell's seconds / scale
  int64_t requested_pixel_frames = 0;  // round(seconds * 24) + 1
  int64_t latent_frames = 0;           // H3LatentFramesCovering(requested)
  int64_t pixel_frames = 0;            // H3PixelFrames(latent_frames)
  int64_t audio_latent_frames = 0;     // H3AudioLatentFrames(pixel_frames, 24)
  int64_t audio_samples = 0;           // per channel: 800 x audio latent frames

  int64_t height_px() const { return height_latent * kH3PixelsPerLatent; }
  int64_t width_px() const { return width_latent * kH3PixelsPerLatent; }
  // The video latent: float32 [1, 24, latent_frames, h, w].
  std::vector<int64_t> latent_shape() const;
  // The audio latent: float32 [2, 32, audio_latent_frames] (stereo).
  std::vector<int64_t> audio_latent_shape() const;
  // The decoded frames: uint8 NHWC [pixel_frames, height_px, width_px, 3].
  std::vector<int64_t> output_shape() const;
};

// `cell` at 1/`scale` (--gate-scale): each canvas side in latent cells
// divided by `scale` and rounded up, the duration divided by `scale`, and
// the lengths from the rules above (so the shortest clip is 7 latent
// frames, 22 pixel frames). Scale 1 is the cell as listed. Precondition:
// scale >= 1.
GateShape ShapeOf(const GateCell& cell, int64_t scale);

// --- Pass criteria.

enum class Verdict { kPass, kFail, kSkipped };

// "pass", "fail", "skipped" (the JSON spelling).
const char* VerdictName(Verdict v);
// "PASS", "FAIL", "SKIP" (the first column of the text lines).
const char* VerdictTag(Verdict v);

// One criterion of one decode: its verdict and the figure it was decided
// on ("124 f; audio 207 lat = 2x165600 smp").
struct Criterion {
  Verdict verdict = Verdict::kPass;
  std::string figure;
};

// One mode's output bytes against eager's (the reference).
struct OutputComparison {
  bool is_reference = false;         // this is eager's own output
  bool reference_available = false;  // eager decoded this cell
  uint64_t video_bytes = 0;
  uint64_t video_bytes_differing = 0;
  uint64_t audio_bytes = 0;  // 0: no audio decoded
  uint64_t audio_bytes_differing = 0;
};

// Exactness vs eager: pass when every byte of the video and the audio
// output equals eager's (eager itself: "reference"); fail when any
// differs, or when eager did not decode (nothing to compare with).
Criterion CheckExact(const OutputComparison& c);

// A/V lengths: the reply's pixel frames, frame rate and output shape are
// those of `want`; with `audio_expected` (the model decodes audio) its
// audio has 2 channels, want.audio_latent_frames latent frames (also the
// daemon's expected_audio_latent_frames), want.audio_samples samples per
// channel at 32000 Hz, and lasts what the video lasts within half an audio
// latent frame (1/80 s). Without audio only the video is checked.
Criterion CheckAvLengths(const GateShape& want, const v1::DecodeReply& r, bool audio_expected);

// No fallback: the reply lists no failure-ladder or compiled-plan fallback
// (tiling.fallbacks) and no group fallback (group.fallback).
Criterion CheckNoFallback(const v1::DecodeReply& r);

// What the daemon's memory may be measured against besides its budget.
struct MemoryLimits {
  uint64_t host_total_bytes = 0;    // the host's MemTotal; 0 = unknown
  uint64_t device_total_bytes = 0;  // the smallest CUDA rank device's memory; 0 = none
};

// Memory: the request's peak tensor bytes (peak_tensor_bytes: LibTorch host
// tensors, weights and plans included) within the daemon's memory budget
// (memory_budget_bytes), or the host's memory when it has none; on GPU
// ranks also peak_device_bytes within the device's memory. Fails when the
// reply measured neither peak (both 0) or no limit is known.
Criterion CheckMemory(const v1::DecodeReply& r, const MemoryLimits& limits);

// --- Results.

// One mode of one cell.
struct GateModeResult {
  std::string mode;
  std::string error;  // the decode failed: the daemon's reason
  std::optional<double> wall_s;  // client wall seconds of the decode
  Criterion exact;
  Criterion av_lengths;
  Criterion no_fallback;
  Criterion memory;
  std::optional<v1::DecodeReply> reply;  // when it decoded

  // kFail when the decode failed or a criterion failed; kSkipped when
  // every criterion was skipped; kPass otherwise.
  Verdict verdict() const;
};

// Every criterion of a decoded mode.
GateModeResult EvaluateMode(const std::string& mode, const GateShape& want,
                            const v1::DecodeReply& r, const OutputComparison& c,
                            bool audio_expected, const MemoryLimits& limits, double wall_s);

// A mode whose decode failed with `error`: every criterion fails.
GateModeResult FailedMode(const std::string& mode, const std::string& error);

// One cell: skipped, failed as a whole, or its modes.
struct GateCellResult {
  GateCell cell;
  GateShape shape;
  std::string skipped;  // the daemon's refusal of an optional cell
  std::string error;    // the cell could not run at all
  std::vector<GateModeResult> modes;

  // kSkipped when skipped; kFail when it could not run, ran no mode or a
  // mode failed; kPass otherwise.
  Verdict verdict() const;
};

// Records the daemon's refusal to plan the cell: an optional cell refused
// with kResourceExhausted (its memory estimate exceeds what a request may
// use) is skipped with the daemon's message; any other refusal is the
// cell's error.
void RecordPlanRefusal(const Status& refusal, GateCellResult* cell);

// The counts of a run, by cell.
struct GateSummary {
  int cells = 0;
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  int decodes = 0;                         // modes that ran
  std::vector<std::string> failed_cells;   // "t2va 1344x768 5s (stacked, auto)"
  std::vector<std::string> skipped_cells;  // "t2va 2688x1536 30s"
  // kFail when a cell failed or there were no cells; kPass otherwise
  // (skipped cells do not fail a gate).
  Verdict verdict = Verdict::kPass;
};
GateSummary Summarize(const std::vector<GateCellResult>& cells);

// The program's exit code: 0 for kPass, 1 otherwise.
int GateExitCode(const GateSummary& s);

// "PASS  t2va 1344x768 5s  eager  exact pass (reference)  a/v pass (...)
// fallback pass (none)  memory pass (...)  3.214 s": one line per decoded
// (cell, mode), no newline. The cell's scaled canvas and duration follow
// its label when the scale is not 1.
std::string FormatModeLine(const GateCellResult& cell, const GateModeResult& m);
// The one line of a cell that ran no mode: "SKIP  <cell>  all modes
// skipped: <message>" or "FAIL  <cell>  all modes  error: <why>".
std::string FormatCellLine(const GateCellResult& cell);
// The summary: one verdict line, then one line per failed cell; each line
// ends with '\n'.
std::string FormatSummary(const std::string& gate, const GateSummary& s);

// {task, width_px, height_px, seconds, optional, source, scaled {scale,
// width_px, height_px, seconds, latent_shape, audio_latent_shape,
// pixel_frames, audio_latent_frames, audio_samples}, verdict, skipped,
// error, modes [{mode, verdict, error, wall_s, criteria {exact, av_lengths,
// no_fallback, memory: {verdict, figure}}, and when decoded frames,
// audio_samples, peak_tensor_bytes, peak_rss_bytes, peak_device_bytes,
// memory_budget_bytes, stack_decision, plan_decision, compile_decision}]}.
// Seconds and bytes; null where not measured.
nlohmann::json GateCellToJson(const GateCellResult& cell);
// {cells, passed, failed, skipped, decodes, failed_cells, skipped_cells,
// verdict}.
nlohmann::json GateSummaryToJson(const GateSummary& s);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_RELEASE_GATE_H_
