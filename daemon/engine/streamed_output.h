// Streamed output (DecodeOptions.stream_output): a job's output
// is written part by part as the model makes it final, and each part is
// announced (ResultSink::OnFinalRange) as soon as it is written, so that a
// worker may encode frames while later ones decode.
//
// Lifetime rule (what the client lends): the elements of an announced
// range are written before the announcement and never again by this job;
// a retry inside the decode (the failure ladder, a group that fell back to
// the output rank alone) calls the model's hand-over again from frame 0,
// and VideoStream writes only the frames past what it already wrote. The
// bytes are those of the unstreamed path: each part is formatted with the
// same element-wise post-processing (output_format.h) and lands at the
// same offsets.
//
// Units: pixel frames of the video output (its outermost dimension in
// every output format), samples per channel of the audio output.
//
// Thread-safety: a VideoStream belongs to the rank thread that runs the
// job (decode_run.cc); StreamedSoFar is the one thing the server reads.
#ifndef VAED_DAEMON_ENGINE_STREAMED_OUTPUT_H_
#define VAED_DAEMON_ENGINE_STREAMED_OUTPUT_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/rank_context.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::engine {

// Where the parts of a streamed output go: the job's rank writes them into
// the client's region and announces them.
struct StreamSink {
  // Writes `formatted` (contiguous) into the client's region at `part`
  // (a sub-range of the output's TensorRef: OuterRange()).
  std::function<Status(const torch::Tensor& formatted, const TensorRef& part)> write;
  // CUDA outputs: the rank's event recorded after the writes so far
  // (FinalRangeEvent::ready_event); "" for host outputs.
  std::function<Result<std::string>()> record_ready;
  // ResultSink::OnFinalRange of the job.
  FinalRangeFn announce;
};

// Elements [begin, end) of `whole`'s outermost dimension as a TensorRef of
// their own: offset advanced by begin * (size / shape[0]) bytes, shape[0]
// = end - begin. Precondition: 0 <= begin <= end <= shape[0], shape not
// empty.
TensorRef OuterRange(const TensorRef& whole, int64_t begin, int64_t end);

// The video output of one streamed job.
class VideoStream {
 public:
  // `model` formats the frames (output_format.h FormatVideo); `job` names
  // the output (job.video set) and records what was announced
  // (job.streamed).
  VideoStream(const DecodeJob& job, const models::VaeModel& model, StreamSink sink);

  // DecodeSettings::final_frames: `raw` holds the raw decoder output of
  // frames [begin, end) ([end - begin, 3, H, W], any strides). Formats and
  // writes the frames at or past end_frame() (earlier ones were written by
  // an earlier attempt and are not touched again), records the ready event,
  // stores the new end in job.streamed and announces [end_frame(), end).
  // Errors: the formatting's or the write's (kClientFault for a segment
  // that faulted); nothing is announced then.
  Status OnFinalFrames(const torch::Tensor& raw, int64_t begin, int64_t end);

  // After the decode: writes and announces what the model did not hand
  // over from `raw`, the whole raw output [frames, 3, H, W] (nothing when
  // every frame was; a model without hand-overs streams it as one range).
  Status Finish(const torch::Tensor& raw);

  int64_t end_frame() const { return end_; }
  // Seconds spent formatting and writing parts (the "stream_output" timing).
  double seconds() const { return seconds_; }

 private:
  const DecodeJob& job_;
  const models::VaeModel& model_;
  const StreamSink sink_;
  int64_t end_ = 0;
  double seconds_ = 0;
};

// The audio output of a streamed job, written whole: writes `formatted`
// (float32 [channels, samples], contiguous) at job.audio->output, records
// the ready event, stores the samples in job.streamed and announces
// [0, samples). Errors: the write's.
Status StreamAudio(const DecodeJob& job, const torch::Tensor& formatted, const StreamSink& sink);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_STREAMED_OUTPUT_H_
