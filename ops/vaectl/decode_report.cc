#include "ops/vaectl/decode_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "ops/common/text_format.h"
#include "vaed/tensor_ref.h"
#include "vaed/wire.h"

namespace vaed::vaectl {

Result<ProgressMode> ParseProgressMode(const std::string& text, bool stderr_is_tty, bool json) {
  if (text == "auto") return stderr_is_tty && !json ? ProgressMode::kBar : ProgressMode::kNone;
  if (text == "bar") return ProgressMode::kBar;
  if (text == "lines") return ProgressMode::kLines;
  if (text == "none") return ProgressMode::kNone;
  return InvalidArgument("--progress '" + text + "' is not one of auto, bar, lines, none");
}

namespace {

// "video window 2/4 (8/16 tiles)", "video frames 4/16", "audio".
std::string ProgressWhat(const v1::Progress& p) {
  std::string what = p.stage();
  if (p.unit() != "audio") {
    what += " " + p.unit() + " " + std::to_string(p.done()) + "/" + std::to_string(p.total());
  }
  if (p.tiles_total() > 0) {
    what += " (" + std::to_string(p.tiles_done()) + "/" + std::to_string(p.tiles_total()) +
            " tiles)";
  }
  return what;
}

std::string ProgressTimes(const v1::Progress& p) {
  std::string out = ops::HumanDuration(p.elapsed_seconds()) + " elapsed";
  if (p.fraction() < 1.0) out += ", ETA " + ops::HumanDuration(p.eta_seconds());
  return out;
}

int Percent(const v1::Progress& p) {
  return static_cast<int>(std::clamp(p.fraction(), 0.0, 1.0) * 100.0 + 1e-9);
}

}  // namespace

std::string FormatProgressLine(const v1::Progress& p) {
  char pct[8];
  std::snprintf(pct, sizeof(pct), "%3d%%", Percent(p));
  return std::string("progress ") + pct + "  " + ProgressWhat(p) + "  " + ProgressTimes(p);
}

std::string FormatProgressBar(const v1::Progress& p, int width) {
  width = std::max(width, 1);
  const int filled = static_cast<int>(std::clamp(p.fraction(), 0.0, 1.0) * width + 1e-9);
  char pct[8];
  std::snprintf(pct, sizeof(pct), "%3d%%", Percent(p));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '-') + "] " + pct + " " +
         ProgressWhat(p) + "  " + ProgressTimes(p);
}
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsDirectoryTarget(const std::string& out) {
  std::error_code ec;
  return EndsWith(out, "/") || fs::is_directory(out, ec);
}

std::string InDirectory(const std::string& dir, const std::string& file) {
  return (fs::path(dir) / file).string();
}

// A comparison tensor from `file`, or nullptr with a note when it is absent
// (only if `note_if_absent`) or does not match the decode.
const TensorEntry* ComparableTensor(const SafetensorsFile& file, const std::string& key,
                                    uint64_t decoded_values, bool note_if_absent,
                                    std::vector<std::string>* notes) {
  const TensorEntry* entry = file.Find(key);
  if (entry == nullptr) {
    if (note_if_absent) notes->push_back("tensor '" + key + "' is not in the latent file");
    return nullptr;
  }
  if (entry->dtype != DType::kUInt8) {
    notes->push_back("tensor '" + key + "' is " + std::string(DTypeName(entry->dtype)) +
                     ", not uint8; not compared");
    return nullptr;
  }
  if (entry->nbytes != decoded_values) {
    notes->push_back("tensor '" + key + "' " + ShapeToString(entry->shape) + " holds " +
                     std::to_string(entry->nbytes) + " values, the decode " +
                     std::to_string(decoded_values) + "; not compared");
    return nullptr;
  }
  return entry;
}

nlohmann::json Db(double db) {
  // JSON has no infinity; identical frames report null, like "not compared".
  return std::isfinite(db) ? nlohmann::json(db) : nlohmann::json(nullptr);
}

std::string DbText(double db) { return ops::FormatFixed(db, 2) + " dB"; }

nlohmann::json FiniteOrNull(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

// "1 frame", "22 frames".
std::string Plural(uint64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// "24", "23.976".
std::string FormatFps(double fps) {
  std::string s = ops::FormatFixed(fps, 3);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// The reply's group report: null when it has none (audio-only).
nlohmann::json GroupJson(const v1::DecodeReply& r) {
  if (!r.has_group()) return nullptr;
  const v1::GroupReport& g = r.group();
  nlohmann::json ranks = nlohmann::json::array();
  for (const v1::RankReport& k : g.ranks()) {
    ranks.push_back({{"rank", k.rank()},
                     {"tiles", k.tiles()},
                     {"decode_seconds", k.decode_seconds()},
                     {"started_unix", k.started_unix()},
                     {"finished_unix", k.finished_unix()}});
  }
  return {{"name", g.name()},
          {"size", g.size()},
          {"generation", g.generation()},
          {"ranks", std::move(ranks)},
          {"imbalance", FiniteOrNull(g.imbalance())},
          {"fallback", g.fallback()}};
}

// "1.24e-06": audio differences span many decades.
std::string Scientific(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", x);
  return buf;
}

const char* WavFormatName(ops::WavSampleFormat format) {
  return format == ops::WavSampleFormat::kFloat32 ? "float32" : "pcm16";
}

// A reply for a request without a video latent (audio-only) has no
// latent shape.
bool HasVideo(const v1::DecodeReply& r) { return r.latent_shape_size() > 0; }

nlohmann::json SanityJson(const v1::OutputSanity& s) {
  return {{"nonfinite", s.nonfinite()},
          {"constant", s.constant()},
          {"rms", FiniteOrNull(s.rms())},
          {"peak_abs", FiniteOrNull(s.peak_abs())},
          {"clipped_fraction", FiniteOrNull(s.clipped_fraction())}};
}

}  // namespace

Result<OutputPlan> PlanOutput(const std::string& format, const std::string& out,
                              const std::string& stem, int64_t frames) {
  OutputPlan plan;
  if (format == "none") return plan;
  if (format == "png") {
    if (EndsWith(out, ".png")) {
      if (frames != 1) {
        return InvalidArgument("--out " + out + " is one PNG file but the decode has " +
                               std::to_string(frames) + " frames; give a directory instead");
      }
      plan.kind = OutputKind::kPngImage;
      plan.path = out;
    } else {
      plan.kind = OutputKind::kPngSequence;
      plan.path = out.empty() ? stem + "_frames" : out;
    }
    return plan;
  }
  if (format == "mp4" || format == "raw") {
    const std::string ext = format == "mp4" ? ".mp4" : ".u8";
    if (out.empty()) {
      plan.path = stem + ext;
    } else if (IsDirectoryTarget(out)) {
      plan.path = InDirectory(out, stem + ext);
    } else {
      plan.path = out;
    }
    if (format == "mp4") {
      plan.kind = OutputKind::kMp4;
    } else {
      plan.kind = OutputKind::kRaw;
      plan.sidecar = fs::path(plan.path).replace_extension(".json").string();
      if (plan.sidecar == plan.path) {
        return InvalidArgument("--out " + out +
                               ": the raw output and its .json sidecar would be the same file");
      }
    }
    return plan;
  }
  return InvalidArgument("--format " + format + ": expected png, mp4, raw or none");
}

Result<ops::WavSampleFormat> ParseWavFormat(const std::string& text) {
  if (text == "pcm16") return ops::WavSampleFormat::kPcm16;
  if (text == "float32") return ops::WavSampleFormat::kFloat32;
  return InvalidArgument("--wav-format " + text + ": expected pcm16 or float32");
}

Result<OutputPlan> PlanAudioOutput(OutputPlan plan, const std::string& format,
                                   const std::string& audio_out, const std::string& stem,
                                   ops::WavSampleFormat wav_format) {
  plan.wav_format = wav_format;
  if (format == "none") return plan;
  const std::string file = stem + ".wav";
  if (!audio_out.empty()) {
    plan.wav = IsDirectoryTarget(audio_out) ? InDirectory(audio_out, file) : audio_out;
  } else if (plan.kind == OutputKind::kNone) {
    plan.wav = file;
  } else if (plan.kind == OutputKind::kPngSequence) {
    fs::path dir = fs::path(plan.path).lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();  // "frames/" names "frames"
    plan.wav = (dir.parent_path() / file).string();
  } else {
    plan.wav = fs::path(plan.path).replace_extension(".wav").string();
  }
  if (plan.wav == plan.path || plan.wav == plan.sidecar) {
    return InvalidArgument("the audio output " + plan.wav +
                           " would overwrite the video output; choose another path with "
                           "--audio-out");
  }
  plan.mux_audio = plan.kind == OutputKind::kMp4;
  return plan;
}

Status CheckOutputsAvoidInputs(const OutputPlan& plan, const std::vector<std::string>& inputs) {
  for (const std::string& out : {plan.path, plan.sidecar, plan.wav}) {
    if (out.empty()) continue;
    for (const std::string& in : inputs) {
      std::error_code ec;
      const bool same = out == in || (fs::exists(out, ec) && fs::equivalent(out, in, ec));
      if (same) {
        return InvalidArgument("output " + out + " is the input file " + in +
                               "; writing it would destroy the latent (choose another --out or "
                               "--audio-out)");
      }
    }
  }
  return Status::Ok();
}

Status CheckOutputTools(const OutputPlan& plan) {
  switch (plan.kind) {
    case OutputKind::kPngSequence:
    case OutputKind::kPngImage:
    case OutputKind::kMp4:
      return ops::CheckFfmpegAvailable();
    case OutputKind::kRaw:
    case OutputKind::kNone:
      return Status::Ok();
  }
  return Status::Ok();
}

Result<std::vector<std::string>> WriteOutputs(const OutputPlan& plan, const ops::RgbFrames& frames,
                                              double fps) {
  switch (plan.kind) {
    case OutputKind::kNone:
      return std::vector<std::string>{};
    case OutputKind::kPngSequence:
      return ops::WritePngSequence(frames, plan.path);
    case OutputKind::kPngImage:
      VAED_RETURN_IF_ERROR(ops::WritePngImage(frames, plan.path));
      return std::vector<std::string>{plan.path};
    case OutputKind::kMp4:
      VAED_RETURN_IF_ERROR(ops::WriteMp4(frames, plan.path, fps));
      return std::vector<std::string>{plan.path};
    case OutputKind::kRaw:
      VAED_RETURN_IF_ERROR(ops::WriteRawWithSidecar(frames, plan.path, plan.sidecar));
      return std::vector<std::string>{plan.path, plan.sidecar};
  }
  return Internal("WriteOutputs: unknown output kind");
}

Result<std::vector<std::string>> WriteDecodedOutputs(const OutputPlan& plan,
                                                     const DecodedOutputs& decoded, double fps) {
  if (plan.kind != OutputKind::kNone && decoded.video == nullptr) {
    return InvalidArgument(
        "WriteDecodedOutputs: a video output is planned but there are no frames");
  }
  if (!plan.wav.empty() && decoded.audio == nullptr) {
    return InvalidArgument("WriteDecodedOutputs: a WAV output is planned but there is no audio");
  }
  if (plan.mux_audio && (plan.kind != OutputKind::kMp4 || plan.wav.empty())) {
    return InvalidArgument("WriteDecodedOutputs: muxing audio needs an MP4 and a WAV output");
  }
  // The WAV comes first: the MP4 muxer reads it.
  if (!plan.wav.empty()) {
    auto stats = ops::WriteWav(*decoded.audio, plan.wav, plan.wav_format);
    if (!stats.ok()) return stats.status();
  }
  std::vector<std::string> files;
  if (plan.mux_audio) {
    VAED_RETURN_IF_ERROR(ops::WriteMp4WithAudio(*decoded.video, plan.path, fps, plan.wav));
    files.push_back(plan.path);
  } else if (plan.kind != OutputKind::kNone) {
    VAED_ASSIGN_OR_RETURN(files, WriteOutputs(plan, *decoded.video, fps));
  }
  if (!plan.wav.empty()) files.push_back(plan.wav);
  return files;
}

Quality CompareWithFile(const ops::RgbFrames& decoded, const SafetensorsFile& file,
                        const std::string& reference_key, const std::string& original_key) {
  Quality q;
  const uint64_t values = decoded.data.size();
  const auto values_per_frame = static_cast<size_t>(decoded.height_px * decoded.width_px * 3);
  if (values == 0 || values_per_frame == 0 || values % values_per_frame != 0) {
    q.notes.push_back("decoded output is empty or inconsistent; not compared");
    return q;
  }

  const TensorEntry* original = nullptr;
  if (original_key == "none") {
    // The caller says the file holds no original pixels.
  } else if (!original_key.empty()) {
    original = ComparableTensor(file, original_key, values, true, &q.notes);
  } else {
    for (const char* key : {"frames_u8", "image_u8"}) {
      // A tensor named as the reference decode is not the original (the H3
      // golden files keep the official decode in frames_u8).
      if (key == reference_key) continue;
      if (file.Find(key) != nullptr) {
        original = ComparableTensor(file, key, values, true, &q.notes);
        break;
      }
    }
  }
  const TensorEntry* reference =
      reference_key.empty()
          ? nullptr
          : ComparableTensor(file, reference_key, values, reference_key != "decoded_u8", &q.notes);

  if (original != nullptr) {
    q.original_key = original->name;
    const std::span<const uint8_t> orig(original->data, original->nbytes);
    q.psnr_vs_original = ops::MeanFramePsnr(decoded.data, orig, values_per_frame);
    if (reference != nullptr) {
      q.reference_psnr_vs_original = ops::MeanFramePsnr(
          std::span<const uint8_t>(reference->data, reference->nbytes), orig, values_per_frame);
    }
  }
  if (reference != nullptr) {
    q.reference_key = reference->name;
    q.vs_reference =
        ops::CompareU8(decoded.data, std::span<const uint8_t>(reference->data, reference->nbytes));
  }
  return q;
}

AudioQuality CompareAudioWithFile(const ops::PlanarAudio& decoded, const SafetensorsFile& file,
                                  const std::string& reference_key) {
  AudioQuality q;
  if (reference_key.empty()) return q;
  const TensorEntry* entry = file.Find(reference_key);
  if (entry == nullptr) {
    if (reference_key != "waveform") {
      q.notes.push_back("audio reference '" + reference_key + "' is not in the audio latent file");
    }
    return q;
  }
  const uint64_t values = decoded.data.size();
  if (entry->dtype != DType::kFloat32) {
    q.notes.push_back("audio reference '" + reference_key + "' is " +
                      std::string(DTypeName(entry->dtype)) + ", not float32; not compared");
    return q;
  }
  if (values == 0 || entry->nbytes != values * sizeof(float)) {
    q.notes.push_back("audio reference '" + reference_key + "' " + ShapeToString(entry->shape) +
                      " holds " + std::to_string(entry->nbytes / sizeof(float)) +
                      " values, the decode " + std::to_string(values) + " (" +
                      std::to_string(decoded.channels) +
                      (decoded.channels == 1 ? " channel x " : " channels x ") +
                      std::to_string(decoded.samples) + " samples); not compared");
    return q;
  }
  q.reference_key = reference_key;
  q.values_compared = values;
  double max_diff = 0;
  for (uint64_t i = 0; i < values; ++i) {
    // Safetensors data is only byte-aligned; copy each value out.
    float ref;
    std::memcpy(&ref, entry->data + i * sizeof(float), sizeof(float));
    const double a = decoded.data[i];
    const double b = ref;
    if (a == b) continue;  // also equal infinities
    const double diff = std::abs(a - b);
    if (!std::isfinite(diff)) {
      ++q.nonfinite_differences;
    } else if (diff > max_diff) {
      max_diff = diff;
    }
  }
  q.max_abs_diff = max_diff;
  if (q.nonfinite_differences != 0) {
    q.notes.push_back(std::to_string(q.nonfinite_differences) + " of " + std::to_string(values) +
                      " audio values differ from '" + reference_key +
                      "' by NaN or infinity; max |diff| is over the others");
  }
  return q;
}

nlohmann::json DecodeReportToJson(const DecodeReport& report) {
  const v1::DecodeReply& r = report.reply;
  const Quality& q = report.quality;
  const bool video = HasVideo(r);
  nlohmann::json timings = nlohmann::json::object();
  for (const auto& t : r.timings()) timings[t.component()] = t.seconds();
  std::vector<std::string> notes = q.notes;
  if (report.audio) {
    notes.insert(notes.end(), report.audio->quality.notes.begin(),
                 report.audio->quality.notes.end());
  }
  nlohmann::json j = {
      {"model", r.model()},
      {"demo_weights", r.demo_weights()},
      {"frames", r.frames()},
      {"height_px", r.height_px()},
      {"width_px", r.width_px()},
      {"latent_shape", std::vector<int64_t>(r.latent_shape().begin(), r.latent_shape().end())},
      {"latent_dtype", video ? nlohmann::json(std::string(DTypeName(FromProto(r.latent_dtype()))))
                             : nlohmann::json(nullptr)},
      {"latent_source", video ? nlohmann::json(report.latent_source) : nlohmann::json(nullptr)},
      {"compute_dtype", r.compute_dtype()},
      {"warm", r.warm()},
      {"timings", timings},
      {"round_trip_seconds", report.round_trip_seconds},
      {"nonfinite_outputs", r.nonfinite_outputs()},
      {"peak_rss_bytes", r.peak_rss_bytes()},
      {"tiling", nullptr},
      {"format", report.format},
      {"outputs", report.outputs},
      {"original_key",
       q.original_key.empty() ? nlohmann::json(nullptr) : nlohmann::json(q.original_key)},
      {"reference_key",
       q.reference_key.empty() ? nlohmann::json(nullptr) : nlohmann::json(q.reference_key)},
      {"psnr_vs_original_db", nullptr},
      {"psnr_vs_original_min_db", nullptr},
      {"psnr_vs_original_max_db", nullptr},
      {"reference_psnr_vs_original_db", nullptr},
      {"psnr_difference_db", nullptr},
      {"max_abs_diff_vs_reference", nullptr},
      {"values_differing_from_reference", nullptr},
      {"values_compared", nullptr},
      {"notes", notes},
      {"video_sanity",
       video && r.has_video_sanity() ? SanityJson(r.video_sanity()) : nlohmann::json(nullptr)},
      {"fps", r.fps() > 0 ? nlohmann::json(r.fps()) : nlohmann::json(nullptr)},
      {"video_seconds", video ? nlohmann::json(r.video_seconds()) : nlohmann::json(nullptr)},
      {"expected_audio_latent_frames", r.expected_audio_latent_frames() != 0
                                           ? nlohmann::json(r.expected_audio_latent_frames())
                                           : nlohmann::json(nullptr)},
      {"independent_lengths", r.independent_lengths()},
      {"av_lengths_match", nullptr},
      {"audio", nullptr},
      {"group", GroupJson(r)},
  };
  j["profile"] = r.profile();
  j["compile_decision"] = r.compile_decision();
  j["stack_decision"] = r.stack_decision();
  j["output_changing"] =
      std::vector<std::string>(r.output_changing().begin(), r.output_changing().end());
  if (r.has_tiling()) {
    const v1::TilingInfo& t = r.tiling();
    j["tiling"] = {{"tile_rows", t.tile_rows()},
                   {"tile_cols", t.tile_cols()},
                   {"windows", t.windows()},
                   {"decoder_calls", t.decoder_calls()},
                   {"max_tiles_per_call", t.max_tiles_per_call()},
                   {"stacked", t.stacked()},
                   {"stack_decision", t.stack_decision()},
                   {"planned_tiles_per_call", t.planned_tiles_per_call()},
                   {"final_tiles_per_call", t.final_tiles_per_call()},
                   {"fallbacks", std::vector<std::string>(t.fallbacks().begin(),
                                                          t.fallbacks().end())},
                   {"plan_decision", t.plan_decision()},
                   {"planned_calls", t.planned_calls()},
                   {"eager_calls", t.eager_calls()},
                   {"estimated_peak_bytes", t.estimated_peak_bytes()}};
  }
  if (q.psnr_vs_original) {
    j["psnr_vs_original_db"] = Db(q.psnr_vs_original->mean_db);
    j["psnr_vs_original_min_db"] = Db(q.psnr_vs_original->min_db);
    j["psnr_vs_original_max_db"] = Db(q.psnr_vs_original->max_db);
  }
  if (q.reference_psnr_vs_original) {
    j["reference_psnr_vs_original_db"] = Db(q.reference_psnr_vs_original->mean_db);
    if (q.psnr_vs_original) {
      j["psnr_difference_db"] =
          Db(q.psnr_vs_original->mean_db - q.reference_psnr_vs_original->mean_db);
    }
  }
  if (q.vs_reference) {
    j["max_abs_diff_vs_reference"] = q.vs_reference->max_abs_diff;
    j["values_differing_from_reference"] = q.vs_reference->values_differing;
    j["values_compared"] = q.vs_reference->values;
  }
  if (report.audio) {
    const AudioReport& a = *report.audio;
    const v1::AudioInfo& info = r.audio();
    nlohmann::json audio = {
        {"latent_source", a.latent_source},
        {"latent_shape",
         std::vector<int64_t>(info.latent_shape().begin(), info.latent_shape().end())},
        {"latent_dtype", a.latent_dtype == DType::kUnknown
                             ? nlohmann::json(nullptr)
                             : nlohmann::json(std::string(DTypeName(a.latent_dtype)))},
        {"latent_frames", info.latent_frames()},
        {"channels", info.channels()},
        {"samples", info.samples()},
        {"sample_rate_hz", info.sample_rate_hz()},
        {"seconds", info.seconds()},
        {"nonfinite", nullptr},
        {"rms", nullptr},
        {"peak_abs", nullptr},
        {"clipped_fraction", nullptr},
        {"constant", nullptr},
        {"max_abs_diff_vs_reference", a.quality.max_abs_diff
                                          ? nlohmann::json(*a.quality.max_abs_diff)
                                          : nlohmann::json(nullptr)},
        {"values_compared", a.quality.reference_key.empty()
                                ? nlohmann::json(nullptr)
                                : nlohmann::json(a.quality.values_compared)},
        {"reference_key", a.quality.reference_key.empty()
                              ? nlohmann::json(nullptr)
                              : nlohmann::json(a.quality.reference_key)},
        {"wav", a.wav.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.wav)},
        {"wav_format", WavFormatName(a.wav_format)},
    };
    if (info.has_sanity()) {
      const v1::OutputSanity& sanity = info.sanity();
      audio["nonfinite"] = sanity.nonfinite();
      audio["rms"] = FiniteOrNull(sanity.rms());
      audio["peak_abs"] = FiniteOrNull(sanity.peak_abs());
      audio["clipped_fraction"] = FiniteOrNull(sanity.clipped_fraction());
      audio["constant"] = sanity.constant();
    }
    j["audio"] = std::move(audio);
    if (video && r.expected_audio_latent_frames() != 0) {
      j["av_lengths_match"] = r.expected_audio_latent_frames() == info.latent_frames();
    }
  }
  return j;
}

std::string FormatDecodeReport(const DecodeReport& report) {
  const v1::DecodeReply& r = report.reply;
  const Quality& q = report.quality;
  const bool video = HasVideo(r);
  std::ostringstream out;
  if (r.demo_weights()) {
    out << "!!! DEMO WEIGHTS: model '" << r.model()
        << "' has deterministic random weights, not a trained decoder.\n"
        << "!!! Its outputs are not images or sound; use them to test plumbing, not quality.\n\n";
  }
  std::vector<std::string> warnings;
  out << "model        " << r.model() << (r.demo_weights() ? " (DEMO weights)" : "") << "\n";
  if (video) {
    const std::vector<int64_t> latent_shape(r.latent_shape().begin(), r.latent_shape().end());
    out << "latent       " << report.latent_source << "  " << DTypeName(FromProto(r.latent_dtype()))
        << " " << ShapeToString(latent_shape) << "\n"
        << "output       " << Plural(r.frames(), "frame") << ", " << r.width_px() << "x"
        << r.height_px() << " px (WxH), uint8 NHWC RGB, " << ops::HumanBytes(r.output_bytes())
        << "\n";
    if (r.has_video_sanity()) {
      const v1::OutputSanity& s = r.video_sanity();
      out << "video check  rms " << ops::FormatFixed(s.rms(), 4) << ", peak |x| "
          << ops::FormatFixed(s.peak_abs(), 4) << ", " << s.nonfinite()
          << " non-finite (raw decoder output)\n";
      if (s.constant()) {
        warnings.push_back("the video is constant (every value equal): a blank or railed decode");
      }
    }
  }
  if (report.audio) {
    const v1::AudioInfo& a = r.audio();
    const std::vector<int64_t> latent_shape(a.latent_shape().begin(), a.latent_shape().end());
    const std::vector<int64_t> output_shape(a.output_shape().begin(), a.output_shape().end());
    out << "audio latent " << report.audio->latent_source << "  "
        << DTypeName(report.audio->latent_dtype) << " " << ShapeToString(latent_shape) << ", "
        << Plural(a.latent_frames(), "latent frame") << "\n"
        << "audio        " << Plural(a.channels(), "channel")
        << (a.channels() == 1   ? " (mono)"
            : a.channels() == 2 ? " (stereo L,R)"
                                : "")
        << ", " << a.samples() << " samples at " << a.sample_rate_hz()
        << " Hz = " << ops::FormatFixed(a.seconds(), 3) << " s, float32 planar "
        << ShapeToString(output_shape) << ", " << ops::HumanBytes(a.output_bytes()) << "\n";
    if (a.has_sanity()) {
      const v1::OutputSanity& s = a.sanity();
      out << "audio check  rms " << ops::FormatFixed(s.rms(), 4) << ", peak |x| "
          << ops::FormatFixed(s.peak_abs(), 4) << ", clipped "
          << ops::FormatFixed(100.0 * s.clipped_fraction(), 2) << " %, " << s.nonfinite()
          << " non-finite\n";
      if (s.nonfinite() != 0) {
        warnings.push_back(std::to_string(s.nonfinite()) + " non-finite (NaN/Inf) audio samples");
      }
      if (s.constant()) {
        warnings.push_back("the audio is constant (every sample " +
                           ops::FormatFixed(s.peak_abs(), 4) +
                           " in magnitude): silent or railed, not sound");
      }
    }
  }
  if (video && r.expected_audio_latent_frames() != 0) {
    out << "A/V          video " << ops::FormatFixed(r.video_seconds(), 3) << " s ("
        << Plural(r.frames(), "frame") << " at " << FormatFps(r.fps()) << " fps)";
    const uint64_t expected = r.expected_audio_latent_frames();
    if (report.audio) {
      const uint64_t given = r.audio().latent_frames();
      out << ", audio " << ops::FormatFixed(r.audio().seconds(), 3) << " s ("
          << Plural(given, "latent frame") << "); the video needs "
          << Plural(expected, "audio latent frame") << ": ";
      if (given == expected) {
        out << "match" << (r.independent_lengths() ? " (independent lengths requested)" : "");
      } else {
        out << (given > expected ? "+" : "-")
            << (given > expected ? given - expected : expected - given)
            << " latent frames, independent lengths (not enforced)";
      }
    } else {
      out << "; a matching audio latent has " << Plural(expected, "latent frame");
    }
    out << "\n";
  }
  out << "compute      " << (r.compute_dtype().empty() ? "?" : r.compute_dtype()) << ", "
      << (r.warm() ? "warm" : "cold (first decode of this shape bucket)");
  if (r.peak_rss_bytes() != 0) out << ", peak RSS " << ops::HumanBytes(r.peak_rss_bytes());
  if (r.peak_tensor_bytes() != 0) {
    out << ", peak tensors " << ops::HumanBytes(r.peak_tensor_bytes());
    if (r.memory_budget_bytes() != 0) {
      out << " of a " << ops::HumanBytes(r.memory_budget_bytes()) << " budget";
    }
  }
  out << "\n";
  out << "profile      " << (r.profile().empty() ? "?" : r.profile()) << "; compile "
      << (r.compile_decision().empty() ? "-" : r.compile_decision());
  if (!r.stack_decision().empty()) out << "; tiles " << r.stack_decision();
  out << "\n";
  for (const auto& k : r.output_changing()) out << "OUTPUT       changed by " << k << "\n";
  if (r.has_tiling()) {
    const v1::TilingInfo& t = r.tiling();
    out << "tiling       " << t.tile_rows() << "x" << t.tile_cols()
        << (t.tile_rows() * t.tile_cols() == 1 ? " tile x " : " tiles x ")
        << Plural(t.windows(), "window") << ", " << Plural(t.decoder_calls(), "decoder call")
        << ", up to " << Plural(t.max_tiles_per_call(), "tile") << " per call ("
        << t.stack_decision() << ")\n";
    if (!t.plan_decision().empty()) {
      out << "plans        " << t.plan_decision() << " (" << t.planned_calls() << " planned, "
          << t.eager_calls() << " eager calls)\n";
    }
    for (const auto& f : t.fallbacks()) out << "FALLBACK     " << f << "\n";
  }
  if (r.has_group()) {
    const v1::GroupReport& g = r.group();
    out << "group        " << g.name() << " (" << Plural(g.size(), "rank") << ", generation "
        << g.generation() << "):";
    const char* sep = " ";
    for (const v1::RankReport& k : g.ranks()) {
      out << sep << "rank " << k.rank() << " " << Plural(k.tiles(), "tile") << " "
          << ops::FormatFixed(k.decode_seconds(), 2) << " s";
      sep = ", ";
    }
    out << "; imbalance " << ops::FormatFixed(g.imbalance(), 2) << "\n";
    if (!g.fallback().empty()) out << "FALLBACK     group: " << g.fallback() << "\n";
  }
  if (r.nonfinite_outputs() != 0) {
    out << "WARNING      " << r.nonfinite_outputs() << " non-finite (NaN/Inf) output values\n";
  }
  for (const auto& w : warnings) out << "WARNING      " << w << "\n";
  out << "\n";

  ops::TextTable timings({"component", "seconds", "ms"}, {false, true, true});
  for (const auto& t : r.timings()) {
    timings.AddRow(
        {t.component(), ops::FormatFixed(t.seconds(), 4), ops::FormatFixed(t.seconds() * 1e3, 1)});
  }
  timings.AddRow({"(client round trip)", ops::FormatFixed(report.round_trip_seconds, 4),
                  ops::FormatFixed(report.round_trip_seconds * 1e3, 1)});
  out << timings.Render();

  const AudioQuality* aq = report.audio ? &report.audio->quality : nullptr;
  const bool audio_compared = aq != nullptr && aq->max_abs_diff.has_value();
  if (q.psnr_vs_original || q.vs_reference || audio_compared) {
    out << (q.psnr_vs_original
                ? "\nquality (PSNR = 10*log10(255^2/MSE) per frame, mean over frames)\n"
                : "\nquality\n");
    ops::TextTable t({"comparison", "value", "detail"}, {false, true, false});
    if (q.psnr_vs_original) {
      const auto& p = *q.psnr_vs_original;
      t.AddRow({"decode vs original (" + q.original_key + ")", DbText(p.mean_db),
                "min " + DbText(p.min_db) + ", max " + DbText(p.max_db)});
    }
    if (q.reference_psnr_vs_original) {
      t.AddRow({"reference (" + q.reference_key + ") vs original",
                DbText(q.reference_psnr_vs_original->mean_db), ""});
      if (q.psnr_vs_original) {
        const double d = q.psnr_vs_original->mean_db - q.reference_psnr_vs_original->mean_db;
        t.AddRow({"difference (decode - reference)", (d >= 0 ? "+" : "") + DbText(d), ""});
      }
    }
    if (q.vs_reference) {
      const auto& d = *q.vs_reference;
      const double pct = d.values > 0 ? 100.0 * static_cast<double>(d.values_differing) /
                                            static_cast<double>(d.values)
                                      : 0.0;
      t.AddRow({"decode vs reference (" + q.reference_key + ")",
                "max |diff| " + std::to_string(d.max_abs_diff),
                std::to_string(d.values_differing) + " of " + std::to_string(d.values) +
                    " values differ (" + ops::FormatFixed(pct, 4) + " %)"});
    }
    if (audio_compared) {
      t.AddRow({"audio vs reference (" + aq->reference_key + ")",
                "max |diff| " + Scientific(*aq->max_abs_diff),
                std::to_string(aq->values_compared) + " float32 values compared"});
    }
    out << t.Render();
  }
  for (const auto& note : q.notes) out << "note: " << note << "\n";
  if (aq != nullptr) {
    for (const auto& note : aq->notes) out << "note: " << note << "\n";
  }

  if (!report.outputs.empty()) {
    out << "\nwrote " << Plural(report.outputs.size(), "file");
    if (report.outputs.size() <= 3) {
      for (const auto& p : report.outputs) out << "\n  " << p;
    } else {
      out << "\n  " << report.outputs.front() << "\n  ...\n  " << report.outputs.back();
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace vaed::vaectl
