#include "ops/vaectl/streamed_mp4.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace vaed::vaectl {

std::string StreamedMp4Output::TemporaryVideoPath(const std::string& path) {
  return path + ".video-" + std::to_string(::getpid()) + ".mp4";
}

std::string StreamedMp4Output::TemporaryMuxPath(const std::string& path) {
  return path + ".muxed-" + std::to_string(::getpid()) + ".mp4";
}

Result<std::unique_ptr<StreamedMp4Output>> StreamedMp4Output::Start(const OutputPlan& plan,
                                                                    const ops::RgbFrames& output,
                                                                    double fps) {
  if (plan.kind != OutputKind::kMp4) {
    return InvalidArgument("StreamedMp4Output: the plan does not write an MP4");
  }
  VAED_RETURN_IF_ERROR(ops::CheckRgbFrames(output));
  const std::string video_path = TemporaryVideoPath(plan.path);
  // An output directory that cannot be written fails now, before the
  // decode, not when ffmpeg exits after it.
  if (!std::ofstream(video_path)) {
    return IoError("cannot create " + video_path + " beside the output " + plan.path + ": " +
                   std::strerror(errno));
  }
  VAED_ASSIGN_OR_RETURN(std::unique_ptr<ops::Mp4Stream> encoder,
                        ops::Mp4Stream::Start(video_path, output.height_px, output.width_px, fps));
  std::unique_ptr<StreamedMp4Output> out(
      new StreamedMp4Output(plan, output, std::move(encoder), video_path));
  out->writer_ = std::thread([o = out.get()] { o->WriteQueued(); });
  return out;
}

StreamedMp4Output::StreamedMp4Output(const OutputPlan& plan, const ops::RgbFrames& output,
                                     std::unique_ptr<ops::Mp4Stream> encoder,
                                     std::string video_path)
    : plan_(plan),
      output_(output),
      video_path_(std::move(video_path)),
      frame_bytes_(encoder->frame_bytes()),
      encoder_(std::move(encoder)) {}

StreamedMp4Output::~StreamedMp4Output() { Abort(); }

uint64_t StreamedMp4Output::announced_frames() const {
  MutexLock lock(&mu_);
  return announced_end_;
}

void StreamedMp4Output::OnFinalRange(const client::FinalRange& range) {
  if (range.stage != "video") return;
  const uint64_t frames = static_cast<uint64_t>(output_.frames);
  MutexLock lock(&mu_);
  if (!range_error_.ok() || closed_) return;
  if (range.unit != "frames" || range.begin != announced_end_ || range.end < range.begin ||
      range.end > frames) {
    range_error_ =
        Internal("the daemon announced video " + range.unit + " [" + std::to_string(range.begin) +
                 ", " + std::to_string(range.end) + ") final after [0, " +
                 std::to_string(announced_end_) + ") of " + std::to_string(frames) +
                 " frames; expected a range of frames from " + std::to_string(announced_end_));
    return;
  }
  if (range.end == range.begin) return;
  announced_end_ = range.end;
  queue_.emplace_back(range.begin, range.end);
  cv_.notify_one();
}

void StreamedMp4Output::WriteQueued() {
  for (;;) {
    std::pair<uint64_t, uint64_t> range;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !closed_) cv_.wait(mu_);
      if (queue_.empty()) return;  // closed and drained
      range = queue_.front();
      queue_.pop_front();
    }
    // After a failed Append the rest is only drained: Finish reports it.
    if (!write_error_.ok()) continue;
    write_error_ = encoder_->Append(output_.data.subspan(
        range.first * frame_bytes_, (range.second - range.first) * frame_bytes_));
  }
}

void StreamedMp4Output::StopWriter(bool cancel) noexcept {
  {
    MutexLock lock(&mu_);
    closed_ = true;
    if (cancel) queue_.clear();
  }
  cv_.notify_one();
  if (cancel) encoder_->Cancel();  // unblocks an Append waiting on the pipe
  if (writer_.joinable()) writer_.join();
}

void StreamedMp4Output::RemoveFiles() const noexcept {
  std::error_code ec;
  std::filesystem::remove(video_path_, ec);
  std::filesystem::remove(TemporaryMuxPath(plan_.path), ec);
}

Status StreamedMp4Output::MoveIntoPlace() const {
  std::string complete = video_path_;
  if (plan_.mux_audio) {
    complete = TemporaryMuxPath(plan_.path);
    VAED_RETURN_IF_ERROR(ops::MuxWavIntoMp4(video_path_, plan_.wav, complete));
  }
  std::error_code ec;
  std::filesystem::rename(complete, plan_.path, ec);
  if (ec) {
    return IoError("moving the finished MP4 " + complete + " to " + plan_.path + ": " +
                   ec.message());
  }
  return Status::Ok();
}

Status StreamedMp4Output::Finish() {
  if (done_) return FailedPrecondition("StreamedMp4Output: already finished or aborted");
  Status range_error;
  {
    MutexLock lock(&mu_);
    range_error = range_error_;
    // The reply means every frame is final: queue those a daemon that does
    // not stream (or streams less) did not announce.
    const uint64_t frames = static_cast<uint64_t>(output_.frames);
    if (range_error.ok() && announced_end_ < frames) {
      queue_.emplace_back(announced_end_, frames);
      announced_end_ = frames;
    }
  }
  if (!range_error.ok()) {
    Abort();
    return range_error;
  }
  StopWriter(/*cancel=*/false);
  done_ = true;
  Status s = encoder_->Finish();  // also a failed Append's error (write_error_)
  if (s.ok()) s = MoveIntoPlace();
  RemoveFiles();  // the temporary files (moved ones are gone already)
  return s;
}

void StreamedMp4Output::Abort() noexcept {
  if (done_) return;
  done_ = true;
  StopWriter(/*cancel=*/true);
  encoder_.reset();  // kills and reaps ffmpeg before its file is removed
  RemoveFiles();
}

}  // namespace vaed::vaectl
