// The pieces of `vaectl decode` that need no daemon: where outputs go,
// comparison of a decode with the reference tensors stored next to the
// latent, and the report (human table or one JSON object).
//
// Thread-safety: pure functions and plain values.
#ifndef VAED_OPS_VAECTL_DECODE_REPORT_H_
#define VAED_OPS_VAECTL_DECODE_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ops/common/frame_writer.h"
#include "ops/common/psnr.h"
#include "vaed/safetensors.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::vaectl {

// Output formats of `vaectl decode --format`.
enum class OutputKind { kPngSequence, kPngImage, kMp4, kRaw, kNone };

// Where `vaectl decode` writes. `path` is a directory for kPngSequence and
// a file otherwise; `sidecar` is the JSON file next to a raw output.
struct OutputPlan {
  OutputKind kind = OutputKind::kNone;
  std::string path;
  std::string sidecar;
};

// Resolves --format/--out. `format` is "png", "mp4", "raw" or "none"; `out`
// may be empty (defaults below); `stem` names default outputs (the latent
// file's stem); `frames` is the number of decoded frames.
//   png:  `out` ending in ".png" is a single image (only when frames == 1);
//         anything else is a directory of frame_0000.png, ...
//         (default "<stem>_frames").
//   mp4:  a file (default "<stem>.mp4"); an existing directory or one
//         ending in '/' gets "<stem>.mp4" inside it.
//   raw:  a file (default "<stem>.u8") plus a sidecar with the extension
//         replaced by ".json"; directories as for mp4.
// Errors: kInvalidArgument for an unknown format or a multi-frame decode
// sent to one .png file.
Result<OutputPlan> PlanOutput(const std::string& format, const std::string& out,
                              const std::string& stem, int64_t frames);

// OK when the tools `plan` needs are present (ffmpeg for PNG and MP4).
Status CheckOutputTools(const OutputPlan& plan);

// Writes `frames` as planned; returns the files written. See
// ops/common/frame_writer.h for errors.
Result<std::vector<std::string>> WriteOutputs(const OutputPlan& plan, const ops::RgbFrames& frames,
                                              double fps);

// How a decode compares with the tensors stored in the latent file
// (README §6 definitions: mean of per-frame PSNRs, peak 255, float64 MSE).
struct Quality {
  std::string original_key;   // tensor used as the original; "" if none
  std::string reference_key;  // tensor used as the reference decode; "" if none
  std::optional<ops::FramePsnr> psnr_vs_original;            // decode vs original
  std::optional<ops::FramePsnr> reference_psnr_vs_original;  // reference vs original
  std::optional<ops::U8Diff> vs_reference;                   // decode vs reference
  std::vector<std::string> notes;                            // why a comparison was skipped
};

// Compares `decoded` (uint8 NHWC [frames, height_px, width_px, 3]) with
// tensors of `file`: the reference decode `reference_key` and the original
// `original_key` (when empty: "frames_u8", then "image_u8", skipping a key
// equal to `reference_key`; "none": no original). A tensor is
// used when it is uint8 and holds exactly the decoded number of values
// ([N,H,W,3], or [H,W,3] for one frame); otherwise, or when it is absent,
// that comparison is skipped with a note (an absent default key gets no
// note: most latent files carry no references). Never fails.
Quality CompareWithFile(const ops::RgbFrames& decoded, const SafetensorsFile& file,
                        const std::string& reference_key, const std::string& original_key);

// Everything `vaectl decode` reports.
struct DecodeReport {
  v1::DecodeReply reply;
  std::string latent_source;      // "video_bikes.safetensors:latent" or "random(seed=0)"
  double round_trip_seconds = 0;  // Decode() as seen by the client
  std::string format;             // png | mp4 | raw | none
  std::vector<std::string> outputs;
  Quality quality;
};

// One JSON object with the stable keys: model, frames, height_px, width_px,
// latent_shape, warm, timings {component: seconds}, outputs [paths],
// psnr_vs_original_db, reference_psnr_vs_original_db,
// max_abs_diff_vs_reference, values_differing_from_reference; plus
// latent_source, latent_dtype, demo_weights, compute_dtype,
// round_trip_seconds, format, nonfinite_outputs, original_key,
// reference_key, psnr_difference_db (decode minus reference),
// psnr_vs_original_min_db/max_db, values_compared, notes.
// Comparisons that were not made are null, and so is an infinite PSNR
// (identical frames).
nlohmann::json DecodeReportToJson(const DecodeReport& report);

// The human-readable report: a summary, the timing table (component,
// seconds, ms) and the quality lines. A decode by demo weights starts with
// a loud warning.
std::string FormatDecodeReport(const DecodeReport& report);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_DECODE_REPORT_H_
