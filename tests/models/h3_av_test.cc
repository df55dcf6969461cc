// Tests of the joint audio + video pieces: the A/V length rule
// (daemon/models/av_sync.h), the output statistics behind every reply's
// sanity report (postprocess.h SummarizeValues), and the H3 model that
// serves both decoders (h3/h3_vae.h) with the golden tiny weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "daemon/models/av_sync.h"
#include "daemon/models/h3/h3_vae.h"
#include "daemon/models/model_registry.h"
#include "daemon/models/postprocess.h"
#include "daemon/models/safetensors.h"
#include "safetensors_test_util.h"
#include "tests/common/golden_tolerance.h"
#include "tests/common/test_paths.h"

namespace vaed::models {
namespace {

using ::testing::HasSubstr;

// ------------------------------------------------------------ length rule

TEST(AvSyncTest, RuleGivesTheSpecTableAndTheIssueFrameCounts) {
  // round(frames / 24 * 40): spec/h3_vae.md §3.1.
  const std::vector<std::pair<int64_t, int64_t>> table = {
      {22, 37}, {39, 65}, {124, 207}, {209, 348}, {362, 603}, {17, 28}, {0, 0}, {1, 2}};
  for (const auto& [frames, latents] : table) {
    EXPECT_EQ(AudioLatentFramesForVideo(frames, 24.0, 40.0), latents) << frames << " frames";
  }
}

TEST(AvSyncTest, RoundsHalfToEvenLikePython) {
  // frames / fps * rate = k + 0.5 exactly: Python's round goes to the even k.
  EXPECT_EQ(AudioLatentFramesForVideo(1, 4.0, 2.0), 0);  // 0.5 -> 0
  EXPECT_EQ(AudioLatentFramesForVideo(3, 4.0, 2.0), 2);  // 1.5 -> 2
  EXPECT_EQ(AudioLatentFramesForVideo(5, 4.0, 2.0), 2);  // 2.5 -> 2
  EXPECT_EQ(AudioLatentFramesForVideo(7, 4.0, 2.0), 4);  // 3.5 -> 4
  // Division first, then multiplication, in double: 1 / 3 * 3 rounds to 1.
  EXPECT_EQ(AudioLatentFramesForVideo(1, 3.0, 3.0), 1);
}

TEST(AvSyncTest, AbsurdInputsDoNotOverflow) {
  EXPECT_EQ(AudioLatentFramesForVideo(std::numeric_limits<int64_t>::max(), 1e-300, 40.0), -1);
  EXPECT_EQ(AudioLatentFramesForVideo(10, 0.0, 40.0), -1);  // infinity
}

TEST(AvSyncTest, CheckStatesBothLengthsAndTheRule) {
  AvLengths l{.video_frames = 22,
              .fps = 24,
              .audio_latent_frames = 37,
              .audio_latent_rate_hz = 40,
              .samples_per_latent = 800,
              .sample_rate_hz = 32000};
  EXPECT_TRUE(CheckAvLengths(l).ok());
  l.audio_latent_frames = 40;
  const Status s = CheckAvLengths(l);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "audio_latent.shape[2] is 40 audio latent frames (32000 samples, 1.000 s) but the "
            "video has 22 frames at 24 fps (0.917 s), which needs round(22 / 24 * 40) = 37 "
            "audio latent frames (29600 samples); set av_sync.independent_lengths to decode "
            "lengths that differ");
  l.fps = 23.976;
  EXPECT_THAT(CheckAvLengths(l).message(), HasSubstr("at 23.976 fps"));
}

// ------------------------------------------------------------ output statistics

TEST(SummarizeValuesTest, CountsNonFiniteRmsPeakAndClipping) {
  torch::Tensor x = torch::tensor({0.5f, -1.0f, 1.0f, 0.0f, std::nanf(""), INFINITY});
  auto st = SummarizeValues(x, 1.0);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->values, 6);
  EXPECT_EQ(st->nonfinite, 2);
  EXPECT_NEAR(st->rms, std::sqrt((0.25 + 1 + 1 + 0) / 4), 1e-12);
  EXPECT_DOUBLE_EQ(st->peak_abs, 1.0);
  EXPECT_DOUBLE_EQ(st->clipped_fraction, 2.0 / 6.0);
  EXPECT_FALSE(st->constant);
}

// More than one 4M-value slice: the figures combined across slices equal
// those of one reduction over the whole tensor.
TEST(SummarizeValuesTest, FiguresAcrossSlicesEqualOneReduction) {
  torch::manual_seed(11);
  torch::Tensor x = torch::randn({9 << 20}) * 0.7;
  x[5] = std::nanf("");
  x[(5 << 20) + 3] = std::numeric_limits<float>::infinity();
  x[(8 << 20) + 1] = 42.0f;
  auto st = SummarizeValues(x, 1.0);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  const torch::Tensor finite = x.masked_select(torch::isfinite(x)).to(torch::kDouble);
  EXPECT_EQ(st->values, x.numel());
  EXPECT_EQ(st->nonfinite, 2);
  EXPECT_DOUBLE_EQ(st->peak_abs, 42.0);
  EXPECT_NEAR(st->rms, finite.square().mean().sqrt().item<double>(), 1e-12);
  EXPECT_DOUBLE_EQ(st->clipped_fraction,
                   double((finite.abs() >= 1.0).sum().item<int64_t>()) / double(x.numel()));
  EXPECT_FALSE(st->constant);
}

TEST(SummarizeValuesTest, FlagsConstantOutputs) {
  auto silent = SummarizeValues(torch::zeros({2, 1000}), 1.0);
  ASSERT_TRUE(silent.ok());
  EXPECT_TRUE(silent->constant);
  EXPECT_EQ(silent->rms, 0.0);
  auto railed = SummarizeValues(torch::full({1, 500}, -1.0f), 1.0);
  ASSERT_TRUE(railed.ok());
  EXPECT_TRUE(railed->constant);
  EXPECT_DOUBLE_EQ(railed->clipped_fraction, 1.0);
  auto nan = SummarizeValues(torch::full({4}, std::nanf("")), 1.0);
  ASSERT_TRUE(nan.ok());
  EXPECT_FALSE(nan->constant) << "all-NaN is reported as non-finite, not constant";
  EXPECT_EQ(nan->nonfinite, 4);
}

// Regression: an all-NaN output reported rms 0.0
// and peak 0.0, the figures of silence. With no finite value both are NaN
// (a reply's sanity says so; vaectl prints "every value non-finite").
TEST(SummarizeValuesTest, RegressionAllNanIsNotReportedAsSilence) {
  auto nan = SummarizeValues(torch::full({2, 100}, std::nanf("")), 1.0);
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(nan->rms));
  EXPECT_TRUE(std::isnan(nan->peak_abs));
  auto silent = SummarizeValues(torch::zeros({2, 100}), 1.0);
  ASSERT_TRUE(silent.ok());
  EXPECT_EQ(silent->rms, 0.0);
  auto empty = SummarizeValues(torch::zeros({0}), 1.0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->rms, 0.0);  // nothing to summarize is not non-finite
}

TEST(SummarizeValuesTest, LargeAndNonContiguousTensorsMatchASimpleComputation) {
  // 5M values (more than one 4M slice), and a transposed view.
  torch::manual_seed(3);
  torch::Tensor x = torch::randn({5, 1000, 1000});
  x.view({-1})[4'500'000] = std::numeric_limits<float>::quiet_NaN();
  for (const torch::Tensor& t : {x, x.transpose(0, 2)}) {
    auto st = SummarizeValues(t, 2.0);
    ASSERT_TRUE(st.ok());
    torch::Tensor finite = t.reshape({-1}).masked_select(torch::isfinite(t.reshape({-1})));
    EXPECT_EQ(st->nonfinite, 1);
    EXPECT_NEAR(st->rms, finite.to(torch::kDouble).square().mean().sqrt().item<double>(), 1e-9);
    EXPECT_DOUBLE_EQ(st->peak_abs, finite.abs().max().item<double>());
    EXPECT_DOUBLE_EQ(st->clipped_fraction,
                     (finite.abs() >= 2.0).sum().item<double>() / double(t.numel()));
  }
  EXPECT_EQ(SummarizeValues(torch::zeros({2}, torch::kInt), 1.0).status().code(),
            StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------ the H3 model

std::string GoldenPath(const std::string& file) {
  return std::string(VAED_SHARED_DIR) + "/golden/h3/" + file;
}

bool HaveGolden() {
  return test_util::Exists(GoldenPath("audio_tiny_weights.safetensors")) &&
         test_util::Exists(GoldenPath("video_tiny_weights.safetensors"));
}

h3::AudioVaeOptions GoldenAudio() {
  return {GoldenPath("audio_tiny_config.json"), GoldenPath("audio_tiny_weights.safetensors"), 0};
}

// The registry entry of a joint "h3" model on the golden tiny weights.
ModelConfig GoldenAvConfig() {
  ModelConfig av;
  av.name = "av";
  av.kind = models::ModelKind::kH3;
  av.weights_path = GoldenPath("video_tiny_weights.safetensors");
  av.config_path = GoldenPath("video_tiny_config.json");
  av.audio_weights_path = GoldenPath("audio_tiny_weights.safetensors");
  av.audio_config_path = GoldenPath("audio_tiny_config.json");
  return av;
}

h3::VideoVaeOptions GoldenVideo() {
  h3::VideoVaeOptions v;
  v.config_path = GoldenPath("video_tiny_config.json");
  v.weights = {GoldenPath("video_tiny_weights.safetensors")};
  return v;
}

class H3VaeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGolden()) {
      GTEST_SKIP() << "golden vectors absent: " << GoldenPath("")
                   << " (shared/golden/h3) is not on this machine";
    }
  }
};

TEST_F(H3VaeTest, AudioPlanStatesTheContract) {
  auto m = h3::H3Vae::Create({.name = "av", .video = GoldenVideo(), .audio = GoldenAudio()});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelInfo& info = (*m)->info();
  EXPECT_EQ(info.kind, "h3");
  EXPECT_TRUE(info.caps.video);
  EXPECT_TRUE(info.caps.audio);
  EXPECT_EQ(info.audio_sample_rate_hz, 32000);
  EXPECT_DOUBLE_EQ(info.audio_latent_rate_hz, 40.0);
  EXPECT_DOUBLE_EQ(info.native_fps, 24.0);
  EXPECT_EQ(info.audio_weights_sha256.size(), 64u);
  EXPECT_FALSE(info.demo_weights);

  auto plan = (*m)->PlanAudio(DType::kFloat32, {2, 32, 37});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->channels, 2);
  EXPECT_EQ(plan->latent_frames, 37);
  EXPECT_EQ(plan->samples, 29600);
  EXPECT_EQ(plan->sample_rate_hz, 32000);
  EXPECT_EQ(plan->shape_bucket, "av:audio:2x37");

  struct Bad {
    DType dtype;
    std::vector<int64_t> shape;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {DType::kFloat16, {1, 32, 37}, "audio_latent.dtype is float16; model 'av' needs float32"},
      {DType::kFloat32, {32, 37}, "has rank 2; model 'av' expected [channels, 32, "},
      {DType::kFloat32, {1, 37, 32}, "transpose it to [channels, 32, T]"},
      {DType::kFloat32, {1, 16, 37}, "audio_latent.shape[1] (latent channels) is 16"},
      {DType::kFloat32, {32, 2, 37}, "this looks like [32, channels, T]"},
      {DType::kFloat32, {0, 32, 37}, "audio_latent.shape[0] (channels) is 0"},
      {DType::kFloat32, {1, 32, 0}, "audio_latent.shape[2] (audio latent frames) is 0"},
      {DType::kFloat32, {1, 32, std::numeric_limits<int64_t>::max()}, "must be in [1, 4096]"},
  };
  for (const Bad& b : bad) {
    auto p = (*m)->PlanAudio(b.dtype, b.shape);
    ASSERT_FALSE(p.ok()) << ShapeToString(b.shape);
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(b.message));
  }
}

TEST_F(H3VaeTest, DecodeAudioReproducesGoldenStereoAndTimesIt) {
  auto m = h3::H3Vae::Create({.name = "a", .video = std::nullopt, .audio = GoldenAudio()});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->info().kind, "h3_audio");
  EXPECT_FALSE((*m)->info().caps.video);
  auto file = SafetensorsFile::Open(GoldenPath("audio_case_stereo.safetensors"));
  ASSERT_TRUE(file.ok());
  const TensorEntry* latent = (*file)->Find("latent");
  const TensorEntry* waveform = (*file)->Find("waveform");
  torch::Tensor z = torch::empty(latent->shape);
  std::memcpy(z.data_ptr(), latent->data, latent->nbytes);
  torch::Tensor ref = torch::empty({2, 32000});
  std::memcpy(ref.data_ptr(), waveform->data, waveform->nbytes);
  DecodeReport report;
  auto wave = (*m)->DecodeAudio(z, LatentSpace::kNormalized, &report);
  ASSERT_TRUE(wave.ok()) << wave.status().ToString();
  EXPECT_EQ(wave->sizes().vec(), (std::vector<int64_t>{2, 32000}));
  const torch::Tensor ours = wave->contiguous();
  EXPECT_TRUE(testing::GoldenF32Within(
      "audio stereo", std::span<const float>(ours.data_ptr<float>(), size_t(ours.numel())),
      std::span<const float>(ref.data_ptr<float>(), size_t(ref.numel())),
      testing::kGoldenAudioF32MaxAbs));
  ASSERT_EQ(report.timings.entries().size(), 1u);
  EXPECT_EQ(report.timings.entries()[0].first, "audio_vae.decode_latent");
  // An audio-only model has no video side.
  auto plan = (*m)->Plan(DType::kFloat32, {1, 24, 7, 16, 16});
  EXPECT_THAT(plan.status().message(), HasSubstr("has no video decoder"));
  // A bad tensor is an error, not an exception.
  EXPECT_FALSE((*m)->DecodeAudio(torch::zeros({1, 32}), LatentSpace::kNormalized, nullptr).ok());
}

// ------------------------------------------------------------ devices

// The float32 latent `key` of a golden case file.
torch::Tensor GoldenLatent(const std::string& file) {
  auto f = SafetensorsFile::Open(GoldenPath(file));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return torch::Tensor();
  const TensorEntry* latent = (*f)->Find("latent");
  EXPECT_NE(latent, nullptr);
  if (latent == nullptr) return torch::Tensor();
  torch::Tensor t = torch::empty(latent->shape, torch::kFloat);
  std::memcpy(t.data_ptr(), latent->data, latent->nbytes);
  return t;
}

// Naming the CPU explicitly is the CPU path, byte for byte
// (the weights' one-time move to the device is the identity there).
TEST_F(H3VaeTest, AnExplicitCpuDeviceDecodesTheSameBytes) {
  auto implicit = h3::H3Vae::Create({.name = "av", .video = GoldenVideo(), .audio = GoldenAudio()});
  auto explicit_cpu = h3::H3Vae::Create({.name = "av",
                                         .video = GoldenVideo(),
                                         .audio = GoldenAudio(),
                                         .device = torch::Device(torch::kCPU)});
  ASSERT_TRUE(implicit.ok()) << implicit.status().ToString();
  ASSERT_TRUE(explicit_cpu.ok()) << explicit_cpu.status().ToString();
  EXPECT_EQ((*explicit_cpu)->info().device, "cpu");
  EXPECT_EQ((*explicit_cpu)->device(), torch::Device(torch::kCPU));

  const torch::Tensor latent = GoldenLatent("video_case_one_tile.safetensors");
  ASSERT_TRUE(latent.defined());
  auto a = (*implicit)->Decode(latent, nullptr);
  auto b = (*explicit_cpu)->Decode(latent, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->device().is_cpu());
  EXPECT_TRUE(torch::equal(*a, *b)) << "video bytes differ with an explicit CPU device";

  const torch::Tensor audio = GoldenLatent("audio_case_one_second.safetensors");
  ASSERT_TRUE(audio.defined());
  auto wa = (*implicit)->DecodeAudio(audio, LatentSpace::kNormalized, nullptr);
  auto wb = (*explicit_cpu)->DecodeAudio(audio, LatentSpace::kNormalized, nullptr);
  ASSERT_TRUE(wa.ok()) << wa.status().ToString();
  ASSERT_TRUE(wb.ok()) << wb.status().ToString();
  EXPECT_TRUE(torch::equal(*wa, *wb)) << "audio bytes differ with an explicit CPU device";
}

// A latent on another device than the model's is refused before any math,
// naming the field (a `meta` tensor: a device every LibTorch build has).
TEST_F(H3VaeTest, ALatentOnAnotherDeviceIsRefusedNamingIt) {
  auto m = h3::H3Vae::Create({.name = "av", .video = GoldenVideo(), .audio = GoldenAudio()});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto meta = torch::TensorOptions().dtype(torch::kFloat).device(torch::kMeta);
  auto video = (*m)->Decode(torch::empty({1, 24, 7, 16, 16}, meta), nullptr);
  EXPECT_EQ(video.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(video.status().message(), "latent.device is meta; model 'av' runs on cpu");
  auto audio =
      (*m)->DecodeAudio(torch::empty({1, 32, 40}, meta), LatentSpace::kNormalized, nullptr);
  EXPECT_EQ(audio.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(audio.status().message(), "audio_latent.device is meta; model 'av' runs on cpu");
}

// A model built for another device holds its weights there and refuses a
// host latent: the caller (the engine) copies latents to the model's
// device, the model never does. `meta` stands for a GPU here: placing the
// weights there runs without one.
TEST_F(H3VaeTest, AModelOnAnotherDeviceRefusesAHostLatent) {
  auto m = h3::H3Vae::Create({.name = "elsewhere",
                              .video = GoldenVideo(),
                              .audio = GoldenAudio(),
                              .device = torch::Device(torch::kMeta)});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->info().device, "meta");
  EXPECT_EQ((*m)->device(), torch::Device(torch::kMeta));
  EXPECT_GT((*m)->info().resident_bytes, 0u);
  const torch::Tensor latent = GoldenLatent("video_case_one_tile.safetensors");
  ASSERT_TRUE(latent.defined());
  auto video = (*m)->Decode(latent, nullptr);
  EXPECT_EQ(video.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(video.status().message(), "latent.device is cpu; model 'elsewhere' runs on meta");
  auto audio = (*m)->DecodeAudio(torch::zeros({1, 32, 40}), LatentSpace::kNormalized, nullptr);
  EXPECT_EQ(audio.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(audio.status().message(), "audio_latent.device is cpu; model 'elsewhere' runs on meta");
}

// compute_dtype float16 is the official GPU recipe (spec §1.6): refused for
// a model on the CPU, naming the dtype and the device; on another device
// (`meta` stands for a GPU) the block weights are resident once in fp16:
// the same bytes as bf16, fewer than fp32 (the tiny golden model's fp32
// norms, embedder and projection keep the ratio at 0.72).
TEST_F(H3VaeTest, Float16IsTheGpuRecipeWithBlockWeightsResidentInFp16) {
  h3::VideoVaeOptions v = GoldenVideo();
  v.name = "fp16";
  v.compute_dtype = torch::kHalf;
  auto on_cpu = h3::VideoVae::Create(v);
  ASSERT_FALSE(on_cpu.ok());
  EXPECT_EQ(on_cpu.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(on_cpu.status().message(), HasSubstr("compute_dtype float16 is the GPU recipe"));
  EXPECT_THAT(on_cpu.status().message(), HasSubstr("this model is on the CPU"));

  v.device = torch::Device(torch::kMeta);
  auto fp16 = h3::VideoVae::Create(v);
  ASSERT_TRUE(fp16.ok()) << fp16.status().ToString();
  EXPECT_EQ((*fp16)->info().compute_dtype, "float16");
  v.compute_dtype = torch::kBFloat16;
  auto bf16 = h3::VideoVae::Create(v);
  v.compute_dtype = torch::kFloat;
  auto fp32 = h3::VideoVae::Create(v);
  ASSERT_TRUE(bf16.ok() && fp32.ok());
  EXPECT_EQ((*fp16)->info().resident_bytes, (*bf16)->info().resident_bytes);
  EXPECT_LT((*fp16)->info().resident_bytes, (*fp32)->info().resident_bytes * 3 / 4);
}

TEST_F(H3VaeTest, RegistryPlacesEveryModelOnItsDevice) {
  const ModelConfig av = GoldenAvConfig();
  ModelConfig demo;
  demo.name = "demo";
  demo.kind = models::ModelKind::kDemo;
  auto r = ModelRegistry::Create({av, demo}, "av", torch::Device(torch::kMeta));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->device(), torch::Device(torch::kMeta));
  for (const VaeModel* m : (*r)->models()) {
    EXPECT_EQ(m->info().device, "meta") << m->info().name;
    EXPECT_EQ(m->device(), torch::Device(torch::kMeta)) << m->info().name;
  }
  auto cpu = ModelRegistry::Create({demo}, "demo");
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ((*cpu)->device(), torch::Device(torch::kCPU));
  EXPECT_EQ((*cpu)->Find("demo")->info().device, "cpu");
}

TEST_F(H3VaeTest, VideoOnlyModelsRejectAudio) {
  auto m = h3::H3Vae::Create({.name = "v", .video = GoldenVideo(), .audio = std::nullopt});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->info().kind, "h3_video");
  EXPECT_THAT((*m)->PlanAudio(DType::kFloat32, {1, 32, 37}).status().message(),
              HasSubstr("audio_latent is set but model 'v' (kind h3_video) has no audio decoder"));
  EXPECT_FALSE(h3::H3Vae::Create({.name = "n", .video = std::nullopt, .audio = std::nullopt}).ok());
}

TEST_F(H3VaeTest, RegistryBuildsH3KindsFromConfig) {
  const ModelConfig av = GoldenAvConfig();
  ModelConfig audio;
  audio.name = "audio";
  audio.kind = models::ModelKind::kH3Audio;
  audio.audio_weights_path = av.audio_weights_path;
  audio.audio_config_path = av.audio_config_path;
  auto r = ModelRegistry::Create({av, audio}, "av");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->Find("av")->info().caps.audio);
  EXPECT_TRUE((*r)->Find("av")->info().caps.video);
  EXPECT_FALSE((*r)->Find("audio")->info().caps.video);
}

}  // namespace
}  // namespace vaed::models
