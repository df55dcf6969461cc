// ops::Mp4Stream and ops::MuxWavIntoMp4 (ops/common/mp4_stream.h): an MP4
// encoded frame by frame through a pipe is WriteMp4's, and a WAV muxed in
// afterwards gives WriteMp4WithAudio's file. Tests that need the real
// ffmpeg skip without it; the others use a stand-in ffmpeg script.
#include "ops/common/mp4_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "media_fixtures.h"
#include "ops/common/frame_writer.h"
#include "test_util.h"

namespace vaed::ops {
namespace {

namespace fs = std::filesystem;
using ops_test::HaveFfmpeg;
using ops_test::Pattern;
using ops_test::ReadFile;
using ops_test::TempDir;
using ops_test::WriteStereoTone;
using ::testing::HasSubstr;

std::string Capture(const std::string& command) { return ops_test::RunCommand(command).out; }

// The first video stream of `mp4` decoded to rgb24 bytes.
std::string DecodedFrames(const std::string& mp4) {
  return Capture("ffmpeg -v error -nostdin -i '" + mp4 +
                 "' -map 0:v:0 -f rawvideo -pix_fmt rgb24 -");
}

// The first audio stream of `mp4` decoded to float32 samples.
std::string DecodedAudio(const std::string& mp4) {
  return Capture("ffmpeg -v error -nostdin -i '" + mp4 + "' -map 0:a:0 -f f32le -");
}

// The H.264 bitstream of `mp4`, as stored (not decoded).
std::string H264Stream(const std::string& mp4) {
  return Capture("ffmpeg -v error -nostdin -i '" + mp4 + "' -map 0:v:0 -c copy -f h264 -");
}

// No child process is left to reap (none running, no zombie).
bool NoChildLeft() { return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

TEST(Mp4StreamTest, FramesAppendedInPiecesGiveWriteMp4sFile) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  TempDir dir;
  const int64_t n = 7, h = 16, w = 24;
  const uint64_t frame = h * w * 3;
  const auto data = Pattern(n * frame);
  ASSERT_TRUE(WriteMp4({data, n, h, w}, dir / "whole.mp4", 25.0).ok());

  auto stream = Mp4Stream::Start(dir / "pieces.mp4", h, w, 25.0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ((*stream)->frame_bytes(), frame);
  const std::span<const uint8_t> all(data);
  uint64_t at = 0;
  for (const uint64_t frames : {1, 2, 4}) {
    Status s = (*stream)->Append(all.subspan(at * frame, frames * frame));
    ASSERT_TRUE(s.ok()) << s.ToString();
    at += frames;
  }
  EXPECT_EQ((*stream)->frames_appended(), n);
  Status finished = (*stream)->Finish();
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  EXPECT_TRUE((*stream)->Finish().ok());  // the same Status again

  const std::string whole = DecodedFrames(dir / "whole.mp4");
  EXPECT_EQ(whole.size(), n * frame);
  EXPECT_TRUE(DecodedFrames(dir / "pieces.mp4") == whole);
  // The same encoder on the same frames: the same H.264 bitstream.
  const std::string bitstream = H264Stream(dir / "whole.mp4");
  EXPECT_FALSE(bitstream.empty());
  EXPECT_TRUE(H264Stream(dir / "pieces.mp4") == bitstream);
  EXPECT_TRUE(NoChildLeft());
}

// Mp4Stream and WriteMp4 build one argument list: checked with a stand-in
// ffmpeg that records its arguments.
TEST(Mp4StreamTest, RunsFfmpegWithWriteMp4sArguments) {
  TempDir dir;
  const std::string args = dir / "args.txt";
  ops_test::WriteScript(dir / "ffmpeg",
                        "printf '%s\\n' \"$@\" > '" + args + "'\ncat > /dev/null\n");
  const auto data = Pattern(3 * 4 * 6 * 3);
  std::vector<std::string> whole, streamed;
  {
    ops_test::ScopedPathPrefix path(dir.path().string());
    ASSERT_TRUE(WriteMp4({data, 3, 4, 6}, dir / "o.mp4", 23.976).ok());
    whole = ops_test::Lines(ReadFile(args));
    auto stream = Mp4Stream::Start(dir / "o.mp4", 4, 6, 23.976);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    ASSERT_TRUE((*stream)->Append(data).ok());
    ASSERT_TRUE((*stream)->Finish().ok());
    streamed = ops_test::Lines(ReadFile(args));
  }
  ASSERT_FALSE(whole.empty());
  EXPECT_EQ(streamed, whole);
  EXPECT_NE(std::find(whole.begin(), whole.end(), "libx264"), whole.end());
  EXPECT_NE(std::find(whole.begin(), whole.end(), "23.976"), whole.end());
}

TEST(Mp4StreamTest, AppendRefusesPartialFrames) {
  TempDir dir;
  ops_test::WriteScript(dir / "ffmpeg", "cat > /dev/null\n");
  ops_test::ScopedPathPrefix path(dir.path().string());
  auto stream = Mp4Stream::Start(dir / "o.mp4", 2, 2, 24.0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const auto data = Pattern(2 * 2 * 3 + 1);
  EXPECT_EQ((*stream)->Append(data).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*stream)->frames_appended(), 0);
}

TEST(Mp4StreamTest, StartRefusesBadGeometryAndRate) {
  EXPECT_EQ(Mp4Stream::Start("/nonexistent/x.mp4", 0, 4, 24.0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Mp4Stream::Start("/nonexistent/x.mp4", 4, 4, 0.0).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Mp4StreamTest, FinishReportsFfmpegsExitStatusForAnUnwritablePath) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  const auto data = Pattern(3 * 8 * 8 * 3);
  auto stream = Mp4Stream::Start("/nonexistent/vaed-dir/x.mp4", 8, 8, 24.0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  // ffmpeg may fail before or after reading these: Append either sends
  // them or fails with EPIPE; Finish names the exit status either way.
  (void)(*stream)->Append(data).ok();
  Status s = (*stream)->Finish();
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("exited with status"));
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/vaed-dir/x.mp4"));
  EXPECT_TRUE(NoChildLeft());
}

TEST(Mp4StreamTest, FinishWithoutFramesIsAnError) {
  TempDir dir;
  ops_test::WriteScript(dir / "ffmpeg", "cat > /dev/null\n");
  ops_test::ScopedPathPrefix path(dir.path().string());
  auto stream = Mp4Stream::Start(dir / "o.mp4", 2, 2, 24.0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ((*stream)->Finish().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(NoChildLeft());
}

TEST(Mp4StreamTest, DestroyingAnUnfinishedStreamKillsAndReapsFfmpeg) {
  TempDir dir;
  ops_test::WriteScript(dir / "ffmpeg", "exec sleep 60\n");  // never reads, never exits
  ops_test::ScopedPathPrefix path(dir.path().string());
  const auto start = std::chrono::steady_clock::now();
  {
    auto stream = Mp4Stream::Start(dir / "o.mp4", 2, 2, 24.0);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(NoChildLeft());
}

// A writer thread blocked on a full pipe (ffmpeg not reading) is released
// by Cancel() from another thread.
TEST(Mp4StreamTest, CancelReleasesAnAppendBlockedInAnotherThread) {
  TempDir dir;
  ops_test::WriteScript(dir / "ffmpeg", "exec sleep 60\n");
  ops_test::ScopedPathPrefix path(dir.path().string());
  auto stream = Mp4Stream::Start(dir / "o.mp4", 64, 64, 24.0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const auto data = Pattern(256 * 64 * 64 * 3);  // 3 MiB: more than a socket buffer
  Status appended;
  std::thread writer([&] { appended = (*stream)->Append(data); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  (*stream)->Cancel();
  writer.join();
  EXPECT_EQ(appended.code(), StatusCode::kIoError) << appended.ToString();
  Status s = (*stream)->Finish();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("killed by signal 9"));
  EXPECT_TRUE(NoChildLeft());
}

TEST(MuxWavIntoMp4Test, StreamedVideoPlusWavIsWriteMp4WithAudiosFile) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  TempDir dir;
  const int64_t n = 6, h = 16, w = 24;
  const auto data = Pattern(n * h * w * 3);
  const std::string wav = WriteStereoTone(dir);
  ASSERT_TRUE(WriteMp4WithAudio({data, n, h, w}, dir / "whole.mp4", 24.0, wav).ok());

  auto stream = Mp4Stream::Start(dir / "video.mp4", h, w, 24.0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  ASSERT_TRUE((*stream)->Append(data).ok());
  ASSERT_TRUE((*stream)->Finish().ok());
  Status s = MuxWavIntoMp4(dir / "video.mp4", wav, dir / "muxed.mp4");
  ASSERT_TRUE(s.ok()) << s.ToString();

  const std::string frames = DecodedFrames(dir / "whole.mp4");
  EXPECT_EQ(frames.size(), static_cast<size_t>(n * h * w * 3));
  EXPECT_TRUE(DecodedFrames(dir / "muxed.mp4") == frames);
  EXPECT_TRUE(H264Stream(dir / "muxed.mp4") == H264Stream(dir / "whole.mp4"));
  const std::string audio = DecodedAudio(dir / "whole.mp4");
  EXPECT_GT(audio.size(), 2u * 32000 * sizeof(float) * 9 / 10);
  EXPECT_TRUE(DecodedAudio(dir / "muxed.mp4") == audio);

  const std::string probe = Capture(
      "ffprobe -v error -show_entries "
      "stream=codec_type,codec_name,pix_fmt,color_space,color_range,color_transfer,"
      "color_primaries,channels,sample_rate -of compact '" +
      (dir / "muxed.mp4") + "'");
  const std::string whole_probe = Capture(
      "ffprobe -v error -show_entries "
      "stream=codec_type,codec_name,pix_fmt,color_space,color_range,color_transfer,"
      "color_primaries,channels,sample_rate -of compact '" +
      (dir / "whole.mp4") + "'");
  EXPECT_EQ(probe, whole_probe);
  EXPECT_THAT(probe, HasSubstr("codec_name=h264|codec_type=video|pix_fmt=yuv420p"));
  EXPECT_THAT(probe, HasSubstr("codec_name=aac|codec_type=audio|sample_rate=32000|channels=2"));
  // +faststart: the moov atom precedes the media data.
  const std::string bytes = ReadFile(dir / "muxed.mp4");
  ASSERT_NE(bytes.find("moov"), std::string::npos);
  EXPECT_LT(bytes.find("moov"), bytes.find("mdat"));
}

// The mux copies the video (no video encoding arguments at all) and
// encodes the audio with WriteMp4WithAudio's arguments, reading both
// inputs through `file:`.
TEST(MuxWavIntoMp4Test, CopiesTheVideoAndEncodesTheAudioAsWriteMp4WithAudio) {
  TempDir dir;
  const std::string args = dir / "args.txt";
  // It reads its stdin, as ffmpeg does: a writer gets no EPIPE.
  ops_test::WriteScript(dir / "ffmpeg",
                        "printf '%s\\n' \"$@\" > '" + args + "'\ncat > /dev/null\n");
  const std::string wav = WriteStereoTone(dir);
  const std::string video = dir / "video.mp4";
  { std::ofstream(video) << "not really an mp4"; }
  std::vector<std::string> with_audio, mux;
  {
    ops_test::ScopedPathPrefix path(dir.path().string());
    const auto data = Pattern(2 * 4 * 6 * 3);
    Status s = WriteMp4WithAudio({data, 2, 4, 6}, dir / "a.mp4", 24.0, wav);
    ASSERT_TRUE(s.ok()) << s.ToString();
    with_audio = ops_test::Lines(ReadFile(args));
    s = MuxWavIntoMp4(video, wav, dir / "m.mp4");
    ASSERT_TRUE(s.ok()) << s.ToString();
    mux = ops_test::Lines(ReadFile(args));
  }
  auto after = [](const std::vector<std::string>& argv, const std::string& flag) {
    auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? std::string() : *(it + 1);
  };
  EXPECT_EQ(after(mux, "-c:v"), "copy");
  EXPECT_EQ(std::find(mux.begin(), mux.end(), "-vf"), mux.end());
  EXPECT_EQ(std::find(mux.begin(), mux.end(), "-shortest"), mux.end());
  EXPECT_EQ(after(mux, "-i"), "file:" + video);
  EXPECT_NE(std::find(mux.begin(), mux.end(), "file:" + wav), mux.end());
  for (const char* flag : {"-c:a", "-b:a", "-loglevel"}) {
    EXPECT_EQ(after(mux, flag), after(with_audio, flag)) << flag;
  }
  // The same MP4 output options (-movflags +faststart -f mp4 -y).
  ASSERT_GE(mux.size(), 6u);
  ASSERT_GE(with_audio.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(mux.end() - 6, mux.end() - 1),
            std::vector<std::string>(with_audio.end() - 6, with_audio.end() - 1));
  EXPECT_EQ(mux.back(), dir / "m.mp4");
}

TEST(MuxWavIntoMp4Test, MissingInputsAreNotFound) {
  TempDir dir;
  const std::string wav = WriteStereoTone(dir);
  const std::string video = dir / "video.mp4";
  { std::ofstream(video) << "x"; }
  Status no_wav = MuxWavIntoMp4(video, dir / "missing.wav", dir / "m.mp4");
  EXPECT_EQ(no_wav.code(), StatusCode::kNotFound);
  EXPECT_THAT(no_wav.message(), HasSubstr("missing.wav"));
  Status no_video = MuxWavIntoMp4(dir / "missing.mp4", wav, dir / "m.mp4");
  EXPECT_EQ(no_video.code(), StatusCode::kNotFound);
  EXPECT_THAT(no_video.message(), HasSubstr("missing.mp4"));
  EXPECT_FALSE(fs::exists(dir / "m.mp4"));
  EXPECT_EQ(MuxWavIntoMp4(video, wav, video).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vaed::ops
