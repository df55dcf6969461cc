#include "ops/vaectl/decode_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

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
  auto p = PlanOutput("png", "", "video_bikes", 16);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, OutputKind::kPngSequence);
  EXPECT_EQ(p->path, "video_bikes_frames");
}

TEST(PlanOutputTest, PngFileForOneFrame) {
  auto p = PlanOutput("png", "out/astronaut.png", "photo_astronaut", 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, OutputKind::kPngImage);
  EXPECT_EQ(p->path, "out/astronaut.png");
}

TEST(PlanOutputTest, PngFileForManyFramesIsRejected) {
  auto p = PlanOutput("png", "x.png", "bikes", 16);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("16 frames"));
}

TEST(PlanOutputTest, Mp4DefaultsToStemAndGoesInsideDirectories) {
  TempDir dir;
  auto a = PlanOutput("mp4", "", "bikes", 16);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, OutputKind::kMp4);
  EXPECT_EQ(a->path, "bikes.mp4");
  auto b = PlanOutput("mp4", dir / "", "bikes", 16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->path, dir / "bikes.mp4");
  auto c = PlanOutput("mp4", "clip.mov.mp4", "bikes", 16);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->path, "clip.mov.mp4");
}

TEST(PlanOutputTest, RawHasJsonSidecarBesideIt) {
  auto a = PlanOutput("raw", "", "bikes", 16);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, OutputKind::kRaw);
  EXPECT_EQ(a->path, "bikes.u8");
  EXPECT_EQ(a->sidecar, "bikes.json");
  auto b = PlanOutput("raw", "out/frames.bin", "bikes", 16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->sidecar, "out/frames.json");
}

TEST(PlanOutputTest, RawOutputNamedJsonIsRejected) {
  EXPECT_FALSE(PlanOutput("raw", "frames.json", "bikes", 1).ok());
}

TEST(PlanOutputTest, NoneWritesNothingAndUnknownFormatFails) {
  auto n = PlanOutput("none", "ignored", "x", 3);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->kind, OutputKind::kNone);
  auto w = WriteOutputs(*n, {}, 24);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->empty());
  EXPECT_FALSE(PlanOutput("gif", "", "x", 1).ok());
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

// ------------------------------------------------------------------ reports

DecodeReport SampleReport() {
  DecodeReport r;
  v1::DecodeReply& reply = r.reply;
  reply.set_model("taef2");
  for (int64_t d : {16, 32, 34, 80}) reply.add_latent_shape(d);
  reply.set_latent_dtype(v1::DTYPE_FLOAT32);
  for (int64_t d : {16, 272, 640, 3}) reply.add_output_shape(d);
  reply.set_output_dtype(v1::DTYPE_UINT8);
  reply.set_output_bytes(16ull * 272 * 640 * 3);
  reply.set_frames(16);
  reply.set_height_px(272);
  reply.set_width_px(640);
  reply.set_warm(true);
  reply.set_compute_dtype("float32");
  auto* t = reply.add_timings();
  t->set_component("decode");
  t->set_seconds(7.5);
  t = reply.add_timings();
  t->set_component("taef2.decode_latent");
  t->set_seconds(7.25);
  r.latent_source = "video_bikes.safetensors:latent";
  r.round_trip_seconds = 7.6;
  r.format = "mp4";
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

TEST(FormatDecodeReportTest, DemoWeightsAreAnnouncedLoudly) {
  DecodeReport r = SampleReport();
  r.reply.set_model("demo");
  r.reply.set_demo_weights(true);
  r.reply.set_warm(false);
  const std::string text = FormatDecodeReport(r);
  EXPECT_EQ(text.rfind("!!! DEMO WEIGHTS", 0), 0u) << text;
  EXPECT_THAT(text, HasSubstr("cold"));
  EXPECT_EQ(DecodeReportToJson(r)["demo_weights"], true);
}

}  // namespace
}  // namespace vaed::vaectl
