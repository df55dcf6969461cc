// Media inputs shared by the frame-writing tests in tests/ops: patterned
// frames, a stereo tone as a WAV, whether the ffmpeg tools are installed.
#ifndef VAED_TESTS_OPS_MEDIA_FIXTURES_H_
#define VAED_TESTS_OPS_MEDIA_FIXTURES_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "ops/common/audio_writer.h"
#include "ops/common/frame_writer.h"
#include "test_util.h"

namespace vaed::ops_test {

// `n` bytes of a fixed pattern (uint8 frames that are not flat).
inline std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37 + i / 7) & 0xff);
  return v;
}

inline bool HaveFfmpeg() {
  return ops::FindExecutable("ffmpeg").ok() && ops::FindExecutable("ffprobe").ok();
}

// A 1 s stereo 32 kHz tone (440 Hz left, 660 Hz right) written as
// `dir`/tone.wav; returns its path.
inline std::string WriteStereoTone(const TempDir& dir) {
  const int64_t rate = 32000, samples = 32000;
  std::vector<float> audio(2 * samples);
  for (int64_t t = 0; t < samples; ++t) {
    const double s = 2 * std::numbers::pi * static_cast<double>(t) / rate;
    audio[t] = static_cast<float>(0.5 * std::sin(440 * s));
    audio[samples + t] = static_cast<float>(0.25 * std::sin(660 * s));
  }
  const std::string path = dir / "tone.wav";
  auto stats = ops::WriteWav({audio, 2, samples, rate}, path);
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return path;
}

}  // namespace vaed::ops_test

#endif  // VAED_TESTS_OPS_MEDIA_FIXTURES_H_
