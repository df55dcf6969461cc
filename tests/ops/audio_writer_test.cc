#include "ops/common/audio_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "ops/common/frame_writer.h"
#include "test_util.h"

namespace vaed::ops {
namespace {

namespace fs = std::filesystem;
using ops_test::ReadFile;
using ops_test::TempDir;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// The most a PCM16 round trip may move a sample in [-1, 1]: half a code,
// plus float rounding of the read-back division.
constexpr float kPcm16Tolerance = 0.5f / 32767.0f + 1e-7f;

// Planar [channels, samples] tones, a different frequency and level per
// channel so that a channel swap or interleaving slip shows.
std::vector<float> Tones(int64_t channels, int64_t samples, int64_t rate_hz) {
  std::vector<float> v(static_cast<size_t>(channels * samples));
  for (int64_t c = 0; c < channels; ++c) {
    const double freq = 440.0 * static_cast<double>(c + 1);
    const double level = 0.9 / static_cast<double>(c + 1);
    for (int64_t t = 0; t < samples; ++t) {
      v[static_cast<size_t>(c * samples + t)] = static_cast<float>(
          level * std::sin(2 * std::numbers::pi * freq * static_cast<double>(t) / rate_hz));
    }
  }
  return v;
}

// Little-endian byte strings, to spell expected file contents.
std::string Le16(uint16_t v) { return {static_cast<char>(v & 0xff), static_cast<char>(v >> 8)}; }
std::string Le32(uint32_t v) { return Le16(static_cast<uint16_t>(v)) + Le16(v >> 16); }
std::string LeF32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return Le32(u);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// A hand-built WAV file: RIFF header around the given chunks.
std::string Riff(const std::string& chunks) {
  return "RIFF" + Le32(static_cast<uint32_t>(4 + chunks.size())) + "WAVE" + chunks;
}
std::string Chunk(const std::string& id, const std::string& body) {
  std::string c = id + Le32(static_cast<uint32_t>(body.size())) + body;
  if (body.size() % 2 == 1) c += '\0';
  return c;
}
std::string PcmFmt(uint16_t channels, uint32_t rate, uint16_t bits, uint16_t tag = 1) {
  const uint16_t align = static_cast<uint16_t>(channels * bits / 8);
  return Chunk("fmt ", Le16(tag) + Le16(channels) + Le32(rate) + Le32(rate * align) + Le16(align) +
                           Le16(bits));
}

// --- CheckPlanarAudio ------------------------------------------------------

TEST(CheckPlanarAudioTest, AcceptsConsistentGeometry) {
  const std::vector<float> data(2 * 5);
  EXPECT_TRUE(CheckPlanarAudio({data, 2, 5, 32000}).ok());
  EXPECT_TRUE(CheckPlanarAudio({data, 1, 10, 32000}).ok());
}

TEST(CheckPlanarAudioTest, RejectsBadGeometry) {
  const std::vector<float> data(2 * 5);
  for (const PlanarAudio& a : {
           PlanarAudio{data, 2, 4, 32000},    // size mismatch
           PlanarAudio{data, 0, 5, 32000},    // no channels
           PlanarAudio{data, 10, 1, 32000},   // more than 8 channels
           PlanarAudio{data, 2, 0, 32000},    // no samples
           PlanarAudio{data, 2, -5, 32000},   // negative samples
           PlanarAudio{data, 2, 5, 0},        // no sample rate
           PlanarAudio{data, 2, 5, 500},      // below the sane range
           PlanarAudio{data, 2, 5, 1000000},  // above it
       }) {
    Status s = CheckPlanarAudio(a);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument)
        << a.channels << "x" << a.samples << " @" << a.sample_rate_hz;
    EXPECT_THAT(s.message(), HasSubstr("audio: "));
  }
  // 8 * (2^61 + 2) wraps to 16 in 64 bits; the check must not be fooled.
  const std::vector<float> sixteen(16);
  EXPECT_EQ(CheckPlanarAudio({sixteen, 8, (int64_t{1} << 61) + 2, 32000}).code(),
            StatusCode::kInvalidArgument);
}

// --- WriteWav: exact bytes -------------------------------------------------

TEST(WriteWavTest, Pcm16MonoFileIsExactBytes) {
  TempDir dir;
  const std::vector<float> data = {0.0f, 1.0f, -1.0f};
  auto stats = WriteWav({data, 1, 3, 32000}, dir / "a.wav");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const std::string want = "RIFF" + Le32(36 + 6) + "WAVE" +  //
                           "fmt " + Le32(16) +               //
                           Le16(1) +                         // WAVE_FORMAT_PCM
                           Le16(1) +                         // channels
                           Le32(32000) +                     // sample rate
                           Le32(64000) +                     // bytes per second
                           Le16(2) +                         // block align
                           Le16(16) +                        // bits per sample
                           "data" + Le32(6) +                //
                           Le16(0) + Le16(32767) + Le16(static_cast<uint16_t>(-32767));
  EXPECT_EQ(ReadFile(dir / "a.wav"), want);
  EXPECT_EQ(stats->nan_samples, 0);
  EXPECT_EQ(stats->out_of_range_samples, 0);
}

TEST(WriteWavTest, Float32StereoFileIsExactBytesWithFactChunkAndInterleaving) {
  TempDir dir;
  // Planar: left = {0.25, -0.5}, right = {1.5, -3.0}.
  const std::vector<float> data = {0.25f, -0.5f, 1.5f, -3.0f};
  auto stats = WriteWav({data, 2, 2, 32000}, dir / "f.wav", WavSampleFormat::kFloat32);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const std::string want = "RIFF" + Le32(50 + 16) + "WAVE" +  //
                           "fmt " + Le32(18) +                //
                           Le16(3) +                          // WAVE_FORMAT_IEEE_FLOAT
                           Le16(2) +                          // channels
                           Le32(32000) +                      // sample rate
                           Le32(256000) +                     // bytes per second
                           Le16(8) +                          // block align
                           Le16(32) +                         // bits per sample
                           Le16(0) +                          // cbSize
                           "fact" + Le32(4) + Le32(2) +       // sample frames
                           "data" + Le32(16) +                //
                           LeF32(0.25f) + LeF32(1.5f) + LeF32(-0.5f) + LeF32(-3.0f);
  EXPECT_EQ(ReadFile(dir / "f.wav"), want);
  // Out-of-range values are written unchanged but counted.
  EXPECT_EQ(stats->out_of_range_samples, 2);
}

TEST(WriteWavTest, MoreThanTwoChannelsUseWaveFormatExtensible) {
  TempDir dir;
  const auto data = Tones(3, 4, 32000);
  for (auto format : {WavSampleFormat::kPcm16, WavSampleFormat::kFloat32}) {
    const bool is_float = format == WavSampleFormat::kFloat32;
    ASSERT_TRUE(WriteWav({data, 3, 4, 32000}, dir / "x.wav", format).ok());
    const std::string bytes = ReadFile(dir / "x.wav");
    const uint16_t bits = is_float ? 32 : 16;
    const std::string fmt =
        "fmt " + Le32(40) + Le16(0xFFFE) + Le16(3) + Le32(32000) + Le32(32000u * 3 * bits / 8) +
        Le16(3 * bits / 8) + Le16(bits) + Le16(22) + Le16(bits) +
        Le32(0) +  // cbSize, valid bits, mask
        Le16(is_float ? 3 : 1) +
        std::string("\x00\x00\x00\x00\x10\x00\x80\x00\x00\xAA\x00\x38\x9B\x71", 14);
    EXPECT_EQ(bytes.substr(12, fmt.size()), fmt);
    EXPECT_EQ(bytes.substr(12 + fmt.size(), 4), is_float ? "fact" : "data");
  }
}

// --- WriteWav: sample conversion ------------------------------------------

TEST(WriteWavTest, Pcm16ClampsAndRoundsHalfAwayFromZero) {
  TempDir dir;
  // 0.5 * 32767 = 16383.5 exactly: a tie, rounded away from zero.
  const std::vector<float> data = {1.5f, -2.0f, kInf, -kInf, 0.5f, -0.5f, 0.25f, -1e-6f};
  auto stats = WriteWav({data, 1, 8, 16000}, dir / "c.wav");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const std::string bytes = ReadFile(dir / "c.wav");
  ASSERT_EQ(bytes.size(), 44u + 16u);
  const std::string want = Le16(32767) + Le16(static_cast<uint16_t>(-32767)) + Le16(32767) +
                           Le16(static_cast<uint16_t>(-32767)) + Le16(16384) +
                           Le16(static_cast<uint16_t>(-16384)) + Le16(8192) + Le16(0);
  EXPECT_EQ(bytes.substr(44), want);
  EXPECT_EQ(stats->out_of_range_samples, 4);
  EXPECT_EQ(stats->nan_samples, 0);
}

TEST(WriteWavTest, Pcm16WritesNanAsZeroAndCountsIt) {
  TempDir dir;
  const std::vector<float> data = {0.5f, kNaN, kNaN, -0.5f};  // stereo, 2 samples
  auto stats = WriteWav({data, 2, 2, 32000}, dir / "n.wav");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->nan_samples, 2);
  EXPECT_EQ(stats->out_of_range_samples, 0);
  // Interleaved: L0=0.5, R0=NaN, L1=NaN, R1=-0.5.
  EXPECT_EQ(ReadFile(dir / "n.wav").substr(44),
            Le16(16384) + Le16(0) + Le16(0) + Le16(static_cast<uint16_t>(-16384)));
}

TEST(WriteWavTest, Float32KeepsNanAndCountsIt) {
  TempDir dir;
  const std::vector<float> data = {kNaN, 0.125f};
  auto stats = WriteWav({data, 1, 2, 32000}, dir / "n.wav", WavSampleFormat::kFloat32);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->nan_samples, 1);
  auto back = ReadWav(dir / "n.wav");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(back->data[0]));
  EXPECT_EQ(back->data[1], 0.125f);
}

// --- Round trips -----------------------------------------------------------

TEST(WavRoundTripTest, Pcm16MonoAndStereoWithinHalfACode) {
  TempDir dir;
  for (int64_t channels : {1, 2}) {
    SCOPED_TRACE(channels);
    // Longer than the writer's interleaving block.
    const int64_t samples = 40000;
    const auto data = Tones(channels, samples, 32000);
    ASSERT_TRUE(WriteWav({data, channels, samples, 32000}, dir / "p.wav").ok());
    auto back = ReadWav(dir / "p.wav");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->channels, channels);
    EXPECT_EQ(back->samples, samples);
    EXPECT_EQ(back->sample_rate_hz, 32000);
    EXPECT_EQ(back->format, WavSampleFormat::kPcm16);
    ASSERT_EQ(back->data.size(), data.size());
    float max_err = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      max_err = std::max(max_err, std::abs(back->data[i] - data[i]));
    }
    EXPECT_LE(max_err, kPcm16Tolerance);
  }
}

TEST(WavRoundTripTest, Float32MonoAndStereoAreBitExact) {
  TempDir dir;
  for (int64_t channels : {1, 2}) {
    SCOPED_TRACE(channels);
    const int64_t samples = 40000;
    const auto data = Tones(channels, samples, 32000);
    ASSERT_TRUE(
        WriteWav({data, channels, samples, 32000}, dir / "f.wav", WavSampleFormat::kFloat32).ok());
    auto back = ReadWav(dir / "f.wav");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->channels, channels);
    EXPECT_EQ(back->samples, samples);
    EXPECT_EQ(back->sample_rate_hz, 32000);
    EXPECT_EQ(back->format, WavSampleFormat::kFloat32);
    EXPECT_EQ(back->data, data);
  }
}

TEST(WavRoundTripTest, ExtensibleFilesReadBack) {
  TempDir dir;
  const auto data = Tones(6, 100, 48000);
  ASSERT_TRUE(WriteWav({data, 6, 100, 48000}, dir / "f.wav", WavSampleFormat::kFloat32).ok());
  auto back = ReadWav(dir / "f.wav");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->channels, 6);
  EXPECT_EQ(back->sample_rate_hz, 48000);
  EXPECT_EQ(back->data, data);

  ASSERT_TRUE(WriteWav({data, 6, 100, 48000}, dir / "p.wav").ok());
  back = ReadWav(dir / "p.wav");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->format, WavSampleFormat::kPcm16);
  EXPECT_NEAR(back->data[250], data[250], kPcm16Tolerance);
}

// ffmpeg is an independent reader: it must see the encoding and geometry
// that we meant to write.
TEST(WavRoundTripTest, FfprobeReadsWhatWriteWavWrites) {
  if (!FindExecutable("ffprobe").ok()) GTEST_SKIP() << "ffprobe not installed";
  TempDir dir;
  struct Case {
    int64_t channels;
    WavSampleFormat format;
    const char* codec;
  };
  for (const Case& c : {Case{2, WavSampleFormat::kPcm16, "pcm_s16le"},
                        Case{1, WavSampleFormat::kFloat32, "pcm_f32le"},
                        Case{3, WavSampleFormat::kFloat32, "pcm_f32le"}}) {
    SCOPED_TRACE(c.codec + std::to_string(c.channels));
    const auto data = Tones(c.channels, 3200, 32000);
    ASSERT_TRUE(WriteWav({data, c.channels, 3200, 32000}, dir / "w.wav", c.format).ok());
    const std::string probe =
        ops_test::RunCommand(
            "ffprobe -v error -show_entries stream=codec_name,channels,sample_rate,duration_ts "
            "-of default=nw=1 '" +
            (dir / "w.wav") + "'")
            .out;
    EXPECT_THAT(probe, HasSubstr(std::string("codec_name=") + c.codec));
    EXPECT_THAT(probe, HasSubstr("channels=" + std::to_string(c.channels)));
    EXPECT_THAT(probe, HasSubstr("sample_rate=32000"));
    EXPECT_THAT(probe, HasSubstr("duration_ts=3200"));
  }
}

// --- WriteWav errors -------------------------------------------------------

TEST(WriteWavTest, BadGeometryIsInvalidArgumentAndWritesNothing) {
  TempDir dir;
  const std::vector<float> data(7);
  auto r = WriteWav({data, 2, 4, 32000}, dir / "bad.wav");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir / "bad.wav"));
  r = WriteWav({data, 1, 7, 10}, dir / "bad.wav");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(WriteWavTest, UnwritablePathIsIoErrorNamingIt) {
  const std::vector<float> data(4);
  auto r = WriteWav({data, 1, 4, 32000}, "/nonexistent/dir/x.wav");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/dir/x.wav"));

  TempDir dir;  // a directory is not a writable file either
  r = WriteWav({data, 1, 4, 32000}, dir.path().string());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
}

TEST(WriteWavTest, FullDeviceIsIoErrorAndLeavesNoFile) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "/dev/full not available";
  const std::vector<float> data(1000);
  auto r = WriteWav({data, 1, 1000, 32000}, "/dev/full");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_THAT(r.status().message(), HasSubstr("/dev/full"));
}

// --- ReadWav errors --------------------------------------------------------

TEST(ReadWavTest, MissingFileIsNotFound) {
  auto r = ReadWav("/nonexistent/x.wav");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(ReadWavTest, SkipsUnknownChunksAndPadBytes) {
  TempDir dir;
  // An odd-sized LIST chunk (with its pad byte) between fmt and data.
  WriteBytes(dir / "l.wav", Riff(PcmFmt(1, 8000, 16) + Chunk("LIST", "abc") +
                                 Chunk("data", Le16(32767) + Le16(0))));
  auto r = ReadWav(dir / "l.wav");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->samples, 2);
  EXPECT_EQ(r->sample_rate_hz, 8000);
  EXPECT_EQ(r->data, (std::vector<float>{1.0f, 0.0f}));
}

TEST(ReadWavTest, RejectsMalformedFilesNamingTheProblem) {
  TempDir dir;
  const std::string data2 = Chunk("data", Le16(1) + Le16(2));
  struct Case {
    const char* name;
    std::string bytes;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"empty", "", "no RIFF/WAVE header"},
      {"text", "hello, this is not audio at all", "no RIFF/WAVE header"},
      {"riff_too_long", "RIFF" + Le32(1000) + "WAVE" + PcmFmt(1, 8000, 16) + data2, "truncated"},
      {"chunk_too_long", Riff(PcmFmt(1, 8000, 16) + "data" + Le32(100) + Le16(1)), "declares"},
      {"no_fmt", Riff(data2), "no 'fmt ' chunk"},
      {"no_data", Riff(PcmFmt(1, 8000, 16)), "no 'data' chunk"},
      {"two_data", Riff(PcmFmt(1, 8000, 16) + data2 + data2), "more than one 'data'"},
      {"pcm24", Riff(PcmFmt(1, 8000, 24) + Chunk("data", "abcdef")), "unsupported encoding"},
      {"alaw", Riff(PcmFmt(1, 8000, 8, 6) + Chunk("data", "ab")), "unsupported encoding"},
      {"bad_align",
       Riff(Chunk("fmt ", Le16(1) + Le16(2) + Le32(8000) + Le32(32000) + Le16(2) + Le16(16)) +
            data2),
       "block_align"},
      {"bad_byte_rate",
       Riff(Chunk("fmt ", Le16(1) + Le16(1) + Le32(8000) + Le32(1) + Le16(2) + Le16(16)) + data2),
       "byte rate"},
      {"partial_frame", Riff(PcmFmt(2, 8000, 16) + Chunk("data", Le16(1) + Le16(2) + Le16(3))),
       "whole number"},
      {"no_samples", Riff(PcmFmt(1, 8000, 16) + Chunk("data", "")), "samples per channel"},
      {"rate_zero", Riff(PcmFmt(1, 0, 16) + data2), "sample_rate_hz"},
      {"nine_channels", Riff(PcmFmt(9, 8000, 16) + Chunk("data", std::string(18, '\0'))),
       "channels"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir / (std::string(c.name) + ".wav");
    WriteBytes(path, c.bytes);
    auto r = ReadWav(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(path));
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST(ReadWavTest, RejectsATruncatedWriteWavFile) {
  TempDir dir;
  const auto data = Tones(2, 100, 32000);
  ASSERT_TRUE(WriteWav({data, 2, 100, 32000}, dir / "t.wav").ok());
  const std::string whole = ReadFile(dir / "t.wav");
  WriteBytes(dir / "t.wav", whole.substr(0, whole.size() - 10));
  auto r = ReadWav(dir / "t.wav");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("truncated"));
}

}  // namespace
}  // namespace vaed::ops
