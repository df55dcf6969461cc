// vaectl's StreamedMp4Output (ops/vaectl/streamed_mp4.h) in-process, with
// a stand-in ffmpeg that copies its stdin to its output file: which bytes
// reach the encoder and when, what an inconsistent range or an abort
// leaves on disk. The real encoder and daemon are in vaectl_daemon_test.
#include "ops/vaectl/streamed_mp4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace vaed::vaectl {
namespace {

namespace fs = std::filesystem;
using ops_test::ReadFile;
using ops_test::TempDir;
using ::testing::HasSubstr;

constexpr int64_t kFrames = 5, kHeight = 4, kWidth = 6;
constexpr uint64_t kFrameBytes = kHeight * kWidth * 3;

client::FinalRange Range(uint64_t begin, uint64_t end, const std::string& stage = "video") {
  client::FinalRange r;
  r.stage = stage;
  r.unit = stage == "video" ? "frames" : "samples";
  r.begin = begin;
  r.end = end;
  r.total = stage == "video" ? kFrames : 100;
  return r;
}

// A stand-in ffmpeg on PATH that writes its stdin to its last argument
// (the output file), and the output region the frames are read from.
class StreamedMp4OutputTest : public ::testing::Test {
 protected:
  StreamedMp4OutputTest() : path_(dir_.path().string()), output_(kFrames * kFrameBytes, 0) {
    ops_test::WriteScript(dir_ / "ffmpeg", "for a do last=$a; done\nexec cat > \"$last\"\n");
  }

  OutputPlan Mp4Plan(bool with_audio) const {
    OutputPlan plan{OutputKind::kMp4, dir_ / "clip.mp4", ""};
    if (with_audio) {
      plan.wav = dir_ / "clip.wav";
      plan.mux_audio = true;
      std::ofstream(plan.wav) << "RIFF";
    }
    return plan;
  }

  ops::RgbFrames Frames() const { return {output_, kFrames, kHeight, kWidth}; }

  // Fills frames [begin, end) of the region with a pattern (what the
  // daemon writes before it announces them).
  void Write(uint64_t begin, uint64_t end) {
    for (uint64_t i = begin * kFrameBytes; i < end * kFrameBytes; ++i) {
      output_[i] = static_cast<uint8_t>(i * 37 + 1);
    }
  }

  std::string Region() const { return std::string(output_.begin(), output_.end()); }

  TempDir dir_;
  ops_test::ScopedPathPrefix path_;
  std::vector<uint8_t> output_;
};

// Each range is read when announced: a frame written before its
// announcement reaches the encoder as written.
TEST_F(StreamedMp4OutputTest, AnnouncedFramesReachTheEncoderInOrder) {
  const OutputPlan plan = Mp4Plan(false);
  auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Write(0, 2);
  (*out)->OnFinalRange(Range(0, 2));
  (*out)->OnFinalRange(Range(0, 100, "audio"));  // ignored: the WAV is written later
  Write(2, 5);
  (*out)->OnFinalRange(Range(2, 5));
  EXPECT_EQ((*out)->announced_frames(), 5u);
  Status s = (*out)->Finish();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadFile(plan.path), Region());
}

// A daemon that announces nothing (or not everything): the reply means all
// frames are final, and Finish sends the rest.
TEST_F(StreamedMp4OutputTest, FramesNotAnnouncedAreSentWhenTheDecodeReplies) {
  const OutputPlan plan = Mp4Plan(false);
  auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Write(0, 1);
  (*out)->OnFinalRange(Range(0, 1));
  Write(1, 5);
  ASSERT_TRUE((*out)->Finish().ok());
  EXPECT_EQ(ReadFile(plan.path), Region());
  EXPECT_EQ((*out)->Finish().code(), StatusCode::kFailedPrecondition);
}

TEST_F(StreamedMp4OutputTest, ARangeThatSkipsFramesFailsAndLeavesNoFile) {
  const OutputPlan plan = Mp4Plan(false);
  auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  (*out)->OnFinalRange(Range(0, 2));
  (*out)->OnFinalRange(Range(3, 5));  // frame 2 skipped
  EXPECT_EQ((*out)->announced_frames(), 2u);
  Status s = (*out)->Finish();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("[3, 5)"));
  EXPECT_FALSE(fs::exists(plan.path));
}

TEST_F(StreamedMp4OutputTest, ARangePastThePlannedFramesFails) {
  const OutputPlan plan = Mp4Plan(false);
  auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  (*out)->OnFinalRange(Range(0, 6));
  EXPECT_EQ((*out)->Finish().code(), StatusCode::kInternal);
  EXPECT_FALSE(fs::exists(plan.path));
}

// With audio the video goes to a temporary file beside the MP4, and the
// WAV is muxed into the MP4 at the end; the temporary file is removed.
TEST_F(StreamedMp4OutputTest, WithAudioTheVideoIsMuxedFromATemporaryFileThenRemoved) {
  const OutputPlan plan = Mp4Plan(true);
  const std::string temporary = StreamedMp4Output::TemporaryVideoPath(plan.path);
  EXPECT_EQ(fs::path(temporary).parent_path(), fs::path(plan.path).parent_path());
  auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Write(0, 5);
  (*out)->OnFinalRange(Range(0, 5));
  Status s = (*out)->Finish();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::exists(plan.path));  // the mux's output (empty from the stand-in)
  EXPECT_FALSE(fs::exists(temporary));
  EXPECT_FALSE(fs::exists(StreamedMp4Output::TemporaryMuxPath(plan.path)));
  EXPECT_TRUE(fs::exists(plan.wav));
}

// Regression: a failed streamed MP4 deleted a file the
// user already had at --out (ffmpeg opened the final path with -y at the
// start; with audio, Abort removed the final path it never wrote). The MP4
// is now encoded and muxed beside it and renamed into place only when
// complete.
TEST_F(StreamedMp4OutputTest, RegressionAFailedStreamKeepsTheFileAlreadyAtTheOutputPath) {
  for (const bool with_audio : {false, true}) {
    SCOPED_TRACE(with_audio ? "with audio" : "video only");
    const OutputPlan plan = Mp4Plan(with_audio);
    std::ofstream(plan.path) << "an earlier video";
    {  // aborted mid-stream
      auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      Write(0, 2);
      (*out)->OnFinalRange(Range(0, 2));
      (*out)->Abort();
    }
    EXPECT_EQ(ReadFile(plan.path), "an earlier video");
    {  // a range error found by Finish
      auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      (*out)->OnFinalRange(Range(1, 2));
      EXPECT_EQ((*out)->Finish().code(), StatusCode::kInternal);
    }
    EXPECT_EQ(ReadFile(plan.path), "an earlier video");
    EXPECT_FALSE(fs::exists(StreamedMp4Output::TemporaryVideoPath(plan.path)));
    EXPECT_FALSE(fs::exists(StreamedMp4Output::TemporaryMuxPath(plan.path)));
    fs::remove(plan.path);
  }
}

// A failed decode: Abort stops the encoder and removes what it wrote, the
// temporary video included; the WAV is not this object's.
TEST_F(StreamedMp4OutputTest, AbortRemovesThePartialFiles) {
  for (const bool with_audio : {false, true}) {
    SCOPED_TRACE(with_audio ? "with audio" : "video only");
    const OutputPlan plan = Mp4Plan(with_audio);
    const std::string video = StreamedMp4Output::TemporaryVideoPath(plan.path);
    auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    Write(0, 2);
    (*out)->OnFinalRange(Range(0, 2));
    // The stand-in creates its output at once; wait until it has.
    for (int i = 0; i < 500 && !fs::exists(video); ++i) ::usleep(10000);
    EXPECT_TRUE(fs::exists(video));
    (*out)->Abort();
    EXPECT_FALSE(fs::exists(video));
    EXPECT_FALSE(fs::exists(plan.path));  // never written (rename only when complete)
    if (with_audio) {
      EXPECT_TRUE(fs::exists(plan.wav));
    }
    (*out)->Abort();  // idempotent
  }
}

// Destroying an unfinished output aborts it.
TEST_F(StreamedMp4OutputTest, DestroyingAnUnfinishedOutputRemovesTheFile) {
  const OutputPlan plan = Mp4Plan(false);
  {
    auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    Write(0, 1);
    (*out)->OnFinalRange(Range(0, 1));
  }
  EXPECT_FALSE(fs::exists(plan.path));
}

// Regression: an output directory that cannot be written failed
// only after the whole decode; Start() now says so before it.
TEST_F(StreamedMp4OutputTest, StartFailsAtOnceForAnOutputDirectoryThatCannotBeWritten) {
  OutputPlan plan = Mp4Plan(false);
  plan.path = (fs::path(dir_.path()) / "no_such_dir" / "clip.mp4").string();
  auto out = StreamedMp4Output::Start(plan, Frames(), 24.0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kIoError);
  EXPECT_THAT(out.status().message(), HasSubstr("no_such_dir"));
}

TEST_F(StreamedMp4OutputTest, StartRefusesAPlanWithoutAnMp4) {
  OutputPlan plan{OutputKind::kRaw, dir_ / "x.u8", dir_ / "x.json"};
  EXPECT_EQ(StreamedMp4Output::Start(plan, Frames(), 24.0).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vaed::vaectl
