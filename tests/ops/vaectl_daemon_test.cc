// vaectl against a real daemon: starts the built `vaed` on a private socket
// with the demo model and the real TAEF2 weights from ../shared (or the
// MiniMax-H3 golden tiny decoders), then runs the built `vaectl` binary.
// Skips when the shared data is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/daemon_process.h"
#include "tests/common/golden_tolerance.h"
#include "test_util.h"
#include "tests/common/test_paths.h"

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

// Runs vaectl against the daemon at `socket`; stdout and stderr kept apart
// (stderr goes through a file in `dir`).
CliRun VaectlAt(const std::string& socket, const fs::path& dir, const std::string& args) {
  const std::string err_path = (dir / "stderr.txt").string();
  const auto run = vaed::ops_test::RunCommand(std::string(VAECTL_PATH) + " --socket '" + socket +
                                              "' " + args + " 2>'" + err_path + "'");
  return {run.exit_code, run.out, ReadFile(err_path)};
}

bool HaveTool(const std::string& name) {
  return vaed::ops_test::RunCommand("command -v " + name + " >/dev/null 2>&1").exit_code == 0;
}

// The first video stream of `mp4` decoded to rgb24 bytes, or the first
// audio stream to float32 samples; "" when there is none.
std::string DecodedVideo(const std::string& mp4) {
  return vaed::ops_test::RunCommand("ffmpeg -v error -nostdin -i '" + mp4 +
                                    "' -map 0:v:0 -f rawvideo -pix_fmt rgb24 - 2>/dev/null")
      .out;
}
std::string DecodedAudio(const std::string& mp4) {
  return vaed::ops_test::RunCommand("ffmpeg -v error -nostdin -i '" + mp4 +
                                    "' -map 0:a:0 -f f32le - 2>/dev/null")
      .out;
}

// Files in `dir` whose name contains `part` (e.g. the temporary video of
// a streamed MP4 with audio, "<out>.video-<pid>.mp4").
std::vector<std::string> FilesContaining(const fs::path& dir, const std::string& part) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(part) != std::string::npos) {
      found.push_back(e.path().string());
    }
  }
  return found;
}

// One daemon per test suite, started with Daemon::Args() when
// Daemon::Present(); the suite's tests skip with Daemon::Missing()
// otherwise. Daemon is a small traits struct (below).
template <typename Daemon>
class DaemonSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!Daemon::Present()) return;
    daemon_ = new vaed::testing::DaemonProcess(Daemon::Args());
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
    if (!Daemon::Present()) GTEST_SKIP() << Daemon::Missing();
    ASSERT_TRUE(ready_) << "vaed did not become ready; its log:\n" << startup_log_;
  }

  static CliRun Vaectl(const std::string& args) { return VaectlAt(socket_, dir_, args); }

  static std::string Tmp(const std::string& name) { return (dir_ / name).string(); }

  // Streamed output: runs `vaectl decode` with `args` (--format mp4 among them)
  // twice with --json: streamed into `streamed`, then with --no-stream into
  // `unstreamed`. Both must succeed and say how they wrote the MP4 (the
  // seconds after the reply are printed). Their reports, or nulls after a
  // failure (reported).
  static std::pair<nlohmann::json, nlohmann::json> DecodeStreamedAndNot(
      const std::string& args, const std::string& streamed, const std::string& unstreamed) {
    const CliRun s = Vaectl(args + " --json --out '" + streamed + "'");
    const CliRun u = Vaectl(args + " --json --no-stream --out '" + unstreamed + "'");
    if (s.exit_code != 0 || u.exit_code != 0) {
      ADD_FAILURE() << "streamed: exit " << s.exit_code << ", " << s.err << "\n--no-stream: exit "
                    << u.exit_code << ", " << u.err;
      return {};
    }
    const auto js = nlohmann::json::parse(s.out);
    const auto ju = nlohmann::json::parse(u.out);
    EXPECT_EQ(js["mp4_streamed"], true);
    EXPECT_EQ(ju["mp4_streamed"], false);
    EXPECT_GE(js["mp4_tail_seconds"].get<double>(), 0.0);
    EXPECT_GE(ju["mp4_tail_seconds"].get<double>(), 0.0);
    std::printf("%s: MP4 complete %.3f s after the reply streamed, %.3f s not streamed\n",
                streamed.c_str(), js["mp4_tail_seconds"].get<double>(),
                ju["mp4_tail_seconds"].get<double>());
    return {js, ju};
  }

  static inline vaed::testing::DaemonProcess* daemon_ = nullptr;
  static inline fs::path dir_;
  static inline std::string socket_;
  static inline bool ready_ = false;
  static inline std::string startup_log_;
};

// The demo model plus the real TAEF2 weights.
struct TaefDaemon {
  static bool Present() { return fs::exists(kData + "/taef2_decoder.safetensors"); }
  static std::vector<std::string> Args() {
    return {"--taef2-weights", kData + "/taef2_decoder.safetensors", "--intra-op-threads", "2"};
  }
  static std::string Missing() { return kData + " not present"; }
};

class VaectlDaemonTest : public DaemonSuite<TaefDaemon> {};

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
      // ../shared/data/taef2/SHA256SUMS lists the decoder: checked before loading.
      EXPECT_EQ(m["weights_verification"], "verified");
      EXPECT_GT(m["resident_bytes"].get<uint64_t>(), 0u);
    }
    if (m["demo_weights"] == true) {
      saw_demo = true;
      EXPECT_EQ(m["weights_verification"], "generated");
    }
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
  EXPECT_THAT(r.out, HasSubstr("verified"));
  EXPECT_THAT(r.out, HasSubstr("generated"));
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
  // Streamed by default: the timing table says so.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\(mp4 after reply, streamed\\) +[0-9.]+ +[0-9.]+"));
  const std::string probe = vaed::ops_test::RunCommand(
                                "ffprobe -v error -count_frames -show_entries "
                                "stream=nb_read_frames,width,height -of default=nw=1 '" +
                                mp4 + "'")
                                .out;
  EXPECT_THAT(probe, HasSubstr("nb_read_frames=3"));
  EXPECT_THAT(probe, HasSubstr("width=48"));
  EXPECT_THAT(probe, HasSubstr("height=32"));

  const CliRun unstreamed = Vaectl(
      "decode --random-latent 3,32,4,6 --model demo --format mp4 --fps 30 --no-stream --out '" +
      Tmp("demo_unstreamed.mp4") + "'");
  ASSERT_EQ(unstreamed.exit_code, 0) << unstreamed.err;
  EXPECT_THAT(unstreamed.out, HasSubstr("(mp4 after reply, not streamed)"));
  EXPECT_TRUE(DecodedVideo(Tmp("demo_unstreamed.mp4")) == DecodedVideo(mp4));
}

// Streamed output: --format mp4 feeds each frame batch to ffmpeg as the daemon
// announces it final; --no-stream encodes after the decode. The real bikes
// clip gives the same frames either way, and the report says which ran.
TEST_F(VaectlDaemonTest, StreamedAndUnstreamedMp4OfTheBikesClipHoldTheSameFrames) {
  if (!HaveTool("ffmpeg")) GTEST_SKIP() << "ffmpeg not installed";
  const std::string bikes = kData + "/video_bikes.safetensors";
  if (!fs::exists(bikes)) GTEST_SKIP() << bikes << " not present";
  const std::string streamed = Tmp("bikes_streamed.mp4");
  const std::string unstreamed = Tmp("bikes_unstreamed.mp4");
  const auto [js, ju] = DecodeStreamedAndNot(
      "decode '" + bikes + "' --model taef2 --format mp4 --fps 25", streamed, unstreamed);
  if (js.is_null()) return;
  EXPECT_EQ(js["outputs"], nlohmann::json({streamed}));
  EXPECT_EQ(ju["outputs"], nlohmann::json({unstreamed}));

  const std::string frames = DecodedVideo(unstreamed);
  EXPECT_EQ(frames.size(), 16u * 272 * 640 * 3);
  EXPECT_TRUE(DecodedVideo(streamed) == frames) << "the streamed MP4 holds other frames";
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

// Acceptance: `vaectl decode` through a running vaed on each real
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

// ------------------------------------------------ MiniMax-H3 audio + video

const std::string kGolden = std::string(VAED_SHARED_DIR) + "/golden/h3";

// A float32 tensor of a safetensors file, read without the library under
// test (header: u64 length, JSON; data after it). Empty when absent.
std::vector<float> ReadF32Tensor(const std::string& path, const std::string& name) {
  const std::string bytes = ReadFile(path);
  if (bytes.size() < 8) return {};
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) {
    header_len |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  if (!header.contains(name) || header[name]["dtype"] != "F32") return {};
  const uint64_t begin = header[name]["data_offsets"][0];
  const uint64_t end = header[name]["data_offsets"][1];
  std::vector<float> values((end - begin) / sizeof(float));
  std::memcpy(values.data(), bytes.data() + 8 + header_len + begin, end - begin);
  return values;
}

// A WAV file, parsed here independently of ops/common's reader (RIFF
// chunks, little-endian): 16-bit PCM (codes / 32767) or 32-bit IEEE float.
struct WavFile {
  int format_tag = 0;  // 1 PCM, 3 IEEE float; 0 = not read
  int channels = 0;
  int sample_rate_hz = 0;
  std::vector<double> interleaved;
};

uint32_t Le(const std::string& b, size_t at, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint32_t{static_cast<unsigned char>(b[at + i])} << (8 * i);
  return v;
}

WavFile ReadWavFile(const std::string& path) {
  WavFile wav;
  const std::string b = ReadFile(path);
  if (b.size() < 12 || b.compare(0, 4, "RIFF") != 0 || b.compare(8, 4, "WAVE") != 0) return wav;
  for (size_t at = 12; at + 8 <= b.size();) {
    const std::string id = b.substr(at, 4);
    const uint32_t size = Le(b, at + 4, 4);
    const size_t body = at + 8;
    if (body + size > b.size()) break;
    if (id == "fmt ") {
      const int tag = static_cast<int>(Le(b, body, 2));
      const int bits = static_cast<int>(Le(b, body + 14, 2));
      if ((tag == 1 && bits == 16) || (tag == 3 && bits == 32)) wav.format_tag = tag;
      wav.channels = static_cast<int>(Le(b, body + 2, 2));
      wav.sample_rate_hz = static_cast<int>(Le(b, body + 4, 4));
    } else if (id == "data" && wav.format_tag == 1) {
      for (size_t i = 0; i + 2 <= size; i += 2) {
        wav.interleaved.push_back(static_cast<int16_t>(Le(b, body + i, 2)) / 32767.0);
      }
    } else if (id == "data" && wav.format_tag == 3) {
      for (size_t i = 0; i + 4 <= size; i += 4) {
        const uint32_t bits = Le(b, body + i, 4);
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        wav.interleaved.push_back(f);
      }
    }
    at = body + size + (size & 1);
  }
  return wav;
}

// The uint8 comparison vaectl decode --json reports against --reference-key
// (here frames_u8 of a golden file), checked against the golden tolerance.
::testing::AssertionResult ReportedU8WithinGolden(const std::string& what,
                                                  const nlohmann::json& report) {
  return vaed::testing::GoldenU8CountsWithin(
      what, {.values = report["values_compared"].get<uint64_t>(),
             .differing = report["values_differing_from_reference"].get<uint64_t>(),
             .max_abs_diff = report["max_abs_diff_vs_reference"].get<int>()});
}

// One daemon with the golden tiny H3 decoders: "a3" (audio only) and "hv"
// (video + audio, the H3 A/V length rule at 24 fps).
struct H3Daemon {
  static bool Present() { return fs::exists(kGolden + "/audio_tiny_weights.safetensors"); }
  static std::vector<std::string> Args() {
    const std::string audio =
        kGolden + "/audio_tiny_weights.safetensors:" + kGolden + "/audio_tiny_config.json";
    const std::string video =
        kGolden + "/video_tiny_weights.safetensors:" + kGolden + "/video_tiny_config.json";
    return {"--model", "a3=h3_audio:" + audio, "--model", "hv=h3:" + video + ":" + audio,
            "--intra-op-threads", "2"};
  }
  static std::string Missing() { return kGolden + " not present"; }
};

class VaectlH3DaemonTest : public DaemonSuite<H3Daemon> {};

// The tile grid without decoding.
TEST_F(VaectlH3DaemonTest, PlanShowsTheTileGridAndWindowsWithoutDecoding) {
  const CliRun j = Vaectl("plan --shape 1,24,33,96,168 --model hv --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto plan = nlohmann::json::parse(j.out);
  EXPECT_EQ(plan["frames"], 111);
  EXPECT_EQ(plan["output_shape"], nlohmann::json({111, 1536, 2688, 3}));
  // The RFC's shape: 112 tiles per temporal window, 7 windows.
  EXPECT_EQ(plan["tiling"]["windows"], 7);
  EXPECT_EQ(plan["tiling"]["tile_rows"].get<int>() * plan["tiling"]["tile_cols"].get<int>(), 112);
  EXPECT_EQ(plan["tiling"]["tiles"], 784);
  const CliRun text = Vaectl("plan --shape 1,24,7,16,16 --audio-shape 1,32,37 --model hv");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("tiles        1x1 tiles per window x 1 temporal window = 1 tile"));
  EXPECT_THAT(text.out, HasSubstr("22 frames, 256x256 px (WxH)"));
  EXPECT_THAT(text.out, HasSubstr("audio        [1, 32, 37] -> 1 channel, 29600 samples"));
  const CliRun refused = Vaectl("plan --shape 1,16,7,16,16 --model hv");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("latent.shape[1]"));
}

TEST_F(VaectlH3DaemonTest, FormatNoneWithAudioOutWritesOnlyTheWav) {
  // --format none is about video frames; --audio-out still
  // names the WAV to write, and nothing else is written.
  const std::string golden = kGolden + "/audio_case_stereo.safetensors";
  const std::string wav_path = Tmp("only.wav");
  const CliRun r = Vaectl("decode --audio-latent '" + golden + "' --model a3 --format none " +
                          "--audio-out '" + wav_path + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["outputs"], nlohmann::json({wav_path}));
  EXPECT_EQ(j["audio"]["wav"], wav_path);
  EXPECT_TRUE(std::filesystem::exists(wav_path));
  EXPECT_GT(std::filesystem::file_size(wav_path), uint64_t{2 * 32000 * 2});  // pcm16 stereo 1 s
}

TEST_F(VaectlH3DaemonTest, AudioOnlyStereoGoldenWritesWavMatchingTheReference) {
  const std::string golden = kGolden + "/audio_case_stereo.safetensors";
  const std::string wav_path = Tmp("stereo.wav");
  const CliRun r = Vaectl("decode --audio-latent '" + golden + "' --model a3 --audio-out '" +
                          wav_path + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["frames"], 0);
  EXPECT_TRUE(j["latent_source"].is_null());
  EXPECT_TRUE(j["video_seconds"].is_null());
  EXPECT_EQ(j["outputs"], nlohmann::json({wav_path}));
  EXPECT_TRUE(j["timings"].contains("audio_vae.decode_latent"));
  const auto& a = j["audio"];
  EXPECT_EQ(a["latent_source"], "audio_case_stereo.safetensors:latent");
  EXPECT_EQ(a["latent_shape"], nlohmann::json({2, 32, 40}));
  EXPECT_EQ(a["channels"], 2);
  EXPECT_EQ(a["samples"], 32000);
  EXPECT_EQ(a["sample_rate_hz"], 32000);
  EXPECT_DOUBLE_EQ(a["seconds"].get<double>(), 1.0);
  EXPECT_EQ(a["nonfinite"], 0);
  EXPECT_EQ(a["constant"], false);
  EXPECT_EQ(a["reference_key"], "waveform");
  EXPECT_EQ(a["values_compared"], 64000);
  EXPECT_EQ(a["wav"], wav_path);
  EXPECT_EQ(a["wav_format"], "pcm16");
  // Golden README §8: kernel/batch differences alone reach ~2.6e-5.
  const double max_diff = a["max_abs_diff_vs_reference"].get<double>();
  EXPECT_TRUE(vaed::testing::GoldenMaxAbsWithin("stereo waveform via vaectl", max_diff,
                                                vaed::testing::kGoldenAudioF32MaxAbs));

  // The same decode as float32 WAV: exactly the daemon's samples.
  const std::string float_path = Tmp("stereo_f32.wav");
  ASSERT_EQ(Vaectl("decode --audio-latent '" + golden + "' --model a3 --audio-out '" + float_path +
                   "' --wav-format float32")
                .exit_code,
            0);

  const std::vector<float> reference = ReadF32Tensor(golden, "waveform");  // [2, 1, 32000]
  ASSERT_EQ(reference.size(), 64000u);
  const WavFile pcm = ReadWavFile(wav_path);
  const WavFile exact = ReadWavFile(float_path);
  ASSERT_EQ(pcm.format_tag, 1);
  ASSERT_EQ(exact.format_tag, 3);
  for (const WavFile* w : {&pcm, &exact}) {
    EXPECT_EQ(w->channels, 2);
    EXPECT_EQ(w->sample_rate_hz, 32000);
    ASSERT_EQ(w->interleaved.size(), 64000u);
  }
  double pcm_vs_reference = 0, exact_vs_reference = 0, pcm_vs_exact = 0;
  for (size_t i = 0; i < 32000; ++i) {
    for (size_t c = 0; c < 2; ++c) {
      const double ref = reference[c * 32000 + i];  // planar; WAV is interleaved
      const double p = pcm.interleaved[i * 2 + c], e = exact.interleaved[i * 2 + c];
      pcm_vs_reference = std::max(pcm_vs_reference, std::abs(p - ref));
      exact_vs_reference = std::max(exact_vs_reference, std::abs(e - ref));
      pcm_vs_exact = std::max(pcm_vs_exact, std::abs(p - e));
    }
  }
  std::printf(
      "stereo: decode vs reference %.3g (JSON %.3g), pcm16 WAV vs decode %.3g, "
      "pcm16 WAV vs reference %.3g (1/32767 = %.3g)\n",
      exact_vs_reference, max_diff, pcm_vs_exact, pcm_vs_reference, 1.0 / 32767);
  EXPECT_DOUBLE_EQ(exact_vs_reference, max_diff);
  // pcm16 rounds to the nearest code: within half a step of the decode.
  EXPECT_LE(pcm_vs_exact, 0.5 / 32767 + 1e-9);
  // So against the reference: half a step plus the decode's own difference.
  // (A flat 1/32767 does not hold: 0.5/32767 + 2.78e-5 can exceed it.)
  EXPECT_LE(pcm_vs_reference, 0.5 / 32767 + max_diff + 1e-9);
}

TEST_F(VaectlH3DaemonTest, JointGoldenDecodeToMp4CarriesAacAudioAndKeepsTheWav) {
  if (!HaveTool("ffmpeg")) GTEST_SKIP() << "ffmpeg not installed";
  const std::string mp4 = Tmp("joint.mp4");
  const CliRun r = Vaectl("decode '" + kGolden +
                          "/video_case_one_tile.safetensors' --reference-key frames_u8 "
                          "--audio-latent '" +
                          kGolden +
                          "/audio_case_odd_length.safetensors' --model hv --format mp4 "
                          "--out '" +
                          mp4 + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["frames"], 22);
  EXPECT_TRUE(ReportedU8WithinGolden("one_tile frames_u8 via vaectl (joint)", j));
  EXPECT_DOUBLE_EQ(j["fps"].get<double>(), 24.0);
  EXPECT_NEAR(j["video_seconds"].get<double>(), 22.0 / 24, 1e-12);
  EXPECT_EQ(j["expected_audio_latent_frames"], 37);
  EXPECT_EQ(j["av_lengths_match"], true);
  EXPECT_EQ(j["independent_lengths"], false);
  EXPECT_EQ(j["audio"]["latent_frames"], 37);
  EXPECT_EQ(j["audio"]["samples"], 29600);
  EXPECT_TRUE(vaed::testing::GoldenMaxAbsWithin(
      "odd_length waveform via vaectl (joint)",
      j["audio"]["max_abs_diff_vs_reference"].get<double>(), vaed::testing::kGoldenAudioF32MaxAbs));
  EXPECT_FALSE(j["video_sanity"].is_null());
  EXPECT_TRUE(j["timings"].contains("audio_vae.decode_latent"));
  EXPECT_TRUE(j["timings"].contains("video_vae.decode_latent"));
  EXPECT_EQ(j["outputs"], nlohmann::json({mp4, Tmp("joint.wav")}));
  const WavFile wav = ReadWavFile(Tmp("joint.wav"));
  EXPECT_EQ(wav.format_tag, 1);
  EXPECT_EQ(wav.channels, 1);
  EXPECT_EQ(wav.interleaved.size(), 29600u);

  if (!HaveTool("ffprobe")) GTEST_SKIP() << "ffprobe not installed; MP4 streams not checked";
  const std::string probe = vaed::ops_test::RunCommand(
                                "ffprobe -v error -show_entries "
                                "stream=codec_type,codec_name,sample_rate,channels -of "
                                "compact '" +
                                mp4 + "'")
                                .out;
  EXPECT_THAT(probe, HasSubstr("codec_name=h264|codec_type=video"));
  EXPECT_THAT(probe, HasSubstr("codec_name=aac|codec_type=audio|sample_rate=32000|channels=1"));
}

TEST_F(VaectlH3DaemonTest, MismatchedJointLengthsFailUnlessIndependentLengths) {
  const std::string args = "decode '" + kGolden + "/video_case_one_tile.safetensors' " +
                           "--audio-latent '" + kGolden +
                           "/audio_case_one_second.safetensors' --model hv --format none";
  const CliRun rejected = Vaectl(args);
  EXPECT_NE(rejected.exit_code, 0);
  // 22 frames at 24 fps need round(22 / 24 * 40) = 37 latent frames; 40 given.
  EXPECT_THAT(rejected.err, HasSubstr("40 audio latent frames"));
  EXPECT_THAT(rejected.err, HasSubstr("= 37 audio latent frames"));
  EXPECT_THAT(rejected.err, HasSubstr("22 frames"));
  EXPECT_THAT(rejected.err, HasSubstr("--independent-lengths"));
  EXPECT_TRUE(rejected.out.empty()) << rejected.out;

  const CliRun waived = Vaectl(args + " --independent-lengths --json");
  ASSERT_EQ(waived.exit_code, 0) << waived.err;
  const auto j = nlohmann::json::parse(waived.out);
  EXPECT_EQ(j["independent_lengths"], true);
  EXPECT_EQ(j["expected_audio_latent_frames"], 37);
  EXPECT_EQ(j["av_lengths_match"], false);
  EXPECT_EQ(j["audio"]["latent_frames"], 40);
  EXPECT_EQ(j["outputs"], nlohmann::json::array());

  const CliRun text = Vaectl(args + " --independent-lengths");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("the video needs 37 audio latent frames: +3 latent frames, "
                                  "independent lengths"));
}

// Streamed output: a joint H3 decode streamed to MP4 (video encoded while
// decoding, the WAV muxed in at the end) is the --no-stream file: the same
// frames, the same audio, the same streams; the temporary video is gone.
TEST_F(VaectlH3DaemonTest, StreamedJointMp4HoldsTheFramesAndAudioOfTheUnstreamedOne) {
  if (!HaveTool("ffmpeg") || !HaveTool("ffprobe")) GTEST_SKIP() << "ffmpeg not installed";
  const std::string streamed = Tmp("joint_streamed.mp4");
  const std::string unstreamed = Tmp("joint_unstreamed.mp4");
  const auto [js, ju] = DecodeStreamedAndNot(
      "decode '" + kGolden + "/video_case_one_tile.safetensors' --audio-latent '" + kGolden +
          "/audio_case_odd_length.safetensors' --model hv --format mp4",
      streamed, unstreamed);
  if (js.is_null()) return;
  EXPECT_EQ(js["outputs"], nlohmann::json({streamed, Tmp("joint_streamed.wav")}));
  EXPECT_EQ(ReadFile(Tmp("joint_streamed.wav")), ReadFile(Tmp("joint_unstreamed.wav")));

  const std::string frames = DecodedVideo(unstreamed);
  EXPECT_EQ(frames.size(), 22u * 256 * 256 * 3);
  EXPECT_TRUE(DecodedVideo(streamed) == frames) << "the streamed MP4 holds other frames";
  const std::string audio = DecodedAudio(unstreamed);
  EXPECT_GE(audio.size(), 29600u * sizeof(float));
  EXPECT_TRUE(DecodedAudio(streamed) == audio) << "the streamed MP4 holds other audio";
  auto streams = [](const std::string& mp4) {
    return vaed::ops_test::RunCommand(
               "ffprobe -v error -show_entries stream=codec_type,codec_name,pix_fmt,width,height,"
               "r_frame_rate,color_space,color_range,sample_rate,channels -of compact '" +
               mp4 + "'")
        .out;
  };
  EXPECT_EQ(streams(streamed), streams(unstreamed));
  EXPECT_THAT(streams(streamed), HasSubstr("codec_name=aac"));
  EXPECT_THAT(FilesContaining(dir_, ".video-"), ::testing::IsEmpty());
}

// Streamed output: an H3 decode of 7 temporal windows (111 frames) streams window
// by window into the MP4: the frames of the --no-stream file.
TEST_F(VaectlH3DaemonTest, MultiWindowStreamedMp4HoldsTheUnstreamedFrames) {
  if (!HaveTool("ffmpeg")) GTEST_SKIP() << "ffmpeg not installed";
  const auto [js, ju] = DecodeStreamedAndNot(
      "decode --random-latent 1,24,33,16,16 --seed 3 --model hv --format mp4 --progress lines",
      Tmp("windows_s.mp4"), Tmp("windows_u.mp4"));
  if (js.is_null()) return;
  EXPECT_EQ(js["frames"], 111);
  EXPECT_EQ(js["tiling"]["windows"], 7);
  const std::string frames = DecodedVideo(Tmp("windows_u.mp4"));
  EXPECT_EQ(frames.size(), 111u * 256 * 256 * 3);
  EXPECT_TRUE(DecodedVideo(Tmp("windows_s.mp4")) == frames)
      << "the streamed MP4 holds other frames";
}

// Streamed output: a streamed decode that fails after some windows were final
// (here: its --deadline-ms passes) leaves no partial MP4 (nor the
// temporary video of one with audio) and says which frames were final.
TEST_F(VaectlH3DaemonTest, FailedStreamedDecodeLeavesNoPartialMp4) {
  if (!HaveTool("ffmpeg")) GTEST_SKIP() << "ffmpeg not installed";
  const std::string mp4 = Tmp("cut.mp4");
  // How long the decode takes depends on the machine: deadlines grow until
  // one lets it finish; every shorter one must fail and leave nothing.
  bool mid_stream = false, finished = false;
  for (int deadline_ms = 5; deadline_ms < 120000 && !finished; deadline_ms = deadline_ms * 3 / 2) {
    SCOPED_TRACE("--deadline-ms " + std::to_string(deadline_ms));
    const CliRun r = Vaectl(
        "decode --random-latent 1,24,33,16,16 --random-audio-latent 1,32,185 --model hv "
        "--format mp4 --out '" +
        mp4 + "' --deadline-ms " + std::to_string(deadline_ms));
    if (r.exit_code == 0) {
      finished = true;
      EXPECT_TRUE(fs::exists(mp4));
      break;
    }
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("vaectl decode: "));
    EXPECT_FALSE(fs::exists(mp4)) << "a failed decode left " << mp4;
    EXPECT_THAT(FilesContaining(dir_, "cut.mp4.video-"), ::testing::IsEmpty());
    if (r.err.find("were final when the decode failed; the partial MP4") != std::string::npos) {
      mid_stream = true;
      EXPECT_THAT(r.err, ::testing::ContainsRegex("frames \\[0, [1-9][0-9]*\\) were final"));
    }
  }
  EXPECT_TRUE(finished) << "no deadline let the decode finish";
  EXPECT_TRUE(mid_stream) << "no deadline ended the decode after a final window";
}

// --------------------------------------------------------- VAE groups

// The golden tiny H3 video decoder on a daemon with 2 ranks (groups s1.b0,
// s1.b1, s2.b0) whose requests decode on 2 ranks unless they ask.
struct GroupDaemon {
  static bool Present() { return vaed::testing::H3TinyVideoPresent(); }
  static std::vector<std::string> Args() {
    return {"--model",
            "hv=h3_video:" + vaed::testing::SharedPath(vaed::testing::kH3TinyVideoWeights) + ":" +
                vaed::testing::SharedPath(vaed::testing::kH3TinyVideoConfig),
            "--default-model", "hv", "--group-ranks", "2", "--group-size", "2",
            "--intra-op-threads", "1"};
  }
  static std::string Missing() { return kGolden + " (tiny video decoder) not present"; }
};

class VaectlGroupDaemonTest : public DaemonSuite<GroupDaemon> {};

TEST_F(VaectlGroupDaemonTest, StatusListsRanksAndGroups) {
  const CliRun text = Vaectl("status");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("VAE groups (2 ranks)"));
  EXPECT_THAT(text.out, HasSubstr("group  size  ranks  generation  state  runs  failures\n"));
  EXPECT_THAT(text.out, ::testing::ContainsRegex("s1\\.b0 +1 +0 +0 +idle"));
  EXPECT_THAT(text.out, ::testing::ContainsRegex("s1\\.b1 +1 +1 +0 +idle"));
  EXPECT_THAT(text.out, ::testing::ContainsRegex("s2\\.b0 +2 +0-1 +0 +idle"));
  // No group has failed: no "last failure" column.
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("last failure")));

  const CliRun json = Vaectl("status --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["ranks"], 2);
  std::vector<std::string> names;
  for (const auto& g : j["groups"]) {
    names.push_back(g["name"]);
    EXPECT_EQ(g["generation"], 0);
    EXPECT_EQ(g["failures"], 0);
    EXPECT_EQ(g["last_failure"], "");
    if (g["name"] == "s2.b0") {
      EXPECT_EQ(g["size"], 2);
      EXPECT_EQ(g["ranks"], nlohmann::json({0, 1}));
    }
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("s1.b0", "s1.b1", "s2.b0"));
}

// A 2x2-tile golden case decodes on the daemon's default group (size 2), which
// status then counts; the output matches the golden within its tolerance.
TEST_F(VaectlGroupDaemonTest, DecodeOnTheDefaultGroupIsCountedInStatus) {
  auto runs_of = [](const std::string& name) -> uint64_t {
    const auto j = nlohmann::json::parse(Vaectl("status --json").out);
    for (const auto& g : j["groups"]) {
      if (g["name"] == name) return g["runs"].get<uint64_t>();
    }
    ADD_FAILURE() << "no group " << name;
    return 0;
  };
  const uint64_t before = runs_of("s2.b0");
  const CliRun r = Vaectl("decode '" + kGolden +
                          "/video_case_grid_2x2.safetensors' --reference-key frames_u8 "
                          "--format none --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(ReportedU8WithinGolden("grid_2x2 frames_u8 on s2.b0", j));
  EXPECT_EQ(j["group"]["name"], "s2.b0");
  EXPECT_EQ(j["group"]["size"], 2);
  EXPECT_EQ(j["group"]["ranks"].size(), 2u);
  EXPECT_EQ(j["group"]["fallback"], "");
  EXPECT_EQ(runs_of("s2.b0"), before + 1);
  EXPECT_THAT(Vaectl("status").out, ::testing::ContainsRegex("s2\\.b0 +2 +0-1 +0 +idle +[1-9]"));
}

// --group-size picks the ranks: 1 decodes on one rank, 2 on both, the
// output byte-identical (and within the golden tolerance); the text
// report's group line and the JSON say which.
TEST_F(VaectlGroupDaemonTest, GroupSizeChoosesHowManyRanksDecode) {
  const std::string decode = "decode '" + kGolden +
                             "/video_case_grid_2x2.safetensors' --reference-key frames_u8";
  std::vector<std::string> frames;  // raw uint8 output per size
  for (const int size : {1, 2}) {
    SCOPED_TRACE("--group-size " + std::to_string(size));
    const std::string raw = Tmp("group_size_" + std::to_string(size) + ".u8");
    const CliRun json = Vaectl(decode + " --format raw --out '" + raw + "' --json --group-size " +
                               std::to_string(size));
    ASSERT_EQ(json.exit_code, 0) << json.err;
    const auto j = nlohmann::json::parse(json.out);
    EXPECT_TRUE(ReportedU8WithinGolden("grid_2x2 frames_u8 on " + std::to_string(size) +
                                           " rank(s)",
                                       j));
    frames.push_back(ReadFile(raw));
    const auto& g = j["group"];
    ASSERT_TRUE(g.is_object()) << json.out;
    EXPECT_EQ(g["size"], size);
    ASSERT_EQ(g["ranks"].size(), static_cast<size_t>(size));
    EXPECT_THAT(g["name"].get<std::string>(), ::testing::StartsWith("s" + std::to_string(size)));
    uint64_t tiles = 0;
    for (const auto& k : g["ranks"]) {
      tiles += k["tiles"].get<uint64_t>();
      EXPECT_LE(k["started_unix"].get<double>(), k["finished_unix"].get<double>());
    }
    EXPECT_GT(tiles, 0u);
    EXPECT_EQ(g["fallback"], "");

    const CliRun text = Vaectl(decode + " --format none --group-size " + std::to_string(size));
    ASSERT_EQ(text.exit_code, 0) << text.err;
    const std::string ranks = size == 1 ? "1 rank" : "2 ranks";
    EXPECT_THAT(text.out, ::testing::ContainsRegex(
                              "group +s" + std::to_string(size) + "\\.b[01] \\(" + ranks +
                              ", generation [0-9]+\\): rank [01] [0-9]+ tiles? "
                              "[0-9.]+ s.*; imbalance [0-9.]+\n"))
        << text.out;
    EXPECT_THAT(text.out, ::testing::Not(HasSubstr("FALLBACK")));
  }
  // vaed's own paths (1 rank vs 2 ranks): byte-exact.
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].size(), 22u * 320 * 320 * 3);
  EXPECT_TRUE(frames[0] == frames[1]) << "the output depends on the group size";
}

TEST_F(VaectlGroupDaemonTest, UnqualifiedGroupSizeIsRefusedWithTheDaemonsReason) {
  const CliRun r = Vaectl("decode '" + kGolden +
                          "/video_case_grid_2x2.safetensors' --format none --group-size 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("options.group_size is 3"));
  EXPECT_THAT(r.err, HasSubstr("group.qualified_sizes"));
  EXPECT_THAT(r.err, HasSubstr("--group-size sets options.group_size"));
}

}  // namespace
