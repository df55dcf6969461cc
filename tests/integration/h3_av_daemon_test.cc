// Acceptance for the H3 audio decoder and joint audio + video requests: the
// golden audio cases of ../shared/golden/h3 (official code, tiny seeded
// weights, CPU fp32) decoded by a real `vaed` process through the socket
// and shared memory, alone and together with the golden video cases.
//   * audio within 5e-5 max abs of the golden waveform and video frames
//     within the uint8 golden tolerance (tests/common/golden_tolerance.h),
//     exact sample counts (odd length and stereo included);
//   * joint requests: samples == 800 * round(frames / 24 * 40) for every
//     golden video case's frame count, both outputs in the client's regions,
//     timings decode / video_vae.decode_latent / audio_vae.decode_latent;
//   * the length rule, swapped axes and misplaced outputs rejected with a
//     precise error, the next valid request served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "daemon/models/safetensors.h"
#include "tests/common/daemon_process.h"
#include "tests/common/golden_tolerance.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;

const char* const kVideoWeights = "golden/h3/video_tiny_weights.safetensors";
const char* const kVideoConfig = "golden/h3/video_tiny_config.json";
const char* const kAudioWeights = "golden/h3/audio_tiny_weights.safetensors";
const char* const kAudioConfig = "golden/h3/audio_tiny_config.json";
const char* const kAudioCases = "golden/h3/audio_cases.json";

bool GoldenPresent() {
  for (const char* f : {kVideoWeights, kVideoConfig, kAudioWeights, kAudioConfig, kAudioCases}) {
    if (!testing::SharedFileExists(f)) return false;
  }
  return true;
}

// The A/V rule with integers only, independent of the daemon's double
// arithmetic: round(frames / 24 * 40) = round(5 * frames / 3), and
// 5 * frames / 3 is never a half, so it is floor((5 * frames + 1) / 3).
int64_t RuleAudioLatentFrames(int64_t frames) { return (5 * frames + 1) / 3; }

double TimingOf(const v1::DecodeReply& r, const std::string& component) {
  for (const auto& t : r.timings()) {
    if (t.component() == component) return t.seconds();
  }
  return -1;
}

// A float32 latent held by the test.
struct Latent {
  std::vector<float> values;
  std::vector<int64_t> shape;
  uint64_t bytes() const { return values.size() * sizeof(float); }
};

Latent FromEntry(const TensorEntry& e) {
  Latent l;
  l.shape = e.shape;
  l.values.resize(e.nbytes / sizeof(float));
  std::memcpy(l.values.data(), e.data, e.nbytes);
  return l;
}

// [1, 32, frames] made by repeating the columns of a [1, 32, T0] latent.
Latent RepeatFrames(const Latent& base, int64_t frames) {
  const int64_t t0 = base.shape[2];
  Latent l;
  l.shape = {1, 32, frames};
  l.values.resize(static_cast<size_t>(32 * frames));
  for (int64_t c = 0; c < 32; ++c) {
    for (int64_t t = 0; t < frames; ++t) l.values[c * frames + t] = base.values[c * t0 + t % t0];
  }
  return l;
}

class H3AudioDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!GoldenPresent()) return;
    const std::string vw = testing::SharedPath(kVideoWeights);
    const std::string vc = testing::SharedPath(kVideoConfig);
    const std::string aw = testing::SharedPath(kAudioWeights);
    const std::string ac = testing::SharedPath(kAudioConfig);
    std::vector<std::string> args = testing::NoQuarantineArgs();
    args.insert(args.end(), {"--model", "av=h3:" + vw + ":" + vc + ":" + aw + ":" + ac, "--model",
                             "audio=h3_audio:" + aw + ":" + ac, "--default-model", "av",
                             "--intra-op-threads", "2"});
    daemon_ = new DaemonProcess(args);
    std::ifstream f(testing::SharedPath(kAudioCases));
    cases_ = new nlohmann::json(nlohmann::json::parse(f));
  }
  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
    delete daemon_;
    delete cases_;
    daemon_ = nullptr;
    cases_ = nullptr;
  }
  void SetUp() override {
    if (daemon_ == nullptr) {
      GTEST_SKIP() << "../shared/golden/h3 is absent; H3 audio acceptance needs the shared "
                      "golden pack beside the checkout";
    }
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    auto client = client::Client::Connect({.socket = daemon_->socket(), .client_name = "h3av"});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  struct Decoded {
    v1::DecodeReply reply;
    std::vector<uint8_t> frames;  // uint8 NHWC
    std::vector<float> audio;     // [channels, samples]
  };

  // Decodes a video latent, an audio latent or both (null = not sent) into
  // fresh regions of the planned sizes.
  Result<Decoded> Decode(const std::string& model, const TensorEntry* video, const Latent* audio,
                         double fps = 0, bool independent = false,
                         client::LatentSpace space = client::LatentSpace::kNormalized) {
    client::DecodeRequest request;
    request.model = model;
    request.fps = fps;
    request.independent_lengths = independent;
    request.latent_space = space;
    if (video) request.latent = {0, 0, video->dtype, video->shape};
    if (audio) request.audio_latent = {0, 0, DType::kFloat32, audio->shape};
    VAED_ASSIGN_OR_RETURN(v1::DecodeReply plan, ClientProtocol::PlanDecode(*client_, request));
    const uint64_t video_in = video ? video->nbytes : 0;
    const uint64_t audio_in = audio ? audio->bytes() : 0;
    const uint64_t video_out = plan.output_bytes();
    const uint64_t audio_out = plan.audio().output_bytes();
    // One input region and one output region; the audio follows the video.
    VAED_ASSIGN_OR_RETURN(auto in, client::SharedRegion::Create(video_in + audio_in));
    VAED_ASSIGN_OR_RETURN(auto out, client::SharedRegion::Create(video_out + audio_out));
    VAED_ASSIGN_OR_RETURN(uint64_t in_id, client_->RegisterRegion(*in));
    VAED_ASSIGN_OR_RETURN(uint64_t out_id, client_->RegisterRegion(*out));
    if (video) {
      std::memcpy(in->data(), video->data, video_in);
      request.latent.region_id = in_id;
      request.output = {
          out_id, 0, FromProto(plan.output_dtype()),
          std::vector<int64_t>(plan.output_shape().begin(), plan.output_shape().end())};
    }
    if (audio) {
      std::memcpy(in->data() + video_in, audio->values.data(), audio_in);
      request.audio_latent.region_id = in_id;
      request.audio_latent.offset = video_in;
      request.audio_output = {out_id, video_out, DType::kFloat32,
                              std::vector<int64_t>(plan.audio().output_shape().begin(),
                                                   plan.audio().output_shape().end())};
    }
    VAED_ASSIGN_OR_RETURN(v1::DecodeReply reply, ClientProtocol::Decode(*client_, request));
    Decoded d;
    d.reply = reply;
    d.frames.assign(out->data(), out->data() + video_out);
    d.audio.resize(audio_out / sizeof(float));
    std::memcpy(d.audio.data(), out->data() + video_out, audio_out);
    VAED_RETURN_IF_ERROR(client_->UnregisterRegion(in_id));
    VAED_RETURN_IF_ERROR(client_->UnregisterRegion(out_id));
    return d;
  }

  static std::unique_ptr<SafetensorsFile> OpenGolden(const std::string& name) {
    auto f = SafetensorsFile::Open(testing::SharedPath("golden/h3/" + name + ".safetensors"));
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(*f) : nullptr;
  }

  static DaemonProcess* daemon_;
  static nlohmann::json* cases_;
  std::unique_ptr<client::Client> client_;
};
DaemonProcess* H3AudioDaemonTest::daemon_ = nullptr;
nlohmann::json* H3AudioDaemonTest::cases_ = nullptr;

class H3GoldenAudioTest : public H3AudioDaemonTest,
                          public ::testing::WithParamInterface<std::string> {};

TEST_P(H3GoldenAudioTest, ReproducesGoldenWaveform) {
  const std::string name = GetParam();
  const nlohmann::json& c = cases_->at(name);
  auto file = OpenGolden("audio_case_" + name);
  ASSERT_NE(file, nullptr);
  const TensorEntry* latent_entry = file->Find("latent");
  const TensorEntry* waveform = file->Find("waveform");
  ASSERT_NE(latent_entry, nullptr);
  ASSERT_NE(waveform, nullptr);
  const Latent latent = FromEntry(*latent_entry);
  const int64_t channels = latent.shape[0], frames = latent.shape[2];
  const std::span<const float> golden(reinterpret_cast<const float*>(waveform->data),
                                      waveform->nbytes / sizeof(float));

  for (const char* model : {"av", "audio"}) {
    auto d = Decode(model, nullptr, &latent);
    ASSERT_TRUE(d.ok()) << model << ": " << d.status().ToString() << "\n" << daemon_->Log();
    const v1::DecodeReply& r = d->reply;
    ASSERT_TRUE(r.has_audio());
    const v1::AudioInfo& a = r.audio();
    // Exact sample counts: 800 per latent frame, per channel.
    EXPECT_EQ(a.samples(), uint64_t(800 * frames));
    EXPECT_EQ(a.channels(), uint32_t(channels));
    EXPECT_EQ(a.latent_frames(), uint64_t(frames));
    EXPECT_EQ(a.sample_rate_hz(), 32000u);
    EXPECT_DOUBLE_EQ(a.seconds(), 800.0 * frames / 32000.0);
    EXPECT_THAT(std::vector<int64_t>(a.output_shape().begin(), a.output_shape().end()),
                ::testing::ElementsAre(channels, 800 * frames));
    ASSERT_EQ(d->audio.size(), golden.size());
    std::printf("%s via %s: %lld x %lld samples\n", name.c_str(), model,
                static_cast<long long>(channels), static_cast<long long>(800 * frames));
    EXPECT_TRUE(testing::GoldenF32Within(name + " waveform via " + model, d->audio, golden,
                                         testing::kGoldenAudioF32MaxAbs));
    // Sanity report, against the statistics the golden generator recorded.
    EXPECT_EQ(a.sanity().nonfinite(), 0u);
    EXPECT_FALSE(a.sanity().constant());
    EXPECT_NEAR(a.sanity().rms(), c.at("rms").get<double>(), 1e-4);
    EXPECT_NEAR(a.sanity().clipped_fraction(), c.at("clamped_fraction").get<double>(), 1e-4);
    EXPECT_LE(a.sanity().peak_abs(), 1.0);
    // Audio-only: no video geometry, no video timings.
    EXPECT_EQ(r.frames(), 0u);
    EXPECT_FALSE(r.has_video_sanity());
    EXPECT_EQ(r.expected_audio_latent_frames(), 0u);
    EXPECT_GE(TimingOf(r, "audio_vae.decode_latent"), 0.0);
    EXPECT_LE(TimingOf(r, "audio_vae.decode_latent"), TimingOf(r, "decode"));
    EXPECT_LT(TimingOf(r, "video_vae.decode_latent"), 0.0);
    EXPECT_FALSE(r.demo_weights());
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, H3GoldenAudioTest,
                         ::testing::Values("one_second", "odd_length", "stereo"));

TEST(AvRuleTest, IntegerFormMatchesTheSpecTable) {
  // spec/h3_vae.md §3.1 table, plus further frame counts.
  const std::vector<std::pair<int64_t, int64_t>> table = {
      {22, 37}, {39, 65}, {124, 207}, {209, 348}, {362, 603}};
  for (const auto& [frames, latents] : table) EXPECT_EQ(RuleAudioLatentFrames(frames), latents);
}

class H3JointTest : public H3AudioDaemonTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(H3JointTest, JointRequestFollowsTheLengthRule) {
  const std::string name = GetParam();
  auto video_file = OpenGolden("video_case_" + name);
  auto audio_file = OpenGolden("audio_case_odd_length");
  auto one_second = OpenGolden("audio_case_one_second");
  ASSERT_TRUE(video_file && audio_file && one_second);
  const TensorEntry* video = video_file->Find("latent");
  const TensorEntry* golden_u8 = video_file->Find("frames_u8");
  ASSERT_TRUE(video && golden_u8);
  const int64_t frames = golden_u8->shape[0];
  const int64_t audio_frames = RuleAudioLatentFrames(frames);
  // 22 frames need 37 latent frames: exactly the golden odd_length case.
  const bool golden_length = audio_frames == 37;
  const Latent audio = golden_length
                           ? FromEntry(*audio_file->Find("latent"))
                           : RepeatFrames(FromEntry(*one_second->Find("latent")), audio_frames);

  auto d = Decode("av", video, &audio);
  ASSERT_TRUE(d.ok()) << d.status().ToString() << "\n" << daemon_->Log();
  const v1::DecodeReply& r = d->reply;
  EXPECT_EQ(r.frames(), uint64_t(frames));
  EXPECT_DOUBLE_EQ(r.fps(), 24.0);
  EXPECT_DOUBLE_EQ(r.video_seconds(), frames / 24.0);
  EXPECT_EQ(r.expected_audio_latent_frames(), uint64_t(audio_frames));
  EXPECT_FALSE(r.independent_lengths());
  ASSERT_TRUE(r.has_audio());
  EXPECT_EQ(r.audio().samples(), uint64_t(800 * audio_frames));
  std::printf("%s: %lld frames (%.3f s) + %lld audio latent frames -> %llu samples (%.3f s)\n",
              name.c_str(), static_cast<long long>(frames), r.video_seconds(),
              static_cast<long long>(audio_frames),
              static_cast<unsigned long long>(r.audio().samples()), r.audio().seconds());
  // Both outputs landed in the client's region.
  ASSERT_EQ(d->frames.size(), golden_u8->nbytes);
  EXPECT_TRUE(
      testing::GoldenU8Within(name + " joint frames_u8", d->frames,
                              std::span<const uint8_t>(golden_u8->data, golden_u8->nbytes)));
  ASSERT_EQ(d->audio.size(), size_t(800 * audio_frames));
  if (golden_length) {
    const TensorEntry* waveform = audio_file->Find("waveform");
    EXPECT_TRUE(testing::GoldenF32Within(
        name + " joint waveform", d->audio,
        std::span<const float>(reinterpret_cast<const float*>(waveform->data),
                               waveform->nbytes / sizeof(float)),
        testing::kGoldenAudioF32MaxAbs));
  }
  // Video and audio timed separately, both inside `decode`.
  const double total = TimingOf(r, "decode");
  const double video_s = TimingOf(r, "video_vae.decode_latent");
  const double audio_s = TimingOf(r, "audio_vae.decode_latent");
  EXPECT_GE(video_s, 0.0);
  EXPECT_GE(audio_s, 0.0);
  EXPECT_LE(video_s + audio_s, total);
  EXPECT_TRUE(r.has_video_sanity());
  EXPECT_EQ(r.video_sanity().nonfinite(), 0u);
  EXPECT_FALSE(r.video_sanity().constant());
  EXPECT_EQ(r.audio().sanity().nonfinite(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Golden, H3JointTest,
                         ::testing::Values("one_tile", "two_windows_two_tiles", "grid_2x2",
                                           "padded_windows", "small_canvas"));

// Decode.latent_space: the golden `latent_denorm` (the official pipeline's
// latent * std + mean of `latent`) decoded as denormalized gives the bytes
// of `latent` decoded as normalized, video and audio in one request; and
// the field is not ignored (the de-normalised latent sent as normalized is
// de-normalised twice: other frames).
using H3LatentSpaceTest = H3AudioDaemonTest;

TEST_F(H3LatentSpaceTest, ADenormalizedLatentDecodesToTheBytesOfItsNormalizedOne) {
  auto video_file = OpenGolden("video_case_one_tile");
  auto audio_file = OpenGolden("audio_case_odd_length");  // 37 frames: 22 video frames' rule
  ASSERT_TRUE(video_file && audio_file);
  const TensorEntry* video = video_file->Find("latent");
  const TensorEntry* video_denorm = video_file->Find("latent_denorm");
  ASSERT_TRUE(video && video_denorm);
  const Latent audio = FromEntry(*audio_file->Find("latent"));
  const Latent audio_denorm = FromEntry(*audio_file->Find("latent_denorm"));

  auto normalized = Decode("av", video, &audio);
  ASSERT_TRUE(normalized.ok()) << normalized.status().ToString() << "\n" << daemon_->Log();
  auto denormalized =
      Decode("av", video_denorm, &audio_denorm, 0, false, client::LatentSpace::kDenormalized);
  ASSERT_TRUE(denormalized.ok()) << denormalized.status().ToString() << "\n" << daemon_->Log();
  ASSERT_EQ(normalized->frames.size(), denormalized->frames.size());
  ASSERT_EQ(normalized->audio.size(), denormalized->audio.size());
  EXPECT_EQ(normalized->frames, denormalized->frames) << "video frames differ";
  EXPECT_EQ(std::memcmp(normalized->audio.data(), denormalized->audio.data(),
                        normalized->audio.size() * sizeof(float)),
            0)
      << "audio samples differ";
  std::printf("latent_space: %zu frame bytes and %zu audio samples equal both ways\n",
              normalized->frames.size(), normalized->audio.size());

  // The audio-only model takes it too.
  auto audio_only =
      Decode("audio", nullptr, &audio_denorm, 0, false, client::LatentSpace::kDenormalized);
  ASSERT_TRUE(audio_only.ok()) << audio_only.status().ToString();
  EXPECT_EQ(std::memcmp(audio_only->audio.data(), normalized->audio.data(),
                        normalized->audio.size() * sizeof(float)),
            0);

  auto twice = Decode("av", video_denorm, &audio_denorm);
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  EXPECT_NE(twice->frames, normalized->frames) << "latent_space had no effect";
}

class H3AvRejectTest : public H3AudioDaemonTest {
 protected:
  // A request that must fail with kInvalidArgument naming every fragment.
  void ExpectRejected(const Result<Decoded>& r, const std::vector<std::string>& fragments) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    for (const std::string& f : fragments) EXPECT_THAT(r.status().message(), HasSubstr(f));
  }
};

TEST_F(H3AvRejectTest, MismatchedLengthsAreRejectedUnlessIndependent) {
  auto video_file = OpenGolden("video_case_one_tile");
  auto audio_file = OpenGolden("audio_case_one_second");
  ASSERT_TRUE(video_file && audio_file);
  const TensorEntry* video = video_file->Find("latent");
  const Latent audio = FromEntry(*audio_file->Find("latent"));  // 40 frames; 22 frames need 37

  ExpectRejected(Decode("av", video, &audio),
                 {"audio_latent.shape[2] is 40 audio latent frames (32000 samples, 1.000 s)",
                  "22 frames at 24 fps (0.917 s)", "round(22 / 24 * 40) = 37", "(29600 samples)",
                  "av_sync.independent_lengths"});
  // Another frame rate moves the rule: 22 frames at 22 fps = 1 s = 40.
  auto at_22fps = Decode("av", video, &audio, 22.0);
  ASSERT_TRUE(at_22fps.ok()) << at_22fps.status().ToString();
  EXPECT_EQ(at_22fps->reply.expected_audio_latent_frames(), 40u);
  EXPECT_DOUBLE_EQ(at_22fps->reply.fps(), 22.0);
  // Waived: both decoded whole.
  auto independent = Decode("av", video, &audio, 0, /*independent=*/true);
  ASSERT_TRUE(independent.ok()) << independent.status().ToString();
  EXPECT_TRUE(independent->reply.independent_lengths());
  EXPECT_EQ(independent->reply.expected_audio_latent_frames(), 37u);
  EXPECT_EQ(independent->reply.audio().samples(), 32000u);
  EXPECT_EQ(independent->reply.frames(), 22u);
  for (double fps : {-1.0, 1e9, std::nan("")}) {
    ExpectRejected(Decode("av", video, &audio, fps), {"av_sync.fps"});
  }
  // The next valid request is served.
  auto odd = OpenGolden("audio_case_odd_length");
  const Latent audio37 = FromEntry(*odd->Find("latent"));
  auto ok = Decode("av", video, &audio37);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(H3AvRejectTest, SwappedAxesAndBadAudioLatentsAreRejected) {
  auto odd = OpenGolden("audio_case_odd_length");
  ASSERT_NE(odd, nullptr);
  const Latent good = FromEntry(*odd->Find("latent"));  // [1, 32, 37]
  auto with_shape = [&](std::vector<int64_t> shape) {
    Latent l = good;
    l.shape = std::move(shape);
    int64_t n = 1;
    for (int64_t d : l.shape) n *= std::max<int64_t>(d, 0);
    l.values.assign(static_cast<size_t>(n), 0.25f);
    return l;
  };
  // Channels and time swapped: [1, T, 32].
  ExpectRejected(Decode("av", nullptr, &(const Latent&)with_shape({1, 37, 32})),
                 {"audio_latent.shape[1]", "is 37", "32 latent channels", "swapped"});
  // [32, channels, T].
  ExpectRejected(Decode("av", nullptr, &(const Latent&)with_shape({32, 1, 37})),
                 {"audio_latent.shape[0]", "1 (mono) or 2 (stereo", "[32, channels, T]"});
  ExpectRejected(Decode("av", nullptr, &(const Latent&)with_shape({3, 32, 37})),
                 {"audio_latent.shape[0] (channels) is 3"});
  ExpectRejected(Decode("av", nullptr, &(const Latent&)with_shape({32, 37})), {"rank 2"});
  ExpectRejected(Decode("av", nullptr, &(const Latent&)with_shape({1, 32, 0})),
                 {"audio_latent.shape[2]", "is 0"});
  ExpectRejected(Decode("av", nullptr, &(const Latent&)with_shape({1, 32, 5000})),
                 {"audio_latent.shape[2]", "4096"});
  // Non-finite values are refused, with their count.
  Latent nan = good;
  nan.values[3] = std::nanf("");
  nan.values[7] = INFINITY;
  ExpectRejected(Decode("av", nullptr, &nan), {"audio_latent contains 2 non-finite"});
  // Models without the modality.
  ExpectRejected(Decode("demo", nullptr, &good), {"has no audio decoder"});
  auto video_file = OpenGolden("video_case_one_tile");
  ExpectRejected(Decode("audio", video_file->Find("latent"), nullptr),
                 {"has no video decoder", "audio_latent"});
  // The next valid request is served.
  auto ok = Decode("av", nullptr, &good);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(H3AvRejectTest, MisplacedAudioOutputsAreRejected) {
  auto odd = OpenGolden("audio_case_odd_length");
  ASSERT_NE(odd, nullptr);
  const Latent latent = FromEntry(*odd->Find("latent"));
  auto region = client::SharedRegion::Create(1 << 20);
  ASSERT_TRUE(region.ok());
  auto id = client_->RegisterRegion(**region);
  ASSERT_TRUE(id.ok());
  std::memcpy((*region)->data(), latent.values.data(), latent.bytes());
  auto send = [&](client::TensorView audio_output, client::TensorView output = {}) {
    client::DecodeRequest r;
    r.model = "av";
    r.audio_latent = {*id, 0, DType::kFloat32, latent.shape};
    r.audio_output = std::move(audio_output);
    r.output = std::move(output);
    return ClientProtocol::Decode(*client_, r);
  };
  const uint64_t after = latent.bytes();
  auto wrong_shape = send({*id, after, DType::kFloat32, {1, 1000}});
  EXPECT_THAT(wrong_shape.status().message(),
              HasSubstr("audio_output is float32 [1, 1000]; model 'av' writes float32 "
                        "[channels, samples] [1, 29600]"));
  auto overlap = send({*id, 64, DType::kFloat32, {1, 29600}});
  EXPECT_THAT(overlap.status().message(), HasSubstr("audio_output bytes [64, "));
  EXPECT_THAT(overlap.status().message(), HasSubstr("overlap audio_latent bytes"));
  auto missing = send({});
  EXPECT_THAT(missing.status().message(), HasSubstr("audio_output is required"));
  auto stray = send({*id, after, DType::kFloat32, {1, 29600}},
                    {*id, after + 29600 * 4, DType::kUInt8, {1, 16, 16, 3}});
  EXPECT_THAT(stray.status().message(), HasSubstr("output is set but latent is not"));
  auto ok = send({*id, after, DType::kFloat32, {1, 29600}});
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(H3AvRejectTest, ProfilesAndCapabilitiesDriveOptions) {
  client::DecodeRequest request;
  request.model = "av";
  request.latent = {0, 0, DType::kFloat32, {1, 24, 7, 16, 16}};
  auto safe = ClientProtocol::PlanDecode(*client_, request);
  ASSERT_TRUE(safe.ok()) << safe.status().ToString();
  EXPECT_EQ(safe->profile(), "safe");
  EXPECT_EQ(safe->compile_decision(), "off (profile safe)");
  request.profile = "optimized";
  request.compile = client::Compile::kAuto;
  auto optimized = ClientProtocol::PlanDecode(*client_, request);
  ASSERT_TRUE(optimized.ok()) << optimized.status().ToString();
  EXPECT_EQ(optimized->profile(), "optimized");
  EXPECT_EQ(optimized->compile_decision(), "auto: compiled plans by shape bucket");
  request.compile = client::Compile::kOn;
  auto on = ClientProtocol::PlanDecode(*client_, request);
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_EQ(on->compile_decision(), "on (requested)");
  client::DecodeRequest demo_compiled;
  demo_compiled.model = "demo";
  demo_compiled.latent = {0, 0, DType::kFloat32, {1, 32, 8, 8}};
  demo_compiled.profile = "optimized";
  demo_compiled.compile = client::Compile::kOn;
  EXPECT_THAT(ClientProtocol::PlanDecode(*client_, demo_compiled).status().message(),
              HasSubstr("options.compile is COMPILE_ON; model 'demo' (kind demo) has no "
                        "compiled-plan backend"));
  request.inject_faults = {"oom_stacked"};
  EXPECT_THAT(ClientProtocol::PlanDecode(*client_, request).status().message(),
              HasSubstr("does not allow fault injection"));
  request.inject_faults.clear();
  request.compile = client::Compile::kDefault;
  request.profile = "student";
  EXPECT_THAT(ClientProtocol::PlanDecode(*client_, request).status().message(),
              HasSubstr("options.profile 'student' is not allowed"));
  // Stacked tiles on a model that does not decode in tiles.
  client::DecodeRequest demo;
  demo.model = "demo";
  demo.latent = {0, 0, DType::kFloat32, {1, 32, 8, 8}};
  demo.stack_tiling = client::StackTiling::kOn;
  EXPECT_THAT(ClientProtocol::PlanDecode(*client_, demo).status().message(),
              HasSubstr("options.stack_tiling is STACK_TILING_ON; model 'demo' (kind demo) does "
                        "not support stacked tiles"));
  auto status = ClientProtocol::GetStatus(*client_);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->default_profile(), "safe");
  EXPECT_THAT(std::vector<std::string>(status->allowed_profiles().begin(),
                                       status->allowed_profiles().end()),
              ::testing::ElementsAre("safe", "optimized", "diagnostic"));
}

TEST_F(H3AvRejectTest, StatusDescribesBothDecoders) {
  auto status = ClientProtocol::GetStatus(*client_);
  ASSERT_TRUE(status.ok());
  int found = 0;
  for (const auto& m : status->models()) {
    const std::vector<std::string> caps(m.capabilities().begin(), m.capabilities().end());
    if (m.name() == "av") {
      ++found;
      EXPECT_EQ(m.kind(), "h3");
      EXPECT_THAT(caps, ::testing::IsSupersetOf({"video", "audio", "tiled", "stack_tiling",
                                                 "compiled_plans", "latent_space"}));
      EXPECT_EQ(m.plan_cache().capacity(), 8u);
      EXPECT_EQ(m.weights_sha256().size(), 64u);
    } else if (m.name() == "audio") {
      ++found;
      EXPECT_EQ(m.kind(), "h3_audio");
      EXPECT_THAT(caps, ::testing::ElementsAre("audio", "latent_space"));
      EXPECT_TRUE(m.weights_sha256().empty());
    } else {
      continue;
    }
    EXPECT_EQ(m.audio_sample_rate_hz(), 32000u);
    EXPECT_DOUBLE_EQ(m.audio_latent_rate_hz(), 40.0);
    EXPECT_DOUBLE_EQ(m.native_fps(), 24.0);
    EXPECT_EQ(m.audio_weights_sha256().size(), 64u);
    EXPECT_FALSE(m.demo_weights());
  }
  EXPECT_EQ(found, 2);
}

}  // namespace
}  // namespace vaed
