// The audio/video length rule of joint decode requests.
//
// A DiT that generates audio and video together sizes the audio latent
// from the video's frame count (spec/h3_vae.md §3.1, as MiniMax-H3
// pipelines do):
//   audio latent frames = round(frames / fps * audio latent rate)
//   samples             = samples per latent frame * audio latent frames
// with Python's round (half to even) on the double value computed in that
// order; H3: round(frames / 24 * 40), 800 samples each at 32000 Hz (22
// frames -> 37 latent frames -> 29600 samples).
//
// Torch-free. Thread-safety: pure functions.
#ifndef VAED_DAEMON_MODELS_AV_SYNC_H_
#define VAED_DAEMON_MODELS_AV_SYNC_H_

#include <cstdint>
#include <string>

#include "vaed/status.h"

namespace vaed::models {

// The two sides of a joint request. Units in the names.
struct AvLengths {
  int64_t video_frames = 0;          // decoded pixel frames
  double fps = 0;                    // video frames per second (> 0)
  int64_t audio_latent_frames = 0;   // the request's audio latent frames
  double audio_latent_rate_hz = 0;   // audio latent frames per second (> 0)
  int64_t samples_per_latent = 0;    // samples one audio latent frame decodes to
  int64_t sample_rate_hz = 0;        // output samples per second
};

// round_half_even(video_frames / fps * audio_latent_rate_hz), evaluated in
// double in that order. Requires fps > 0 and rate > 0; returns -1 when the
// result does not fit an int64 (absurd inputs).
int64_t AudioLatentFramesForVideo(int64_t video_frames, double fps, double audio_latent_rate_hz);

// OK when lengths.audio_latent_frames equals the rule's count; otherwise
// kInvalidArgument stating both lengths (frames, seconds, latent frames,
// samples), the rule with its numbers, and how to waive it
// (av_sync.independent_lengths), e.g.
//   "audio_latent.shape[2] is 40 audio latent frames (32000 samples,
//    1.000 s) but the video has 22 frames at 24 fps (0.917 s), which needs
//    round(22 / 24 * 40) = 37 audio latent frames (29600 samples); ..."
Status CheckAvLengths(const AvLengths& lengths);

// "0.917 s" style formatting used by the messages above (3 decimals).
std::string FormatSeconds(double seconds);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_AV_SYNC_H_
