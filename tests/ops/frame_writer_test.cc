#include "ops/common/frame_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media_fixtures.h"
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

TEST(FindExecutableTest, FindsShellAndRejectsUnknownName) {
  auto sh = FindExecutable("sh");
  ASSERT_TRUE(sh.ok()) << sh.status().ToString();
  EXPECT_EQ(::access(sh->c_str(), X_OK), 0);
  auto none = FindExecutable("vaed-no-such-tool-3f9a");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST(CheckRgbFramesTest, RejectsSizeMismatchAndNonPositiveExtents) {
  const std::vector<uint8_t> data(2 * 3 * 4 * 3);
  EXPECT_TRUE(CheckRgbFrames({data, 2, 3, 4}).ok());
  EXPECT_EQ(CheckRgbFrames({data, 2, 3, 5}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckRgbFrames({data, 0, 3, 4}).code(), StatusCode::kInvalidArgument);
}

TEST(RunWithStdinTest, ReportsNonZeroExit) {
  const std::vector<uint8_t> input(10, 1);
  Status s = RunWithStdin({"/bin/sh", "-c", "cat >/dev/null; exit 3"}, input);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("exited with status 3"));
}

TEST(RunWithStdinTest, ChildReceivesAllBytes) {
  TempDir dir;
  const auto input = Pattern(3 * 1024 * 1024 + 17);
  const std::string copy = dir / "copy.bin";
  ASSERT_TRUE(RunWithStdin({"/bin/sh", "-c", "cat > '" + copy + "'"}, input).ok());
  EXPECT_EQ(ReadFile(copy), std::string(input.begin(), input.end()));
}

TEST(RunWithStdinTest, MissingExecutableIsAnError) {
  Status s = RunWithStdin({"/nonexistent/vaed-tool"}, {});
  EXPECT_FALSE(s.ok());
}

TEST(WritePngSequenceTest, RoundTripsLosslesslyThroughFfmpeg) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  TempDir dir;
  const int64_t n = 3, h = 6, w = 10;
  const auto data = Pattern(n * h * w * 3);
  auto paths = WritePngSequence({data, n, h, w}, dir / "frames");
  ASSERT_TRUE(paths.ok()) << paths.status().ToString();
  ASSERT_EQ(paths->size(), 3u);
  EXPECT_EQ((*paths)[0], dir / "frames/frame_0000.png");
  EXPECT_EQ((*paths)[2], dir / "frames/frame_0002.png");
  for (const auto& p : *paths) EXPECT_TRUE(fs::exists(p)) << p;
  const std::string back =
      Capture("ffmpeg -v error -nostdin -start_number 0 -i '" + dir.path().string() +
              "/frames/frame_%04d.png' -f rawvideo -pix_fmt rgb24 -");
  EXPECT_EQ(back, std::string(data.begin(), data.end()));
}

TEST(WritePngImageTest, WritesOneFrameAndRejectsSeveral) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  TempDir dir;
  const auto one = Pattern(5 * 7 * 3);
  ASSERT_TRUE(WritePngImage({one, 1, 5, 7}, dir / "one.png").ok());
  const std::string back = Capture("ffmpeg -v error -nostdin -i '" + (dir / "one.png") +
                                   "' -f rawvideo -pix_fmt rgb24 -");
  EXPECT_EQ(back, std::string(one.begin(), one.end()));

  const auto two = Pattern(2 * 5 * 7 * 3);
  Status s = WritePngImage({two, 2, 5, 7}, dir / "two.png");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir / "two.png"));
}

TEST(WriteMp4Test, WritesH264Yuv420pWithFrameCountAndRate) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  TempDir dir;
  const int64_t n = 5, h = 16, w = 24;
  const auto data = Pattern(n * h * w * 3);
  ASSERT_TRUE(WriteMp4({data, n, h, w}, dir / "clip.mp4", 25.0).ok());
  const std::string probe = Capture(
      "ffprobe -v error -count_frames -select_streams v:0 -show_entries "
      "stream=codec_name,pix_fmt,width,height,nb_read_frames,r_frame_rate -of default=nw=1 '" +
      (dir / "clip.mp4") + "'");
  EXPECT_THAT(probe, HasSubstr("codec_name=h264"));
  EXPECT_THAT(probe, HasSubstr("pix_fmt=yuv420p"));
  EXPECT_THAT(probe, HasSubstr("width=24"));
  EXPECT_THAT(probe, HasSubstr("height=16"));
  EXPECT_THAT(probe, HasSubstr("nb_read_frames=5"));
  EXPECT_THAT(probe, HasSubstr("r_frame_rate=25/1"));
}

TEST(WriteMp4Test, PadsOddSizesToEven) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  TempDir dir;
  const auto data = Pattern(2 * 5 * 7 * 3);
  ASSERT_TRUE(WriteMp4({data, 2, 5, 7}, dir / "odd.mp4", 24.0).ok());
  const std::string probe =
      Capture("ffprobe -v error -show_entries stream=width,height -of default=nw=1 '" +
              (dir / "odd.mp4") + "'");
  EXPECT_THAT(probe, HasSubstr("width=8"));
  EXPECT_THAT(probe, HasSubstr("height=6"));
}

TEST(WriteMp4Test, RejectsNonPositiveFps) {
  const auto data = Pattern(2 * 2 * 3);
  EXPECT_EQ(WriteMp4({data, 1, 2, 2}, "/nonexistent/x.mp4", 0.0).code(),
            StatusCode::kInvalidArgument);
}

TEST(WriteMp4WithAudioTest, MuxesH264VideoAndAacAudioKeepingBothWhole) {
  if (!HaveFfmpeg()) GTEST_SKIP() << "ffmpeg/ffprobe not installed";
  TempDir dir;
  const int64_t n = 5, h = 16, w = 24;  // 0.2 s of video at 25 fps
  const auto data = Pattern(n * h * w * 3);
  const std::string wav = WriteStereoTone(dir);
  Status s = WriteMp4WithAudio({data, n, h, w}, dir / "av.mp4", 25.0, wav);
  ASSERT_TRUE(s.ok()) << s.ToString();

  const auto probe = nlohmann::json::parse(
      Capture("ffprobe -v error -count_frames -show_entries "
              "stream=codec_type,codec_name,pix_fmt,channels,sample_rate,duration,nb_read_frames"
              ":format=duration -of json '" +
              (dir / "av.mp4") + "'"));
  ASSERT_EQ(probe["streams"].size(), 2u) << probe.dump(2);
  int videos = 0, audios = 0;
  for (const auto& st : probe["streams"]) {
    if (st["codec_type"] == "video") {
      ++videos;
      EXPECT_EQ(st["codec_name"], "h264");
      EXPECT_EQ(st["pix_fmt"], "yuv420p");
      EXPECT_EQ(st["nb_read_frames"], "5");  // not stretched to the audio
    } else if (st["codec_type"] == "audio") {
      ++audios;
      EXPECT_EQ(st["codec_name"], "aac");
      EXPECT_EQ(st["channels"], 2);
      EXPECT_EQ(st["sample_rate"], "32000");
      EXPECT_NEAR(std::stod(st["duration"].get<std::string>()), 1.0, 0.05);
    }
  }
  EXPECT_EQ(videos, 1);
  EXPECT_EQ(audios, 1);
  // No -shortest: the file lasts as long as its audio, not its video.
  EXPECT_NEAR(std::stod(probe["format"]["duration"].get<std::string>()), 1.0, 0.05);
  // +faststart: the moov atom precedes the media data.
  const std::string bytes = ReadFile(dir / "av.mp4");
  ASSERT_NE(bytes.find("moov"), std::string::npos);
  EXPECT_LT(bytes.find("moov"), bytes.find("mdat"));
}

TEST(WriteMp4WithAudioTest, MissingWavIsNotFound) {
  TempDir dir;
  const auto data = Pattern(2 * 2 * 3);
  Status s = WriteMp4WithAudio({data, 1, 2, 2}, dir / "x.mp4", 24.0, dir / "missing.wav");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("missing.wav"));
  EXPECT_FALSE(fs::exists(dir / "x.mp4"));
}

TEST(WriteMp4WithAudioTest, RejectsNonPositiveFps) {
  TempDir dir;
  const std::string wav = WriteStereoTone(dir);
  const auto data = Pattern(2 * 2 * 3);
  EXPECT_EQ(WriteMp4WithAudio({data, 1, 2, 2}, dir / "x.mp4", -1.0, wav).code(),
            StatusCode::kInvalidArgument);
}

// The video half of WriteMp4WithAudio's ffmpeg command is WriteMp4's, and
// the audio half adds only the WAV input, the stream maps and the AAC
// settings (no -shortest). Checked with a stand-in ffmpeg that records its
// arguments.
TEST(WriteMp4WithAudioTest, KeepsTheVideoSettingsOfWriteMp4) {
  TempDir dir;
  const std::string args = dir / "args.txt";
  const std::string fake = dir / "ffmpeg";
  ops_test::WriteScript(fake, "printf '%s\\n' \"$@\" > '" + args + "'\ncat > /dev/null\n");
  const std::string wav = WriteStereoTone(dir);
  const auto data = Pattern(2 * 4 * 6 * 3);
  const std::string out = dir / "o.mp4";

  std::vector<std::string> video_only, with_audio;
  {
    ops_test::ScopedPathPrefix path(dir.path().string());
    ASSERT_TRUE(WriteMp4({data, 2, 4, 6}, out, 24.0).ok());
    video_only = ops_test::Lines(ReadFile(args));
    ASSERT_TRUE(WriteMp4WithAudio({data, 2, 4, 6}, out, 24.0, wav).ok());
    with_audio = ops_test::Lines(ReadFile(args));
  }
  ASSERT_FALSE(video_only.empty());
  EXPECT_EQ(std::count(with_audio.begin(), with_audio.end(), "-shortest"), 0);

  std::vector<std::string> stripped;
  for (size_t i = 0; i < with_audio.size(); ++i) {
    const std::string& a = with_audio[i];
    if (a == "-i" && i + 1 < with_audio.size() && with_audio[i + 1] == "file:" + wav) {
      ++i;
    } else if ((a == "-map" || a == "-c:a" || a == "-b:a") && i + 1 < with_audio.size()) {
      const std::string& v = with_audio[i + 1];
      EXPECT_TRUE((a == "-map" && (v == "0:v:0" || v == "1:a:0")) || (a == "-c:a" && v == "aac") ||
                  (a == "-b:a" && v == "192k"))
          << a << " " << v;
      ++i;
    } else {
      stripped.push_back(a);
    }
  }
  EXPECT_EQ(stripped, video_only);
  EXPECT_EQ(with_audio.size(), video_only.size() + 10);
}

TEST(WriteRawWithSidecarTest, WritesBytesAndDescribingJson) {
  TempDir dir;
  const auto data = Pattern(2 * 3 * 4 * 3);
  ASSERT_TRUE(WriteRawWithSidecar({data, 2, 3, 4}, dir / "out.u8", dir / "out.json").ok());
  EXPECT_EQ(ReadFile(dir / "out.u8"), std::string(data.begin(), data.end()));
  const auto j = nlohmann::json::parse(ReadFile(dir / "out.json"));
  EXPECT_EQ(j["file"], "out.u8");
  EXPECT_EQ(j["dtype"], "uint8");
  EXPECT_EQ(j["layout"], "NHWC");
  EXPECT_EQ(j["channels"], "RGB");
  EXPECT_EQ(j["shape"], nlohmann::json({2, 3, 4, 3}));
  EXPECT_EQ(j["bytes"], data.size());
}

TEST(WriteRawWithSidecarTest, UnwritablePathIsIoError) {
  const auto data = Pattern(3);
  EXPECT_EQ(WriteRawWithSidecar({data, 1, 1, 1}, "/nonexistent/dir/x.u8", "/nonexistent/dir/x.json")
                .code(),
            StatusCode::kIoError);
}

}  // namespace
}  // namespace vaed::ops
