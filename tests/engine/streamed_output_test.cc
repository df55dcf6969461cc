// Streamed output in the engine (daemon/engine/streamed_output.h): the
// sub-range arithmetic, the parts' bytes against the whole output formatted
// at once, a retry that hands frames over again (nothing is written twice),
// Finish() for what a model did not hand over, and the audio range.
#include "daemon/engine/streamed_output.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "daemon/engine/output_format.h"

namespace vaed::engine {
namespace {

// A model whose ToUnitRange is the identity (the default); nothing else used.
class IdentityModel : public models::VaeModel {
 public:
  const models::ModelInfo& info() const override { return info_; }
  torch::Device device() const override { return torch::kCPU; }
  Result<models::DecodePlan> Plan(DType, const std::vector<int64_t>&) const override {
    return models::DecodePlan{};
  }
  Result<torch::Tensor> Decode(const torch::Tensor&, const models::DecodeSettings&,
                               models::DecodeReport*) override {
    return Internal("not used");
  }

 private:
  models::ModelInfo info_;
};

// Records what a VideoStream writes and announces, into a byte buffer the
// size of the whole output.
struct Recorder {
  std::vector<uint8_t> bytes;
  std::vector<std::pair<uint64_t, uint64_t>> writes;  // (offset, size)
  std::vector<FinalRangeEvent> announced;

  StreamSink Sink(const TensorRef& whole) {
    return {.write =
                [this, whole](const torch::Tensor& formatted, const TensorRef& part) -> Status {
              EXPECT_EQ(uint64_t(formatted.nbytes()), part.size);
              std::memcpy(bytes.data() + (part.offset - whole.offset), formatted.data_ptr(),
                          part.size);
              writes.emplace_back(part.offset, part.size);
              return Status::Ok();
            },
            .record_ready = []() -> Result<std::string> { return std::string(); },
            .announce = [this](const FinalRangeEvent& e) { announced.push_back(e); }};
  }
};

// A video job of `frames` frames of 3 x 4 x 5 in `format`, output at byte 64.
DecodeJob VideoJob(int64_t frames, OutputFormat format) {
  DecodeJob job;
  job.stream_output = true;
  job.video.emplace();
  job.video->format = format;
  job.video->plan.frames = frames;
  const bool u8 = format == OutputFormat::kUint8Nhwc;
  job.video->output = {.region_id = 1,
                       .offset = 64,
                       .size = uint64_t(frames) * 60 * (u8 ? 1 : 4),
                       .dtype = u8 ? DType::kUInt8 : DType::kFloat32,
                       .shape = u8 ? std::vector<int64_t>{frames, 4, 5, 3}
                                   : std::vector<int64_t>{frames, 3, 4, 5}};
  return job;
}

TEST(OuterRangeTest, AdvancesTheOffsetByWholeOuterElements) {
  const TensorRef whole{.region_id = 7, .offset = 100, .size = 10 * 24, .dtype = DType::kUInt8,
                        .shape = {10, 2, 4, 3}};
  const TensorRef part = OuterRange(whole, 3, 7);
  EXPECT_EQ(part.region_id, 7u);
  EXPECT_EQ(part.offset, 100u + 3 * 24);
  EXPECT_EQ(part.size, 4u * 24);
  EXPECT_EQ(part.shape, (std::vector<int64_t>{4, 2, 4, 3}));
  EXPECT_EQ(OuterRange(whole, 10, 10).size, 0u);
}

TEST(VideoStreamTest, PartsGiveTheBytesOfTheWholeOutputFormattedAtOnce) {
  IdentityModel model;
  const torch::Tensor raw = torch::rand({9, 3, 4, 5}) * 1.4 - 0.2;  // some values clamp
  for (OutputFormat format : {OutputFormat::kUint8Nhwc, OutputFormat::kFloat32Nchw,
                              OutputFormat::kFloat32NchwUnit}) {
    DecodeJob job = VideoJob(9, format);
    Recorder rec;
    rec.bytes.assign(job.video->output.size, 0);
    VideoStream stream(job, model, rec.Sink(job.video->output));
    ASSERT_TRUE(stream.OnFinalFrames(raw.narrow(0, 0, 4), 0, 4).ok());
    ASSERT_TRUE(stream.OnFinalFrames(raw.narrow(0, 4, 5), 4, 9).ok());
    Result<torch::Tensor> whole = FormatVideo(model, raw, format);
    ASSERT_TRUE(whole.ok());
    ASSERT_EQ(uint64_t(whole->nbytes()), rec.bytes.size());
    EXPECT_EQ(std::memcmp(whole->data_ptr(), rec.bytes.data(), rec.bytes.size()), 0)
        << static_cast<int>(format);
    ASSERT_EQ(rec.announced.size(), 2u);
    EXPECT_EQ(rec.announced[1].begin, 4);
    EXPECT_EQ(rec.announced[1].end, 9);
    EXPECT_EQ(rec.announced[1].total, 9);
    EXPECT_EQ(job.streamed->video_frames.load(), 9u);
  }
}

// A retry (failure ladder, group fallback) hands frames over from 0 again:
// only frames past what was written are written and announced.
TEST(VideoStreamTest, RegressionRetryFromFrameZeroWritesNoFrameTwice) {
  IdentityModel model;
  const torch::Tensor raw = torch::rand({8, 3, 4, 5});
  DecodeJob job = VideoJob(8, OutputFormat::kUint8Nhwc);
  Recorder rec;
  rec.bytes.assign(job.video->output.size, 0);
  VideoStream stream(job, model, rec.Sink(job.video->output));
  ASSERT_TRUE(stream.OnFinalFrames(raw.narrow(0, 0, 3), 0, 3).ok());
  // The retry: [0, 3) again, then [0, 6).
  ASSERT_TRUE(stream.OnFinalFrames(raw.narrow(0, 0, 3), 0, 3).ok());
  ASSERT_TRUE(stream.OnFinalFrames(raw.narrow(0, 0, 6), 0, 6).ok());
  ASSERT_EQ(rec.writes.size(), 2u);
  EXPECT_EQ(rec.writes[1].first, 64u + 3 * 60);  // frames [3, 6) only
  EXPECT_EQ(rec.writes[1].second, 3u * 60);
  ASSERT_EQ(rec.announced.size(), 2u);
  EXPECT_EQ(rec.announced[1].begin, 3);
  EXPECT_EQ(rec.announced[1].end, 6);
  EXPECT_EQ(stream.end_frame(), 6);
  // Finish() streams the rest from the whole raw output, once.
  ASSERT_TRUE(stream.Finish(raw).ok());
  ASSERT_TRUE(stream.Finish(raw).ok());
  ASSERT_EQ(rec.announced.size(), 3u);
  EXPECT_EQ(rec.announced[2].begin, 6);
  EXPECT_EQ(rec.announced[2].end, 8);
  Result<torch::Tensor> whole = FormatVideo(model, raw, OutputFormat::kUint8Nhwc);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(std::memcmp(whole->data_ptr(), rec.bytes.data(), rec.bytes.size()), 0);
}

TEST(VideoStreamTest, AFailedWriteAnnouncesNothing) {
  IdentityModel model;
  DecodeJob job = VideoJob(4, OutputFormat::kUint8Nhwc);
  std::vector<FinalRangeEvent> announced;
  VideoStream stream(job, model,
                     {.write = [](const torch::Tensor&, const TensorRef&) -> Status {
                        return ClientFault("output: the segment faulted");
                      },
                      .record_ready = []() -> Result<std::string> { return std::string(); },
                      .announce = [&](const FinalRangeEvent& e) { announced.push_back(e); }});
  const Status s = stream.OnFinalFrames(torch::rand({4, 3, 4, 5}), 0, 4);
  EXPECT_EQ(s.code(), StatusCode::kClientFault);
  EXPECT_TRUE(announced.empty());
  EXPECT_EQ(job.streamed->video_frames.load(), 0u);
  EXPECT_EQ(stream.end_frame(), 0);
}

TEST(StreamAudioTest, AnnouncesEverySampleInOneRange) {
  DecodeJob job;
  job.stream_output = true;
  job.audio.emplace();
  job.audio->plan.samples = 1600;
  job.audio->output = {.region_id = 2, .offset = 0, .size = 2 * 1600 * 4,
                       .dtype = DType::kFloat32, .shape = {2, 1600}};
  Recorder rec;
  rec.bytes.assign(job.audio->output.size, 0);
  const torch::Tensor wave = torch::rand({2, 1600});
  ASSERT_TRUE(StreamAudio(job, wave, rec.Sink(job.audio->output)).ok());
  ASSERT_EQ(rec.announced.size(), 1u);
  EXPECT_STREQ(rec.announced[0].stage, "audio");
  EXPECT_STREQ(rec.announced[0].unit, "samples");
  EXPECT_EQ(rec.announced[0].begin, 0);
  EXPECT_EQ(rec.announced[0].end, 1600);
  EXPECT_EQ(job.streamed->audio_samples.load(), 1600u);
  EXPECT_EQ(std::memcmp(wave.data_ptr(), rec.bytes.data(), rec.bytes.size()), 0);
}

}  // namespace
}  // namespace vaed::engine
