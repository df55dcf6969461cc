// Tests of the MiniMax-H3 video decoder core (daemon/models/h3/vit3d_decoder.h)
// and its config (daemon/models/h3/video_config.h) against the golden vectors
// of shared/golden/h3 (tiny seeded weights, official code, CPU fp32; README
// §5, §8). Tests that need the golden files skip when they are absent.
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/models/h3/video_config.h"
#include "daemon/models/h3/vit3d_decoder.h"
#include "daemon/models/safetensors.h"
#include "daemon/models/torch_dtype.h"
#include "safetensors_test_util.h"
#include "tests/common/golden_tolerance.h"
#include "tests/common/test_paths.h"

namespace vaed::models::h3 {
namespace {

using test_util::TempDir;
using test_util::TestTensor;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string GoldenDir() { return std::string(VAED_SHARED_DIR) + "/golden/h3"; }
std::string Golden(const std::string& file) { return GoldenDir() + "/" + file; }

#define SKIP_WITHOUT_GOLDEN()                                        \
  do {                                                               \
    if (!test_util::Exists(GoldenDir())) {                           \
      GTEST_SKIP() << "golden vectors absent: " << GoldenDir()       \
                   << " (shared/golden/h3 is needed for this test)"; \
    }                                                                \
  } while (0)

std::string SafetensorsDType(torch::ScalarType t) {
  if (t == torch::kHalf) return "F16";
  if (t == torch::kBFloat16) return "BF16";
  if (t == torch::kByte) return "U8";
  return "F32";
}

torch::Tensor ToTorch(const TensorEntry& e) {
  torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(ToScalarType(e.dtype)));
  std::memcpy(t.data_ptr(), e.data, e.nbytes);
  return t;
}

TestTensor FromTorch(const std::string& name, const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.contiguous();
  return {name, SafetensorsDType(t.scalar_type()), t.sizes().vec(),
          std::string(static_cast<const char*>(t.data_ptr()), t.nbytes())};
}

torch::Tensor AsTorch(const TestTensor& t) {
  torch::Tensor out = torch::empty(t.shape, torch::TensorOptions().dtype(torch::kFloat));
  EXPECT_EQ(t.dtype, "F32");
  std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
  return out;
}

// Every tensor of a safetensors file, by name.
std::map<std::string, torch::Tensor> ReadTensors(const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return out;
  for (const std::string& name : (*f)->names()) out[name] = ToTorch(*(*f)->Find(name));
  return out;
}

// The golden tiny weights as writable test tensors (original layout, F32).
std::vector<TestTensor> TinyWeights() {
  std::vector<TestTensor> out;
  for (const auto& [name, t] : ReadTensors(Golden("video_tiny_weights.safetensors"))) {
    out.push_back(FromTorch(name, t));
  }
  return out;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// Converts original-layout tensors to the diffusers layout, written from the
// spec §1.5 (b) table (independently of the loader): to_q row h*dh+d =
// to_qkv row h*3dh+d, to_k = h*3dh+dh+d, to_v = h*3dh+2dh+d; ff.w1's halves
// swapped ([gate; value] -> [value; gate]); renames; mask_token dropped.
std::vector<TestTensor> ToDiffusersLayout(const std::vector<TestTensor>& original, int64_t heads,
                                          int64_t dim_head) {
  std::vector<TestTensor> out;
  for (const TestTensor& t : original) {
    if (t.name == "decoder.mask_token") continue;
    if (t.name.find(".attn.to_qkv.") != std::string::npos) {
      const torch::Tensor qkv = AsTorch(t);
      const char* parts[] = {"to_q", "to_k", "to_v"};
      for (int64_t j = 0; j < 3; ++j) {
        std::vector<int64_t> rows;
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t d = 0; d < dim_head; ++d)
            rows.push_back(h * 3 * dim_head + j * dim_head + d);
        }
        out.push_back(FromTorch(Replace(t.name, "to_qkv", parts[j]),
                                qkv.index_select(0, torch::tensor(rows, torch::kLong))));
      }
      continue;
    }
    std::string name = Replace(t.name, "decoder.x_embedder.", "decoder.proj_in.");
    name = Replace(name, ".attn.to_out.", ".attn.to_out.0.");
    name = Replace(name, ".ff.w2.", ".ff.net.2.");
    if (t.name.find(".ff.w1.") != std::string::npos) {
      const torch::Tensor w1 = AsTorch(t);
      const int64_t half = w1.size(0) / 2;
      out.push_back(FromTorch(Replace(name, ".ff.w1.", ".ff.net.0.proj."),
                              torch::cat({w1.narrow(0, half, half), w1.narrow(0, 0, half)}, 0)));
      continue;
    }
    out.push_back({name, t.dtype, t.shape, t.bytes});
  }
  return out;
}

struct Diff {
  double max_abs = 0;
  double mean_abs = 0;
};

Diff Compare(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor d = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs();
  return {d.max().item<double>(), d.mean().item<double>()};
}

bool SameBytes(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- VideoDecoderConfig ----

TEST(H3VideoConfigTest, OfficialIsTheReleasedModel) {
  const VideoDecoderConfig c = VideoDecoderConfig::Official();
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  EXPECT_EQ(c.latent_channels, 24);
  EXPECT_EQ(c.dim, 2048);
  EXPECT_EQ(c.depth, 36);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.dim_head, 64);
  EXPECT_EQ(c.ffn_inner, 8192);
  EXPECT_EQ(c.num_register_tokens, 4);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 100.0);
  EXPECT_EQ(c.rope_dim, 48);
  EXPECT_EQ(c.rope_freqs_per_axis(), 8);
  EXPECT_EQ(c.patch_t, 4);
  EXPECT_EQ(c.patch_hw, 16);
  EXPECT_EQ(c.out_channels, 3);
  EXPECT_EQ(c.patch_dim(), 3072);
  EXPECT_EQ(c.tile_px, 256);
  EXPECT_EQ(c.tile_overlap_min_px, 64);
  EXPECT_EQ(c.clip_length, 17);
  EXPECT_EQ(c.token_drop, 3);
  ASSERT_EQ(c.latents_mean.size(), 24u);
  ASSERT_EQ(c.latents_std.size(), 24u);
  EXPECT_EQ(c.latents_mean[0], 0.858090341091156f);
  EXPECT_EQ(c.latents_std[23], 2.6127843856811523f);
}

TEST(H3VideoConfigTest, LoadsGoldenCombinedConfig) {
  SKIP_WITHOUT_GOLDEN();
  Result<VideoDecoderConfig> c = VideoDecoderConfig::LoadJsonFile(Golden("video_tiny_config.json"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->latent_channels, 24);
  EXPECT_EQ(c->heads, 2);
  EXPECT_EQ(c->dim_head, 64);
  EXPECT_EQ(c->dim, 128);
  EXPECT_EQ(c->depth, 2);
  EXPECT_EQ(c->ffn_inner, 512);
  EXPECT_EQ(c->num_register_tokens, 4);
  EXPECT_EQ(c->rope_dim, 48);
  EXPECT_EQ(c->rope_theta, 100.0);
  EXPECT_EQ(c->norm_eps, 1e-5);
  EXPECT_EQ(c->patch_t, 4);
  EXPECT_EQ(c->patch_hw, 16);
  EXPECT_EQ(c->out_channels, 3);
  // The golden component config carries the official fp32 statistics.
  EXPECT_EQ(c->latents_mean, VideoDecoderConfig::Official().latents_mean);
  EXPECT_EQ(c->latents_std, VideoDecoderConfig::Official().latents_std);
}

// Official-format JSON written by hand (values of spec §2.1).
std::string ComponentJson(const std::string& extra = "") {
  std::string mean, std_;
  for (size_t i = 0; i < 24; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s%.17g", i ? "," : "", OfficialLatentsMean()[i]);
    mean += buf;
    std::snprintf(buf, sizeof(buf), "%s%.17g", i ? "," : "", OfficialLatentsStd()[i]);
    std_ += buf;
  }
  return "{\"_class_name\":\"MiniMaxH3VideoVAE\",\"source_path\":\"source\"," + extra +
         "\"vae_clip_length\":17,\"vae_token_drop\":3,\"vae_encoder_tiling\":1,"
         "\"vae_decoder_tiling\":1,\"vae_tile_size\":256,\"vae_tile_overlap_min\":64,"
         "\"latent_channels\":24,\"latents_mean\":[" +
         mean + "],\"latents_std\":[" + std_ + "]}";
}

std::string SourceJson(const std::string& extra = "", const std::string& kwargs_extra = "") {
  return "{\"_class_name\":\"AutoencoderKLLegacy\",\"causal_decoder\":false,"
         "\"causal_encoder\":true,\"embed_dim\":24,\"z_channels\":24,\"out_ch\":3," +
         extra +
         "\"pixel_norm_type\":\"imagenet\",\"space_down\":[2,2,2,2,1,1],"
         "\"time_down\":[1,2,2,1,1,1],\"use_vit_decoder\":true,\"vae_ratio\":16,"
         "\"vae_ratio_t\":4,\"vit_decoder_kwargs\":{" +
         kwargs_extra +
         "\"dim_head\":64,\"ffn_activation_fn\":\"silu\",\"ffn_use_gated\":true,\"heads\":32,"
         "\"norm_affine\":true,\"norm_type\":\"rms_norm\",\"num_layers\":36,"
         "\"qk_norm_affine\":false,\"qk_norm_type\":\"rms_norm\",\"rope_dim_ratio\":0.75,"
         "\"rope_theta\":100.0}}";
}

std::string DiffusersJson(const std::string& extra = "") {
  std::string mean, std_;
  for (size_t i = 0; i < 24; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s%.17g", i ? "," : "", OfficialLatentsMean()[i]);
    mean += buf;
    std::snprintf(buf, sizeof(buf), "%s%.17g", i ? "," : "", OfficialLatentsStd()[i]);
    std_ += buf;
  }
  return "{\"_class_name\":\"AutoencoderKLMiniMaxH3\"," + extra +
         "\"in_channels\":3,\"out_channels\":3,\"latent_channels\":24,"
         "\"block_out_channels\":[128,256,256,512,512,1024],\"layers_per_block\":2,"
         "\"spatial_downsample_factors\":[2,2,2,2,1,1],"
         "\"temporal_downsample_factors\":[1,2,2,1,1,1],\"norm_num_groups\":32,"
         "\"norm_eps\":1e-06,\"decoder_num_layers\":36,\"decoder_num_attention_heads\":32,"
         "\"decoder_attention_head_dim\":64,\"decoder_num_register_tokens\":4,"
         "\"decoder_ffn_mult\":4,\"decoder_rope_theta\":100.0,\"decoder_rope_dim_ratio\":0.75,"
         "\"decoder_norm_eps\":1e-05,\"clip_length\":17,\"token_drop\":3,\"latents_mean\":[" +
         mean + "],\"latents_std\":[" + std_ + "]}";
}

void ExpectOfficial(const VideoDecoderConfig& c) {
  const VideoDecoderConfig o = VideoDecoderConfig::Official();
  EXPECT_EQ(c.latent_channels, o.latent_channels);
  EXPECT_EQ(c.dim, o.dim);
  EXPECT_EQ(c.depth, o.depth);
  EXPECT_EQ(c.heads, o.heads);
  EXPECT_EQ(c.dim_head, o.dim_head);
  EXPECT_EQ(c.ffn_inner, o.ffn_inner);
  EXPECT_EQ(c.num_register_tokens, o.num_register_tokens);
  EXPECT_EQ(c.norm_eps, o.norm_eps);
  EXPECT_EQ(c.rope_theta, o.rope_theta);
  EXPECT_EQ(c.rope_dim, o.rope_dim);
  EXPECT_EQ(c.patch_t, o.patch_t);
  EXPECT_EQ(c.patch_hw, o.patch_hw);
  EXPECT_EQ(c.out_channels, o.out_channels);
  EXPECT_EQ(c.latents_mean, o.latents_mean);
  EXPECT_EQ(c.latents_std, o.latents_std);
  EXPECT_EQ(c.tile_px, o.tile_px);
  EXPECT_EQ(c.tile_overlap_min_px, o.tile_overlap_min_px);
  EXPECT_EQ(c.clip_length, o.clip_length);
  EXPECT_EQ(c.token_drop, o.token_drop);
}

TEST(H3VideoConfigTest, LoadsOfficialComponentConfigWithSourceDir) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/source");
  dir.Write("source/config.json", SourceJson());
  Result<VideoDecoderConfig> c =
      VideoDecoderConfig::LoadJsonFile(dir.Write("config.json", ComponentJson()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ExpectOfficial(*c);
}

TEST(H3VideoConfigTest, LoadsDiffusersConfig) {
  TempDir dir;
  Result<VideoDecoderConfig> c =
      VideoDecoderConfig::LoadJsonFile(dir.Write("config.json", DiffusersJson()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ExpectOfficial(*c);
}

TEST(H3VideoConfigTest, ComponentConfigWithoutSourceDirIsNotFound) {
  TempDir dir;
  const std::string path = dir.Write("config.json", ComponentJson());
  Result<VideoDecoderConfig> c = VideoDecoderConfig::LoadJsonFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr(path), HasSubstr("source/config.json")));
}

TEST(H3VideoConfigTest, RejectsMissingFileAndNonJson) {
  TempDir dir;
  Result<VideoDecoderConfig> c = VideoDecoderConfig::LoadJsonFile(dir.path() + "/nope.json");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  c = VideoDecoderConfig::LoadJsonFile(dir.Write("bad.json", "{\"decoder_num_layers\": "));
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("not valid JSON"));
  c = VideoDecoderConfig::LoadJsonFile(dir.Write("other.json", "{\"hello\": 1}"));
  EXPECT_THAT(c.status().message(), HasSubstr("unknown config format"));
}

// Each case edits the text of DiffusersJson() (nlohmann keeps the last of
// duplicate keys, so edits replace text rather than append keys).
struct BadDiffusersCase {
  const char* name;
  std::string from, to;               // text replacement in DiffusersJson()
  std::vector<std::string> expected;  // substrings of the error
};

void PrintTo(const BadDiffusersCase& c, std::ostream* os) { *os << c.name; }

class H3BadDiffusersConfigTest : public ::testing::TestWithParam<BadDiffusersCase> {};

TEST_P(H3BadDiffusersConfigTest, ErrorNamesFileAndField) {
  TempDir dir;
  const std::string text = DiffusersJson();
  const std::string bad = Replace(text, GetParam().from, GetParam().to);
  ASSERT_NE(bad, text) << "case does not apply: " << GetParam().from;
  const std::string path = dir.Write("config.json", bad);
  Result<VideoDecoderConfig> c = VideoDecoderConfig::LoadJsonFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr(path));
  for (const std::string& s : GetParam().expected) EXPECT_THAT(c.status().message(), HasSubstr(s));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, H3BadDiffusersConfigTest,
    ::testing::Values(BadDiffusersCase{"zero_heads",
                                       "\"decoder_num_attention_heads\":32",
                                       "\"decoder_num_attention_heads\":0",
                                       {"decoder_num_attention_heads", "is 0"}},
                      BadDiffusersCase{"string_layers",
                                       "\"decoder_num_layers\":36",
                                       "\"decoder_num_layers\":\"36\"",
                                       {"decoder_num_layers", "expected an integer"}},
                      BadDiffusersCase{"rope_ratio",
                                       "\"decoder_rope_dim_ratio\":0.75",
                                       "\"decoder_rope_dim_ratio\":0.5",
                                       {"decoder_rope_dim_ratio", "multiple of 6"}},
                      BadDiffusersCase{"rope_fraction",
                                       "\"decoder_rope_dim_ratio\":0.75",
                                       "\"decoder_rope_dim_ratio\":0.7",
                                       {"decoder_rope_dim_ratio", "whole number"}},
                      BadDiffusersCase{"negative_eps",
                                       "\"decoder_norm_eps\":1e-05",
                                       "\"decoder_norm_eps\":-1",
                                       {"decoder_norm_eps", "> 0"}},
                      BadDiffusersCase{"clip_length",
                                       "\"clip_length\":17",
                                       "\"clip_length\":16",
                                       {"clip_length", "model semantics", "spec/h3_vae.md"}},
                      BadDiffusersCase{"token_drop",
                                       "\"token_drop\":3",
                                       "\"token_drop\":2",
                                       {"token_drop", "model semantics"}},
                      BadDiffusersCase{"std_count",
                                       "\"latents_std\":[",
                                       "\"latents_std\":[0,",
                                       {"latents_std", "has 25 values"}},
                      BadDiffusersCase{"mean_type",
                                       "\"latents_mean\":[",
                                       "\"latents_mean\":[\"x\",",
                                       {"latents_mean[0]", "expected a number"}},
                      BadDiffusersCase{"latent_channels",
                                       "\"latent_channels\":24",
                                       "\"latent_channels\":16",
                                       {"latents_mean", "expected 16"}}));

struct BadOriginalCase {
  const char* name;
  bool in_source;  // edit SourceJson() (true) or ComponentJson() (false)
  std::string from, to;
  std::vector<std::string> expected;
};

void PrintTo(const BadOriginalCase& c, std::ostream* os) { *os << c.name; }

class H3BadOriginalConfigTest : public ::testing::TestWithParam<BadOriginalCase> {};

TEST_P(H3BadOriginalConfigTest, ErrorNamesFileAndField) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/source");
  const BadOriginalCase& p = GetParam();
  const std::string src = p.in_source ? Replace(SourceJson(), p.from, p.to) : SourceJson();
  const std::string comp = p.in_source ? ComponentJson() : Replace(ComponentJson(), p.from, p.to);
  ASSERT_TRUE(src != SourceJson() || comp != ComponentJson()) << "case does not apply";
  const std::string src_path = dir.Write("source/config.json", src);
  const std::string comp_path = dir.Write("config.json", comp);
  Result<VideoDecoderConfig> c = VideoDecoderConfig::LoadJsonFile(comp_path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr(p.in_source ? src_path : comp_path));
  for (const std::string& s : p.expected) EXPECT_THAT(c.status().message(), HasSubstr(s));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, H3BadOriginalConfigTest,
    ::testing::Values(
        BadOriginalCase{"tile_size",
                        false,
                        "\"vae_tile_size\":256",
                        "\"vae_tile_size\":320",
                        {"vae_tile_size", "is 320", "needs 256", "model semantics"}},
        BadOriginalCase{"overlap",
                        false,
                        "\"vae_tile_overlap_min\":64",
                        "\"vae_tile_overlap_min\":32",
                        {"vae_tile_overlap_min", "needs 64", "model semantics"}},
        BadOriginalCase{"untiled",
                        false,
                        "\"vae_decoder_tiling\":1",
                        "\"vae_decoder_tiling\":0",
                        {"vae_decoder_tiling"}},
        BadOriginalCase{"causal_decoder",
                        true,
                        "\"causal_decoder\":false",
                        "\"causal_decoder\":true",
                        {"causal_decoder", "not supported"}},
        BadOriginalCase{"qk_norm_affine",
                        true,
                        "\"qk_norm_affine\":false",
                        "\"qk_norm_affine\":true",
                        {"vit_decoder_kwargs.qk_norm_affine", "not supported"}},
        BadOriginalCase{"ffn_not_gated",
                        true,
                        "\"ffn_use_gated\":true",
                        "\"ffn_use_gated\":false",
                        {"vit_decoder_kwargs.ffn_use_gated"}},
        BadOriginalCase{"ffn_gelu",
                        true,
                        "\"ffn_activation_fn\":\"silu\"",
                        "\"ffn_activation_fn\":\"gelu\"",
                        {"vit_decoder_kwargs.ffn_activation_fn", "gelu"}},
        BadOriginalCase{"layer_norm",
                        true,
                        "\"norm_type\":\"rms_norm\"",
                        "\"norm_type\":\"layer_norm\"",
                        {"vit_decoder_kwargs.norm_type"}},
        BadOriginalCase{"unknown_kwarg",
                        true,
                        "\"dim_head\":64",
                        "\"qk_bias\":true,\"dim_head\":64",
                        {"vit_decoder_kwargs.qk_bias", "not a vit_decoder_kwargs key"}},
        BadOriginalCase{
            "heads", true, "\"heads\":32", "\"heads\":-2", {"vit_decoder_kwargs.heads", "is -2"}},
        BadOriginalCase{"latent_mismatch",
                        true,
                        "\"z_channels\":24",
                        "\"z_channels\":16",
                        {"z_channels", "must equal"}},
        BadOriginalCase{"patch_mismatch",
                        true,
                        "\"vae_ratio\":16",
                        "\"vae_ratio\":8",
                        {"space_down", "multiplies to 16"}}));

TEST(H3VideoConfigTest, ValidateNamesStructFields) {
  VideoDecoderConfig c = VideoDecoderConfig::Official();
  c.dim = 2000;
  EXPECT_THAT(c.Validate().message(),
              AllOf(HasSubstr("heads"), HasSubstr("dim_head"), HasSubstr("must equal dim (2000)")));
  c = VideoDecoderConfig::Official();
  c.rope_dim = 70;
  EXPECT_THAT(c.Validate().message(), HasSubstr("rope_dim"));
  c = VideoDecoderConfig::Official();
  c.tile_px = 512;
  EXPECT_THAT(c.Validate().message(), AllOf(HasSubstr("tile_px is 512"), HasSubstr("semantics")));
  c = VideoDecoderConfig::Official();
  c.latents_std.pop_back();
  EXPECT_THAT(c.Validate().message(), HasSubstr("latents_std has 23 values"));
  c = VideoDecoderConfig::Official();
  c.latents_std[3] = 0;
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("latents_std[3] is 0; must be a finite number > 0"));
}

// ---- Vit3dDecoder on the golden vectors ----

// bf16 compute vs the golden fp32 tile_raw on one_tile, measured on this
// build (see the printout of Bf16ErrorVersusFp32IsBounded), with margin.
// Measured: max abs 0.0147, mean abs 0.0020 (output std 1.16).
constexpr double kBf16MaxAbs = 0.03;
constexpr double kBf16MeanAbs = 0.004;

class H3Vit3dGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GOLDEN();
    at::set_num_threads(2);
    Result<VideoDecoderConfig> c =
        VideoDecoderConfig::LoadJsonFile(Golden("video_tiny_config.json"));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    weights_ = Golden("video_tiny_weights.safetensors");
    one_tile_ = ReadTensors(Golden("video_case_one_tile.safetensors"));
    ASSERT_EQ(one_tile_.count("latent_denorm"), 1u);
    ASSERT_EQ(one_tile_.count("tile_raw"), 1u);
  }

  std::unique_ptr<Vit3dDecoder> LoadOrDie(const std::vector<std::string>& files,
                                          torch::ScalarType dtype = torch::kFloat) {
    Result<std::unique_ptr<Vit3dDecoder>> d = Vit3dDecoder::Load(config_, files, dtype);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(d).value() : nullptr;
  }

  Status LoadStatus(const std::vector<TestTensor>& tensors,
                    const std::string& name = "w.safetensors") {
    const std::string path = dir_.Write(name, test_util::SafetensorsBytes(tensors));
    Result<std::unique_ptr<Vit3dDecoder>> d = Vit3dDecoder::Load(config_, {path}, torch::kFloat);
    return d.ok() ? Status::Ok() : d.status();
  }

  VideoDecoderConfig config_;
  std::string weights_;
  std::map<std::string, torch::Tensor> one_tile_;
  TempDir dir_;
};

TEST_F(H3Vit3dGoldenTest, GoldenLatentDenormIsLatentTimesStdPlusMean) {
  const torch::Tensor mean = torch::tensor(config_.latents_mean).view({1, 24, 1, 1, 1});
  const torch::Tensor std = torch::tensor(config_.latents_std).view({1, 24, 1, 1, 1});
  EXPECT_TRUE(SameBytes(one_tile_["latent"] * std + mean, one_tile_["latent_denorm"]));
}

TEST_F(H3Vit3dGoldenTest, LoadReportsLayoutShaAndResidentBytes) {
  std::unique_ptr<Vit3dDecoder> d = LoadOrDie({weights_});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->layout(), WeightLayout::kOriginal);
  EXPECT_EQ(d->compute_dtype(), torch::kFloat);
  EXPECT_EQ(d->config().dim, 128);
  ASSERT_EQ(d->weight_sha256().size(), 1u);
  EXPECT_EQ(d->weight_sha256()[0].first, weights_);
  EXPECT_EQ(d->weight_sha256()[0].second.size(), 64u);
  // README §4: 929,496 decoder parameters (post_quant_conv included).
  EXPECT_EQ(d->resident_bytes(), 929496u * 4);

  std::unique_ptr<Vit3dDecoder> b = LoadOrDie({weights_}, torch::kBFloat16);
  ASSERT_NE(b, nullptr);
  // bf16: post_quant_conv and the 4 block GEMMs (528,216 parameters).
  EXPECT_EQ(b->resident_bytes(), 528216u * 2 + (929496u - 528216u) * 4);
}

TEST_F(H3Vit3dGoldenTest, Fp32ReproducesGoldenTileRaw) {
  std::unique_ptr<Vit3dDecoder> d = LoadOrDie({weights_});
  ASSERT_NE(d, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const torch::Tensor out = d->Forward(one_tile_["latent_denorm"]);
  const double seconds = Seconds(start);
  const torch::Tensor& golden = one_tile_["tile_raw"];
  ASSERT_EQ(out.sizes(), golden.sizes());
  ASSERT_EQ(out.scalar_type(), torch::kFloat);
  const Diff diff = Compare(out, golden);
  std::printf("[ h3 fp32 ] one_tile vs golden tile_raw: max abs %.3g, mean abs %.3g (%.3f s)\n",
              diff.max_abs, diff.mean_abs, seconds);
  // Bitwise equal on the reference machine's kernels (the same LibTorch ops
  // in the same order as the official fp32 path); other BLAS kernels move
  // it by ~2e-6, so the golden tolerance is asserted (golden_tolerance.h).
  const torch::Tensor ours = out.contiguous(), want = golden.contiguous();
  EXPECT_TRUE(testing::GoldenF32Within(
      "one_tile tile_raw", std::span<const float>(ours.data_ptr<float>(), size_t(ours.numel())),
      std::span<const float>(want.data_ptr<float>(), size_t(want.numel())),
      testing::kGoldenVideoF32MaxAbs));
}

TEST_F(H3Vit3dGoldenTest, StackedTilesEqualSequentialCallsBytewise) {
  std::unique_ptr<Vit3dDecoder> d = LoadOrDie({weights_});
  ASSERT_NE(d, nullptr);
  const std::map<std::string, torch::Tensor> grid =
      ReadTensors(Golden("video_case_grid_2x2.safetensors"));
  ASSERT_EQ(grid.count("latent_denorm"), 1u);
  const torch::Tensor z0 = one_tile_["latent_denorm"];
  const torch::Tensor z1 = grid.at("latent_denorm").narrow(3, 4, 16).narrow(4, 0, 16).contiguous();
  const torch::Tensor stacked = d->Forward(torch::cat({z0, z1}, 0));
  const torch::Tensor a = d->Forward(z0), b = d->Forward(z1);
  EXPECT_TRUE(SameBytes(stacked.narrow(0, 0, 1), a)) << Compare(stacked.narrow(0, 0, 1), a).max_abs;
  EXPECT_TRUE(SameBytes(stacked.narrow(0, 1, 1), b)) << Compare(stacked.narrow(0, 1, 1), b).max_abs;

  // bf16 too (measured bytewise on this build: the GEMMs, convs and
  // attention run per batch item).
  std::unique_ptr<Vit3dDecoder> h = LoadOrDie({weights_}, torch::kBFloat16);
  ASSERT_NE(h, nullptr);
  const torch::Tensor hs = h->Forward(torch::cat({z0, z1}, 0));
  EXPECT_TRUE(SameBytes(hs.narrow(0, 0, 1), h->Forward(z0)));
  EXPECT_TRUE(SameBytes(hs.narrow(0, 1, 1), h->Forward(z1)));
}

TEST_F(H3Vit3dGoldenTest, Bf16ErrorVersusFp32IsBounded) {
  std::unique_ptr<Vit3dDecoder> d = LoadOrDie({weights_}, torch::kBFloat16);
  ASSERT_NE(d, nullptr);
  const torch::Tensor out = d->Forward(one_tile_["latent_denorm"]);
  ASSERT_EQ(out.scalar_type(), torch::kFloat);
  const torch::Tensor& golden = one_tile_["tile_raw"];
  const Diff diff = Compare(out, golden);
  std::printf(
      "[ h3 bf16 ] one_tile vs golden fp32 tile_raw: max abs %.4g, mean abs %.4g "
      "(golden std %.3g)\n",
      diff.max_abs, diff.mean_abs, golden.std().item<double>());
  // Measured on this build (see the header): bounds with ~2x margin.
  EXPECT_LE(diff.max_abs, kBf16MaxAbs);
  EXPECT_LE(diff.mean_abs, kBf16MeanAbs);
}

TEST_F(H3Vit3dGoldenTest, DiffusersLayoutGivesIdenticalOutput) {
  std::unique_ptr<Vit3dDecoder> original = LoadOrDie({weights_});
  ASSERT_NE(original, nullptr);
  const std::string path =
      dir_.Write("diffusers.safetensors", test_util::SafetensorsBytes(ToDiffusersLayout(
                                              TinyWeights(), config_.heads, config_.dim_head)));
  std::unique_ptr<Vit3dDecoder> diffusers = LoadOrDie({path});
  ASSERT_NE(diffusers, nullptr);
  EXPECT_EQ(diffusers->layout(), WeightLayout::kDiffusers);
  EXPECT_EQ(diffusers->resident_bytes(), original->resident_bytes());
  const torch::Tensor z = one_tile_["latent_denorm"];
  EXPECT_TRUE(SameBytes(diffusers->Forward(z), original->Forward(z)));
}

TEST_F(H3Vit3dGoldenTest, LoadsShardsThroughIndexAndHashesEveryFile) {
  std::vector<TestTensor> all = ToDiffusersLayout(TinyWeights(), config_.heads, config_.dim_head);
  // Encoder-side tensors of a full VAE checkpoint are ignored.
  all.push_back({"encoder.conv_in.bias", "F32", {2}, std::string(8, '\0')});
  all.push_back({"quant_conv.bias", "F32", {2}, std::string(8, '\0')});
  std::vector<TestTensor> first(all.begin(), all.begin() + all.size() / 2);
  std::vector<TestTensor> second(all.begin() + all.size() / 2, all.end());
  const std::string a =
      dir_.Write("model-00001-of-00002.safetensors", test_util::SafetensorsBytes(first));
  const std::string b =
      dir_.Write("model-00002-of-00002.safetensors", test_util::SafetensorsBytes(second));
  std::string map;
  for (const TestTensor& t : first)
    map += (map.empty() ? "" : ",") + ("\"" + t.name + "\":\"model-00001-of-00002.safetensors\"");
  for (const TestTensor& t : second)
    map += ",\"" + t.name + "\":\"model-00002-of-00002.safetensors\"";
  const std::string index =
      dir_.Write("model.safetensors.index.json",
                 "{\"metadata\":{\"total_size\":1},\"weight_map\":{" + map + "}}");
  std::unique_ptr<Vit3dDecoder> from_index = LoadOrDie({index});
  ASSERT_NE(from_index, nullptr);
  ASSERT_EQ(from_index->weight_sha256().size(), 3u);
  EXPECT_EQ(from_index->weight_sha256()[0].first, index);
  EXPECT_EQ(from_index->weight_sha256()[1].first, a);
  EXPECT_EQ(from_index->weight_sha256()[2].first, b);
  std::unique_ptr<Vit3dDecoder> from_shards = LoadOrDie({b, a});
  ASSERT_NE(from_shards, nullptr);
  std::unique_ptr<Vit3dDecoder> original = LoadOrDie({weights_});
  ASSERT_NE(original, nullptr);
  const torch::Tensor z = one_tile_["latent_denorm"];
  const torch::Tensor expected = original->Forward(z);
  EXPECT_TRUE(SameBytes(from_index->Forward(z), expected));
  EXPECT_TRUE(SameBytes(from_shards->Forward(z), expected));

  // An index with other files, and an index that misplaces a tensor.
  Result<std::unique_ptr<Vit3dDecoder>> bad =
      Vit3dDecoder::Load(config_, {index, a}, torch::kFloat);
  EXPECT_THAT(bad.status().message(), HasSubstr("pass it alone"));
  const std::string wrong = dir_.Write(
      "wrong.safetensors.index.json",
      "{\"weight_map\":{" + Replace(map, "model-00001-of-00002", "model-00002-of-00002") + "}}");
  bad = Vit3dDecoder::Load(config_, {wrong}, torch::kFloat);
  EXPECT_THAT(bad.status().message(), HasSubstr("the index lists tensor"));
}

TEST_F(H3Vit3dGoldenTest, AcceptsHalfAndBFloat16Files) {
  std::unique_ptr<Vit3dDecoder> original = LoadOrDie({weights_});
  ASSERT_NE(original, nullptr);
  const torch::Tensor z = one_tile_["latent_denorm"];
  const torch::Tensor expected = original->Forward(z);
  for (torch::ScalarType type : {torch::kHalf, torch::kBFloat16}) {
    std::vector<TestTensor> tensors;
    for (const TestTensor& t : TinyWeights())
      tensors.push_back(FromTorch(t.name, AsTorch(t).to(type)));
    const std::string path =
        dir_.Write(SafetensorsDType(type) + ".safetensors", test_util::SafetensorsBytes(tensors));
    std::unique_ptr<Vit3dDecoder> d = LoadOrDie({path});
    ASSERT_NE(d, nullptr);
    const Diff diff = Compare(d->Forward(z), expected);
    EXPECT_GT(diff.max_abs, 0.0);  // rounded weights, so not bitwise
    EXPECT_LT(diff.mean_abs, 0.1) << SafetensorsDType(type);
  }
}

TEST_F(H3Vit3dGoldenTest, MissingTensorIsNamedWithExpectedShape) {
  std::vector<TestTensor> tensors = TinyWeights();
  std::erase_if(tensors, [](const TestTensor& t) {
    return t.name == "decoder.transformer_blocks.1.ff.w2.bias" ||
           t.name == "decoder.register_tokens";
  });
  Status s = LoadStatus(tensors, "missing.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(
      s.message(),
      AllOf(HasSubstr("missing.safetensors"),
            HasSubstr(
                "missing tensor 'decoder.transformer_blocks.1.ff.w2.bias' (expected shape [128])"),
            HasSubstr("missing tensor 'decoder.register_tokens' (expected shape [1, 4, 128])"),
            HasSubstr("2 problem(s)")));
}

TEST_F(H3Vit3dGoldenTest, UnexpectedTensorIsNamed) {
  std::vector<TestTensor> tensors = TinyWeights();
  tensors.push_back(
      {"decoder.transformer_blocks.2.norm1.weight", "F32", {128}, std::string(512, '\0')});
  Status s = LoadStatus(tensors, "extra.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("unexpected tensor 'decoder.transformer_blocks.2.norm1.weight' in " +
                        dir_.path() + "/extra.safetensors"));
}

TEST_F(H3Vit3dGoldenTest, MisShapedTensorIsNamedWithBothShapes) {
  std::vector<TestTensor> tensors = TinyWeights();
  for (TestTensor& t : tensors) {
    if (t.name == "decoder.transformer_blocks.0.attn.to_qkv.weight") t.shape = {128, 384};
  }
  Status s = LoadStatus(tensors, "shape.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(
      s.message(),
      HasSubstr("tensor 'decoder.transformer_blocks.0.attn.to_qkv.weight' in " + dir_.path() +
                "/shape.safetensors has shape [128, 384], expected [384, 128]"));
}

TEST_F(H3Vit3dGoldenTest, NonFloatTensorIsNamed) {
  std::vector<TestTensor> tensors = TinyWeights();
  for (TestTensor& t : tensors) {
    if (t.name == "decoder.norm_out.bias") t = {t.name, "U8", {128}, std::string(128, '\0')};
  }
  Status s = LoadStatus(tensors);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'decoder.norm_out.bias' in " + dir_.path() +
                                     "/w.safetensors has dtype uint8; expected F32, F16 or BF16"));
}

TEST_F(H3Vit3dGoldenTest, MixedLayoutsAreRejectedNamingOneKeyOfEach) {
  std::vector<TestTensor> tensors = TinyWeights();
  for (TestTensor& t : tensors) {
    t.name = Replace(t.name, "decoder.transformer_blocks.1.ff.w2.",
                     "decoder.transformer_blocks.1.ff.net.2.");
  }
  Status s = LoadStatus(tensors, "mixed.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("mixed.safetensors"), HasSubstr("original layout"),
                                 HasSubstr("'decoder.transformer_blocks.0.attn.to_out.bias'"),
                                 HasSubstr("diffusers layout (2 keys, e.g. "
                                           "'decoder.transformer_blocks.1.ff.net.2.bias')")));
}

TEST_F(H3Vit3dGoldenTest, TensorInTwoShardsIsRejected) {
  const std::vector<TestTensor> tensors = TinyWeights();
  const std::string a = dir_.Write("a.safetensors", test_util::SafetensorsBytes(tensors));
  const std::string b = dir_.Write("b.safetensors", test_util::SafetensorsBytes({tensors[0]}));
  Result<std::unique_ptr<Vit3dDecoder>> d = Vit3dDecoder::Load(config_, {a, b}, torch::kFloat);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr("'" + tensors[0].name + "' is in both"), HasSubstr(a), HasSubstr(b)));
}

TEST_F(H3Vit3dGoldenTest, ConfigThatDoesNotMatchTheFileIsReportedPerTensor) {
  config_.depth = 3;
  Result<std::unique_ptr<Vit3dDecoder>> d = Vit3dDecoder::Load(config_, {weights_}, torch::kFloat);
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr("missing tensor 'decoder.transformer_blocks.2.norm1.weight'"),
                    HasSubstr("and 4 more")));
}

TEST_F(H3Vit3dGoldenTest, BadArgumentsAreRejected) {
  VideoDecoderConfig bad = config_;
  bad.heads = 3;
  Result<std::unique_ptr<Vit3dDecoder>> d = Vit3dDecoder::Load(bad, {weights_}, torch::kFloat);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr("heads (3)"), HasSubstr("must equal dim (128)")));
  d = Vit3dDecoder::Load(config_, {weights_}, torch::kDouble);
  EXPECT_THAT(d.status().message(),
              HasSubstr("compute_dtype Double is not supported (float32, float16, bfloat16)"));
  d = Vit3dDecoder::Load(config_, {}, torch::kFloat);
  EXPECT_THAT(d.status().message(), HasSubstr("no weight files"));
  d = Vit3dDecoder::Load(config_, {dir_.path() + "/absent.safetensors"}, torch::kFloat);
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr("absent.safetensors"));
}

TEST_F(H3Vit3dGoldenTest, ForwardRejectsBadInputWithTorchError) {
  std::unique_ptr<Vit3dDecoder> d = LoadOrDie({weights_});
  ASSERT_NE(d, nullptr);
  EXPECT_THROW(d->Forward(torch::zeros({1, 16, 7, 16, 16})), c10::Error);
  EXPECT_THROW(d->Forward(torch::zeros({1, 24, 16, 16})), c10::Error);
  EXPECT_THROW(d->Forward(torch::zeros({1, 24, 7, 16, 16}, torch::kDouble)), c10::Error);
}

// ---- Random weights ----

VideoDecoderConfig SmallConfig() {
  VideoDecoderConfig c = VideoDecoderConfig::Official();
  c.depth = 2;
  c.heads = 2;
  c.dim = 128;
  c.ffn_inner = 512;
  return c;
}

TEST(H3Vit3dRandomTest, SameSeedGivesSameWeightsAndOutput) {
  at::set_num_threads(2);
  auto a = Vit3dDecoder::CreateRandom(SmallConfig(), 7, torch::kFloat);
  auto b = Vit3dDecoder::CreateRandom(SmallConfig(), 7, torch::kFloat);
  auto c = Vit3dDecoder::CreateRandom(SmallConfig(), 8, torch::kFloat);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->layout(), WeightLayout::kRandom);
  EXPECT_TRUE((*a)->weight_sha256().empty());
  const torch::Tensor z = torch::randn({1, 24, 3, 5, 6}, at::detail::createCPUGenerator(1));
  const torch::Tensor out = (*a)->Forward(z);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{1, 3, 12, 80, 96}));
  EXPECT_TRUE(SameBytes(out, (*b)->Forward(z)));
  EXPECT_FALSE(SameBytes(out, (*c)->Forward(z)));
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
}

// Stacking at the official width (K = 2048 GEMMs) on a small tile.
TEST(H3Vit3dRandomTest, StackedEqualsSequentialAtFullWidth) {
  at::set_num_threads(2);
  VideoDecoderConfig c = VideoDecoderConfig::Official();
  c.depth = 1;
  auto d = Vit3dDecoder::CreateRandom(c, 3, torch::kFloat);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  at::Generator gen = at::detail::createCPUGenerator(2);
  const torch::Tensor z0 = torch::randn({1, 24, 3, 8, 8}, gen),
                      z1 = torch::randn({1, 24, 3, 8, 8}, gen);
  const torch::Tensor stacked = (*d)->Forward(torch::cat({z0, z1}, 0));
  EXPECT_TRUE(SameBytes(stacked.narrow(0, 0, 1), (*d)->Forward(z0)));
  EXPECT_TRUE(SameBytes(stacked.narrow(0, 1, 1), (*d)->Forward(z1)));
}

TEST(H3Vit3dRandomTest, TwoLayerFullWidthBf16DecodesOneOfficialTile) {
  at::set_num_threads(2);
  VideoDecoderConfig c = VideoDecoderConfig::Official();
  c.depth = 2;
  auto start = std::chrono::steady_clock::now();
  auto d = Vit3dDecoder::CreateRandom(c, 1, torch::kBFloat16);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const double create_s = Seconds(start);
  // 2 blocks of 67,143,680 parameters in bf16 (spec §1.1), the rest fp32.
  const uint64_t block_gemm =
      2 * (6144 * 2048 + 6144 + 2048 * 2048 + 2048 + 16384 * 2048 + 16384 + 2048 * 8192 + 2048);
  EXPECT_EQ((*d)->resident_bytes(),
            block_gemm * 2 + (24 * 24 + 24) * 2 +
                4 * (24 * 2048 + 2048 + 4 * 2048 + 2 * 4 * 2048 + 2 * 2048 + 3072 * 2048 + 3072));
  const torch::Tensor z = torch::randn({1, 24, 7, 16, 16}, at::detail::createCPUGenerator(5));
  start = std::chrono::steady_clock::now();
  const torch::Tensor out = (*d)->Forward(z);
  const double forward_s = Seconds(start);
  std::printf(
      "[ h3 bf16 ] 2-layer full-width tile [1,24,7,16,16]: create %.2f s, forward %.2f s "
      "(2 threads)\n",
      create_s, forward_s);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{1, 3, 28, 256, 256}));
  EXPECT_EQ(out.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  const double std = out.std().item<double>();
  EXPECT_GT(std, 0.3);
  EXPECT_LT(std, 3.0);
}

// Not run by ctest (DISABLED_): one full 36-layer official tile, for timing.
// Run with --gtest_also_run_disabled_tests --gtest_filter='*FullModel*'.
// Needs ~5 GB (bf16) / ~10 GB (fp32) of memory for the weights.
void TimeFullModelTile(torch::ScalarType dtype) {
  at::set_num_threads(2);
  auto start = std::chrono::steady_clock::now();
  auto d = Vit3dDecoder::CreateRandom(VideoDecoderConfig::Official(), 1, dtype);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const double create_s = Seconds(start);
  const torch::Tensor z = torch::randn({1, 24, 7, 16, 16}, at::detail::createCPUGenerator(5));
  start = std::chrono::steady_clock::now();
  const torch::Tensor out = (*d)->Forward(z);
  const double forward_s = Seconds(start);
  std::printf(
      "[ h3 %s ] full 36-layer tile [1,24,7,16,16]: create %.1f s, forward %.1f s, "
      "%.2f GB resident, out std %.3f (2 threads)\n",
      c10::toString(dtype), create_s, forward_s, (*d)->resident_bytes() / 1e9,
      out.std().item<double>());
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
}

TEST(H3Vit3dTimingTest, DISABLED_FullModelTileBf16) { TimeFullModelTile(torch::kBFloat16); }
TEST(H3Vit3dTimingTest, DISABLED_FullModelTileFp32) { TimeFullModelTile(torch::kFloat); }

}  // namespace
}  // namespace vaed::models::h3
