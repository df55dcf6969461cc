#include "ops/vaectl/decode_report.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "ops/common/text_format.h"
#include "vaed/tensor_ref.h"
#include "vaed/wire.h"

namespace vaed::vaectl {
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

nlohmann::json DecodeReportToJson(const DecodeReport& report) {
  const v1::DecodeReply& r = report.reply;
  const Quality& q = report.quality;
  nlohmann::json timings = nlohmann::json::object();
  for (const auto& t : r.timings()) timings[t.component()] = t.seconds();
  nlohmann::json j = {
      {"model", r.model()},
      {"demo_weights", r.demo_weights()},
      {"frames", r.frames()},
      {"height_px", r.height_px()},
      {"width_px", r.width_px()},
      {"latent_shape", std::vector<int64_t>(r.latent_shape().begin(), r.latent_shape().end())},
      {"latent_dtype", DTypeName(FromProto(r.latent_dtype()))},
      {"latent_source", report.latent_source},
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
      {"notes", q.notes},
  };
  if (r.has_tiling()) {
    const v1::TilingInfo& t = r.tiling();
    j["tiling"] = {{"tile_rows", t.tile_rows()},
                   {"tile_cols", t.tile_cols()},
                   {"windows", t.windows()},
                   {"decoder_calls", t.decoder_calls()},
                   {"max_tiles_per_call", t.max_tiles_per_call()},
                   {"stacked", t.stacked()},
                   {"stack_decision", t.stack_decision()}};
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
  return j;
}

std::string FormatDecodeReport(const DecodeReport& report) {
  const v1::DecodeReply& r = report.reply;
  const Quality& q = report.quality;
  std::ostringstream out;
  if (r.demo_weights()) {
    out << "!!! DEMO WEIGHTS: model '" << r.model()
        << "' has deterministic random weights, not a trained decoder.\n"
        << "!!! Its frames are not images; use them to test plumbing, not quality.\n\n";
  }
  const std::vector<int64_t> latent_shape(r.latent_shape().begin(), r.latent_shape().end());
  out << "model        " << r.model() << (r.demo_weights() ? " (DEMO weights)" : "") << "\n"
      << "latent       " << report.latent_source << "  " << DTypeName(FromProto(r.latent_dtype()))
      << " " << ShapeToString(latent_shape) << "\n"
      << "output       " << r.frames() << (r.frames() == 1 ? " frame, " : " frames, ")
      << r.width_px() << "x" << r.height_px() << " px (WxH), uint8 NHWC RGB, "
      << ops::HumanBytes(r.output_bytes()) << "\n"
      << "compute      " << (r.compute_dtype().empty() ? "?" : r.compute_dtype()) << ", "
      << (r.warm() ? "warm" : "cold (first decode of this shape bucket)");
  if (r.peak_rss_bytes() != 0) out << ", peak RSS " << ops::HumanBytes(r.peak_rss_bytes());
  out << "\n";
  if (r.has_tiling()) {
    const v1::TilingInfo& t = r.tiling();
    out << "tiling       " << t.tile_rows() << "x" << t.tile_cols() << " tiles x " << t.windows()
        << (t.windows() == 1 ? " window" : " windows") << ", " << t.decoder_calls()
        << " decoder calls, up to " << t.max_tiles_per_call() << " tiles per call ("
        << t.stack_decision() << ")\n";
  }
  if (r.nonfinite_outputs() != 0) {
    out << "WARNING      " << r.nonfinite_outputs() << " non-finite (NaN/Inf) output values\n";
  }
  out << "\n";

  ops::TextTable timings({"component", "seconds", "ms"}, {false, true, true});
  for (const auto& t : r.timings()) {
    timings.AddRow(
        {t.component(), ops::FormatFixed(t.seconds(), 4), ops::FormatFixed(t.seconds() * 1e3, 1)});
  }
  timings.AddRow({"(client round trip)", ops::FormatFixed(report.round_trip_seconds, 4),
                  ops::FormatFixed(report.round_trip_seconds * 1e3, 1)});
  out << timings.Render();

  if (q.psnr_vs_original || q.vs_reference) {
    out << "\nquality (PSNR = 10*log10(255^2/MSE) per frame, mean over frames)\n";
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
    out << t.Render();
  }
  for (const auto& note : q.notes) out << "note: " << note << "\n";

  if (!report.outputs.empty()) {
    out << "\nwrote " << report.outputs.size() << (report.outputs.size() == 1 ? " file" : " files");
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
