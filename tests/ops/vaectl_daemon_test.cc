// vaectl against a real daemon: starts the built `vaed` on a private socket
// with the demo model and the real TAEF2 weights from ../shared, then runs
// the built `vaectl` binary. Skips when the shared data is absent.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

extern char** environ;

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
    dir_ = fs::temp_directory_path() / ("vaectl-e2e-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    socket_ = (dir_ / "vaed.sock").string();
    const std::string log = (dir_ / "vaed.log").string();
    std::vector<std::string> args = {VAED_PATH,
                                     "--socket",
                                     socket_,
                                     "--taef2-weights",
                                     kData + "/taef2_decoder.safetensors",
                                     "--intra-op-threads",
                                     "2"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int err = posix_spawn(&daemon_pid_, VAED_PATH, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      daemon_pid_ = -1;
      return;
    }
    // Ready when `vaectl status` answers (models load before the socket binds).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Vaectl("status").exit_code == 0) {
        ready_ = true;
        return;
      }
      int status = 0;
      if (::waitpid(daemon_pid_, &status, WNOHANG) == daemon_pid_) {
        daemon_pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    startup_log_ = ReadFile(log);
  }

  static void TearDownTestSuite() {
    if (daemon_pid_ > 0) {
      ::kill(daemon_pid_, SIGTERM);
      int status = 0;
      ::waitpid(daemon_pid_, &status, 0);
      daemon_pid_ = -1;
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
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

  static inline fs::path dir_;
  static inline std::string socket_;
  static inline pid_t daemon_pid_ = -1;
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

}  // namespace
