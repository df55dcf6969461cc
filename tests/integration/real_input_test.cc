// Acceptance: real TAEF2 weights on real photos and camera video, decoded by
// a real `vaed` process through the real socket and shared memory. The
// output must match the Python reference decode to +-1 (uint8) and its mean
// PSNR against the original frames must be within 0.1 dB of the reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "daemon/models/safetensors.h"
#include "ops/common/psnr.h"
#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using testing::DaemonProcess;

struct RealCase {
  const char* file;
  const char* original_key;
  int64_t frames, height_px, width_px;
};

// Names the case in ctest output instead of a byte dump.
void PrintTo(const RealCase& c, std::ostream* os) { *os << c.file; }

class RealInputDecodeTest : public ::testing::TestWithParam<RealCase> {
 protected:
  static void SetUpTestSuite() {
    if (!testing::SharedFileExists("data/taef2/taef2_decoder.safetensors")) return;
    daemon_ = new DaemonProcess({"--taef2-weights", testing::TaefWeights(), "--default-model",
                                 "taef2", "--intra-op-threads", "2"});
  }
  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  static DaemonProcess* daemon_;
};
DaemonProcess* RealInputDecodeTest::daemon_ = nullptr;

TEST_P(RealInputDecodeTest, MatchesReferenceDecodeAndItsPsnr) {
  const RealCase& c = GetParam();
  const std::string rel = std::string("data/taef2/") + c.file;
  if (!testing::SharedFileExists(rel) || daemon_ == nullptr) {
    GTEST_SKIP() << "../shared/" << rel << " or the TAEF2 weights are absent; real-input "
                 << "acceptance needs the shared data pack beside the checkout";
  }
  ASSERT_TRUE(daemon_->ok()) << daemon_->Log();

  auto file = SafetensorsFile::Open(testing::SharedPath(rel));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const TensorEntry* latent = (*file)->Find("latent");
  const TensorEntry* reference = (*file)->Find("decoded_u8");
  const TensorEntry* original = (*file)->Find(c.original_key);
  ASSERT_NE(latent, nullptr);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(original, nullptr);

  auto client = client::Client::Connect({.socket = daemon_->socket(), .client_name = c.file});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto plan = ClientProtocol::PlanDecode(**client, "taef2", latent->dtype, latent->shape,
                                         client::OutputFormat::kUInt8NHWC);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->output_bytes(), reference->nbytes);

  auto in = client::SharedRegion::Create(latent->nbytes);
  auto out = client::SharedRegion::Create(plan->output_bytes());
  ASSERT_TRUE(in.ok() && out.ok());
  std::memcpy((*in)->data(), latent->data, latent->nbytes);
  auto in_id = (*client)->RegisterRegion(**in);
  auto out_id = (*client)->RegisterRegion(**out);
  ASSERT_TRUE(in_id.ok() && out_id.ok());

  const std::vector<int64_t> out_shape(plan->output_shape().begin(), plan->output_shape().end());
  auto reply =
      ClientProtocol::Decode(**client, {.model = "taef2",
                                        .latent = {*in_id, 0, latent->dtype, latent->shape},
                                        .output = {*out_id, 0, DType::kUInt8, out_shape},
                                        .format = client::OutputFormat::kUInt8NHWC});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->frames(), c.frames);
  EXPECT_EQ(reply->height_px(), c.height_px);
  EXPECT_EQ(reply->width_px(), c.width_px);
  EXPECT_FALSE(reply->demo_weights());

  const std::span<const uint8_t> decoded((*out)->data(), reference->nbytes);
  const std::span<const uint8_t> ref(reference->data, reference->nbytes);
  const std::span<const uint8_t> orig(original->data, original->nbytes);
  const ops::U8Diff diff = ops::CompareU8(decoded, ref);
  const size_t frame_values = size_t(c.height_px) * size_t(c.width_px) * 3;
  const double psnr = ops::MeanFramePsnr(decoded, orig, frame_values).mean_db;
  const double reference_psnr = ops::MeanFramePsnr(ref, orig, frame_values).mean_db;
  const int max_diff = diff.max_abs_diff;
  std::printf("%s: PSNR %.4f dB (reference %.4f dB, diff %+.4f dB), max |diff| %d, %llu of %llu "
              "values differ\n",
              c.file, psnr, reference_psnr, psnr - reference_psnr, max_diff,
              static_cast<unsigned long long>(diff.values_differing),
              static_cast<unsigned long long>(diff.values));
  EXPECT_LE(max_diff, 1);
  EXPECT_NEAR(psnr, reference_psnr, 0.1);
}

INSTANTIATE_TEST_SUITE_P(
    TaefData, RealInputDecodeTest,
    ::testing::Values(RealCase{"video_bikes.safetensors", "frames_u8", 16, 272, 640},
                      RealCase{"video_carphone.safetensors", "frames_u8", 32, 144, 176},
                      RealCase{"photo_astronaut.safetensors", "image_u8", 1, 512, 512},
                      RealCase{"photo_coffee.safetensors", "image_u8", 1, 400, 592},
                      RealCase{"photo_chelsea.safetensors", "image_u8", 1, 288, 448}),
    [](const ::testing::TestParamInfo<RealCase>& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.find('.'));
      return name;
    });

// TAEF2's hybrid tiled decode as the diagnostic output-changing knob
// (capability "tunable_tiling"), and optimized == safe for a model without
// stacked tiles or compiled plans.
TEST_F(RealInputDecodeTest, DiagnosticTilingGivesTheHybridReference) {
  const std::string rel = "data/taef2/photo_astronaut.safetensors";
  if (!testing::SharedFileExists(rel) || daemon_ == nullptr) {
    GTEST_SKIP() << "../shared/" << rel << " or the TAEF2 weights are absent";
  }
  ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
  auto file = SafetensorsFile::Open(testing::SharedPath(rel));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const TensorEntry* latent = (*file)->Find("latent");
  const TensorEntry* hybrid = (*file)->Find("decoded_tiled_hybrid_f32");
  ASSERT_NE(latent, nullptr);
  ASSERT_NE(hybrid, nullptr);
  auto client = client::Client::Connect({.socket = daemon_->socket(), .client_name = "tiling"});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto in = client::SharedRegion::Create(latent->nbytes);
  auto out = client::SharedRegion::Create(hybrid->nbytes);
  ASSERT_TRUE(in.ok() && out.ok());
  std::memcpy((*in)->data(), latent->data, latent->nbytes);
  auto in_id = (*client)->RegisterRegion(**in);
  auto out_id = (*client)->RegisterRegion(**out);
  ASSERT_TRUE(in_id.ok() && out_id.ok());
  auto request = [&](std::string profile, bool tiled) {
    client::DecodeRequest r{.model = "taef2",
                            .latent = {*in_id, 0, latent->dtype, latent->shape},
                            .output = {*out_id, 0, DType::kFloat32, {1, 3, 512, 512}},
                            .format = client::OutputFormat::kFloat32NCHW};
    r.profile = std::move(profile);
    if (tiled) r.tiling = client::DecodeRequest::Tiling{40, 16};
    return r;
  };
  auto bytes = [&] {
    return std::vector<uint8_t>((*out)->data(), (*out)->data() + hybrid->nbytes);
  };

  auto safe = ClientProtocol::Decode(**client, request("safe", false));
  ASSERT_TRUE(safe.ok()) << safe.status().ToString();
  const std::vector<uint8_t> safe_bytes = bytes();
  EXPECT_EQ(safe->output_changing_size(), 0);
  auto optimized = ClientProtocol::Decode(**client, request("optimized", false));
  ASSERT_TRUE(optimized.ok()) << optimized.status().ToString();
  EXPECT_TRUE(bytes() == safe_bytes) << "optimized changed the TAEF2 output";

  auto refused = ClientProtocol::Decode(**client, request("optimized", true));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "options.tiling changes the output; only profile 'diagnostic' allows it"),
            std::string::npos)
      << refused.status().message();

  auto tiled = ClientProtocol::Decode(**client, request("diagnostic", true));
  ASSERT_TRUE(tiled.ok()) << tiled.status().ToString();
  ASSERT_EQ(tiled->output_changing_size(), 1);
  EXPECT_NE(tiled->output_changing(0).find("40-cell tiles, 16-cell overlap"), std::string::npos);
  EXPECT_EQ(tiled->tiling().tile_rows(), 2u);
  EXPECT_EQ(tiled->tiling().tile_cols(), 2u);
  std::vector<float> mine(hybrid->nbytes / 4), ref(hybrid->nbytes / 4);
  std::memcpy(mine.data(), (*out)->data(), hybrid->nbytes);
  std::memcpy(ref.data(), hybrid->data, hybrid->nbytes);
  double max_abs = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_abs = std::max(max_abs, double(std::fabs(mine[i] - ref[i])));
  }
  std::printf("astronaut: diagnostic tiling 40/16 vs decoded_tiled_hybrid_f32: max |diff| %.3g\n",
              max_abs);
  EXPECT_LE(max_abs, 1e-5);  // bitwise on the reference build (tests/models/taef2_test.cc)
  EXPECT_FALSE(bytes() == safe_bytes) << "the tiled decode should differ from the untiled one";
}

}  // namespace
}  // namespace vaed
