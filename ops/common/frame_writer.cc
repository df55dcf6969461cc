#include "ops/common/frame_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>

#include "ops/common/child_process.h"
#include "ops/common/ffmpeg_command.h"

namespace vaed::ops {
namespace {

// Encodes `frames` to the MP4 `path` (see WriteMp4), adding the audio of
// the WAV file `*wav_path` when it is not null (see WriteMp4WithAudio).
Status EncodeMp4(const RgbFrames& frames, const std::string& path, double fps,
                 const std::string* wav_path) {
  VAED_RETURN_IF_ERROR(CheckRgbFrames(frames));
  VAED_RETURN_IF_ERROR(CheckFps(fps));
  if (wav_path != nullptr) VAED_RETURN_IF_ERROR(CheckInputFile(*wav_path, "audio file", path));
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, FfmpegPath());
  const auto argv = Mp4EncodeArgv(ffmpeg, frames.height_px, frames.width_px, fps, wav_path, path);
  return RunWithStdin(argv, frames.data).WithContext("writing " + path);
}

}  // namespace

Status CheckRgbFrames(const RgbFrames& frames) {
  if (frames.frames <= 0 || frames.height_px <= 0 || frames.width_px <= 0) {
    return InvalidArgument(
        "frames: extents must be positive, got frames=" + std::to_string(frames.frames) +
        " height_px=" + std::to_string(frames.height_px) +
        " width_px=" + std::to_string(frames.width_px));
  }
  const uint64_t want = static_cast<uint64_t>(frames.frames) *
                        static_cast<uint64_t>(frames.height_px) *
                        static_cast<uint64_t>(frames.width_px) * 3u;
  if (frames.data.size() != want) {
    return InvalidArgument("frames: " + std::to_string(frames.data.size()) +
                           " bytes given, frames*height_px*width_px*3 = " + std::to_string(want));
  }
  return Status::Ok();
}

Status CheckFfmpegAvailable() { return FfmpegPath().status(); }

Result<std::string> FindExecutable(std::string_view name) {
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(begin, end - begin);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + std::string(name);
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  return NotFound(std::string(name) + " not found on PATH");
}

Status RunWithStdin(const std::vector<std::string>& argv, std::span<const uint8_t> input) {
  VAED_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> child, ChildProcess::Spawn(argv));
  const Status write_status = child->WriteAll(input);
  // How the child ended says more than the EPIPE of its early exit.
  VAED_RETURN_IF_ERROR(child->Wait());
  return write_status;
}

Result<std::vector<std::string>> WritePngSequence(const RgbFrames& frames, const std::string& dir) {
  VAED_RETURN_IF_ERROR(CheckRgbFrames(frames));
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, FfmpegPath());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("creating directory " + dir + ": " + ec.message());
  auto argv = FfmpegRawRgbInput(ffmpeg, frames.height_px, frames.width_px, "1");
  for (const char* a : {"-f", "image2", "-start_number", "0", "-y"}) argv.emplace_back(a);
  argv.push_back(dir + "/frame_%04d.png");
  VAED_RETURN_IF_ERROR(RunWithStdin(argv, frames.data).WithContext("writing PNGs to " + dir));
  std::vector<std::string> paths;
  for (int64_t f = 0; f < frames.frames; ++f) {
    char name[32];
    std::snprintf(name, sizeof(name), "/frame_%04lld.png", static_cast<long long>(f));
    paths.push_back(dir + name);
  }
  return paths;
}

Status WritePngImage(const RgbFrames& frames, const std::string& path) {
  VAED_RETURN_IF_ERROR(CheckRgbFrames(frames));
  if (frames.frames != 1) {
    return InvalidArgument("a single PNG file holds one frame, got " +
                           std::to_string(frames.frames) + "; give a directory instead");
  }
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, FfmpegPath());
  auto argv = FfmpegRawRgbInput(ffmpeg, frames.height_px, frames.width_px, "1");
  for (const char* a : {"-f", "image2", "-update", "1", "-frames:v", "1", "-y"}) {
    argv.emplace_back(a);
  }
  argv.push_back(path);
  return RunWithStdin(argv, frames.data).WithContext("writing " + path);
}

Status WriteMp4(const RgbFrames& frames, const std::string& path, double fps) {
  return EncodeMp4(frames, path, fps, nullptr);
}

Status WriteMp4WithAudio(const RgbFrames& frames, const std::string& path, double fps,
                         const std::string& wav_path) {
  return EncodeMp4(frames, path, fps, &wav_path);
}

Status WriteRawWithSidecar(const RgbFrames& frames, const std::string& raw_path,
                           const std::string& json_path) {
  VAED_RETURN_IF_ERROR(CheckRgbFrames(frames));
  {
    std::ofstream raw(raw_path, std::ios::binary | std::ios::trunc);
    raw.write(reinterpret_cast<const char*>(frames.data.data()),
              static_cast<std::streamsize>(frames.data.size()));
    raw.close();
    if (!raw) return IoError("writing " + raw_path);
  }
  const nlohmann::json sidecar = {
      {"file", std::filesystem::path(raw_path).filename().string()},
      {"dtype", "uint8"},
      {"layout", "NHWC"},
      {"channels", "RGB"},
      {"shape", {frames.frames, frames.height_px, frames.width_px, 3}},
      {"bytes", frames.data.size()},
  };
  std::ofstream json(json_path, std::ios::trunc);
  json << sidecar.dump(2) << "\n";
  json.close();
  if (!json) return IoError("writing " + json_path);
  return Status::Ok();
}

}  // namespace vaed::ops
