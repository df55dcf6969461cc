#include "daemon/models/av_sync.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace vaed::models {

namespace {

// Shortest decimal that prints a rate as given: "24", "23.976".
std::string FormatRate(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

int64_t AudioLatentFramesForVideo(int64_t video_frames, double fps, double audio_latent_rate_hz) {
  // Python: round(num_frames / 24 * 40). std::nearbyint rounds half to even
  // in the default FE_TONEAREST mode, which the daemon never changes.
  const double exact = static_cast<double>(video_frames) / fps * audio_latent_rate_hz;
  if (!std::isfinite(exact) || std::fabs(exact) >= 9.0e18) return -1;
  return static_cast<int64_t>(std::nearbyint(exact));
}

std::string FormatSeconds(double seconds) {
  char buf[48];
  // %.3f of an absurd duration would not fit; such values come only from
  // absurd frame rates, so print them in scientific notation.
  std::snprintf(buf, sizeof buf, std::fabs(seconds) < 1e12 ? "%.3f s" : "%.3g s", seconds);
  return buf;
}

Status CheckAvLengths(const AvLengths& l) {
  const int64_t needed = AudioLatentFramesForVideo(l.video_frames, l.fps, l.audio_latent_rate_hz);
  if (needed == l.audio_latent_frames) return Status::Ok();
  const double sr = static_cast<double>(l.sample_rate_hz);
  const int64_t got_samples = l.audio_latent_frames * l.samples_per_latent;
  std::string msg = "audio_latent.shape[2] is " + std::to_string(l.audio_latent_frames) +
                    " audio latent frames (" + std::to_string(got_samples) + " samples, " +
                    FormatSeconds(static_cast<double>(got_samples) / sr) +
                    ") but the video has " + std::to_string(l.video_frames) + " frames at " +
                    FormatRate(l.fps) + " fps (" +
                    FormatSeconds(static_cast<double>(l.video_frames) / l.fps) + "), which needs ";
  if (needed < 0) {
    msg += "an audio length that does not fit in 64 bits";
  } else {
    msg += "round(" + std::to_string(l.video_frames) + " / " + FormatRate(l.fps) + " * " +
           FormatRate(l.audio_latent_rate_hz) + ") = " + std::to_string(needed) +
           " audio latent frames (" + std::to_string(needed * l.samples_per_latent) + " samples)";
  }
  msg += "; set av_sync.independent_lengths to decode lengths that differ";
  return InvalidArgument(msg).WithField("av_sync.independent_lengths");
}

}  // namespace vaed::models
