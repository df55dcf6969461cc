#include "ops/common/frame_writer.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

extern char** environ;

namespace vaed::ops {
namespace {

// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { Close(); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  void Close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

Result<std::string> Ffmpeg() {
  auto path = FindExecutable("ffmpeg");
  if (!path.ok()) {
    return FailedPrecondition(
        "ffmpeg not found on PATH; it is needed to write PNG and MP4 files "
        "(Debian/Ubuntu: apt-get install ffmpeg); raw output needs no ffmpeg");
  }
  return path;
}

// ffmpeg arguments that read `frames` as rawvideo rgb24 from stdin.
std::vector<std::string> FfmpegRawInput(const std::string& ffmpeg, const RgbFrames& frames,
                                        const std::string& rate) {
  return {ffmpeg,
          "-hide_banner",
          "-loglevel",
          "error",
          "-nostdin",
          "-f",
          "rawvideo",
          "-pixel_format",
          "rgb24",
          "-video_size",
          std::to_string(frames.width_px) + "x" + std::to_string(frames.height_px),
          "-framerate",
          rate,
          "-i",
          "pipe:0"};
}

// Encodes `frames` to the MP4 `path` (see WriteMp4), adding the audio of
// the WAV file `*wav_path` when it is not null (see WriteMp4WithAudio).
Status EncodeMp4(const RgbFrames& frames, const std::string& path, double fps,
                 const std::string* wav_path) {
  VAED_RETURN_IF_ERROR(CheckRgbFrames(frames));
  if (!std::isfinite(fps) || fps <= 0) {
    return InvalidArgument("fps must be positive, got " + std::to_string(fps));
  }
  if (wav_path != nullptr) {
    struct stat st {};
    if (::stat(wav_path->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return NotFound("audio file " + *wav_path + " is not an existing regular file; writing " +
                      path);
    }
  }
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, Ffmpeg());
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.6g", fps);
  auto argv = FfmpegRawInput(ffmpeg, frames, rate);
  if (wav_path != nullptr) {
    // `file:` keeps a name such as "a:b.wav" or "http..." from being taken
    // for another protocol; the maps pin input 0 as video, input 1 as audio.
    argv.insert(argv.end(), {"-i", "file:" + *wav_path, "-map", "0:v:0", "-map", "1:a:0"});
  }
  for (const char* a :
       {"-vf",
        "pad=ceil(iw/2)*2:ceil(ih/2)*2,"
        "scale=out_color_matrix=bt709:out_range=tv:flags=accurate_rnd+full_chroma_int,"
        "format=yuv420p",
        "-c:v", "libx264", "-crf", "18", "-preset", "medium", "-colorspace", "bt709",
        "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv"}) {
    argv.emplace_back(a);
  }
  if (wav_path != nullptr) {
    for (const char* a : {"-c:a", "aac", "-b:a", "192k"}) argv.emplace_back(a);
  }
  for (const char* a : {"-movflags", "+faststart", "-f", "mp4", "-y"}) argv.emplace_back(a);
  argv.push_back(path);
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

Status CheckFfmpegAvailable() { return Ffmpeg().status(); }

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
  if (argv.empty()) return InvalidArgument("RunWithStdin: empty argv");
  const std::string what = "running " + argv[0];
  // A socket rather than a pipe: send(MSG_NOSIGNAL) turns a child that
  // exits early into EPIPE instead of a process-wide SIGPIPE.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoStatus(errno, what + ": socketpair");
  }
  FdCloser parent_end(fds[0]);
  FdCloser child_end(fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  // The child's stdout goes to our stderr so that our stdout stays clean.
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_err =
      ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_err != 0) return ErrnoStatus(spawn_err, what + ": posix_spawn");
  child_end.Close();

  Status write_status;
  size_t sent = 0;
  while (sent < input.size()) {
    const ssize_t n = ::send(fds[0], input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      write_status =
          ErrnoStatus(errno, what + ": writing " + std::to_string(input.size()) +
                                 " bytes to its stdin (sent " + std::to_string(sent) + ")");
      break;
    }
    sent += static_cast<size_t>(n);
  }
  parent_end.Close();  // EOF for the child

  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus(errno, what + ": waitpid");
  }
  if (WIFSIGNALED(wstatus)) {
    return IoError(what + ": killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
                   Join(argv) + ")");
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
    return IoError(what + ": exited with status " + std::to_string(WEXITSTATUS(wstatus)) + " (" +
                   Join(argv) + ")");
  }
  return write_status;
}

Result<std::vector<std::string>> WritePngSequence(const RgbFrames& frames, const std::string& dir) {
  VAED_RETURN_IF_ERROR(CheckRgbFrames(frames));
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, Ffmpeg());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("creating directory " + dir + ": " + ec.message());
  auto argv = FfmpegRawInput(ffmpeg, frames, "1");
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
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, Ffmpeg());
  auto argv = FfmpegRawInput(ffmpeg, frames, "1");
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
