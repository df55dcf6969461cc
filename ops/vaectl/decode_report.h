// The report of `vaectl decode`: what the daemon replied, what was
// written and how the decode compares with references, rendered as a human
// table (decode_report_text.cc) or one JSON object
// (decode_report_json.cc). Where outputs go is output_plan.h; the
// comparisons are decode_quality.h; progress lines are progress_format.h.
//
// Thread-safety: pure functions and plain values.
#ifndef VAED_OPS_VAECTL_DECODE_REPORT_H_
#define VAED_OPS_VAECTL_DECODE_REPORT_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ops/common/audio_writer.h"
#include "ops/vaectl/decode_quality.h"
#include "ops/vaectl/output_plan.h"
#include "vaed/replies.h"
#include "vaed/tensor_ref.h"

namespace vaed::vaectl {

// The audio part of a report (the reply's `audio` has the daemon's view).
struct AudioReport {
  std::string latent_source;  // "audio_case_stereo.safetensors:latent" or "random(seed=0)"
  DType latent_dtype = DType::kUnknown;
  std::string wav;  // the WAV written; "" when none
  ops::WavSampleFormat wav_format = ops::WavSampleFormat::kPcm16;
  AudioQuality quality;
};

// How `vaectl decode --format mp4` wrote its MP4.
struct Mp4Report {
  // Fed to ffmpeg frame by frame while the daemon decoded (frames streamed
  // as they became final); false with --no-stream (encoded after the
  // decode).
  bool streamed = false;
  // Seconds from Decode()'s reply to the MP4 being complete (the WAV and
  // the audio mux included): the encode tail the decode did not hide.
  double tail_seconds = 0;
};

// Everything `vaectl decode` reports. A request without a video latent
// (audio-only) has an empty reply.latent_shape and latent_source.
struct DecodeReport {
  client::DecodeReply reply;
  std::string latent_source;      // "video_bikes.safetensors:latent" or "random(seed=0)"
  double round_trip_seconds = 0;  // Decode() as seen by the client
  VideoFileFormat format = VideoFileFormat::kPng;  // --format
  std::vector<std::string> outputs;
  Quality quality;
  std::optional<AudioReport> audio;  // set when the request had an audio latent
  std::optional<Mp4Report> mp4;      // set when an MP4 was written

  // Whether the request had a video latent (the reply then has a latent
  // shape; audio-only replies do not).
  bool has_video() const { return !reply.latent_shape.empty(); }
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
// the request ran on the group as planned)}; mp4_streamed (the MP4 was
// encoded while decoding; false with --no-stream) and mp4_tail_seconds
// (reply to complete MP4), both null unless an MP4 was written.
// Audio-only: frames/height_px/width_px are 0, latent_shape is [],
// latent_source, latent_dtype, video_seconds and video_sanity are null.
// Comparisons that were not made are null, and so is an infinite PSNR
// (identical frames). Audio notes are in `notes` too.
nlohmann::json DecodeReportToJson(const DecodeReport& report);

// The human-readable report: a summary (video, audio, A/V lengths), the
// timing table (component, seconds, ms) and the quality lines. A reply with
// a GroupReport gets a "group" line (name, ranks, generation, each rank's
// tiles and decode seconds, imbalance) and, when the group fell back, a
// "FALLBACK     group: <why>" line. An MP4 adds a "(mp4 after reply,
// streamed)" or "(mp4 after reply, not streamed)" row to the timing
// table: the seconds from the reply to the complete MP4. A decode by demo weights starts with a
// loud warning; non-finite or constant outputs get WARNING lines.
std::string FormatDecodeReport(const DecodeReport& report);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_DECODE_REPORT_H_
