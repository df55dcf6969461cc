#include "daemon/engine/decode_run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/engine/cuda_region_io.h"
#include "daemon/engine/decode_log.h"
#include "daemon/engine/group_job.h"
#include "daemon/engine/output_format.h"
#include "daemon/engine/process_memory.h"
#include "daemon/engine/region_io.h"
#include "daemon/engine/streamed_output.h"
#include "daemon/engine/torch_cuda.h"
#include "daemon/engine/video_on_group.h"
#include "daemon/models/postprocess.h"
#include "daemon/models/tensor_memory.h"

namespace vaed::engine {

namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Turns the model's per-stage progress into the request's ProgressEvents:
// the fraction of the whole request over its stages (the video's units,
// then the audio as one more unit of the video's size; the whole request
// when there is no video). Kept monotonic: a retry after a failure reports
// from 0 again and is not forwarded until it passes what was sent.
class ProgressTracker {
 public:
  ProgressTracker(const DecodeJob& job, SteadyClock::time_point start, const ProgressFn& sink)
      : job_(job), start_(start), sink_(job.progress ? sink : nullptr) {}

  void Report(const char* stage, const models::DecodeProgress& p) {
    if (!sink_ || p.total <= 0) return;
    const double units = job_.video && job_.audio ? double(p.total) + 1.0 : double(p.total);
    const double fraction =
        std::string_view(stage) == "audio" ? 1.0 : std::min(1.0, double(p.done) / units);
    if (fraction <= sent_) return;
    sent_ = fraction;
    const double elapsed = SecondsSince(start_);
    sink_({.stage = stage,
           .done = p.done,
           .total = p.total,
           .unit = p.unit,
           .fraction = fraction,
           .elapsed_seconds = elapsed,
           .eta_seconds = fraction >= 1.0 ? 0.0 : elapsed * (1.0 - fraction) / fraction,
           .tiles_done = p.tiles_done,
           .tiles_total = p.tiles_total});
  }

  bool wanted() const { return static_cast<bool>(sink_); }

 private:
  const DecodeJob& job_;
  const SteadyClock::time_point start_;
  const ProgressFn sink_;
  double sent_ = -1.0;
};

// The steps of one decode (decode_run.h), with what they hand each other.
class DecodeRun {
 public:
  DecodeRun(const DecodeJob& job, const RankContext& ctx)
      : job_(job), ctx_(ctx), start_(SteadyClock::now()), progress_(job, start_, ctx.progress) {}

  // On a group the members wait for the job's announcement: a run that
  // ends before it tells them to stand down.
  ~DecodeRun() {
    if (ctx_.channel != nullptr && !announced_) {
      (void)AnnounceJob(*ctx_.channel, *ctx_.spec, ctx_.generation, ctx_.spans_nodes, &job_,
                        nullptr);
    }
  }

  Result<DecodeResult> Run(RankWork* work);

 private:
  Status CopyIn();
  // One latent onto the rank's device, from a host region (a host copy,
  // then to the device: counted) or a CUDA region (device to device).
  Result<torch::Tensor> ReadLatent(const TensorRef& ref, const std::shared_ptr<HostRegion>& host,
                                   const std::shared_ptr<CudaRegion>& cuda,
                                   const torch::Device& device, const std::string& field);
  // One formatted output into its host region (through the host: counted)
  // or CUDA region (in place, on the rank's stream).
  Status WriteOutput(const torch::Tensor& formatted, const TensorRef& ref,
                     const std::shared_ptr<HostRegion>& host,
                     const std::shared_ptr<CudaRegion>& cuda, const std::string& field);
  bool WritesCudaRegions() const;
  // Decode.inputs_ready_event: the rank's stream waits on the worker's
  // event before its first read (rank_stream.h); refused on a rank without
  // a device.
  Status WaitForInputs();
  // CUDA ranks: the caching allocator's peak starts again for this request
  // (Run) and is read at the end (Finish). A figure, not the decode: a
  // failure is logged and leaves peak_device_bytes 0.
  void StartDevicePeak();
  void ReadDevicePeak();
  // Streamed output (streamed_output.h): the job's sinks (writes through
  // WriteOutput, events through RecordReady, announcements to the
  // executor's ResultSink).
  StreamSink SinkFor(const std::shared_ptr<HostRegion>& host,
                     const std::shared_ptr<CudaRegion>& cuda, const std::string& field);
  // CUDA outputs: the rank's event recorded after the writes enqueued so
  // far; "" when the job writes no CUDA region.
  Result<std::string> RecordReady();
  Status DecodeVideo(RankWork* work);
  Status DecodeAudio();
  Status FormatOutputs();
  Status CopyOut();
  std::vector<RankBucket> DecodedBuckets() const;
  void Finish();

  const DecodeJob& job_;
  const RankContext& ctx_;
  const SteadyClock::time_point start_;
  ProgressTracker progress_;
  bool announced_ = false;
  DecodeResult result_;
  torch::Tensor latent_, audio_latent_;      // copied in
  torch::Tensor raw_, wave_;                 // decoded
  torch::Tensor video_out_, audio_out_;      // formatted
  HostCopies host_copies_;                   // between host regions and the rank's device
  std::optional<VideoStream> video_stream_;  // set when the job streams a video
};

Result<DecodeResult> DecodeRun::Run(RankWork* work) {
  ResetPeakRss();
  models::ResetPeakTensorBytes();
  StartDevicePeak();
  result_.report.timings.Add("queue_wait",
                             std::chrono::duration<double>(start_ - job_.received).count());
  VAED_RETURN_IF_ERROR(CopyIn());
  const std::string& model = job_.model->info().name;
  if (job_.settings.faults.device_fatal > 0) {
    // What CUDA reports for a kernel that corrupted its context (tests).
    return Internal("model '" + model +
                    "': decode: CUDA error: an illegal memory access was "
                    "encountered (injected fault device_fatal)")
        .WithReason(ErrorReason::kStickyDevice);
  }
  if (job_.video) VAED_RETURN_IF_ERROR(DecodeVideo(work));
  if (job_.audio) VAED_RETURN_IF_ERROR(DecodeAudio());
  VAED_RETURN_IF_ERROR(FormatOutputs());
  // A streamed video is written already; its error says what is final.
  VAED_RETURN_IF_ERROR(job_.cancel->Check(video_stream_
                                              ? "after the decode (streamed frames written)"
                                              : "before writing the output (decode done)"));
  VAED_RETURN_IF_ERROR(CopyOut());
  Finish();
  return std::move(result_);
}

Result<torch::Tensor> DecodeRun::ReadLatent(const TensorRef& ref,
                                            const std::shared_ptr<HostRegion>& host,
                                            const std::shared_ptr<CudaRegion>& cuda,
                                            const torch::Device& device, const std::string& field) {
  if (cuda) return CopyLatentFromCuda(ref, *cuda, device, field);
  VAED_ASSIGN_OR_RETURN(torch::Tensor copy, CopyLatentIn(ref, *host, field));
  return ToRankDevice(copy, device, field, &host_copies_);
}

Status DecodeRun::WriteOutput(const torch::Tensor& formatted, const TensorRef& ref,
                              const std::shared_ptr<HostRegion>& host,
                              const std::shared_ptr<CudaRegion>& cuda, const std::string& field) {
  if (cuda) return CopyOutToCuda(formatted, ref, *cuda, field);
  VAED_ASSIGN_OR_RETURN(const torch::Tensor on_host, ToHost(formatted, field, &host_copies_));
  return engine::CopyOut(on_host, ref, *host, field);
}

bool DecodeRun::WritesCudaRegions() const {
  return (job_.video && job_.video->output_cuda) || (job_.audio && job_.audio->output_cuda);
}

Status DecodeRun::WaitForInputs() {
  if (job_.inputs_ready_event.empty()) return Status::Ok();
  return ctx_.stream->WaitForInputs(job_.client_id, job_.inputs_ready_event, ctx_.global_rank);
}

Result<std::string> DecodeRun::RecordReady() {
  if (!WritesCudaRegions()) return std::string();
  return ctx_.stream->RecordOutputsReady(ctx_.global_rank);
}

void DecodeRun::StartDevicePeak() {
  const torch::Device device = ctx_.model->device();
  if (!device.is_cuda()) return;
  if (Status s = ResetPeakDeviceBytes(device.index()); !s.ok()) {
    spdlog::warn("request {}: resetting the device's peak memory: {}", job_.request_id,
                 s.ToString());
  }
}

void DecodeRun::ReadDevicePeak() {
  const torch::Device device = ctx_.model->device();
  if (!device.is_cuda()) return;
  Result<DeviceMemoryFigures> figures = TorchDeviceMemory(device.index());
  if (figures.ok()) {
    result_.peak_device_bytes = figures->peak_allocated_bytes;
  } else {
    spdlog::warn("request {}: reading the device's peak memory: {}", job_.request_id,
                 figures.status().ToString());
  }
}

Status DecodeRun::CopyIn() {
  const auto t0 = SteadyClock::now();
  // Host regions are read into host memory, then copied to the rank's
  // device when it is not the CPU (counted; nothing is copied on CPU ranks).
  const torch::Device device = ctx_.model->device();
  VAED_RETURN_IF_ERROR(WaitForInputs());
  if (job_.video) {
    VAED_ASSIGN_OR_RETURN(latent_, ReadLatent(job_.video->latent, job_.video->latent_region,
                                              job_.video->latent_cuda, device, "latent"));
  }
  if (job_.audio) {
    VAED_ASSIGN_OR_RETURN(audio_latent_,
                          ReadLatent(job_.audio->latent, job_.audio->latent_region,
                                     job_.audio->latent_cuda, device, "audio_latent"));
  }
  result_.report.timings.Add("copy_in", SecondsSince(t0));
  if (job_.video) VAED_RETURN_IF_ERROR(CheckLatentFinite(latent_, "latent"));
  if (job_.audio) VAED_RETURN_IF_ERROR(CheckLatentFinite(audio_latent_, "audio_latent"));
  return Status::Ok();
}

StreamSink DecodeRun::SinkFor(const std::shared_ptr<HostRegion>& host,
                              const std::shared_ptr<CudaRegion>& cuda, const std::string& field) {
  return {.write =
              [this, host, cuda, field](const torch::Tensor& formatted, const TensorRef& part) {
                return WriteOutput(formatted, part, host, cuda, field);
              },
          .record_ready = [this] { return RecordReady(); },
          .announce = ctx_.final_range};
}

Status DecodeRun::DecodeVideo(RankWork* work) {
  models::DecodeSettings settings = job_.settings;
  settings.cancel = job_.cancel.get();
  if (progress_.wanted()) {
    settings.progress = [this](const models::DecodeProgress& p) { progress_.Report("video", p); };
  }
  if (job_.stream_output) {
    video_stream_.emplace(job_, *ctx_.model,
                          SinkFor(job_.video->output_region, job_.video->output_cuda, "output"));
    settings.final_frames = [this](const torch::Tensor& raw, int64_t begin, int64_t end) {
      return video_stream_->OnFinalFrames(raw, begin, end);
    };
  }
  Result<VideoOnGroup> video = DecodeVideoOnGroup(job_, ctx_, latent_, std::move(settings),
                                                  &result_.report, &announced_, work);
  latent_ = torch::Tensor();
  VAED_RETURN_IF_ERROR(video.status());
  raw_ = std::move(video->raw);
  result_.group = std::move(video->group);
  if (video_stream_) {
    VAED_RETURN_IF_ERROR(video_stream_->Finish(raw_));
    result_.report.timings.Add("stream_output", video_stream_->seconds());
  }
  return Status::Ok();
}

Status DecodeRun::DecodeAudio() {
  VAED_RETURN_IF_ERROR(job_.cancel->Check("before the audio decode (video done)"));
  VAED_ASSIGN_OR_RETURN(
      wave_, ctx_.model->DecodeAudio(audio_latent_, job_.settings.latent_space, &result_.report));
  audio_latent_ = torch::Tensor();
  progress_.Report("audio", {.done = 1, .total = 1, .unit = "audio"});
  return Status::Ok();
}

Status DecodeRun::FormatOutputs() {
  const auto t0 = SteadyClock::now();
  if (job_.video) {
    VAED_ASSIGN_OR_RETURN(result_.video_sanity, models::SummarizeValues(raw_, 0));
    // A streamed video is formatted and written already, part by part.
    if (!video_stream_) {
      VAED_ASSIGN_OR_RETURN(video_out_, FormatVideo(*ctx_.model, raw_, job_.video->format));
    }
    raw_ = torch::Tensor();
  }
  if (job_.audio) {
    VAED_ASSIGN_OR_RETURN(result_.audio_sanity,
                          models::SummarizeValues(wave_, job_.audio->plan.clamp_level));
    VAED_ASSIGN_OR_RETURN(audio_out_, FormatAudio(wave_));
    wave_ = torch::Tensor();
  }
  result_.report.timings.Add("postprocess", SecondsSince(t0));
  return Status::Ok();
}

Status DecodeRun::CopyOut() {
  const auto t0 = SteadyClock::now();
  if (job_.video && !video_stream_) {
    VAED_RETURN_IF_ERROR(WriteOutput(video_out_, job_.video->output, job_.video->output_region,
                                     job_.video->output_cuda, "output"));
  }
  if (job_.audio && job_.stream_output) {
    // Streamed: announced as soon as it is written (one range).
    VAED_RETURN_IF_ERROR(
        StreamAudio(job_, audio_out_,
                    SinkFor(job_.audio->output_region, job_.audio->output_cuda, "audio_output")));
  } else if (job_.audio) {
    VAED_RETURN_IF_ERROR(WriteOutput(audio_out_, job_.audio->output, job_.audio->output_region,
                                     job_.audio->output_cuda, "audio_output"));
  }
  // The copies into and out of the client's allocations are asynchronous;
  // RunDecode's fence waits for them before the result goes out
  // (rank_stream.h). The event: "" when no CUDA region is written.
  VAED_ASSIGN_OR_RETURN(result_.outputs_ready_event, RecordReady());
  result_.report.timings.Add("copy_out", SecondsSince(t0));
  return Status::Ok();
}

std::vector<RankBucket> DecodeRun::DecodedBuckets() const {
  const std::string& model = job_.model->info().name;
  std::vector<RankBucket> out;
  if (job_.video) {
    const std::string bucket = HistoryBucket(model, job_.video->plan.shape_bucket);
    out.push_back({ctx_.global_rank, bucket});
    // The other ranks of its group that decoded tiles of it (padding ranks
    // without tiles ran nothing of it; after a fallback the report lists
    // this rank alone).
    if (result_.group) {
      for (const RankFigures& r : result_.group->ranks) {
        const int rank = static_cast<int>(r.rank);
        if (rank != ctx_.global_rank && r.tiles > 0) out.push_back({rank, bucket});
      }
    }
  }
  if (job_.audio) {
    out.push_back({ctx_.global_rank, HistoryBucket(model, job_.audio->plan.shape_bucket)});
  }
  return out;
}

void DecodeRun::Finish() {
  const double seconds = SecondsSince(start_);
  result_.report.timings.Add("decode", seconds);
  // Warm: every rank that ran part of this decode had decoded its shape
  // bucket before (an earlier request or the start-up warm-up).
  result_.warm = ctx_.history->RecordDecodes(DecodedBuckets());
  result_.peak_rss_bytes = PeakRssBytes();
  result_.peak_tensor_bytes = models::PeakTensorBytes();
  result_.memory_budget_bytes = models::TensorMemoryBudget();
  result_.host_copies = host_copies_.count;
  result_.host_copy_bytes = host_copies_.bytes;
  ReadDevicePeak();
  LogFinishedDecode(job_, result_, seconds, ctx_.history);
}

}  // namespace

Result<DecodeResult> RunDecode(const DecodeJob& job, const RankContext& ctx, RankWork* work) {
  // Made before the run and released after it (and its tensors) are gone:
  // whatever way the run ends, its device work has finished before the
  // caller can answer (rank_stream.h).
  RequestFence fence(*ctx.stream);
  Result<DecodeResult> result = [&] {
    DecodeRun run(job, ctx);
    return run.Run(work);
  }();
  return AfterFence(std::move(result), fence.Release());
}

}  // namespace vaed::engine
