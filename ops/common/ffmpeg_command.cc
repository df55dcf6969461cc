#include "ops/common/ffmpeg_command.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <initializer_list>

#include "ops/common/frame_writer.h"

namespace vaed::ops {
namespace {

void Append(std::vector<std::string>* argv, std::initializer_list<const char*> args) {
  for (const char* a : args) argv->emplace_back(a);
}

// Options every ffmpeg run starts with: no banner, errors only, and never
// reading the terminal (stdin is the frames, or nothing).
std::vector<std::string> Quiet(const std::string& ffmpeg) {
  return {ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin"};
}

// The WAV as input 1 and the stream maps. `file:` keeps a name such as
// "a:b.wav" or "http..." from being taken for another protocol; the maps
// pin input 0 as video, input 1 as audio.
void AppendWavInput(const std::string& wav_path, std::vector<std::string>* argv) {
  argv->insert(argv->end(), {"-i", "file:" + wav_path, "-map", "0:v:0", "-map", "1:a:0"});
}

// The video encoding of every MP4 ops/ writes.
void AppendH264Encoding(std::vector<std::string>* argv) {
  Append(argv, {"-vf",
                "pad=ceil(iw/2)*2:ceil(ih/2)*2,"
                "scale=out_color_matrix=bt709:out_range=tv:flags=accurate_rnd+full_chroma_int,"
                "format=yuv420p",
                "-c:v", "libx264", "-crf", "18", "-preset", "medium", "-colorspace", "bt709",
                "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv"});
}

// The audio encoding of every MP4 ops/ writes: ffmpeg's native AAC-LC.
void AppendAacEncoding(std::vector<std::string>* argv) {
  Append(argv, {"-c:a", "aac", "-b:a", "192k"});
}

void AppendMp4Output(const std::string& path, std::vector<std::string>* argv) {
  Append(argv, {"-movflags", "+faststart", "-f", "mp4", "-y"});
  argv->push_back(path);
}

}  // namespace

Result<std::string> FfmpegPath() {
  auto path = FindExecutable("ffmpeg");
  if (!path.ok()) {
    return FailedPrecondition(
        "ffmpeg not found on PATH; it is needed to write PNG and MP4 files "
        "(Debian/Ubuntu: apt-get install ffmpeg); raw output needs no ffmpeg");
  }
  return path;
}

Status CheckFps(double fps) {
  if (!std::isfinite(fps) || fps <= 0) {
    return InvalidArgument("fps must be positive, got " + std::to_string(fps));
  }
  return Status::Ok();
}

Status CheckInputFile(const std::string& input, const std::string& what,
                      const std::string& output) {
  struct stat st {};
  if (::stat(input.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return NotFound(what + " " + input + " is not an existing regular file; writing " + output);
  }
  return Status::Ok();
}

std::string FfmpegRate(double fps) {
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.6g", fps);
  return rate;
}

std::vector<std::string> FfmpegRawRgbInput(const std::string& ffmpeg, int64_t height_px,
                                           int64_t width_px, const std::string& rate) {
  std::vector<std::string> argv = Quiet(ffmpeg);
  argv.insert(argv.end(), {"-f", "rawvideo", "-pixel_format", "rgb24", "-video_size",
                           std::to_string(width_px) + "x" + std::to_string(height_px), "-framerate",
                           rate, "-i", "pipe:0"});
  return argv;
}

std::vector<std::string> Mp4EncodeArgv(const std::string& ffmpeg, int64_t height_px,
                                       int64_t width_px, double fps, const std::string* wav_path,
                                       const std::string& path) {
  std::vector<std::string> argv = FfmpegRawRgbInput(ffmpeg, height_px, width_px, FfmpegRate(fps));
  if (wav_path != nullptr) AppendWavInput(*wav_path, &argv);
  AppendH264Encoding(&argv);
  if (wav_path != nullptr) AppendAacEncoding(&argv);
  AppendMp4Output(path, &argv);
  return argv;
}

std::vector<std::string> MuxWavArgv(const std::string& ffmpeg, const std::string& video_path,
                                    const std::string& wav_path, const std::string& path) {
  std::vector<std::string> argv = Quiet(ffmpeg);
  argv.insert(argv.end(), {"-i", "file:" + video_path});
  AppendWavInput(wav_path, &argv);
  Append(&argv, {"-c:v", "copy"});
  AppendAacEncoding(&argv);
  AppendMp4Output(path, &argv);
  return argv;
}

}  // namespace vaed::ops
