#include "daemon/engine/streamed_output.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "daemon/engine/output_format.h"

namespace vaed::engine {

TensorRef OuterRange(const TensorRef& whole, int64_t begin, int64_t end) {
  TensorRef part = whole;
  const uint64_t per_element = whole.size / static_cast<uint64_t>(whole.shape[0]);
  part.offset = whole.offset + static_cast<uint64_t>(begin) * per_element;
  part.size = static_cast<uint64_t>(end - begin) * per_element;
  part.shape[0] = end - begin;
  return part;
}

VideoStream::VideoStream(const DecodeJob& job, const models::VaeModel& model, StreamSink sink)
    : job_(job), model_(model), sink_(std::move(sink)) {}

Status VideoStream::OnFinalFrames(const torch::Tensor& raw, int64_t begin, int64_t end) {
  if (end <= end_) return Status::Ok();  // a retry re-decoding written frames
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t from = std::max(begin, end_);
  const torch::Tensor frames = raw.narrow(0, from - begin, end - from);
  VAED_ASSIGN_OR_RETURN(const torch::Tensor formatted,
                        FormatVideo(model_, frames, job_.video->format));
  VAED_RETURN_IF_ERROR(sink_.write(formatted, OuterRange(job_.video->output, from, end)));
  VAED_ASSIGN_OR_RETURN(std::string ready, sink_.record_ready());
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  end_ = end;
  job_.streamed->video_frames.store(static_cast<uint64_t>(end));
  sink_.announce({.stage = "video",
                  .unit = "frames",
                  .begin = from,
                  .end = end,
                  .total = job_.video->plan.frames,
                  .ready_event = std::move(ready)});
  return Status::Ok();
}

Status VideoStream::Finish(const torch::Tensor& raw) {
  const int64_t frames = job_.video->plan.frames;
  if (end_ >= frames) return Status::Ok();
  return OnFinalFrames(raw.narrow(0, end_, frames - end_), end_, frames);
}

Status StreamAudio(const DecodeJob& job, const torch::Tensor& formatted, const StreamSink& sink) {
  VAED_RETURN_IF_ERROR(sink.write(formatted, job.audio->output));
  VAED_ASSIGN_OR_RETURN(std::string ready, sink.record_ready());
  const int64_t samples = job.audio->plan.samples;
  job.streamed->audio_samples.store(static_cast<uint64_t>(samples));
  sink.announce({.stage = "audio",
                 .unit = "samples",
                 .begin = 0,
                 .end = samples,
                 .total = samples,
                 .ready_event = std::move(ready)});
  return Status::Ok();
}

}  // namespace vaed::engine
