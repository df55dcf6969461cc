#include "ops/vaectl/decode_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "ops/vaectl/decode_quality.h"
#include "ops/vaectl/output_plan.h"
#include "safetensors_writer.h"
#include "test_util.h"

namespace vaed::vaectl {
namespace {

namespace fs = std::filesystem;
using ops_test::TempDir;
using ops_test::TestTensor;
using ops_test::WriteSafetensors;
using ::testing::HasSubstr;
using ::testing::Not;

// --------------------------------------------------------------- PlanOutput

TEST(PlanOutputTest, PngDefaultsToFramesDirectoryNamedAfterStem) {
  auto p = PlanOutput(VideoFileFormat::kPng, "", "video_bikes", 16);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, OutputKind::kPngSequence);
  EXPECT_EQ(p->path, "video_bikes_frames");
}

TEST(PlanOutputTest, PngFileForOneFrame) {
  auto p = PlanOutput(VideoFileFormat::kPng, "out/astronaut.png", "photo_astronaut", 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, OutputKind::kPngImage);
  EXPECT_EQ(p->path, "out/astronaut.png");
}

TEST(PlanOutputTest, PngFileForManyFramesIsRejected) {
  auto p = PlanOutput(VideoFileFormat::kPng, "x.png", "bikes", 16);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("16 frames"));
}

TEST(PlanOutputTest, Mp4DefaultsToStemAndGoesInsideDirectories) {
  TempDir dir;
  auto a = PlanOutput(VideoFileFormat::kMp4, "", "bikes", 16);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, OutputKind::kMp4);
  EXPECT_EQ(a->path, "bikes.mp4");
  auto b = PlanOutput(VideoFileFormat::kMp4, dir / "", "bikes", 16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->path, dir / "bikes.mp4");
  auto c = PlanOutput(VideoFileFormat::kMp4, "clip.mov.mp4", "bikes", 16);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->path, "clip.mov.mp4");
}

TEST(PlanOutputTest, RawHasJsonSidecarBesideIt) {
  auto a = PlanOutput(VideoFileFormat::kRaw, "", "bikes", 16);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, OutputKind::kRaw);
  EXPECT_EQ(a->path, "bikes.u8");
  EXPECT_EQ(a->sidecar, "bikes.json");
  auto b = PlanOutput(VideoFileFormat::kRaw, "out/frames.bin", "bikes", 16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->sidecar, "out/frames.json");
}

TEST(PlanOutputTest, RawOutputNamedJsonIsRejected) {
  EXPECT_FALSE(PlanOutput(VideoFileFormat::kRaw, "frames.json", "bikes", 1).ok());
}

TEST(PlanOutputTest, NoneWritesNothingAndUnknownFormatFails) {
  auto n = PlanOutput(VideoFileFormat::kNone, "ignored", "x", 3);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->kind, OutputKind::kNone);
  auto w = WriteOutputs(*n, {}, 24);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->empty());
  // --format parses names at the flag; "gif" is not one of them.
  EXPECT_FALSE(ops::FromName(VideoFileFormatNames(), "gif").has_value());
}

TEST(CheckOutputToolsTest, PngAndMp4NeedFfmpegRawDoesNot) {
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path != nullptr ? old_path : "";
  ::setenv("PATH", "/nonexistent-vaed-test", 1);
  const Status png = CheckOutputTools({OutputKind::kPngSequence, "d", ""});
  const Status mp4 = CheckOutputTools({OutputKind::kMp4, "x.mp4", ""});
  const Status raw = CheckOutputTools({OutputKind::kRaw, "x.u8", "x.json"});
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(png.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(png.message(), HasSubstr("ffmpeg not found"));
  EXPECT_EQ(mp4.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(raw.ok());
}

// ---------------------------------------------------------- PlanAudioOutput

Result<OutputPlan> PlanAudio(VideoFileFormat format, const std::string& out,
                             const std::string& audio_out, int64_t frames = 22) {
  OutputPlan video;
  if (frames > 0) {
    auto v = PlanOutput(format, out, "video_case", frames);
    if (!v.ok()) return v.status();
    video = *v;
  }
  return PlanAudioOutput(video, format, audio_out, "audio_case", ops::WavSampleFormat::kPcm16);
}

TEST(PlanAudioOutputTest, WavGoesBesideAVideoFileAndIsMuxedIntoMp4) {
  auto mp4 = PlanAudio(VideoFileFormat::kMp4, "out/clip.mp4", "");
  ASSERT_TRUE(mp4.ok()) << mp4.status().ToString();
  EXPECT_EQ(mp4->path, "out/clip.mp4");
  EXPECT_EQ(mp4->wav, "out/clip.wav");
  EXPECT_TRUE(mp4->mux_audio);

  auto raw = PlanAudio(VideoFileFormat::kRaw, "", "");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->wav, "video_case.wav");
  EXPECT_FALSE(raw->mux_audio);
}

TEST(PlanAudioOutputTest, WavOfAPngDirectoryIsNamedAfterTheAudioLatent) {
  auto png = PlanAudio(VideoFileFormat::kPng, "", "");
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png->path, "video_case_frames");
  EXPECT_EQ(png->wav, "audio_case.wav");
  auto nested = PlanAudio(VideoFileFormat::kPng, "out/frames/", "");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->wav, "out/audio_case.wav");
  EXPECT_FALSE(nested->mux_audio);
}

TEST(PlanAudioOutputTest, AudioOnlyDefaultsToTheAudioStemWhateverTheVideoFormat) {
  for (VideoFileFormat format :
       {VideoFileFormat::kPng, VideoFileFormat::kMp4, VideoFileFormat::kRaw}) {
    const std::string name = ops::NameOf(VideoFileFormatNames(), format);
    auto p = PlanAudio(format, "", "", /*frames=*/0);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ(p->kind, OutputKind::kNone) << name;
    EXPECT_EQ(p->wav, "audio_case.wav") << name;
    EXPECT_FALSE(p->mux_audio) << name;
    EXPECT_TRUE(CheckOutputTools(*p).ok()) << "a WAV needs no ffmpeg";
  }
}

TEST(PlanAudioOutputTest, AudioOutOverridesAndDirectoriesGetTheStem) {
  TempDir dir;
  auto file = PlanAudio(VideoFileFormat::kMp4, "clip.mp4", "sound/track.wav");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->wav, "sound/track.wav");
  EXPECT_TRUE(file->mux_audio);
  auto in_dir = PlanAudio(VideoFileFormat::kMp4, "clip.mp4", dir / "");
  ASSERT_TRUE(in_dir.ok());
  EXPECT_EQ(in_dir->wav, dir / "audio_case.wav");
}

TEST(PlanAudioOutputTest, FormatNoneWritesNoAudioUnlessAudioOutNamesIt) {
  auto p = PlanAudio(VideoFileFormat::kNone, "", "");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->wav.empty());
  EXPECT_FALSE(p->mux_audio);
  // `--format none --audio-out F` writes only the WAV.
  auto only_wav = PlanAudio(VideoFileFormat::kNone, "", "x.wav");
  ASSERT_TRUE(only_wav.ok());
  EXPECT_EQ(only_wav->wav, "x.wav");
  EXPECT_FALSE(only_wav->mux_audio);
}

TEST(PlanAudioOutputTest, WavThatWouldOverwriteTheVideoIsRejected) {
  auto p = PlanAudio(VideoFileFormat::kRaw, "frames.wav", "");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("--audio-out"));
  EXPECT_FALSE(PlanAudio(VideoFileFormat::kMp4, "clip.mp4", "clip.mp4").ok());
}

// --wav-format's names (the flag's error for "mp3" is checked in
// vaectl_cli_test.cc).
TEST(WavSampleFormatNamesTest, KnowsPcm16AndFloat32Only) {
  EXPECT_EQ(ops::FromName(WavSampleFormatNames(), "pcm16").value(), ops::WavSampleFormat::kPcm16);
  EXPECT_EQ(ops::FromName(WavSampleFormatNames(), "float32").value(), ops::WavSampleFormat::kFloat32);
  EXPECT_FALSE(ops::FromName(WavSampleFormatNames(), "mp3").has_value());
}

// Stereo test audio: a ramp on the left, its negation on the right.
std::vector<float> StereoRamp(int64_t samples) {
  std::vector<float> data(2 * samples);
  for (int64_t i = 0; i < samples; ++i) {
    data[i] = -1.0f + 2.0f * static_cast<float>(i) / static_cast<float>(samples - 1);
    data[samples + i] = -data[i];
  }
  return data;
}

TEST(WriteDecodedOutputsTest, AudioOnlyWritesAWavThatReadsBackWithinPcm16Quantization) {
  TempDir dir;
  const std::vector<float> samples = StereoRamp(800);
  const ops::PlanarAudio audio{samples, 2, 800, 32000};
  auto plan =
      PlanAudioOutput({}, VideoFileFormat::kPng, dir / "", "a", ops::WavSampleFormat::kPcm16);
  ASSERT_TRUE(plan.ok());
  auto written = WriteDecodedOutputs(*plan, DecodedOutputs{nullptr, &audio}, 24);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, std::vector<std::string>{dir / "a.wav"});
  auto back = ops::ReadWav(dir / "a.wav");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->channels, 2);
  EXPECT_EQ(back->samples, 800);
  EXPECT_EQ(back->sample_rate_hz, 32000);
  ASSERT_EQ(back->data.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    ASSERT_NEAR(back->data[i], samples[i], 0.5 / 32767 + 1e-7) << i;
  }
}

TEST(WriteDecodedOutputsTest, Float32WavIsExact) {
  TempDir dir;
  const std::vector<float> samples = StereoRamp(100);
  const ops::PlanarAudio audio{samples, 2, 100, 32000};
  auto plan = PlanAudioOutput({}, VideoFileFormat::kRaw, dir / "f.wav", "a",
                              ops::WavSampleFormat::kFloat32);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(WriteDecodedOutputs(*plan, DecodedOutputs{nullptr, &audio}, 24).ok());
  auto back = ops::ReadWav(dir / "f.wav");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->format, ops::WavSampleFormat::kFloat32);
  EXPECT_EQ(back->data, samples);
}

TEST(WriteDecodedOutputsTest, PlannedOutputsWithoutTheirDataAreRejected) {
  const std::vector<float> samples = StereoRamp(10);
  const ops::PlanarAudio audio{samples, 2, 10, 32000};
  OutputPlan video_plan{OutputKind::kRaw, "x.u8", "x.json"};
  EXPECT_EQ(WriteDecodedOutputs(video_plan, DecodedOutputs{nullptr, &audio}, 24).status().code(),
            StatusCode::kInvalidArgument);
  OutputPlan wav_plan;
  wav_plan.wav = "x.wav";
  EXPECT_EQ(WriteDecodedOutputs(wav_plan, DecodedOutputs{}, 24).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(WriteDecodedOutputsTest, RawVideoAndWavAreBothListedVideoFirst) {
  TempDir dir;
  const auto pixels = std::vector<uint8_t>(12, 9);
  const ops::RgbFrames frames{pixels, 1, 2, 2};
  const std::vector<float> samples = StereoRamp(10);
  const ops::PlanarAudio audio{samples, 2, 10, 32000};
  auto video = PlanOutput(VideoFileFormat::kRaw, dir / "v.u8", "v", 1);
  ASSERT_TRUE(video.ok());
  auto plan = PlanAudioOutput(*video, VideoFileFormat::kRaw, "", "a", ops::WavSampleFormat::kPcm16);
  ASSERT_TRUE(plan.ok());
  auto written = WriteDecodedOutputs(*plan, DecodedOutputs{&frames, &audio}, 24);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, (std::vector<std::string>{dir / "v.u8", dir / "v.json", dir / "v.wav"}));
  EXPECT_TRUE(fs::exists(dir / "v.wav"));
}

// ---------------------------------------------------------- CompareWithFile

// Two frames of 2x2 RGB (12 values each).
std::vector<uint8_t> Frames(uint8_t base) { return std::vector<uint8_t>(24, base); }

TEST(CompareWithFileTest, ComparesWithOriginalAndReference) {
  TempDir dir;
  const std::string path = dir / "lat.safetensors";
  std::vector<uint8_t> reference = Frames(100);
  reference[5] = 102;  // differs from the decode by 2 in one value
  WriteSafetensors(path, {{"latent", "F32", {2, 1, 1, 1}, std::vector<uint8_t>(8, 0)},
                          {"frames_u8", "U8", {2, 2, 2, 3}, Frames(101)},
                          {"decoded_u8", "U8", {2, 2, 2, 3}, reference}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const auto decoded = Frames(100);
  const Quality q = CompareWithFile({decoded, 2, 2, 2}, **file, "decoded_u8", "");
  EXPECT_EQ(q.original_key, "frames_u8");
  EXPECT_EQ(q.reference_key, "decoded_u8");
  ASSERT_TRUE(q.psnr_vs_original.has_value());
  EXPECT_NEAR(q.psnr_vs_original->mean_db, 20 * std::log10(255.0), 1e-9);  // MSE 1
  ASSERT_TRUE(q.reference_psnr_vs_original.has_value());
  ASSERT_TRUE(q.vs_reference.has_value());
  EXPECT_EQ(q.vs_reference->max_abs_diff, 2);
  EXPECT_EQ(q.vs_reference->values_differing, 1u);
  EXPECT_EQ(q.vs_reference->values, 24u);
  EXPECT_TRUE(q.notes.empty());
}

TEST(CompareWithFileTest, ReferenceNamedFramesU8IsNotTakenForTheOriginal) {
  // The H3 golden files keep the official decode in frames_u8.
  TempDir dir;
  const std::string path = dir / "golden.safetensors";
  WriteSafetensors(path, {{"frames_u8", "U8", {2, 2, 2, 3}, Frames(100)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  const auto decoded = Frames(100);
  const Quality q = CompareWithFile({decoded, 2, 2, 2}, **file, "frames_u8", "");
  EXPECT_TRUE(q.original_key.empty());
  EXPECT_FALSE(q.psnr_vs_original.has_value());
  ASSERT_TRUE(q.vs_reference.has_value());
  EXPECT_EQ(q.vs_reference->values_differing, 0u);
  // "none" turns the original comparison off explicitly.
  const Quality none = CompareWithFile({decoded, 2, 2, 2}, **file, "", "none");
  EXPECT_FALSE(none.psnr_vs_original.has_value());
  EXPECT_TRUE(none.notes.empty());
}

TEST(CompareWithFileTest, SingleImageReferenceWithoutFrameDimIsUsed) {
  TempDir dir;
  const std::string path = dir / "img.safetensors";
  WriteSafetensors(path, {{"image_u8", "U8", {2, 2, 3}, std::vector<uint8_t>(12, 7)},
                          {"decoded_u8", "U8", {2, 2, 3}, std::vector<uint8_t>(12, 7)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  const std::vector<uint8_t> decoded(12, 7);
  const Quality q = CompareWithFile({decoded, 1, 2, 2}, **file, "decoded_u8", "");
  EXPECT_EQ(q.original_key, "image_u8");
  ASSERT_TRUE(q.psnr_vs_original.has_value());
  EXPECT_TRUE(std::isinf(q.psnr_vs_original->mean_db));
  ASSERT_TRUE(q.vs_reference.has_value());
  EXPECT_EQ(q.vs_reference->values_differing, 0u);
}

TEST(CompareWithFileTest, MismatchedOrMissingTensorsAreSkippedWithNotes) {
  TempDir dir;
  const std::string path = dir / "odd.safetensors";
  WriteSafetensors(path, {{"frames_u8", "U8", {1, 2, 2, 3}, std::vector<uint8_t>(12, 0)},
                          {"decoded_u8", "F32", {1, 1, 1, 3}, std::vector<uint8_t>(12, 0)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  const auto decoded = Frames(0);  // 2 frames: the original holds only one
  Quality q = CompareWithFile({decoded, 2, 2, 2}, **file, "decoded_u8", "");
  EXPECT_FALSE(q.psnr_vs_original.has_value());
  EXPECT_FALSE(q.vs_reference.has_value());
  ASSERT_EQ(q.notes.size(), 2u);
  EXPECT_THAT(q.notes[0], HasSubstr("frames_u8"));
  EXPECT_THAT(q.notes[1], HasSubstr("not uint8"));

  q = CompareWithFile({decoded, 2, 2, 2}, **file, "", "orig");
  ASSERT_EQ(q.notes.size(), 1u);  // frames_u8 not consulted: an explicit key was given
  EXPECT_THAT(q.notes[0], HasSubstr("'orig' is not in the latent file"));
}

TEST(CompareWithFileTest, FileWithoutReferencesGivesNoNotes) {
  TempDir dir;
  const std::string path = dir / "plain.safetensors";
  WriteSafetensors(path, {{"latent", "F32", {1, 1, 1, 1}, std::vector<uint8_t>(4, 0)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  const auto decoded = Frames(0);
  const Quality q = CompareWithFile({decoded, 2, 2, 2}, **file, "decoded_u8", "");
  EXPECT_FALSE(q.psnr_vs_original.has_value());
  EXPECT_FALSE(q.vs_reference.has_value());
  EXPECT_TRUE(q.notes.empty());
}

// ----------------------------------------------------- CompareAudioWithFile

std::vector<uint8_t> F32Bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(CompareAudioWithFileTest, ReportsMaxAbsDiffOverEveryFloat32Value) {
  TempDir dir;
  const std::string path = dir / "audio.safetensors";
  const std::vector<float> decoded = StereoRamp(50);
  std::vector<float> reference = decoded;
  reference[7] += 3e-5f;   // left
  reference[61] -= 1e-4f;  // right: the largest
  // The H3 golden layout [channels, 1, samples] holds the same values.
  WriteSafetensors(path, {{"latent", "F32", {2, 32, 1}, std::vector<uint8_t>(256, 0)},
                          {"waveform", "F32", {2, 1, 50}, F32Bytes(reference)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const AudioQuality q = CompareAudioWithFile({decoded, 2, 50, 32000}, **file, "waveform");
  EXPECT_EQ(q.reference_key, "waveform");
  EXPECT_EQ(q.values_compared, 100u);
  ASSERT_TRUE(q.max_abs_diff.has_value());
  EXPECT_NEAR(*q.max_abs_diff, 1e-4, 1e-7);
  EXPECT_TRUE(q.notes.empty());

  const AudioQuality same = CompareAudioWithFile({reference, 2, 50, 32000}, **file, "waveform");
  EXPECT_EQ(same.max_abs_diff, 0.0);
}

TEST(CompareAudioWithFileTest, MismatchedReferencesAreSkippedWithNotes) {
  TempDir dir;
  const std::string path = dir / "odd.safetensors";
  const std::vector<float> decoded = StereoRamp(50);
  WriteSafetensors(path, {{"waveform", "F32", {1, 1, 50}, F32Bytes(std::vector<float>(50, 0))},
                          {"pcm", "U8", {2, 50}, std::vector<uint8_t>(100, 0)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  AudioQuality q = CompareAudioWithFile({decoded, 2, 50, 32000}, **file, "waveform");
  EXPECT_FALSE(q.max_abs_diff.has_value());
  EXPECT_TRUE(q.reference_key.empty());
  ASSERT_EQ(q.notes.size(), 1u);
  EXPECT_THAT(q.notes[0], HasSubstr("holds 50 values, the decode 100 (2 channels x 50 samples)"));

  q = CompareAudioWithFile({decoded, 2, 50, 32000}, **file, "pcm");
  ASSERT_EQ(q.notes.size(), 1u);
  EXPECT_THAT(q.notes[0], HasSubstr("not float32"));
}

TEST(CompareAudioWithFileTest, AbsentDefaultReferenceIsSilentAnExplicitOneIsNoted) {
  TempDir dir;
  const std::string path = dir / "plain.safetensors";
  WriteSafetensors(path, {{"latent", "F32", {1, 32, 1}, std::vector<uint8_t>(128, 0)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  const std::vector<float> decoded(800, 0.25f);
  EXPECT_TRUE(CompareAudioWithFile({decoded, 1, 800, 32000}, **file, "waveform").notes.empty());
  EXPECT_TRUE(CompareAudioWithFile({decoded, 1, 800, 32000}, **file, "").notes.empty());
  const AudioQuality q = CompareAudioWithFile({decoded, 1, 800, 32000}, **file, "ref");
  ASSERT_EQ(q.notes.size(), 1u);
  EXPECT_THAT(q.notes[0], HasSubstr("'ref' is not in the audio latent file"));
}

TEST(CompareAudioWithFileTest, NonFiniteDifferencesAreCountedNotHidden) {
  TempDir dir;
  const std::string path = dir / "nan.safetensors";
  std::vector<float> reference(4, 0.5f);
  WriteSafetensors(path, {{"waveform", "F32", {1, 1, 4}, F32Bytes(reference)}});
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  std::vector<float> decoded = reference;
  decoded[1] = std::numeric_limits<float>::quiet_NaN();
  decoded[2] = 0.25f;
  const AudioQuality q = CompareAudioWithFile({decoded, 1, 4, 32000}, **file, "waveform");
  EXPECT_EQ(q.nonfinite_differences, 1u);
  ASSERT_TRUE(q.max_abs_diff.has_value());
  EXPECT_DOUBLE_EQ(*q.max_abs_diff, 0.25);
  ASSERT_EQ(q.notes.size(), 1u);
  EXPECT_THAT(q.notes[0], HasSubstr("1 of 4 audio values differ"));
}

// ------------------------------------------------------------------ reports

DecodeReport SampleReport() {
  DecodeReport r;
  client::DecodeReply& reply = r.reply;
  reply.model = "taef2";
  reply.latent_shape = {16, 32, 34, 80};
  reply.latent_dtype = DType::kFloat32;
  reply.output_shape = {16, 272, 640, 3};
  reply.output_dtype = DType::kUInt8;
  reply.output_bytes = 16ull * 272 * 640 * 3;
  reply.frames = 16;
  reply.height_px = 272;
  reply.width_px = 640;
  reply.warm = true;
  reply.compute_dtype = "float32";
  reply.timings.push_back({"decode", 7.5});
  reply.timings.push_back({"taef2.decode_latent", 7.25});
  r.latent_source = "video_bikes.safetensors:latent";
  r.round_trip_seconds = 7.6;
  r.format = VideoFileFormat::kMp4;
  r.outputs = {"video_bikes.mp4"};
  r.quality.original_key = "frames_u8";
  r.quality.reference_key = "decoded_u8";
  r.quality.psnr_vs_original = ops::FramePsnr{37.91, 37.6, 38.3, 16};
  r.quality.reference_psnr_vs_original = ops::FramePsnr{37.90, 37.61, 38.26, 16};
  r.quality.vs_reference = ops::U8Diff{1, 17, 8355840};
  return r;
}

TEST(DecodeReportToJsonTest, HasEveryStableKey) {
  const auto j = DecodeReportToJson(SampleReport());
  for (const char* key :
       {"model", "frames", "height_px", "width_px", "latent_shape", "warm", "timings", "outputs",
        "psnr_vs_original_db", "reference_psnr_vs_original_db", "max_abs_diff_vs_reference",
        "values_differing_from_reference"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["model"], "taef2");
  EXPECT_EQ(j["frames"], 16);
  EXPECT_EQ(j["height_px"], 272);
  EXPECT_EQ(j["width_px"], 640);
  EXPECT_EQ(j["latent_shape"], nlohmann::json({16, 32, 34, 80}));
  EXPECT_EQ(j["latent_dtype"], "float32");
  EXPECT_EQ(j["warm"], true);
  EXPECT_EQ(j["timings"]["decode"], 7.5);
  EXPECT_EQ(j["timings"]["taef2.decode_latent"], 7.25);
  EXPECT_EQ(j["outputs"], nlohmann::json({"video_bikes.mp4"}));
  EXPECT_DOUBLE_EQ(j["psnr_vs_original_db"].get<double>(), 37.91);
  EXPECT_DOUBLE_EQ(j["reference_psnr_vs_original_db"].get<double>(), 37.90);
  EXPECT_NEAR(j["psnr_difference_db"].get<double>(), 0.01, 1e-9);
  EXPECT_EQ(j["max_abs_diff_vs_reference"], 1);
  EXPECT_EQ(j["values_differing_from_reference"], 17);
  EXPECT_EQ(j["values_compared"], 8355840);
  EXPECT_EQ(j["demo_weights"], false);
}

TEST(DecodeReportToJsonTest, MissingComparisonsAndInfinitePsnrAreNull) {
  DecodeReport r = SampleReport();
  r.quality = Quality{};
  auto j = DecodeReportToJson(r);
  EXPECT_TRUE(j["psnr_vs_original_db"].is_null());
  EXPECT_TRUE(j["reference_psnr_vs_original_db"].is_null());
  EXPECT_TRUE(j["max_abs_diff_vs_reference"].is_null());
  EXPECT_TRUE(j["values_differing_from_reference"].is_null());

  r.quality.psnr_vs_original = ops::FramePsnr{std::numeric_limits<double>::infinity(), 1, 1, 1};
  j = DecodeReportToJson(r);
  EXPECT_TRUE(j.contains("psnr_vs_original_db"));
  EXPECT_TRUE(j["psnr_vs_original_db"].is_null());
  EXPECT_NO_THROW(j.dump());
}

TEST(FormatDecodeReportTest, ShowsTimingTableGeometryAndQuality) {
  const std::string text = FormatDecodeReport(SampleReport());
  EXPECT_THAT(text, HasSubstr("component"));
  EXPECT_THAT(text, HasSubstr("taef2.decode_latent"));
  EXPECT_THAT(text, HasSubstr("7250.0"));  // ms column
  EXPECT_THAT(text, HasSubstr("16 frames, 640x272 px"));
  EXPECT_THAT(text, HasSubstr("[16, 32, 34, 80]"));
  EXPECT_THAT(text, HasSubstr("warm"));
  EXPECT_THAT(text, HasSubstr("37.91 dB"));
  EXPECT_THAT(text, HasSubstr("+0.01 dB"));
  EXPECT_THAT(text, HasSubstr("max |diff| 1"));
  EXPECT_THAT(text, HasSubstr("17 of 8355840 values differ"));
  EXPECT_THAT(text, Not(HasSubstr("DEMO")));
}

// Streamed output: how the MP4 was written, additive keys: null without an MP4.
TEST(DecodeReportToJsonTest, Mp4StreamingKeysAreNullWithoutAnMp4) {
  DecodeReport r = SampleReport();
  auto j = DecodeReportToJson(r);
  ASSERT_TRUE(j.contains("mp4_streamed"));
  ASSERT_TRUE(j.contains("mp4_tail_seconds"));
  EXPECT_TRUE(j["mp4_streamed"].is_null());
  EXPECT_TRUE(j["mp4_tail_seconds"].is_null());
  r.mp4 = Mp4Report{.streamed = true, .tail_seconds = 0.25};
  j = DecodeReportToJson(r);
  EXPECT_EQ(j["mp4_streamed"], true);
  EXPECT_DOUBLE_EQ(j["mp4_tail_seconds"].get<double>(), 0.25);
  r.mp4->streamed = false;
  EXPECT_EQ(DecodeReportToJson(r)["mp4_streamed"], false);
}

TEST(FormatDecodeReportTest, Mp4TailIsATimingRowSayingWhetherItStreamed) {
  DecodeReport r = SampleReport();
  EXPECT_THAT(FormatDecodeReport(r), Not(HasSubstr("mp4 after reply")));
  r.mp4 = Mp4Report{.streamed = true, .tail_seconds = 0.125};
  EXPECT_THAT(FormatDecodeReport(r),
              ::testing::ContainsRegex("\\(mp4 after reply, streamed\\) +0\\.1250 +125\\.0"));
  r.mp4->streamed = false;
  EXPECT_THAT(FormatDecodeReport(r), HasSubstr("(mp4 after reply, not streamed)"));
}

// Every key a video-only report had before audio existed, plus the new
// ones (null for video-only).
TEST(DecodeReportToJsonTest, VideoOnlyKeepsEveryKeyAndHasNullAudio) {
  const auto j = DecodeReportToJson(SampleReport());
  const std::vector<std::string> keys = {
      "model", "demo_weights", "frames", "height_px", "width_px", "latent_shape", "latent_dtype",
      "latent_source", "compute_dtype", "warm", "timings", "round_trip_seconds",
      "nonfinite_outputs", "peak_rss_bytes", "tiling", "format", "outputs", "original_key",
      "reference_key", "psnr_vs_original_db", "psnr_vs_original_min_db", "psnr_vs_original_max_db",
      "reference_psnr_vs_original_db", "psnr_difference_db", "max_abs_diff_vs_reference",
      "values_differing_from_reference", "values_compared", "notes",
      // New with audio; null or false for a video-only TAEF2 decode.
      "fps", "video_seconds", "expected_audio_latent_frames", "independent_lengths",
      "av_lengths_match", "audio", "video_sanity",
      // New with VAE groups; null without a GroupReport.
      "group"};
  for (const std::string& key : keys) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["latent_source"], "video_bikes.safetensors:latent");
  EXPECT_TRUE(j["audio"].is_null());
  EXPECT_TRUE(j["expected_audio_latent_frames"].is_null());  // TAEF2 has no audio
  EXPECT_TRUE(j["av_lengths_match"].is_null());
  EXPECT_EQ(j["independent_lengths"], false);
  EXPECT_TRUE(j["group"].is_null());
}

// An H3 reply for `video` (one_tile: 22 frames at 24 fps) and/or `audio`
// (`audio_latent_frames` latent frames, `channels` channels).
DecodeReport H3Report(bool video, int64_t audio_latent_frames, int64_t channels = 1) {
  DecodeReport r;
  client::DecodeReply& reply = r.reply;
  reply.model = "hv";
  reply.compute_dtype = "float32";
  reply.fps = 24;
  reply.timings.push_back({"decode", 0.8});
  r.format = VideoFileFormat::kMp4;
  if (video) {
    reply.latent_shape = {1, 24, 7, 16, 16};
    reply.latent_dtype = DType::kFloat32;
    reply.frames = 22;
    reply.height_px = 256;
    reply.width_px = 256;
    reply.output_bytes = 22ull * 256 * 256 * 3;
    reply.video_seconds = 22.0 / 24;
    reply.expected_audio_latent_frames = 37;
    client::OutputSanity& video_sanity = reply.video_sanity.emplace();
    video_sanity.rms = 1.157;
    video_sanity.peak_abs = 5.5;
    client::TilingInfo& tiling = reply.tiling.emplace();
    tiling.tile_rows = 1;
    tiling.tile_cols = 1;
    tiling.windows = 1;
    tiling.decoder_calls = 1;
    tiling.max_tiles_per_call = 1;
    tiling.stack_decision = "off: one decoder call per tile";
    reply.timings.push_back({"video_vae.decode_latent", 0.6});
    r.latent_source = "video_case_one_tile.safetensors:latent";
    r.outputs = {"joint.mp4"};
  }
  if (audio_latent_frames > 0) {
    client::AudioInfo& a = reply.audio.emplace();
    const int64_t samples = 800 * audio_latent_frames;
    a.latent_shape = {channels, int64_t{32}, audio_latent_frames};
    a.output_shape = {channels, samples};
    a.output_bytes = static_cast<uint64_t>(channels * samples * 4);
    a.channels = static_cast<uint32_t>(channels);
    a.latent_frames = static_cast<uint64_t>(audio_latent_frames);
    a.samples = static_cast<uint64_t>(samples);
    a.sample_rate_hz = 32000;
    a.seconds = static_cast<double>(samples) / 32000;
    client::OutputSanity& sanity = a.sanity.emplace();
    sanity.rms = 0.3088;
    sanity.peak_abs = 1.0;
    sanity.clipped_fraction = 0.0024;
    reply.timings.push_back({"audio_vae.decode_latent", 0.18});
    AudioReport& ar = r.audio.emplace();
    ar.latent_source = "audio_case.safetensors:latent";
    ar.latent_dtype = DType::kFloat32;
    ar.wav = video ? "joint.wav" : "audio_case.wav";
    ar.quality.reference_key = "waveform";
    ar.quality.values_compared = static_cast<uint64_t>(channels * samples);
    ar.quality.max_abs_diff = 2.78e-5;
    r.outputs.push_back(ar.wav);
  }
  return r;
}

TEST(DecodeReportToJsonTest, AudioOnlyHasTheAudioObjectAndNullVideoFields) {
  const auto j = DecodeReportToJson(H3Report(/*video=*/false, 40, 2));
  EXPECT_EQ(j["frames"], 0);
  EXPECT_EQ(j["latent_shape"], nlohmann::json::array());
  EXPECT_TRUE(j["latent_source"].is_null());
  EXPECT_TRUE(j["latent_dtype"].is_null());
  EXPECT_TRUE(j["video_seconds"].is_null());
  EXPECT_TRUE(j["video_sanity"].is_null());
  EXPECT_TRUE(j["expected_audio_latent_frames"].is_null());
  EXPECT_TRUE(j["av_lengths_match"].is_null());
  EXPECT_TRUE(j["max_abs_diff_vs_reference"].is_null());  // the video comparison
  EXPECT_EQ(j["timings"]["audio_vae.decode_latent"], 0.18);
  const auto& a = j["audio"];
  for (const char* key : {"latent_source", "latent_shape", "channels", "samples", "sample_rate_hz",
                          "seconds", "nonfinite", "rms", "peak_abs", "clipped_fraction", "constant",
                          "max_abs_diff_vs_reference", "values_compared", "reference_key", "wav"}) {
    EXPECT_TRUE(a.contains(key)) << key;
  }
  EXPECT_EQ(a["latent_source"], "audio_case.safetensors:latent");
  EXPECT_EQ(a["latent_dtype"], "float32");
  EXPECT_EQ(a["latent_shape"], nlohmann::json({2, 32, 40}));
  EXPECT_EQ(a["latent_frames"], 40);
  EXPECT_EQ(a["channels"], 2);
  EXPECT_EQ(a["samples"], 32000);
  EXPECT_EQ(a["sample_rate_hz"], 32000);
  EXPECT_DOUBLE_EQ(a["seconds"].get<double>(), 1.0);
  EXPECT_EQ(a["nonfinite"], 0);
  EXPECT_DOUBLE_EQ(a["rms"].get<double>(), 0.3088);
  EXPECT_DOUBLE_EQ(a["peak_abs"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(a["clipped_fraction"].get<double>(), 0.0024);
  EXPECT_EQ(a["constant"], false);
  EXPECT_DOUBLE_EQ(a["max_abs_diff_vs_reference"].get<double>(), 2.78e-5);
  EXPECT_EQ(a["values_compared"], 64000);
  EXPECT_EQ(a["reference_key"], "waveform");
  EXPECT_EQ(a["wav"], "audio_case.wav");
  EXPECT_EQ(a["wav_format"], "pcm16");
  EXPECT_EQ(j["outputs"], nlohmann::json({"audio_case.wav"}));
}

TEST(DecodeReportToJsonTest, JointReportHasTheAvFields) {
  DecodeReport r = H3Report(/*video=*/true, 37);
  auto j = DecodeReportToJson(r);
  EXPECT_DOUBLE_EQ(j["fps"].get<double>(), 24.0);
  EXPECT_NEAR(j["video_seconds"].get<double>(), 22.0 / 24, 1e-12);
  EXPECT_EQ(j["expected_audio_latent_frames"], 37);
  EXPECT_EQ(j["av_lengths_match"], true);
  EXPECT_EQ(j["independent_lengths"], false);
  EXPECT_DOUBLE_EQ(j["video_sanity"]["rms"].get<double>(), 1.157);
  EXPECT_EQ(j["audio"]["latent_frames"], 37);
  EXPECT_EQ(j["outputs"], nlohmann::json({"joint.mp4", "joint.wav"}));

  r = H3Report(/*video=*/true, 40);
  r.reply.independent_lengths = true;
  j = DecodeReportToJson(r);
  EXPECT_EQ(j["independent_lengths"], true);
  EXPECT_EQ(j["av_lengths_match"], false);
}

TEST(DecodeReportToJsonTest, SkippedAudioComparisonIsNullWithItsNoteInNotes) {
  DecodeReport r = H3Report(/*video=*/false, 40);
  r.audio->quality = AudioQuality{};
  r.audio->quality.notes.push_back("audio reference 'ref' is not in the audio latent file");
  r.audio->wav.clear();
  const auto j = DecodeReportToJson(r);
  EXPECT_TRUE(j["audio"]["max_abs_diff_vs_reference"].is_null());
  EXPECT_TRUE(j["audio"]["values_compared"].is_null());
  EXPECT_TRUE(j["audio"]["reference_key"].is_null());
  EXPECT_TRUE(j["audio"]["wav"].is_null());
  EXPECT_EQ(j["notes"], nlohmann::json({"audio reference 'ref' is not in the audio latent file"}));
}

TEST(FormatDecodeReportTest, AudioOnlyShowsAudioLinesAndNoVideoLines) {
  const std::string text = FormatDecodeReport(H3Report(/*video=*/false, 40, 2));
  EXPECT_THAT(text, HasSubstr("audio latent audio_case.safetensors:latent  float32 [2, 32, 40], "
                              "40 latent frames"));
  EXPECT_THAT(text, HasSubstr("2 channels (stereo L,R), 32000 samples at 32000 Hz = 1.000 s, "
                              "float32 planar [2, 32000]"));
  EXPECT_THAT(text, HasSubstr("audio check  0 non-finite, rms 0.3088, peak |x| 1.0000, clipped 0.24 %"));
  EXPECT_THAT(text, HasSubstr("audio_vae.decode_latent"));
  EXPECT_THAT(text, HasSubstr("audio vs reference (waveform)"));
  EXPECT_THAT(text, HasSubstr("max |diff| 2.78e-05"));
  EXPECT_THAT(text, HasSubstr("64000 float32 values compared"));
  EXPECT_THAT(text, Not(HasSubstr("latent       ")));
  EXPECT_THAT(text, Not(HasSubstr("px (WxH)")));
  EXPECT_THAT(text, Not(HasSubstr("A/V")));
  EXPECT_THAT(text, Not(HasSubstr("WARNING")));
  EXPECT_THAT(text, Not(HasSubstr("PSNR")));
}

TEST(FormatDecodeReportTest, JointShowsTheAvLineAndSingularTiling) {
  const std::string text = FormatDecodeReport(H3Report(/*video=*/true, 37));
  EXPECT_THAT(text, HasSubstr("22 frames, 256x256 px (WxH), uint8 NHWC RGB, "));
  EXPECT_THAT(text, HasSubstr("video check  0 non-finite, rms 1.1570, peak |x| 5.5000"));
  EXPECT_THAT(text, HasSubstr("1 channel (mono), 29600 samples"));
  EXPECT_THAT(text, HasSubstr("A/V          video 0.917 s (22 frames at 24 fps), audio 0.925 s "
                              "(37 latent frames); the video needs 37 audio latent frames: "
                              "match\n"));
  EXPECT_THAT(text, HasSubstr("1x1 tile x 1 window, 1 decoder call, up to 1 tile per call"));
  EXPECT_THAT(text, HasSubstr("video_vae.decode_latent"));
  EXPECT_THAT(text, HasSubstr("audio_vae.decode_latent"));
  EXPECT_THAT(text, HasSubstr("wrote 2 files\n  joint.mp4\n  joint.wav"));
}

TEST(FormatDecodeReportTest, TilingPluralsForSeveralTilesAndCalls) {
  DecodeReport r = H3Report(/*video=*/true, 0);
  client::TilingInfo& t = r.reply.tiling.value();
  t.tile_rows = 2;
  t.tile_cols = 2;
  t.windows = 2;
  t.decoder_calls = 2;
  t.max_tiles_per_call = 4;
  const std::string text = FormatDecodeReport(r);
  EXPECT_THAT(text, HasSubstr("2x2 tiles x 2 windows, 2 decoder calls, up to 4 tiles per call"));
  // Video-only on an audio-capable model: what a matching audio latent needs.
  EXPECT_THAT(text, HasSubstr("a matching audio latent has 37 latent frames"));
}

TEST(FormatDecodeReportTest, IndependentMismatchedLengthsAreStated) {
  DecodeReport r = H3Report(/*video=*/true, 40);
  r.reply.independent_lengths = true;
  const std::string text = FormatDecodeReport(r);
  EXPECT_THAT(text, HasSubstr("audio 1.000 s (40 latent frames); the video needs 37 audio latent "
                              "frames: +3 latent frames, independent lengths (not enforced)"));
}

TEST(FormatDecodeReportTest, ConstantOrNonFiniteAudioGetsWarnings) {
  DecodeReport r = H3Report(/*video=*/false, 40);
  client::OutputSanity& s = r.reply.audio.value().sanity.value();
  s.constant = true;
  s.rms = 0;
  s.peak_abs = 0;
  s.nonfinite = 3;
  const std::string text = FormatDecodeReport(r);
  EXPECT_THAT(text, HasSubstr("WARNING      3 non-finite (NaN/Inf) audio samples"));
  EXPECT_THAT(text, HasSubstr("WARNING      the audio is constant"));
  const auto j = DecodeReportToJson(r);
  EXPECT_EQ(j["audio"]["constant"], true);
  EXPECT_EQ(j["audio"]["nonfinite"], 3);
}

// Regression: all-NaN audio read like silence ("rms 0.0000,
// peak |x| 0.0000"). The daemon now reports NaN figures for an output with
// no finite value, and the report states the non-finite values first.
TEST(FormatDecodeReportTest, AllNonFiniteAudioIsSaidSoFirstNotShownAsSilence) {
  DecodeReport r = H3Report(/*video=*/false, 40);
  client::OutputSanity& s = r.reply.audio.value().sanity.value();
  s.rms = std::nan("");
  s.peak_abs = std::nan("");
  s.nonfinite = 64000;
  const std::string text = FormatDecodeReport(r);
  EXPECT_THAT(text, HasSubstr("audio check  every value non-finite (NaN/Inf): 64000 non-finite, "
                              "no rms or peak"));
  EXPECT_THAT(text, Not(HasSubstr("rms 0.0000")));
  const auto j = DecodeReportToJson(r);
  EXPECT_TRUE(j["audio"]["rms"].is_null());
  EXPECT_TRUE(j["audio"]["peak_abs"].is_null());
}

TEST(FormatDecodeReportTest, DemoWeightsAreAnnouncedLoudly) {
  DecodeReport r = SampleReport();
  r.reply.model = "demo";
  r.reply.demo_weights = true;
  r.reply.warm = false;
  const std::string text = FormatDecodeReport(r);
  EXPECT_EQ(text.rfind("!!! DEMO WEIGHTS", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr("cold"));
  EXPECT_EQ(DecodeReportToJson(r)["demo_weights"], true);
}

// The group report of a 2x2-tile decode on group s2.b0 (ranks 0 and 1).
void AddGroup(client::DecodeReply* reply) {
  client::GroupReport& g = reply->group.emplace();
  g.name = "s2.b0";
  g.size = 2;
  g.generation = 0;
  g.ranks.push_back({.rank = 0,
                     .tiles = 2,
                     .decode_seconds = 0.61,
                     .started_unix = 1700000000.25,
                     .finished_unix = 1700000000.86});
  g.ranks.push_back({.rank = 1,
                     .tiles = 2,
                     .decode_seconds = 0.60,
                     .started_unix = 1700000000.26,
                     .finished_unix = 1700000000.86});
  g.imbalance = 1.0083;
}

TEST(FormatDecodeReportTest, GroupLineNamesEachRanksTilesAndTheImbalance) {
  DecodeReport r = H3Report(/*video=*/true, 0);
  AddGroup(&r.reply);
  const std::string text = FormatDecodeReport(r);
  EXPECT_THAT(text, HasSubstr("group        s2.b0 (2 ranks, generation 0): rank 0 2 tiles 0.61 s, "
                              "rank 1 2 tiles 0.60 s; imbalance 1.01\n"));
  EXPECT_THAT(text, Not(HasSubstr("FALLBACK")));
}

TEST(FormatDecodeReportTest, GroupOfOneRankIsSingular) {
  DecodeReport r = H3Report(/*video=*/true, 0);
  client::GroupReport& g = r.reply.group.emplace();
  g.name = "s1.b1";
  g.size = 1;
  g.generation = 3;
  g.ranks.push_back({.rank = 1, .tiles = 1, .decode_seconds = 1.5});
  g.imbalance = 1;
  EXPECT_THAT(FormatDecodeReport(r),
              HasSubstr("group        s1.b1 (1 rank, generation 3): rank 1 1 tile 1.50 s; "
                        "imbalance 1.00\n"));
}

TEST(FormatDecodeReportTest, GroupFallbackGetsItsOwnLine) {
  DecodeReport r = H3Report(/*video=*/true, 0);
  AddGroup(&r.reply);
  r.reply.group->fallback =
      "collective gather of group s2.b0 generation 0 failed: injected; decoded on rank 0 alone";
  EXPECT_THAT(FormatDecodeReport(r),
              HasSubstr("FALLBACK     group: collective gather of group s2.b0 generation 0 "
                        "failed: injected; decoded on rank 0 alone\n"));
}

TEST(FormatDecodeReportTest, ReplyWithoutGroupHasNoGroupLine) {
  const std::string text = FormatDecodeReport(H3Report(/*video=*/false, 40));
  EXPECT_THAT(text, Not(HasSubstr("group ")));
  EXPECT_TRUE(DecodeReportToJson(H3Report(/*video=*/false, 40))["group"].is_null());
}

TEST(DecodeReportToJsonTest, GroupObjectHasEveryField) {
  DecodeReport r = H3Report(/*video=*/true, 0);
  AddGroup(&r.reply);
  r.reply.group->fallback = "decoded on rank 0 alone";
  const auto j = DecodeReportToJson(r);
  ASSERT_TRUE(j["group"].is_object()) << j.dump();
  const auto& g = j["group"];
  EXPECT_EQ(g["name"], "s2.b0");
  EXPECT_EQ(g["size"], 2);
  EXPECT_EQ(g["generation"], 0);
  EXPECT_DOUBLE_EQ(g["imbalance"].get<double>(), 1.0083);
  EXPECT_EQ(g["fallback"], "decoded on rank 0 alone");
  ASSERT_EQ(g["ranks"].size(), 2u);
  EXPECT_EQ(g["ranks"][1]["rank"], 1);
  EXPECT_EQ(g["ranks"][1]["tiles"], 2);
  EXPECT_DOUBLE_EQ(g["ranks"][1]["decode_seconds"].get<double>(), 0.60);
  EXPECT_DOUBLE_EQ(g["ranks"][0]["started_unix"].get<double>(), 1700000000.25);
  EXPECT_DOUBLE_EQ(g["ranks"][0]["finished_unix"].get<double>(), 1700000000.86);
}

TEST(DecodeReportToJsonTest, NonFiniteImbalanceIsNull) {
  DecodeReport r = H3Report(/*video=*/true, 0);
  AddGroup(&r.reply);
  r.reply.group->imbalance = std::numeric_limits<double>::quiet_NaN();
  const auto j = DecodeReportToJson(r);
  EXPECT_TRUE(j["group"]["imbalance"].is_null());
  EXPECT_NO_THROW(j.dump());
}

}  // namespace
}  // namespace vaed::vaectl
