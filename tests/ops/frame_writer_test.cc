#include "ops/common/frame_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace vaed::ops {
namespace {

namespace fs = std::filesystem;
using ops_test::ReadFile;
using ops_test::TempDir;
using ::testing::HasSubstr;

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37 + i / 7) & 0xff);
  return v;
}

std::string Capture(const std::string& command) { return ops_test::RunCommand(command).out; }

bool HaveFfmpeg() { return FindExecutable("ffmpeg").ok() && FindExecutable("ffprobe").ok(); }

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

// Regression guard: a child that exits without reading its input must give
// an error, not kill the calling process with SIGPIPE.
TEST(RunWithStdinTest, ChildExitingEarlyIsAnErrorNotSigpipe) {
  const auto input = Pattern(16 * 1024 * 1024);
  Status s = RunWithStdin({"/bin/true"}, input);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("stdin"));
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
