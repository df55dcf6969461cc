#include "ops/common/mp4_stream.h"

#include <utility>
#include <vector>

#include "ops/common/child_process.h"
#include "ops/common/ffmpeg_command.h"
#include "ops/common/frame_writer.h"

namespace vaed::ops {

Mp4Stream::Mp4Stream(std::unique_ptr<ChildProcess> ffmpeg, std::string path, uint64_t frame_bytes)
    : ffmpeg_(std::move(ffmpeg)), path_(std::move(path)), frame_bytes_(frame_bytes) {}

Mp4Stream::~Mp4Stream() = default;  // ~ChildProcess kills and reaps an unfinished ffmpeg

Result<std::unique_ptr<Mp4Stream>> Mp4Stream::Start(const std::string& path, int64_t height_px,
                                                    int64_t width_px, double fps) {
  if (height_px <= 0 || width_px <= 0) {
    return InvalidArgument("Mp4Stream: extents must be positive, got height_px=" +
                           std::to_string(height_px) + " width_px=" + std::to_string(width_px));
  }
  VAED_RETURN_IF_ERROR(CheckFps(fps));
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, FfmpegPath());
  auto child = ChildProcess::Spawn(Mp4EncodeArgv(ffmpeg, height_px, width_px, fps, nullptr, path));
  if (!child.ok()) return child.status().WithContext("writing " + path);
  const uint64_t frame_bytes =
      static_cast<uint64_t>(height_px) * static_cast<uint64_t>(width_px) * 3u;
  return std::unique_ptr<Mp4Stream>(new Mp4Stream(std::move(child).value(), path, frame_bytes));
}

Status Mp4Stream::Append(std::span<const uint8_t> frames) {
  if (finished_) return FailedPrecondition("Mp4Stream: Append after Finish, writing " + path_);
  if (frames.size() % frame_bytes_ != 0) {
    return InvalidArgument("Mp4Stream: " + std::to_string(frames.size()) +
                           " bytes are not whole frames of " + std::to_string(frame_bytes_) +
                           " bytes, writing " + path_);
  }
  if (!append_error_.ok()) return append_error_;
  Status s = ffmpeg_->WriteAll(frames);
  if (!s.ok()) {
    append_error_ = s.WithContext("writing " + path_);
    return append_error_;
  }
  frames_appended_ += static_cast<int64_t>(frames.size() / frame_bytes_);
  return Status::Ok();
}

Status Mp4Stream::Finish() {
  if (finished_) return finish_status_;
  finished_ = true;
  if (frames_appended_ == 0 && append_error_.ok()) {
    ffmpeg_->Kill();
    finish_status_ = FailedPrecondition("Mp4Stream: no frame was appended to " + path_ +
                                        "; an MP4 needs at least one");
    return finish_status_;
  }
  // ffmpeg's exit says more than the EPIPE its early exit gave Append.
  finish_status_ = ffmpeg_->Wait().WithContext("writing " + path_);
  if (finish_status_.ok()) finish_status_ = append_error_;
  return finish_status_;
}

void Mp4Stream::Cancel() noexcept { ffmpeg_->Interrupt(); }

Status MuxWavIntoMp4(const std::string& video_path, const std::string& wav_path,
                     const std::string& path) {
  if (path == video_path || path == wav_path) {
    return InvalidArgument("MuxWavIntoMp4: the output " + path + " is one of its inputs");
  }
  VAED_RETURN_IF_ERROR(CheckInputFile(video_path, "video file", path));
  VAED_RETURN_IF_ERROR(CheckInputFile(wav_path, "audio file", path));
  VAED_ASSIGN_OR_RETURN(const std::string ffmpeg, FfmpegPath());
  return RunWithStdin(MuxWavArgv(ffmpeg, video_path, wav_path, path), {})
      .WithContext("writing " + path);
}

}  // namespace vaed::ops
