#include "ops/bench/release_gate.h"

#include <algorithm>
#include <cmath>

#include "ops/common/text_format.h"
#include "vaed/tensor_ref.h"

namespace vaed::bench {
namespace {

using ops::FormatFixed;
using ops::HumanBytes;
using ops::Join;

// Where the H3 gate's shapes come from (docs/benchmarks.md "Release gate").
constexpr const char* kSupported =
    "supported size: vllm-omni #6030 benchmark outputs (spec 5.1; tiles 2.3)";
constexpr const char* kLargest =
    "largest published decode: vllm-omni #5948, latent 1x24x33x96x168 (spec 5.3)";
constexpr const char* kPortrait =
    "FL2VA: canvas follows the first/last frames; portrait of a supported size";
constexpr const char* kRefLogged =
    "Ref2VA generation logged in ComfyUI-MiniMax-H3-Turbo #3: video 1x24x72x40x30, "
    "audio 1x32x2x405";
constexpr const char* kRefAntirez = "Ref2VA 576x1024, 124 frames: antirez/h3.c #1 (spec 5.3)";

// The H3 gate. T2VA: every supported canvas at 5, 10, 20 and 30 s, and
// 2688x1536 where the limits allow; FL2VA: the portrait canvases at 5 s;
// Ref2VA: the two Ref2VA decodes found published. Width x height in
// pixels, all multiples of 32.
const std::vector<GateCell>& H3Cells() {
  static const std::vector<GateCell> kCells = {
      {GateTask::kT2va, 384, 224, 5, false, kSupported},
      {GateTask::kT2va, 384, 224, 10, false, kSupported},
      {GateTask::kT2va, 384, 224, 20, false, kSupported},
      {GateTask::kT2va, 384, 224, 30, false, kSupported},
      {GateTask::kT2va, 672, 384, 5, false, kSupported},
      {GateTask::kT2va, 672, 384, 10, false, kSupported},
      {GateTask::kT2va, 672, 384, 20, false, kSupported},
      {GateTask::kT2va, 672, 384, 30, false, kSupported},
      {GateTask::kT2va, 1024, 576, 5, false, kSupported},
      {GateTask::kT2va, 1024, 576, 10, false, kSupported},
      {GateTask::kT2va, 1024, 576, 20, false, kSupported},
      {GateTask::kT2va, 1024, 576, 30, false, kSupported},
      {GateTask::kT2va, 1344, 768, 5, false, kSupported},
      {GateTask::kT2va, 1344, 768, 10, false, kSupported},
      {GateTask::kT2va, 1344, 768, 20, false, kSupported},
      {GateTask::kT2va, 1344, 768, 30, false, kSupported},
      {GateTask::kT2va, 2688, 1536, 5, true, kLargest},
      {GateTask::kT2va, 2688, 1536, 10, true, kLargest},
      {GateTask::kT2va, 2688, 1536, 20, true, kLargest},
      {GateTask::kT2va, 2688, 1536, 30, true, kLargest},
      {GateTask::kFl2va, 224, 384, 5, false, kPortrait},
      {GateTask::kFl2va, 384, 672, 5, false, kPortrait},
      {GateTask::kFl2va, 576, 1024, 5, false, kPortrait},
      {GateTask::kFl2va, 768, 1344, 5, false, kPortrait},
      {GateTask::kFl2va, 1536, 2688, 5, true, kPortrait},
      {GateTask::kRef2va, 480, 640, 10, false, kRefLogged},
      {GateTask::kRef2va, 1024, 576, 5, false, kRefAntirez},
  };
  return kCells;
}

// "5s", "1.25s", "0.833s".
std::string SecondsText(double seconds) {
  if (seconds == std::floor(seconds)) return std::to_string(static_cast<int64_t>(seconds)) + "s";
  std::string s = FormatFixed(seconds, 3);
  while (s.back() == '0') s.pop_back();
  return s + "s";
}

std::string PadRight(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// The cell's label, and at another scale what the gate sent:
// "t2va 1344x768 5s   [1/5: 272x160 1s]".
std::string CellColumn(const GateCellResult& cell) {
  std::string s = PadRight(CellLabel(cell.cell), 19);
  if (cell.shape.scale != 1) {
    s += "  [1/" + std::to_string(cell.shape.scale) + ": " + std::to_string(cell.shape.width_px()) +
         "x" + std::to_string(cell.shape.height_px()) + " " + SecondsText(cell.shape.seconds) + "]";
  }
  return s;
}

std::string CriterionText(const char* name, const Criterion& c) {
  const char* verdict = c.verdict == Verdict::kFail ? "FAIL" : VerdictName(c.verdict);
  return std::string(name) + " " + verdict + " (" + c.figure + ")";
}

nlohmann::json CriterionJson(const Criterion& c) {
  return {{"verdict", VerdictName(c.verdict)}, {"figure", c.figure}};
}

nlohmann::json OrNull(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

nlohmann::json ModeJson(const GateModeResult& m) {
  nlohmann::json j = {
      {"mode", m.mode},
      {"verdict", VerdictName(m.verdict())},
      {"error", OrNull(m.error)},
      {"wall_s", m.wall_s ? nlohmann::json(*m.wall_s) : nlohmann::json(nullptr)},
      {"criteria",
       {{"exact", CriterionJson(m.exact)},
        {"av_lengths", CriterionJson(m.av_lengths)},
        {"no_fallback", CriterionJson(m.no_fallback)},
        {"memory", CriterionJson(m.memory)}}},
  };
  if (m.reply) {
    const v1::DecodeReply& r = *m.reply;
    j["frames"] = r.frames();
    j["audio_samples"] = r.has_audio() ? nlohmann::json(r.audio().samples()) : nlohmann::json(nullptr);
    j["peak_tensor_bytes"] = r.peak_tensor_bytes();
    j["peak_rss_bytes"] = r.peak_rss_bytes();
    j["peak_device_bytes"] = r.peak_device_bytes();
    j["memory_budget_bytes"] = r.memory_budget_bytes();
    j["stack_decision"] = r.has_tiling() ? r.tiling().stack_decision() : r.stack_decision();
    j["plan_decision"] = r.has_tiling() ? nlohmann::json(r.tiling().plan_decision())
                                        : nlohmann::json(nullptr);
    j["compile_decision"] = r.compile_decision();
  }
  return j;
}

}  // namespace

const char* GateTaskName(GateTask task) {
  switch (task) {
    case GateTask::kT2va:
      return "t2va";
    case GateTask::kFl2va:
      return "fl2va";
    case GateTask::kRef2va:
      return "ref2va";
  }
  return "?";
}

// Every gate by name: the one table --gate is checked and resolved against.
struct NamedGate {
  const char* name;
  const std::vector<GateCell>& (*cells)();
};
const std::vector<NamedGate>& Gates() {
  static const std::vector<NamedGate> kGates = {{"h3", &H3Cells}};
  return kGates;
}

const std::vector<std::string>& GateNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const NamedGate& g : Gates()) names.emplace_back(g.name);
    return names;
  }();
  return kNames;
}

const std::vector<GateCell>* FindGateCells(const std::string& name) {
  for (const NamedGate& g : Gates()) {
    if (name == g.name) return &g.cells();
  }
  return nullptr;
}

std::string CellLabel(const GateCell& cell) {
  return std::string(GateTaskName(cell.task)) + " " + std::to_string(cell.width_px) + "x" +
         std::to_string(cell.height_px) + " " + SecondsText(cell.seconds);
}

int64_t H3PixelFrames(int64_t latent_frames) {
  if (latent_frames < 3) return 0;
  static constexpr int64_t kExtra[5] = {0, 4, 8, 12, 13};
  const int64_t n = (latent_frames - 2) / 5;
  return 17 * n + 5 + kExtra[(latent_frames - 2) % 5];
}

int64_t H3LatentFramesCovering(int64_t pixel_frames) {
  // n = ceil((frames - 5) / 17), at least one 17-frame clip.
  const int64_t n = std::max<int64_t>(1, (pixel_frames - 5 + 16) / 17);
  return 5 * n + 2;
}

int64_t H3AudioLatentFrames(int64_t pixel_frames, double fps) {
  // The pipelines' Python round(frames / fps * 40): halves to even, as
  // std::nearbyint does in the default rounding mode.
  return static_cast<int64_t>(
      std::nearbyint(static_cast<double>(pixel_frames) / fps * kH3AudioLatentRate));
}

std::vector<int64_t> GateShape::latent_shape() const {
  return {1, kH3LatentChannels, latent_frames, height_latent, width_latent};
}

std::vector<int64_t> GateShape::audio_latent_shape() const {
  return {kH3AudioChannels, kH3AudioLatentChannels, audio_latent_frames};
}

std::vector<int64_t> GateShape::output_shape() const {
  return {pixel_frames, height_px(), width_px(), 3};
}

GateShape ShapeOf(const GateCell& cell, int64_t scale) {
  GateShape s;
  s.scale = scale;
  const int64_t height_cells = cell.height_px / kH3PixelsPerLatent;
  const int64_t width_cells = cell.width_px / kH3PixelsPerLatent;
  s.height_latent = (height_cells + scale - 1) / scale;
  s.width_latent = (width_cells + scale - 1) / scale;
  s.seconds = cell.seconds / static_cast<double>(scale);
  s.requested_pixel_frames = std::llround(s.seconds * kGateFps) + 1;
  s.latent_frames = H3LatentFramesCovering(s.requested_pixel_frames);
  s.pixel_frames = H3PixelFrames(s.latent_frames);
  s.audio_latent_frames = H3AudioLatentFrames(s.pixel_frames, kGateFps);
  s.audio_samples = s.audio_latent_frames * kH3SamplesPerAudioLatent;
  return s;
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kSkipped:
      return "skipped";
  }
  return "?";
}

const char* VerdictTag(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kSkipped:
      return "SKIP";
  }
  return "?";
}

Criterion CheckExact(const OutputComparison& c) {
  std::string sizes = HumanBytes(c.video_bytes) + " video";
  if (c.audio_bytes > 0) sizes += ", " + HumanBytes(c.audio_bytes) + " audio";
  if (c.is_reference) return {Verdict::kPass, "reference: " + sizes};
  if (!c.reference_available) {
    return {Verdict::kFail, "no reference: eager did not decode this cell"};
  }
  if (c.video_bytes_differing == 0 && c.audio_bytes_differing == 0) {
    return {Verdict::kPass, "identical to eager: " + sizes};
  }
  return {Verdict::kFail, std::to_string(c.video_bytes_differing) + " video and " +
                              std::to_string(c.audio_bytes_differing) +
                              " audio bytes differ from eager's (" + sizes + ")"};
}

Criterion CheckAvLengths(const GateShape& want, const v1::DecodeReply& r, bool audio_expected) {
  std::vector<std::string> wrong;
  const int64_t frames = static_cast<int64_t>(r.frames());
  if (frames != want.pixel_frames) {
    wrong.push_back(std::to_string(frames) + " frames, want " + std::to_string(want.pixel_frames));
  }
  if (std::abs(r.fps() - kGateFps) > 1e-9) {
    wrong.push_back("fps " + FormatFixed(r.fps(), 3) + ", want " + FormatFixed(kGateFps, 0));
  }
  const std::vector<int64_t> output(r.output_shape().begin(), r.output_shape().end());
  if (output != want.output_shape()) {
    wrong.push_back("output " + ShapeToString(output) + ", want " +
                    ShapeToString(want.output_shape()));
  }
  std::string figure = std::to_string(frames) + " f";
  if (!audio_expected) {
    figure += "; no audio (the model has none)";
  } else if (!r.has_audio()) {
    wrong.push_back("no audio in the reply");
  } else {
    const v1::AudioInfo& a = r.audio();
    const int64_t latent = static_cast<int64_t>(a.latent_frames());
    const int64_t samples = static_cast<int64_t>(a.samples());
    const int64_t channels = static_cast<int64_t>(a.channels());
    const int64_t rule = static_cast<int64_t>(r.expected_audio_latent_frames());
    if (latent != want.audio_latent_frames) {
      wrong.push_back("audio " + std::to_string(latent) + " latent frames, want " +
                      std::to_string(want.audio_latent_frames));
    }
    if (rule != want.audio_latent_frames) {
      wrong.push_back("the daemon's A/V rule expects " + std::to_string(rule) +
                      " audio latent frames, want " + std::to_string(want.audio_latent_frames));
    }
    if (channels != kH3AudioChannels) {
      wrong.push_back(std::to_string(channels) + " audio channels, want " +
                      std::to_string(kH3AudioChannels));
    }
    if (samples != want.audio_samples) {
      wrong.push_back(std::to_string(samples) + " samples per channel, want " +
                      std::to_string(want.audio_samples));
    }
    if (a.sample_rate_hz() != kH3SampleRateHz) {
      wrong.push_back(std::to_string(a.sample_rate_hz()) + " Hz, want " +
                      std::to_string(kH3SampleRateHz));
    } else {
      // The rule rounds to whole audio latent frames: the lengths differ
      // by at most half of one.
      const double skew = std::abs(static_cast<double>(frames) / kGateFps -
                                   static_cast<double>(samples) / kH3SampleRateHz);
      if (skew > 0.5 / kH3AudioLatentRate + 1e-9) {
        wrong.push_back("audio and video lengths differ by " + FormatFixed(skew, 4) + " s");
      }
    }
    figure += "; audio " + std::to_string(latent) + " lat = " + std::to_string(channels) + "x" +
              std::to_string(samples) + " smp";
  }
  if (!wrong.empty()) return {Verdict::kFail, Join(wrong, "; ") + " [" + figure + "]"};
  return {Verdict::kPass, figure};
}

Criterion CheckNoFallback(const v1::DecodeReply& r) {
  std::vector<std::string> fallbacks;
  if (r.has_tiling()) {
    for (const std::string& f : r.tiling().fallbacks()) fallbacks.push_back(f);
  }
  if (r.has_group() && !r.group().fallback().empty()) {
    fallbacks.push_back("group " + r.group().name() + ": " + r.group().fallback());
  }
  if (fallbacks.empty()) return {Verdict::kPass, "none"};
  return {Verdict::kFail,
          std::to_string(fallbacks.size()) + " fallback(s): " + Join(fallbacks, "; ")};
}

Criterion CheckMemory(const v1::DecodeReply& r, const MemoryLimits& limits) {
  const uint64_t host_peak = r.peak_tensor_bytes();
  const uint64_t device_peak = r.peak_device_bytes();
  if (host_peak == 0 && device_peak == 0) {
    return {Verdict::kFail, "not measured (peak_tensor_bytes and peak_device_bytes are 0)"};
  }
  bool ok = true;
  std::vector<std::string> parts;
  if (host_peak > 0) {
    uint64_t limit = r.memory_budget_bytes();
    std::string what = "budget";
    if (limit == 0) {
      limit = limits.host_total_bytes;
      what = "host memory";
    }
    if (limit == 0) {
      ok = false;
      parts.push_back("tensors " + HumanBytes(host_peak) + ", no budget or host memory known");
    } else {
      ok = ok && host_peak <= limit;
      parts.push_back("tensors " + HumanBytes(host_peak) + (host_peak <= limit ? " <= " : " > ") +
                      what + " " + HumanBytes(limit));
    }
  }
  if (device_peak > 0) {
    const uint64_t limit = limits.device_total_bytes;
    if (limit == 0) {
      ok = false;
      parts.push_back("device " + HumanBytes(device_peak) + ", device memory unknown");
    } else {
      ok = ok && device_peak <= limit;
      parts.push_back("device " + HumanBytes(device_peak) +
                      (device_peak <= limit ? " <= " : " > ") + "device memory " +
                      HumanBytes(limit));
    }
  }
  return {ok ? Verdict::kPass : Verdict::kFail, Join(parts, "; ")};
}

Verdict GateModeResult::verdict() const {
  if (!error.empty()) return Verdict::kFail;
  bool all_skipped = true;
  for (const Criterion* c : {&exact, &av_lengths, &no_fallback, &memory}) {
    if (c->verdict == Verdict::kFail) return Verdict::kFail;
    if (c->verdict != Verdict::kSkipped) all_skipped = false;
  }
  return all_skipped ? Verdict::kSkipped : Verdict::kPass;
}

GateModeResult EvaluateMode(const std::string& mode, const GateShape& want,
                            const v1::DecodeReply& r, const OutputComparison& c,
                            bool audio_expected, const MemoryLimits& limits, double wall_s) {
  GateModeResult m;
  m.mode = mode;
  m.wall_s = wall_s;
  m.exact = CheckExact(c);
  m.av_lengths = CheckAvLengths(want, r, audio_expected);
  m.no_fallback = CheckNoFallback(r);
  m.memory = CheckMemory(r, limits);
  m.reply = r;
  return m;
}

GateModeResult FailedMode(const std::string& mode, const std::string& error) {
  GateModeResult m;
  m.mode = mode;
  m.error = error;
  const Criterion failed{Verdict::kFail, "the decode failed"};
  m.exact = failed;
  m.av_lengths = failed;
  m.no_fallback = failed;
  m.memory = failed;
  return m;
}

Verdict GateCellResult::verdict() const {
  if (!skipped.empty()) return Verdict::kSkipped;
  if (!error.empty() || modes.empty()) return Verdict::kFail;
  for (const GateModeResult& m : modes) {
    if (m.verdict() == Verdict::kFail) return Verdict::kFail;
  }
  return Verdict::kPass;
}

void RecordPlanRefusal(const Status& refusal, GateCellResult* cell) {
  const bool memory = refusal.code() == StatusCode::kResourceExhausted;
  if (memory && cell->cell.optional) {
    cell->skipped = refusal.message();
    return;
  }
  cell->error = "the daemon refused to plan it: " + refusal.ToString();
  if (memory) cell->error += " (only cells marked 'where the limits allow' may be skipped)";
}

GateSummary Summarize(const std::vector<GateCellResult>& cells) {
  GateSummary s;
  s.cells = static_cast<int>(cells.size());
  for (const GateCellResult& cell : cells) {
    s.decodes += static_cast<int>(cell.modes.size());
    switch (cell.verdict()) {
      case Verdict::kPass:
        ++s.passed;
        break;
      case Verdict::kSkipped:
        ++s.skipped;
        s.skipped_cells.push_back(CellLabel(cell.cell));
        break;
      case Verdict::kFail: {
        ++s.failed;
        std::vector<std::string> why;
        if (!cell.error.empty()) why.push_back("could not run");
        for (const GateModeResult& m : cell.modes) {
          if (m.verdict() == Verdict::kFail) why.push_back(m.mode);
        }
        if (why.empty()) why.push_back("no mode ran");
        s.failed_cells.push_back(CellLabel(cell.cell) + " (" + Join(why, ", ") + ")");
        break;
      }
    }
  }
  s.verdict = s.failed > 0 || s.cells == 0 ? Verdict::kFail : Verdict::kPass;
  return s;
}

int GateExitCode(const GateSummary& s) { return s.verdict == Verdict::kPass ? 0 : 1; }

std::string FormatModeLine(const GateCellResult& cell, const GateModeResult& m) {
  std::string line = std::string(VerdictTag(m.verdict())) + "  " + CellColumn(cell) + "  " +
                     PadRight(m.mode, 16);
  if (!m.error.empty()) {
    line += "  error: " + m.error;
  } else {
    line += "  " + CriterionText("exact", m.exact) + "  " + CriterionText("a/v", m.av_lengths) +
            "  " + CriterionText("fallback", m.no_fallback) + "  " +
            CriterionText("memory", m.memory);
  }
  if (m.wall_s) line += "  " + FormatFixed(*m.wall_s, 3) + " s";
  return line;
}

std::string FormatCellLine(const GateCellResult& cell) {
  std::string line = std::string(VerdictTag(cell.verdict())) + "  " + CellColumn(cell) + "  " +
                     PadRight("all modes", 16) + "  ";
  if (!cell.skipped.empty()) return line + "skipped: " + cell.skipped;
  if (!cell.error.empty()) return line + "error: " + cell.error;
  return line + "error: no mode ran";
}

std::string FormatSummary(const std::string& gate, const GateSummary& s) {
  std::string out = "gate " + gate + ": " + VerdictTag(s.verdict) + "  " +
                    std::to_string(s.cells) + " cells: " + std::to_string(s.passed) +
                    " passed, " + std::to_string(s.failed) + " failed, " +
                    std::to_string(s.skipped) + " skipped; " + std::to_string(s.decodes) +
                    " decodes\n";
  for (const std::string& c : s.failed_cells) out += "  failed:  " + c + "\n";
  for (const std::string& c : s.skipped_cells) out += "  skipped: " + c + "\n";
  return out;
}

nlohmann::json GateCellToJson(const GateCellResult& cell) {
  const GateShape& s = cell.shape;
  nlohmann::json modes = nlohmann::json::array();
  for (const GateModeResult& m : cell.modes) modes.push_back(ModeJson(m));
  return {
      {"task", GateTaskName(cell.cell.task)},
      {"width_px", cell.cell.width_px},
      {"height_px", cell.cell.height_px},
      {"seconds", cell.cell.seconds},
      {"optional", cell.cell.optional},
      {"source", cell.cell.source},
      {"scaled",
       {{"scale", s.scale},
        {"width_px", s.width_px()},
        {"height_px", s.height_px()},
        {"seconds", s.seconds},
        {"latent_shape", s.latent_shape()},
        {"audio_latent_shape", s.audio_latent_shape()},
        {"pixel_frames", s.pixel_frames},
        {"audio_latent_frames", s.audio_latent_frames},
        {"audio_samples", s.audio_samples}}},
      {"verdict", VerdictName(cell.verdict())},
      {"skipped", OrNull(cell.skipped)},
      {"error", OrNull(cell.error)},
      {"modes", modes},
  };
}

nlohmann::json GateSummaryToJson(const GateSummary& s) {
  return {{"cells", s.cells},
          {"passed", s.passed},
          {"failed", s.failed},
          {"skipped", s.skipped},
          {"decodes", s.decodes},
          {"failed_cells", s.failed_cells},
          {"skipped_cells", s.skipped_cells},
          {"verdict", VerdictName(s.verdict)}};
}

}  // namespace vaed::bench
