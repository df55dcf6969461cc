// The pieces of `vaectl decode` that need no daemon: where outputs go,
// comparison of a decode with the reference tensors stored next to the
// latents (video frames and audio waveforms), and the report (human table
// or one JSON object).
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

#include "ops/common/audio_writer.h"
#include "ops/common/frame_writer.h"
#include "ops/common/psnr.h"
#include "vaed/safetensors.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::vaectl {

// `vaectl decode --progress`: how Progress messages are shown (on stderr).
enum class ProgressMode { kNone, kBar, kLines };
// "auto" (a bar when stderr is a terminal and the report is not --json,
// else none), "bar", "lines" or "none". Errors: kInvalidArgument naming
// --progress.
Result<ProgressMode> ParseProgressMode(const std::string& text, bool stderr_is_tty, bool json);
// One progress line, e.g. "progress  50%  video window 2/4 (8/16 tiles)
// elapsed 1.2 s, ETA 1.2 s".
std::string FormatProgressLine(const v1::Progress& p);
// A terminal progress bar `width` cells wide, without the leading '\r':
// "[##########----------]  50% video window 2/4  1.2 s elapsed, ETA 1.2 s".
std::string FormatProgressBar(const v1::Progress& p, int width);

// Output formats of `vaectl decode --format`.
enum class OutputKind { kPngSequence, kPngImage, kMp4, kRaw, kNone };

// Where `vaectl decode` writes. `path` is a directory for kPngSequence and
// a file otherwise; `sidecar` is the JSON file next to a raw output.
struct OutputPlan {
  OutputKind kind = OutputKind::kNone;
  std::string path;
  std::string sidecar;
  // Audio (set by PlanAudioOutput): the WAV file, "" when no audio is
  // written; with kMp4, `mux_audio` also puts it into the MP4 (AAC).
  // (`= {}` keeps {kind, path, sidecar} initialisers free of
  // -Wmissing-field-initializers.)
  std::string wav = {};
  ops::WavSampleFormat wav_format = ops::WavSampleFormat::kPcm16;
  bool mux_audio = false;
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

// Parses --wav-format: "pcm16" or "float32". kInvalidArgument otherwise.
Result<ops::WavSampleFormat> ParseWavFormat(const std::string& text);

// Adds the audio output to `plan`: the result of PlanOutput for a joint
// decode, or a default OutputPlan (kNone) for an audio-only one. `format`
// is --format ("none" writes no audio either; any other value writes a
// WAV), `audio_out` is --audio-out (may be empty), `stem` names the default
// WAV (the audio latent file's stem).
//   audio_out a file:       that file.
//   audio_out a directory   (existing, or ending in '/'): "<stem>.wav" inside it.
//   empty, video file       (mp4, raw, one png): the video path with
//                           extension ".wav" (clip.mp4 -> clip.wav).
//   empty, PNG directory D: "<stem>.wav" beside D (in D's parent).
//   empty, no video:        "<stem>.wav".
// With kMp4, mux_audio is set: the MP4 gets the WAV's audio as well.
// Errors: kInvalidArgument when the WAV would be the video file or its
// sidecar.
Result<OutputPlan> PlanAudioOutput(OutputPlan plan, const std::string& format,
                                   const std::string& audio_out, const std::string& stem,
                                   ops::WavSampleFormat wav_format);

// OK when the tools `plan` needs are present (ffmpeg for PNG and MP4; the
// WAV writer needs none).
Status CheckOutputTools(const OutputPlan& plan);

// kInvalidArgument when a file `plan` would write (video, sidecar, WAV) is
// one of `inputs` (the same file, by path or through another name).
Status CheckOutputsAvoidInputs(const OutputPlan& plan, const std::vector<std::string>& inputs);

// Writes `frames` as planned (ignoring the audio part of `plan`); returns
// the files written. See ops/common/frame_writer.h for errors.
Result<std::vector<std::string>> WriteOutputs(const OutputPlan& plan, const ops::RgbFrames& frames,
                                              double fps);

// What a decode produced: video frames and/or audio (null when the request
// had none). Non-owning.
struct DecodedOutputs {
  const ops::RgbFrames* video = nullptr;
  const ops::PlanarAudio* audio = nullptr;
};

// Writes everything `plan` asks for: the WAV first (when plan.wav is set
// and there is audio), then the video, muxing the WAV into an MP4 when
// plan.mux_audio. Returns the files written (video files, then the WAV).
// Errors: those of WriteWav, WriteMp4WithAudio and the overload above;
// kInvalidArgument when `plan` has a video or WAV output but `decoded`
// lacks that part.
Result<std::vector<std::string>> WriteDecodedOutputs(const OutputPlan& plan,
                                                     const DecodedOutputs& decoded, double fps);

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

// How decoded audio compares with a reference waveform stored in the
// audio latent file. Values are float32 samples before any WAV
// quantization; differences are taken in double.
struct AudioQuality {
  std::string reference_key;           // tensor compared with; "" if none
  std::optional<double> max_abs_diff;  // over the pairs whose difference is finite
  uint64_t values_compared = 0;        // channels * samples when compared
  uint64_t nonfinite_differences = 0;  // pairs with a NaN/Inf difference (also in notes)
  std::vector<std::string> notes;      // why the comparison was skipped, or caveats
};

// Compares `decoded` (float32 [channels, samples] planar) with the tensor
// `reference_key` of `file` (H3 golden files: "waveform", float32
// [channels, 1, samples]). The tensor is used when it is float32 and holds
// exactly channels * samples values, in the same channel-major order;
// otherwise the comparison is skipped with a note. An absent tensor gets a
// note unless `reference_key` is the default "waveform" (most latent files
// carry no reference); an empty key skips silently. Never fails.
AudioQuality CompareAudioWithFile(const ops::PlanarAudio& decoded, const SafetensorsFile& file,
                                  const std::string& reference_key);

// The audio part of a report (the reply's `audio` has the daemon's view).
struct AudioReport {
  std::string latent_source;  // "audio_case_stereo.safetensors:latent" or "random(seed=0)"
  DType latent_dtype = DType::kUnknown;
  std::string wav;  // the WAV written; "" when none
  ops::WavSampleFormat wav_format = ops::WavSampleFormat::kPcm16;
  AudioQuality quality;
};

// Everything `vaectl decode` reports. A request without a video latent
// (audio-only) has an empty reply.latent_shape and latent_source.
struct DecodeReport {
  v1::DecodeReply reply;
  std::string latent_source;      // "video_bikes.safetensors:latent" or "random(seed=0)"
  double round_trip_seconds = 0;  // Decode() as seen by the client
  std::string format;             // png | mp4 | raw | none
  std::vector<std::string> outputs;
  Quality quality;
  std::optional<AudioReport> audio;  // set when the request had an audio latent
};

// One JSON object with the stable keys: model, frames, height_px, width_px,
// latent_shape, warm, timings {component: seconds}, outputs [paths],
// psnr_vs_original_db, reference_psnr_vs_original_db,
// max_abs_diff_vs_reference, values_differing_from_reference; plus
// latent_source, latent_dtype, demo_weights, compute_dtype,
// round_trip_seconds, format, nonfinite_outputs, original_key,
// reference_key, psnr_difference_db (decode minus reference),
// psnr_vs_original_min_db/max_db, values_compared, notes, tiling,
// peak_rss_bytes, video_sanity {nonfinite, constant, rms, peak_abs,
// clipped_fraction}; A/V: fps, video_seconds, expected_audio_latent_frames
// (audio latent frames the video needs; null when not applicable),
// independent_lengths, av_lengths_match (null unless the request had both
// latents and the model states the rule); audio: null, or {latent_source,
// latent_dtype, latent_shape, latent_frames, channels, samples,
// sample_rate_hz, seconds, nonfinite, rms, peak_abs, clipped_fraction
// (0..1), constant, max_abs_diff_vs_reference, values_compared,
// reference_key, wav, wav_format}; group: null (no GroupReport in the
// reply, e.g. audio-only), or {name, size, generation, ranks [{rank (global),
// tiles, decode_seconds, started_unix, finished_unix (wall clock, seconds)}],
// imbalance (max / mean decode seconds; null if not finite), fallback ("" when
// the request ran on the group as planned)}.
// Audio-only: frames/height_px/width_px are 0, latent_shape is [],
// latent_source, latent_dtype, video_seconds and video_sanity are null.
// Comparisons that were not made are null, and so is an infinite PSNR
// (identical frames). Audio notes are in `notes` too.
nlohmann::json DecodeReportToJson(const DecodeReport& report);

// The human-readable report: a summary (video, audio, A/V lengths), the
// timing table (component, seconds, ms) and the quality lines. A reply with
// a GroupReport gets a "group" line (name, ranks, generation, each rank's
// tiles and decode seconds, imbalance) and, when the group fell back, a
// "FALLBACK     group: <why>" line. A decode by demo weights starts with a
// loud warning; non-finite or constant outputs get WARNING lines.
std::string FormatDecodeReport(const DecodeReport& report);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_DECODE_REPORT_H_
