// vaectl against a real daemon: starts the built `vaed` on a private socket
// with the demo model and the real TAEF2 weights from ../shared, then runs
// the built `vaectl` binary. Skips when the shared data is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/daemon_process.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using vaed::ops_test::ReadFile;

const std::string kData = std::string(VAED_SHARED_DIR) + "/data/taef2";

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

class VaectlDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kData + "/taef2_decoder.safetensors")) return;
    daemon_ = new vaed::testing::DaemonProcess(
        {"--taef2-weights", kData + "/taef2_decoder.safetensors", "--intra-op-threads", "2"});
    socket_ = daemon_->socket();
    dir_ = daemon_->dir();
    ready_ = daemon_->ok();
    if (!ready_) startup_log_ = daemon_->Log();
  }

  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    if (!fs::exists(kData + "/taef2_decoder.safetensors")) {
      GTEST_SKIP() << kData << " not present";
    }
    ASSERT_TRUE(ready_) << "vaed did not become ready; its log:\n" << startup_log_;
  }

  // Runs vaectl against the test daemon; stdout and stderr kept apart.
  static CliRun Vaectl(const std::string& args) {
    const std::string err_path = (dir_ / "stderr.txt").string();
    const auto run = vaed::ops_test::RunCommand(std::string(VAECTL_PATH) + " --socket '" + socket_ +
                                                "' " + args + " 2>'" + err_path + "'");
    return {run.exit_code, run.out, ReadFile(err_path)};
  }

  static std::string Tmp(const std::string& name) { return (dir_ / name).string(); }

  static inline vaed::testing::DaemonProcess* daemon_ = nullptr;
  static inline fs::path dir_;
  static inline std::string socket_;
  static inline bool ready_ = false;
  static inline std::string startup_log_;
};

TEST_F(VaectlDaemonTest, StatusJsonListsRealAndDemoModels) {
  const CliRun r = Vaectl("status --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["healthy"], true);
  EXPECT_EQ(j["socket"], socket_);
  EXPECT_EQ(j["intra_op_threads"], 2);
  bool saw_taef2 = false, saw_demo = false;
  for (const auto& m : j["models"]) {
    if (m["name"] == "taef2") {
      saw_taef2 = true;
      EXPECT_EQ(m["demo_weights"], false);
      EXPECT_EQ(m["weights_sha256"],
                "89f5078dc26a2dd6b6ce5d18ef0cee482bb81c56ff56c417185f1699defd2138");
      EXPECT_GT(m["resident_bytes"].get<uint64_t>(), 0u);
    }
    if (m["demo_weights"] == true) saw_demo = true;
  }
  EXPECT_TRUE(saw_taef2);
  EXPECT_TRUE(saw_demo);
}

TEST_F(VaectlDaemonTest, StatusTextIsHumanReadable) {
  const CliRun r = Vaectl("status");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("is healthy, up "));
  EXPECT_THAT(r.out, HasSubstr("MiB"));
  EXPECT_THAT(r.out, HasSubstr("DEMO"));
}

// README §6: chelsea's reference decode has PSNR 32.57 dB vs the photo.
TEST_F(VaectlDaemonTest, DecodePhotoReproducesReferencePsnrAndWritesPng) {
  const std::string png = Tmp("chelsea.png");
  const CliRun r = Vaectl("decode '" + kData + "/photo_chelsea.safetensors' --model taef2 --out '" +
                          png + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "taef2");
  EXPECT_EQ(j["demo_weights"], false);
  EXPECT_EQ(j["frames"], 1);
  EXPECT_EQ(j["height_px"], 288);
  EXPECT_EQ(j["width_px"], 448);
  EXPECT_EQ(j["latent_shape"], nlohmann::json({1, 32, 36, 56}));
  EXPECT_TRUE(j["timings"].contains("decode"));
  EXPECT_NEAR(j["psnr_vs_original_db"].get<double>(), 32.57, 0.01);
  EXPECT_NEAR(j["reference_psnr_vs_original_db"].get<double>(), 32.57, 0.005);
  // README §6 tolerance for uint8: |diff| <= 1 in <= 0.01 % of values.
  EXPECT_LE(j["max_abs_diff_vs_reference"].get<int>(), 1);
  EXPECT_LE(j["values_differing_from_reference"].get<double>(), 0.0001 * 288 * 448 * 3);
  EXPECT_EQ(j["outputs"], nlohmann::json({png}));
  EXPECT_GT(fs::file_size(png), 1000u);
}

TEST_F(VaectlDaemonTest, DecodeRandomLatentWithDemoModelWarnsAndWritesRaw) {
  const std::string raw = Tmp("demo.u8");
  const CliRun r =
      Vaectl("decode --random-latent 2,32,8,8 --seed 5 --model demo --format raw --out '" + raw +
             "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("DEMO weights"));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["demo_weights"], true);
  EXPECT_EQ(j["frames"], 2);
  EXPECT_EQ(j["height_px"], 64);
  EXPECT_EQ(j["width_px"], 64);
  EXPECT_TRUE(j["psnr_vs_original_db"].is_null());
  EXPECT_EQ(fs::file_size(raw), 2u * 64 * 64 * 3);
  const auto sidecar = nlohmann::json::parse(ReadFile(Tmp("demo.json")));
  EXPECT_EQ(sidecar["shape"], nlohmann::json({2, 64, 64, 3}));

  // The same seed gives the same frames.
  const std::string again = Tmp("demo2.u8");
  ASSERT_EQ(Vaectl("decode --random-latent 2,32,8,8 --seed 5 --model demo --format raw --out '" +
                   again + "'")
                .exit_code,
            0);
  EXPECT_EQ(ReadFile(raw), ReadFile(again));
}

TEST_F(VaectlDaemonTest, DecodeToMp4HasEveryFrame) {
  const std::string mp4 = Tmp("demo.mp4");
  const CliRun r = Vaectl(
      "decode --random-latent 3,32,4,6 --model demo --format mp4 --fps 30 --out '" + mp4 + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("!!! DEMO WEIGHTS"));
  EXPECT_THAT(r.out, HasSubstr("component"));
  const std::string probe = vaed::ops_test::RunCommand(
                                "ffprobe -v error -count_frames -show_entries "
                                "stream=nb_read_frames,width,height -of default=nw=1 '" +
                                mp4 + "'")
                                .out;
  EXPECT_THAT(probe, HasSubstr("nb_read_frames=3"));
  EXPECT_THAT(probe, HasSubstr("width=48"));
  EXPECT_THAT(probe, HasSubstr("height=32"));
}

TEST_F(VaectlDaemonTest, MissingFfmpegFailsBeforeDecoding) {
  auto served = [] {
    return nlohmann::json::parse(Vaectl("status --json").out)["requests_served"].get<uint64_t>();
  };
  const uint64_t served_before = served();
  const std::string err_path = Tmp("noffmpeg.txt");
  const auto run = vaed::ops_test::RunCommand(
      "PATH=/nonexistent-vaed-test " + std::string(VAECTL_PATH) + " --socket '" + socket_ +
      "' decode --random-latent 1,32,4,4 --model demo --format png --out '" + Tmp("nf") + "' 2>'" +
      err_path + "'");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(ReadFile(err_path), HasSubstr("ffmpeg not found on PATH"));
  EXPECT_FALSE(fs::exists(Tmp("nf")));
  EXPECT_EQ(served(), served_before);
}

TEST_F(VaectlDaemonTest, RejectedLatentExitsWithTheDaemonsReason) {
  const CliRun r = Vaectl("decode --random-latent 1,16,8,8 --model taef2 --format none");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("latent.shape[1]"));
  EXPECT_THAT(r.err, HasSubstr("32"));
}

TEST_F(VaectlDaemonTest, UnknownModelIsReported) {
  const CliRun r = Vaectl("decode --random-latent 1,32,8,8 --model nosuch --format none");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("nosuch"));
}

// Acceptance (issue 2): `vaectl decode` through a running vaed on each real
// input: the decode matches the Python reference decode to |diff| <= 1 and
// its mean PSNR against the original frames is within 0.1 dB of the
// reference's (data/taef2/README.md §6).
struct RealInput {
  const char* file;
  int frames, height_px, width_px;
};

void PrintTo(const RealInput& in, std::ostream* os) { *os << in.file; }

class VaectlRealInputTest : public VaectlDaemonTest,
                            public ::testing::WithParamInterface<RealInput> {};

TEST_P(VaectlRealInputTest, DecodeMatchesReferenceWithinTolerance) {
  const RealInput& in = GetParam();
  const CliRun r = Vaectl("decode '" + kData + "/" + in.file +
                          "' --model taef2 --format none --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["frames"], in.frames);
  EXPECT_EQ(j["height_px"], in.height_px);
  EXPECT_EQ(j["width_px"], in.width_px);
  const double psnr = j["psnr_vs_original_db"].get<double>();
  const double reference = j["reference_psnr_vs_original_db"].get<double>();
  std::printf("%s: vaectl PSNR %.4f dB, reference %.4f dB, max |diff| %d\n", in.file, psnr,
              reference, j["max_abs_diff_vs_reference"].get<int>());
  EXPECT_NEAR(psnr, reference, 0.1);
  EXPECT_LE(j["max_abs_diff_vs_reference"].get<int>(), 1);
}

INSTANTIATE_TEST_SUITE_P(
    TaefData, VaectlRealInputTest,
    ::testing::Values(RealInput{"video_bikes.safetensors", 16, 272, 640},
                      RealInput{"video_carphone.safetensors", 32, 144, 176},
                      RealInput{"photo_astronaut.safetensors", 1, 512, 512},
                      RealInput{"photo_coffee.safetensors", 1, 400, 592},
                      RealInput{"photo_chelsea.safetensors", 1, 288, 448}),
    [](const ::testing::TestParamInfo<RealInput>& info) {
      const std::string f = info.param.file;
      return f.substr(0, f.find('.'));
    });

}  // namespace
