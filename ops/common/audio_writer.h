// Writing decoded audio (float32, planar [channels, samples]) to RIFF/WAVE
// files, and reading such files back.
//
// The H3 audio decoder gives 32 kHz mono or stereo float32 samples in
// [-1, 1], channel-major: all of channel 0's samples, then channel 1's
// (spec/h3_vae.md §3.1). WAV stores them interleaved; WriteWav and ReadWav
// convert between the two layouts.
//
// The WAV writer is our own (no ffmpeg needed). Header fields and samples
// are written little-endian byte by byte, so the files do not depend on the
// host's byte order.
//
// Errors: kInvalidArgument for inconsistent audio geometry, audio too long
// for a WAV file (its sizes are 32-bit) or a file that is not a WAV file
// ReadWav can read; kIoError naming the path when a file cannot be written;
// ReadWav reports a file it cannot open through ErrnoStatus (kNotFound for
// a missing file).
//
// Thread-safety: functions may run concurrently on different files.
#ifndef VAED_OPS_COMMON_AUDIO_WRITER_H_
#define VAED_OPS_COMMON_AUDIO_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::ops {

// Bounds that CheckPlanarAudio enforces. 8 channels is the most a WAV
// speaker mask names in common use (7.1); the sample-rate range covers
// everything from telephone-band tests to high-rate studio audio.
inline constexpr int64_t kMaxAudioChannels = 8;
inline constexpr int64_t kMinAudioSampleRateHz = 1000;
inline constexpr int64_t kMaxAudioSampleRateHz = 384000;

// Decoded audio: float32 [channels, samples] planar (channel-major,
// C-contiguous), nominally in [-1, 1]. `samples` counts samples per
// channel, not in total. Non-owning.
struct PlanarAudio {
  std::span<const float> data;
  int64_t channels = 0;
  int64_t samples = 0;  // per channel
  int64_t sample_rate_hz = 0;
};

// kInvalidArgument unless channels is in [1, kMaxAudioChannels], samples is
// positive, sample_rate_hz is in [kMinAudioSampleRateHz,
// kMaxAudioSampleRateHz] and data.size() equals channels * samples.
Status CheckPlanarAudio(const PlanarAudio& audio);

// How WriteWav stores samples.
enum class WavSampleFormat {
  // 16-bit signed PCM (WAVE_FORMAT_PCM). Each sample is clamped to
  // [-1, 1], multiplied by 32767 and rounded half away from zero (std::round),
  // so the codes are symmetric, -32767..32767 (-32768 is never written).
  // NaN is written as 0; +-inf clamps like any other out-of-range value.
  kPcm16,
  // 32-bit IEEE float (WAVE_FORMAT_IEEE_FLOAT, with the `fact` chunk that
  // non-PCM WAV files must carry). Values, including NaN and out-of-range
  // ones, are written unchanged.
  kFloat32,
};

// What WriteWav found in the samples it wrote.
struct WavWriteStats {
  // NaN samples. kPcm16 wrote them as 0; kFloat32 wrote them unchanged.
  int64_t nan_samples = 0;
  // Samples outside [-1, 1] (including +-inf). kPcm16 clamped them;
  // kFloat32 wrote them unchanged.
  int64_t out_of_range_samples = 0;
};

// Writes `audio` to the WAV file `path` (created or truncated), channels
// interleaved. With 1 or 2 channels the fmt chunk uses the plain format
// tag (PCM or IEEE float); with more it uses WAVE_FORMAT_EXTENSIBLE, as the
// WAV spec requires, with a channel mask of 0 (no speaker positions given).
//
// Returns the sample statistics on success. Errors: kInvalidArgument from
// CheckPlanarAudio or when the data would not fit a WAV file's 32-bit sizes
// (nothing is written then); kIoError naming `path` when it cannot be
// created or written (a partly written regular file is removed).
Result<WavWriteStats> WriteWav(const PlanarAudio& audio, const std::string& path,
                               WavSampleFormat format = WavSampleFormat::kPcm16);

// Audio read back from a WAV file. Owns its samples.
struct WavAudio {
  std::vector<float> data;  // float32 [channels, samples], planar
  int64_t channels = 0;
  int64_t samples = 0;  // per channel
  int64_t sample_rate_hz = 0;
  WavSampleFormat format = WavSampleFormat::kPcm16;  // how the file stored them

  // A view of `data`; valid while this object lives and is not modified.
  PlanarAudio view() const { return {data, channels, samples, sample_rate_hz}; }
};

// Reads the WAV file `path`: 16-bit PCM or 32-bit IEEE float, plain or
// WAVE_FORMAT_EXTENSIBLE, which covers everything WriteWav writes. Chunks
// other than `fmt ` and `data` (fact, LIST, ...) are skipped. 16-bit codes
// are divided by 32767, the inverse of WriteWav, so a WriteWav/ReadWav
// round trip is within 0.5/32767 of the clamped input (a foreign file's
// -32768 reads as -32768/32767, slightly below -1).
//
// Errors: the ErrnoStatus of opening or reading `path` (kNotFound when it
// does not exist); kInvalidArgument naming `path` and the broken rule for
// a malformed or truncated file, an unsupported encoding (e.g. 24-bit PCM),
// or audio that CheckPlanarAudio rejects (e.g. an empty data chunk).
Result<WavAudio> ReadWav(const std::string& path);

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_AUDIO_WRITER_H_
