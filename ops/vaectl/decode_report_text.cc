// FormatDecodeReport (decode_report.h): the human-readable `vaectl decode`
// report, one section per function below in the order they print.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ops/common/text_format.h"
#include "ops/vaectl/decode_report.h"
#include "vaed/tensor_ref.h"

namespace vaed::vaectl {
namespace {

std::string DbText(double db) { return ops::FormatFixed(db, 2) + " dB"; }

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

// "1.24e-06": audio differences span many decades.
std::string Scientific(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", x);
  return buf;
}

// The loud banner of a decode by demo (random) weights.
void PrintDemoBanner(const client::DecodeReply& r, std::ostream& out) {
  if (!r.demo_weights) return;
  out << "!!! DEMO WEIGHTS: model '" << r.model
      << "' has deterministic random weights, not a trained decoder.\n"
      << "!!! Its outputs are not images or sound; use them to test plumbing, not quality.\n\n";
}

// "<n> non-finite, rms <r>, peak |x| <p>": the non-finite count first, and
// for an output with no finite value (rms and peak NaN, postprocess.h)
// "every value non-finite (NaN/Inf)" instead of figures that would read as
// silence.
std::string ValueFigures(const client::OutputSanity& s) {
  if (std::isnan(s.rms) && s.nonfinite > 0) {
    return "every value non-finite (NaN/Inf): " + std::to_string(s.nonfinite) +
           " non-finite, no rms or peak";
  }
  return std::to_string(s.nonfinite) + " non-finite, rms " + ops::FormatFixed(s.rms, 4) +
         ", peak |x| " + ops::FormatFixed(s.peak_abs, 4);
}

// The video latent, output and raw-output check lines.
void PrintVideo(const DecodeReport& report, std::ostream& out, std::vector<std::string>* warnings) {
  const client::DecodeReply& r = report.reply;
  out << "latent       " << report.latent_source << "  " << DTypeName(r.latent_dtype) << " "
      << ShapeToString(r.latent_shape) << "\n"
      << "output       " << Plural(r.frames, "frame") << ", " << r.width_px << "x" << r.height_px
      << " px (WxH), uint8 NHWC RGB, " << ops::HumanBytes(r.output_bytes) << "\n";
  if (r.video_sanity) {
    const client::OutputSanity& s = *r.video_sanity;
    out << "video check  " << ValueFigures(s) << " (raw decoder output)\n";
    if (s.constant) {
      warnings->push_back("the video is constant (every value equal): a blank or railed decode");
    }
  }
}

// The audio latent, output and check lines.
void PrintAudio(const DecodeReport& report, std::ostream& out, std::vector<std::string>* warnings) {
  // A reply without its audio part reads as an empty AudioInfo (zeros).
  const client::AudioInfo a = report.reply.audio.value_or(client::AudioInfo{});
  out << "audio latent " << report.audio->latent_source << "  "
      << DTypeName(report.audio->latent_dtype) << " " << ShapeToString(a.latent_shape) << ", "
      << Plural(a.latent_frames, "latent frame") << "\n"
      << "audio        " << Plural(a.channels, "channel")
      << (a.channels == 1   ? " (mono)"
          : a.channels == 2 ? " (stereo L,R)"
                            : "")
      << ", " << a.samples << " samples at " << a.sample_rate_hz
      << " Hz = " << ops::FormatFixed(a.seconds, 3) << " s, float32 planar "
      << ShapeToString(a.output_shape) << ", " << ops::HumanBytes(a.output_bytes) << "\n";
  if (!a.sanity) return;
  const client::OutputSanity& s = *a.sanity;
  out << "audio check  " << ValueFigures(s) << ", clipped "
      << ops::FormatFixed(100.0 * s.clipped_fraction, 2) << " %\n";
  if (s.nonfinite != 0) {
    warnings->push_back(std::to_string(s.nonfinite) + " non-finite (NaN/Inf) audio samples");
  }
  if (s.constant) {
    warnings->push_back("the audio is constant (every sample " + ops::FormatFixed(s.peak_abs, 4) +
                        " in magnitude): silent or railed, not sound");
  }
}

// The A/V line: video and audio lengths against the model's rule (when it
// states one, for a request with video).
void PrintAvLengths(const DecodeReport& report, std::ostream& out) {
  const client::DecodeReply& r = report.reply;
  if (!report.has_video() || r.expected_audio_latent_frames == 0) return;
  out << "A/V          video " << ops::FormatFixed(r.video_seconds, 3) << " s ("
      << Plural(r.frames, "frame") << " at " << FormatFps(r.fps) << " fps)";
  const uint64_t expected = r.expected_audio_latent_frames;
  if (report.audio) {
    const client::AudioInfo audio = r.audio.value_or(client::AudioInfo{});
    const uint64_t given = audio.latent_frames;
    out << ", audio " << ops::FormatFixed(audio.seconds, 3) << " s ("
        << Plural(given, "latent frame") << "); the video needs "
        << Plural(expected, "audio latent frame") << ": ";
    if (given == expected) {
      out << "match" << (r.independent_lengths ? " (independent lengths requested)" : "");
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

// The compute, profile and output-changing lines: how the daemon decoded.
void PrintDecisions(const client::DecodeReply& r, std::ostream& out) {
  out << "compute      " << (r.compute_dtype.empty() ? "?" : r.compute_dtype) << ", "
      << (r.warm ? "warm" : "cold (first decode of this shape bucket on its rank)");
  if (r.peak_rss_bytes != 0) out << ", peak RSS " << ops::HumanBytes(r.peak_rss_bytes);
  if (r.peak_tensor_bytes != 0) {
    out << ", peak tensors " << ops::HumanBytes(r.peak_tensor_bytes);
    if (r.memory_budget_bytes != 0) {
      out << " of a " << ops::HumanBytes(r.memory_budget_bytes) << " budget";
    }
  }
  out << "\n";
  out << "profile      " << (r.profile.empty() ? "?" : r.profile) << "; compile "
      << (r.compile_decision.empty() ? "-" : r.compile_decision);
  if (!r.stack_decision.empty()) out << "; tiles " << r.stack_decision;
  out << "\n";
  for (const auto& k : r.output_changing) out << "OUTPUT       changed by " << k << "\n";
}

// The tiling, plans and tiling fallback lines.
void PrintTiling(const client::TilingInfo& t, std::ostream& out) {
  out << "tiling       " << t.tile_rows << "x" << t.tile_cols
      << (t.tile_rows * t.tile_cols == 1 ? " tile x " : " tiles x ") << Plural(t.windows, "window")
      << ", " << Plural(t.decoder_calls, "decoder call") << ", up to "
      << Plural(t.max_tiles_per_call, "tile") << " per call (" << t.stack_decision << ")\n";
  if (!t.plan_decision.empty()) {
    out << "plans        " << t.plan_decision << " (" << t.planned_calls << " planned, "
        << t.eager_calls << " eager calls)\n";
  }
  for (const auto& f : t.fallbacks) out << "FALLBACK     " << f << "\n";
}

// The group line (each rank's tiles and decode seconds) and its fallback.
void PrintGroup(const client::GroupReport& g, std::ostream& out) {
  out << "group        " << g.name << " (" << Plural(g.size, "rank") << ", generation "
      << g.generation << "):";
  const char* sep = " ";
  for (const client::RankReport& k : g.ranks) {
    out << sep << "rank " << k.rank << " " << Plural(k.tiles, "tile") << " "
        << ops::FormatFixed(k.decode_seconds, 2) << " s";
    sep = ", ";
  }
  out << "; imbalance " << ops::FormatFixed(g.imbalance, 2) << "\n";
  if (!g.fallback.empty()) out << "FALLBACK     group: " << g.fallback << "\n";
}

// The summary above the timing table, ending with its WARNING lines.
void PrintSummary(const DecodeReport& report, std::ostream& out) {
  const client::DecodeReply& r = report.reply;
  std::vector<std::string> warnings;
  out << "model        " << r.model << (r.demo_weights ? " (DEMO weights)" : "") << "\n";
  if (report.has_video()) PrintVideo(report, out, &warnings);
  if (report.audio) PrintAudio(report, out, &warnings);
  PrintAvLengths(report, out);
  PrintDecisions(r, out);
  if (r.tiling) PrintTiling(*r.tiling, out);
  if (r.group) PrintGroup(*r.group, out);
  if (r.nonfinite_outputs != 0) {
    out << "WARNING      " << r.nonfinite_outputs << " non-finite (NaN/Inf) output values\n";
  }
  for (const auto& w : warnings) out << "WARNING      " << w << "\n";
  out << "\n";
}

// Seconds and milliseconds per component, then the client's round trip
// and, for an MP4, the seconds from the reply to the complete file.
void PrintTimings(const DecodeReport& report, std::ostream& out) {
  ops::TextTable timings({"component", "seconds", "ms"}, {false, true, true});
  for (const auto& t : report.reply.timings) {
    timings.AddRow(
        {t.component, ops::FormatFixed(t.seconds, 4), ops::FormatFixed(t.seconds * 1e3, 1)});
  }
  timings.AddRow({"(client round trip)", ops::FormatFixed(report.round_trip_seconds, 4),
                  ops::FormatFixed(report.round_trip_seconds * 1e3, 1)});
  if (report.mp4) {
    const double tail = report.mp4->tail_seconds;
    timings.AddRow(
        {report.mp4->streamed ? "(mp4 after reply, streamed)" : "(mp4 after reply, not streamed)",
         ops::FormatFixed(tail, 4), ops::FormatFixed(tail * 1e3, 1)});
  }
  out << timings.Render();
}

// The comparisons that were made (a table, when any was), then the notes
// on those that were not.
void PrintQuality(const DecodeReport& report, std::ostream& out) {
  const Quality& q = report.quality;
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
}

// "wrote N files" and the paths (the first and last of more than three).
void PrintOutputs(const std::vector<std::string>& outputs, std::ostream& out) {
  if (outputs.empty()) return;
  out << "\nwrote " << Plural(outputs.size(), "file");
  if (outputs.size() <= 3) {
    for (const auto& p : outputs) out << "\n  " << p;
  } else {
    out << "\n  " << outputs.front() << "\n  ...\n  " << outputs.back();
  }
  out << "\n";
}

}  // namespace

std::string FormatDecodeReport(const DecodeReport& report) {
  std::ostringstream out;
  PrintDemoBanner(report.reply, out);
  PrintSummary(report, out);
  PrintTimings(report, out);
  PrintQuality(report, out);
  PrintOutputs(report.outputs, out);
  return out.str();
}

}  // namespace vaed::vaectl
