// Acceptance: streamed output. A real `vaed` with two ranks
// decodes with DecodeOptions.stream_output through the real client:
//   * the bytes are those of the unstreamed decode (every golden H3 case,
//     uint8 and float32; TAEF2 on the real bikes clip; groups of 1 and 2);
//   * per stage the ranges are contiguous from 0, monotonic, and the last
//     ends at the output's frame (sample) count; H3 ranges end on temporal
//     window bounds (17 (k + 1) frames);
//   * each range, read when it is announced, already holds its final bytes,
//     and nothing touches it afterwards: the test overwrites every announced
//     range with a sentinel at once and finds the sentinel intact after the
//     reply;
//   * audio is announced in one range of samples;
//   * a request that misses its deadline mid-stream keeps the announced
//     ranges valid and its error names the last final frame.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "daemon/models/safetensors.h"
#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;

constexpr uint8_t kSentinel = 0xA5;
const char* const kAudioWeights = "golden/h3/audio_tiny_weights.safetensors";
const char* const kAudioConfig = "golden/h3/audio_tiny_config.json";
const char* const kBikes = "data/taef2/video_bikes.safetensors";

bool H3Present() {
  return testing::H3TinyVideoPresent() && testing::SharedFileExists(kAudioWeights) &&
         testing::SharedFileExists(kAudioConfig);
}

bool TaefPresent() {
  return testing::SharedFileExists("data/taef2/taef2_decoder.safetensors") &&
         testing::SharedFileExists(kBikes);
}

// Two ranks; the tiny golden H3 (video and audio) and the real TAEF2.
std::string StreamConfig() {
  std::string toml =
      "[executor]\nintra_op_threads = 1\nallow_fault_injection = true\n"
      "[group]\nranks = 2\nsize = 1\nqualified_sizes = [1, 2]\ncollective_timeout_ms = 20000\n"
      "[models]\ndefault = \"h3\"\n"
      "[[models.entry]]\nname = \"h3\"\nkind = \"h3\"\nweights = \"" +
      testing::SharedPath(testing::kH3TinyVideoWeights) + "\"\nconfig = \"" +
      testing::SharedPath(testing::kH3TinyVideoConfig) + "\"\naudio_weights = \"" +
      testing::SharedPath(kAudioWeights) + "\"\naudio_config = \"" +
      testing::SharedPath(kAudioConfig) + "\"\n";
  if (TaefPresent()) {
    toml += "[[models.entry]]\nname = \"taef2\"\nkind = \"taef2\"\nweights = \"" +
            testing::TaefWeights() + "\"\n";
  }
  return testing::WriteTempConfig("stream", "stream", toml);
}

// A float32 latent held by the test.
struct Latent {
  std::vector<float> values;
  std::vector<int64_t> shape;
  uint64_t bytes() const { return values.size() * sizeof(float); }
};

Latent FromFile(const std::string& rel) {
  Latent l;
  auto file = SafetensorsFile::Open(testing::SharedPath(rel));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return l;
  const TensorEntry* e = (*file)->Find("latent");
  EXPECT_NE(e, nullptr) << rel;
  if (e == nullptr) return l;
  l.shape = e->shape;
  l.values.resize(e->nbytes / sizeof(float));
  std::memcpy(l.values.data(), e->data, e->nbytes);
  return l;
}

Latent Pseudo(std::vector<int64_t> shape, float phase) {
  Latent l;
  l.shape = std::move(shape);
  size_t n = 1;
  for (int64_t d : l.shape) n *= size_t(d);
  l.values.resize(n);
  for (size_t i = 0; i < n; ++i) l.values[i] = std::sin(0.37f * float(i) + phase);
  return l;
}

// What one decode produced. For a streamed one, `*_seen` holds each range
// as it read when announced (the rest zero) and `*_after` the region after
// the reply (announced ranges were overwritten with kSentinel at once).
struct Outcome {
  Status status;
  v1::DecodeReply reply;
  std::vector<client::FinalRange> ranges;
  std::vector<uint8_t> video, video_seen, audio, audio_seen;
  uint64_t frames = 0, samples = 0, channels = 0;
};

struct Options {
  std::string model = "h3";
  client::OutputFormat format = client::OutputFormat::kUInt8NHWC;
  uint32_t group_size = 1;
  bool stream = false;
  std::vector<std::string> faults = {};
  uint32_t deadline_ms = 0;
  std::optional<client::DecodeRequest::Tiling> tiling = std::nullopt;
};

class StreamedOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!H3Present()) return;
    daemon_ = new DaemonProcess({"--config", StreamConfig()});
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    if (daemon_ == nullptr) {
      GTEST_SKIP() << "../shared/golden/h3 (tiny video and audio weights) is absent; streamed "
                      "output acceptance needs the shared golden pack beside the checkout";
    }
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    auto c = client::Client::Connect({.socket = daemon_->socket(), .client_name = "stream"});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }

  // Decodes `video` and/or `audio` (null: not sent) into one fresh output
  // region (video first, then audio).
  Outcome Run(const Latent* video, const Latent* audio, const Options& o) {
    Outcome out;
    client::DecodeRequest request;
    request.model = o.model;
    request.format = o.format;
    request.profile = o.tiling ? "diagnostic" : "";
    request.inject_faults = o.faults;
    request.tiling = o.tiling;
    request.deadline_ms = o.deadline_ms;
    request.group_size = o.group_size;
    request.independent_lengths = true;
    if (video) request.latent = {0, 0, DType::kFloat32, video->shape};
    if (audio) request.audio_latent = {0, 0, DType::kFloat32, audio->shape};
    auto plan = ClientProtocol::PlanDecode(*client_, request);
    if (!plan.ok()) {
      out.status = plan.status();
      return out;
    }
    const uint64_t video_in = video ? video->bytes() : 0;
    const uint64_t audio_in = audio ? audio->bytes() : 0;
    const uint64_t video_out = video ? plan->output_bytes() : 0;
    const uint64_t audio_out = audio ? plan->audio().output_bytes() : 0;
    out.frames = video ? plan->frames() : 0;
    out.samples = audio ? plan->audio().samples() : 0;
    out.channels = audio ? plan->audio().channels() : 0;
    auto in = client::SharedRegion::Create(video_in + audio_in);
    auto region = client::SharedRegion::Create(video_out + audio_out);
    EXPECT_TRUE(in.ok() && region.ok());
    auto in_id = client_->RegisterRegion(**in);
    auto out_id = client_->RegisterRegion(**region);
    EXPECT_TRUE(in_id.ok() && out_id.ok());
    uint8_t* base = (*region)->data();
    if (video) {
      std::memcpy((*in)->data(), video->values.data(), video_in);
      request.latent.region_id = *in_id;
      request.output = {*out_id, 0, FromProto(plan->output_dtype()),
                        {plan->output_shape().begin(), plan->output_shape().end()}};
    }
    if (audio) {
      std::memcpy((*in)->data() + video_in, audio->values.data(), audio_in);
      request.audio_latent.region_id = *in_id;
      request.audio_latent.offset = video_in;
      request.audio_output = {*out_id, video_out, DType::kFloat32,
                              {plan->audio().output_shape().begin(),
                               plan->audio().output_shape().end()}};
    }
    if (o.stream) {
      out.video_seen.assign(video_out, 0);
      out.audio_seen.assign(audio_out, 0);
      request.final_range = [&](const client::FinalRange& r) {
        out.ranges.push_back(r);
        if (r.stage == "video") {
          const uint64_t frame_bytes = video_out / out.frames;
          const uint64_t from = r.begin * frame_bytes, n = (r.end - r.begin) * frame_bytes;
          std::memcpy(out.video_seen.data() + from, base + from, n);
          std::memset(base + from, kSentinel, n);
        } else {
          // Planar [channels, samples] float32: the range in each row.
          for (uint64_t ch = 0; ch < out.channels; ++ch) {
            const uint64_t from = video_out + (ch * out.samples + r.begin) * 4;
            const uint64_t n = (r.end - r.begin) * 4;
            std::memcpy(out.audio_seen.data() + (from - video_out), base + from, n);
            std::memset(base + from, kSentinel, n);
          }
        }
      };
    }
    auto reply = ClientProtocol::Decode(*client_, request);
    out.status = reply.status();
    if (reply.ok()) out.reply = *reply;
    out.video.assign(base, base + video_out);
    out.audio.assign(base + video_out, base + video_out + audio_out);
    EXPECT_TRUE(client_->UnregisterRegion(*in_id).ok());
    EXPECT_TRUE(client_->UnregisterRegion(*out_id).ok());
    return out;
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<client::Client> client_;
};
DaemonProcess* StreamedOutputTest::daemon_ = nullptr;

// The ranges of `stage`: contiguous from 0, each non-empty, in unit `unit`,
// with `total` as their total; returns the end of the last (0 if none).
uint64_t CheckRanges(const std::vector<client::FinalRange>& ranges, const std::string& stage,
                     const std::string& unit, uint64_t total) {
  uint64_t end = 0;
  for (const client::FinalRange& r : ranges) {
    if (r.stage != stage) continue;
    EXPECT_EQ(r.unit, unit);
    EXPECT_EQ(r.begin, end) << stage << ": ranges are not contiguous";
    EXPECT_GT(r.end, r.begin) << stage << ": an empty range";
    EXPECT_EQ(r.total, total);
    EXPECT_TRUE(r.ready_event.empty()) << "host output with a CUDA event";
    end = r.end;
  }
  return end;
}

// Every byte of the announced ranges still holds the sentinel.
bool UntouchedAfterAnnouncement(const std::vector<uint8_t>& after, uint64_t from, uint64_t to) {
  return std::all_of(after.begin() + from, after.begin() + to,
                     [](uint8_t b) { return b == kSentinel; });
}

// A streamed decode of `video` matches the unstreamed `reference`.
void ExpectSameAsUnstreamed(const Outcome& streamed, const Outcome& reference) {
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.ToString();
  const uint64_t end = CheckRanges(streamed.ranges, "video", "frames", reference.frames);
  EXPECT_EQ(end, reference.frames) << "the last range does not cover every frame";
  EXPECT_TRUE(streamed.video_seen == reference.video)
      << "a frame read when announced differs from the unstreamed output";
  EXPECT_TRUE(UntouchedAfterAnnouncement(streamed.video, 0, streamed.video.size()))
      << "a frame was written after it was announced final";
}

TEST_F(StreamedOutputTest, GoldenH3CasesGiveTheUnstreamedBytesOnOneAndTwoRanks) {
  for (const char* name :
       {"one_tile", "two_windows_two_tiles", "grid_2x2", "padded_windows", "small_canvas"}) {
    SCOPED_TRACE(name);
    const Latent latent = FromFile(std::string("golden/h3/video_case_") + name + ".safetensors");
    ASSERT_FALSE(latent.values.empty());
    for (client::OutputFormat format :
         {client::OutputFormat::kUInt8NHWC, client::OutputFormat::kFloat32NCHW}) {
      const Outcome reference = Run(&latent, nullptr, {.format = format});
      ASSERT_TRUE(reference.status.ok()) << reference.status.ToString();
      for (uint32_t size : {1u, 2u}) {
        SCOPED_TRACE("group size " + std::to_string(size));
        const Outcome streamed =
            Run(&latent, nullptr, {.format = format, .group_size = size, .stream = true});
        ExpectSameAsUnstreamed(streamed, reference);
        // H3: one range per temporal window that finalises frames, each
        // ending on a window bound 17 (k + 1), the last at the end.
        const uint32_t windows = streamed.reply.tiling().windows();
        EXPECT_GE(streamed.ranges.size(), 1u);
        EXPECT_LE(streamed.ranges.size(), windows);
        for (size_t k = 0; k + 1 < streamed.ranges.size(); ++k) {
          EXPECT_EQ(streamed.ranges[k].end % 17, 0u) << streamed.ranges[k].end;
        }
        if (windows > 1 && reference.frames > 17) {
          EXPECT_GT(streamed.ranges.size(), 1u) << "a multi-window video streamed in one range";
        }
      }
    }
  }
}

TEST_F(StreamedOutputTest, ManyWindowsStreamWindowByWindow) {
  // 25 latent frames: several temporal windows of one tile (spec 2.2).
  const Latent latent = Pseudo({1, 24, 25, 16, 16}, 0.3f);
  const Outcome reference = Run(&latent, nullptr, {});
  ASSERT_TRUE(reference.status.ok()) << reference.status.ToString();
  const Outcome streamed = Run(&latent, nullptr, {.stream = true});
  ExpectSameAsUnstreamed(streamed, reference);
  const uint32_t windows = streamed.reply.tiling().windows();
  ASSERT_GE(windows, 3u);
  // One range per window (a last window may add no frame of its own).
  ASSERT_GE(streamed.ranges.size() + 1, windows);
  for (size_t k = 0; k + 1 < streamed.ranges.size(); ++k) {
    EXPECT_EQ(streamed.ranges[k].end, 17u * (k + 1)) << "window " << k;
  }
}

TEST_F(StreamedOutputTest, AudioIsAnnouncedInOneRangeOfSamples) {
  const Latent video = FromFile("golden/h3/video_case_two_windows_two_tiles.safetensors");
  const Latent audio = FromFile("golden/h3/audio_case_stereo.safetensors");
  ASSERT_FALSE(video.values.empty());
  ASSERT_FALSE(audio.values.empty());
  const Outcome reference = Run(&video, &audio, {});
  ASSERT_TRUE(reference.status.ok()) << reference.status.ToString();
  const Outcome streamed = Run(&video, &audio, {.stream = true});
  ExpectSameAsUnstreamed(streamed, reference);
  EXPECT_EQ(CheckRanges(streamed.ranges, "audio", "samples", reference.samples),
            reference.samples);
  int audio_ranges = 0;
  for (const client::FinalRange& r : streamed.ranges) audio_ranges += r.stage == "audio";
  EXPECT_EQ(audio_ranges, 1);
  EXPECT_TRUE(streamed.audio_seen == reference.audio) << "the audio differs from unstreamed";
  EXPECT_TRUE(UntouchedAfterAnnouncement(streamed.audio, 0, streamed.audio.size()));
  // Audio alone streams too.
  const Outcome audio_only = Run(nullptr, &audio, {.stream = true});
  ASSERT_TRUE(audio_only.status.ok()) << audio_only.status.ToString();
  ASSERT_EQ(audio_only.ranges.size(), 1u);
  EXPECT_EQ(audio_only.ranges[0].end, reference.samples);
}

TEST_F(StreamedOutputTest, TaefBikesGiveTheUnstreamedBytesOnOneAndTwoRanks) {
  if (!TaefPresent()) GTEST_SKIP() << "../shared/" << kBikes << " or the TAEF2 weights are absent";
  const Latent latent = FromFile(kBikes);
  ASSERT_FALSE(latent.values.empty());
  const Outcome reference = Run(&latent, nullptr, {.model = "taef2"});
  ASSERT_TRUE(reference.status.ok()) << reference.status.ToString();
  for (uint32_t size : {1u, 2u}) {
    SCOPED_TRACE("group size " + std::to_string(size));
    const Outcome streamed =
        Run(&latent, nullptr, {.model = "taef2", .group_size = size, .stream = true});
    ExpectSameAsUnstreamed(streamed, reference);
  }
  // Hybrid tiles spread over two ranks: each frame batch streams after its
  // merge on the output rank.
  const client::DecodeRequest::Tiling tiles{.tile_latent = 16, .overlap_latent = 4};
  const Outcome tiled = Run(&latent, nullptr, {.model = "taef2", .tiling = tiles});
  ASSERT_TRUE(tiled.status.ok()) << tiled.status.ToString();
  const Outcome tiled_streamed = Run(
      &latent, nullptr, {.model = "taef2", .group_size = 2, .stream = true, .tiling = tiles});
  ExpectSameAsUnstreamed(tiled_streamed, tiled);
}

TEST_F(StreamedOutputTest, DeadlineMidStreamKeepsAnnouncedFramesAndNamesTheLastFinalFrame) {
  // Several windows of one tile; every tile call waits 50 ms (slow_tiles).
  const Latent latent = Pseudo({1, 24, 25, 16, 16}, 0.7f);
  const Outcome reference = Run(&latent, nullptr, {});
  ASSERT_TRUE(reference.status.ok()) << reference.status.ToString();
  // The deadline that ends the decode after its first window depends on
  // the machine's speed: try longer ones until one does.
  bool mid_stream = false;
  for (uint32_t deadline_ms : {150u, 300u, 600u, 1200u, 2400u}) {
    const Outcome cut = Run(&latent, nullptr,
                            {.stream = true, .faults = {"slow_tiles"}, .deadline_ms = deadline_ms});
    if (cut.status.ok()) break;  // too long: finished
    ASSERT_EQ(cut.status.code(), StatusCode::kDeadlineExceeded) << cut.status.ToString();
    const uint64_t final_end = CheckRanges(cut.ranges, "video", "frames", reference.frames);
    EXPECT_EQ(cut.status.final_frames(), final_end) << cut.status.ToString();
    if (final_end == 0) {
      EXPECT_THAT(cut.status.message(), HasSubstr("no part of the output was final"));
      continue;  // too short: nothing was final yet
    }
    mid_stream = true;
    EXPECT_LT(final_end, reference.frames);
    EXPECT_THAT(cut.status.message(),
                HasSubstr("output frames [0, " + std::to_string(final_end) + ") are final"));
    const uint64_t frame_bytes = reference.video.size() / reference.frames;
    const uint64_t valid = final_end * frame_bytes;
    EXPECT_TRUE(std::equal(cut.video_seen.begin(), cut.video_seen.begin() + valid,
                           reference.video.begin()))
        << "an announced frame differs from the finished output";
    EXPECT_TRUE(UntouchedAfterAnnouncement(cut.video, 0, valid))
        << "an announced frame was written after the announcement";
    break;
  }
  EXPECT_TRUE(mid_stream) << "no deadline ended the decode after a final range";
  // The daemon serves on.
  const Outcome again = Run(&latent, nullptr, {.stream = true});
  ExpectSameAsUnstreamed(again, reference);
}

}  // namespace
}  // namespace vaed
