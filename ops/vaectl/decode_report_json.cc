// DecodeReportToJson (decode_report.h): `vaectl decode --json`.
#include <cmath>
#include <utility>

#include "ops/vaectl/decode_report.h"
#include "vaed/tensor_ref.h"

namespace vaed::vaectl {
namespace {

nlohmann::json Db(double db) {
  // JSON has no infinity; identical frames report null, like "not compared".
  return std::isfinite(db) ? nlohmann::json(db) : nlohmann::json(nullptr);
}

nlohmann::json FiniteOrNull(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

nlohmann::json StringOrNull(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

// The reply's group report: null when it has none (audio-only).
nlohmann::json GroupJson(const client::DecodeReply& r) {
  if (!r.group) return nullptr;
  const client::GroupReport& g = *r.group;
  nlohmann::json ranks = nlohmann::json::array();
  for (const client::RankReport& k : g.ranks) {
    ranks.push_back({{"rank", k.rank},
                     {"tiles", k.tiles},
                     {"decode_seconds", k.decode_seconds},
                     {"started_unix", k.started_unix},
                     {"finished_unix", k.finished_unix}});
  }
  return {{"name", g.name},
          {"size", g.size},
          {"generation", g.generation},
          {"ranks", std::move(ranks)},
          {"imbalance", FiniteOrNull(g.imbalance)},
          {"fallback", g.fallback}};
}

nlohmann::json SanityJson(const client::OutputSanity& s) {
  return {{"nonfinite", s.nonfinite},
          {"constant", s.constant},
          {"rms", FiniteOrNull(s.rms)},
          {"peak_abs", FiniteOrNull(s.peak_abs)},
          {"clipped_fraction", FiniteOrNull(s.clipped_fraction)}};
}

nlohmann::json TilingJson(const client::TilingInfo& t) {
  return {{"tile_rows", t.tile_rows},
          {"tile_cols", t.tile_cols},
          {"windows", t.windows},
          {"decoder_calls", t.decoder_calls},
          {"max_tiles_per_call", t.max_tiles_per_call},
          {"stacked", t.stacked},
          {"stack_decision", t.stack_decision},
          {"planned_tiles_per_call", t.planned_tiles_per_call},
          {"final_tiles_per_call", t.final_tiles_per_call},
          {"fallbacks", t.fallbacks},
          {"plan_decision", t.plan_decision},
          {"planned_calls", t.planned_calls},
          {"eager_calls", t.eager_calls},
          {"estimated_peak_bytes", t.estimated_peak_bytes}};
}

// Every key of the object, comparisons and audio still null.
nlohmann::json ReplyJson(const DecodeReport& report) {
  const client::DecodeReply& r = report.reply;
  const Quality& q = report.quality;
  const bool video = report.has_video();
  nlohmann::json timings = nlohmann::json::object();
  for (const auto& t : r.timings) timings[t.component] = t.seconds;
  std::vector<std::string> notes = q.notes;
  if (report.audio) {
    notes.insert(notes.end(), report.audio->quality.notes.begin(),
                 report.audio->quality.notes.end());
  }
  return {
      {"model", r.model},
      {"demo_weights", r.demo_weights},
      {"frames", r.frames},
      {"height_px", r.height_px},
      {"width_px", r.width_px},
      {"latent_shape", r.latent_shape},
      {"latent_dtype",
       video ? nlohmann::json(std::string(DTypeName(r.latent_dtype))) : nlohmann::json(nullptr)},
      {"latent_source", video ? nlohmann::json(report.latent_source) : nlohmann::json(nullptr)},
      {"compute_dtype", r.compute_dtype},
      {"warm", r.warm},
      {"timings", timings},
      {"round_trip_seconds", report.round_trip_seconds},
      {"nonfinite_outputs", r.nonfinite_outputs},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"tiling", r.tiling ? TilingJson(*r.tiling) : nlohmann::json(nullptr)},
      {"format", ops::NameOf(VideoFileFormatNames(), report.format)},
      {"outputs", report.outputs},
      {"original_key", StringOrNull(q.original_key)},
      {"reference_key", StringOrNull(q.reference_key)},
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
       video && r.video_sanity ? SanityJson(*r.video_sanity) : nlohmann::json(nullptr)},
      {"fps", r.fps > 0 ? nlohmann::json(r.fps) : nlohmann::json(nullptr)},
      {"video_seconds", video ? nlohmann::json(r.video_seconds) : nlohmann::json(nullptr)},
      {"expected_audio_latent_frames", r.expected_audio_latent_frames != 0
                                           ? nlohmann::json(r.expected_audio_latent_frames)
                                           : nlohmann::json(nullptr)},
      {"independent_lengths", r.independent_lengths},
      {"av_lengths_match", nullptr},
      {"audio", nullptr},
      {"group", GroupJson(r)},
      {"profile", r.profile},
      {"compile_decision", r.compile_decision},
      {"stack_decision", r.stack_decision},
      {"output_changing", r.output_changing},
      {"mp4_streamed", report.mp4 ? nlohmann::json(report.mp4->streamed) : nlohmann::json(nullptr)},
      {"mp4_tail_seconds",
       report.mp4 ? nlohmann::json(report.mp4->tail_seconds) : nlohmann::json(nullptr)},
  };
}

// The video comparisons that were made.
void SetQuality(const Quality& q, nlohmann::json* j) {
  if (q.psnr_vs_original) {
    (*j)["psnr_vs_original_db"] = Db(q.psnr_vs_original->mean_db);
    (*j)["psnr_vs_original_min_db"] = Db(q.psnr_vs_original->min_db);
    (*j)["psnr_vs_original_max_db"] = Db(q.psnr_vs_original->max_db);
  }
  if (q.reference_psnr_vs_original) {
    (*j)["reference_psnr_vs_original_db"] = Db(q.reference_psnr_vs_original->mean_db);
    if (q.psnr_vs_original) {
      (*j)["psnr_difference_db"] =
          Db(q.psnr_vs_original->mean_db - q.reference_psnr_vs_original->mean_db);
    }
  }
  if (q.vs_reference) {
    (*j)["max_abs_diff_vs_reference"] = q.vs_reference->max_abs_diff;
    (*j)["values_differing_from_reference"] = q.vs_reference->values_differing;
    (*j)["values_compared"] = q.vs_reference->values;
  }
}

// The "audio" object: the daemon's view (info), what was written and the
// comparison.
nlohmann::json AudioJson(const AudioReport& a, const client::AudioInfo& info) {
  nlohmann::json audio = {
      {"latent_source", a.latent_source},
      {"latent_shape", info.latent_shape},
      {"latent_dtype", a.latent_dtype == DType::kUnknown
                           ? nlohmann::json(nullptr)
                           : nlohmann::json(std::string(DTypeName(a.latent_dtype)))},
      {"latent_frames", info.latent_frames},
      {"channels", info.channels},
      {"samples", info.samples},
      {"sample_rate_hz", info.sample_rate_hz},
      {"seconds", info.seconds},
      {"nonfinite", nullptr},
      {"rms", nullptr},
      {"peak_abs", nullptr},
      {"clipped_fraction", nullptr},
      {"constant", nullptr},
      {"max_abs_diff_vs_reference",
       a.quality.max_abs_diff ? nlohmann::json(*a.quality.max_abs_diff) : nlohmann::json(nullptr)},
      {"values_compared", a.quality.reference_key.empty()
                              ? nlohmann::json(nullptr)
                              : nlohmann::json(a.quality.values_compared)},
      {"reference_key", StringOrNull(a.quality.reference_key)},
      {"wav", StringOrNull(a.wav)},
      {"wav_format", ops::NameOf(WavSampleFormatNames(), a.wav_format)},
  };
  if (info.sanity) {
    const client::OutputSanity& sanity = *info.sanity;
    audio["nonfinite"] = sanity.nonfinite;
    audio["rms"] = FiniteOrNull(sanity.rms);
    audio["peak_abs"] = FiniteOrNull(sanity.peak_abs);
    audio["clipped_fraction"] = FiniteOrNull(sanity.clipped_fraction);
    audio["constant"] = sanity.constant;
  }
  return audio;
}

}  // namespace

nlohmann::json DecodeReportToJson(const DecodeReport& report) {
  const client::DecodeReply& r = report.reply;
  nlohmann::json j = ReplyJson(report);
  SetQuality(report.quality, &j);
  if (report.audio) {
    // A reply without its audio part reads as an empty AudioInfo (zeros).
    const client::AudioInfo info = r.audio.value_or(client::AudioInfo{});
    j["audio"] = AudioJson(*report.audio, info);
    if (report.has_video() && r.expected_audio_latent_frames != 0) {
      j["av_lengths_match"] = r.expected_audio_latent_frames == info.latent_frames;
    }
  }
  return j;
}

}  // namespace vaed::vaectl
