#include "daemon/engine/executor.h"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "daemon/engine/memory_policy.h"
#include "daemon/engine/process_memory.h"
#include "daemon/models/postprocess.h"
#include "daemon/models/tensor_memory.h"
#include "daemon/models/torch_status.h"
#include "vaed/guarded_copy.h"
#include "vaed/wire.h"
#include "vaed/zmq_status.h"

namespace vaed::engine {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Runs LibTorch code at the adapter edge: any exception becomes a Status.
template <typename Fn>
auto RunTorch(std::string_view context, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (...) {
    return models::CurrentTorchErrorStatus(context);
  }
}

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// The raw decoder output bytes in the layout the request asked for.
Result<torch::Tensor> FormatOutput(const models::VaeModel& model, const torch::Tensor& raw,
                                   v1::OutputFormat format) {
  if (format == v1::OUTPUT_FORMAT_FLOAT32_NCHW) {
    return RunTorch("formatting output", [&]() -> Result<torch::Tensor> {
      return raw.to(torch::kFloat32).contiguous();
    });
  }
  VAED_ASSIGN_OR_RETURN(torch::Tensor unit, model.ToUnitRange(raw));
  if (format == v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT) {
    return RunTorch("formatting output", [&]() -> Result<torch::Tensor> {
      return unit.to(torch::kFloat32).contiguous();
    });
  }
  return models::ToUint8Nhwc(unit);
}

}  // namespace

void FillDecodeGeometry(const models::VaeModel& model, const std::optional<VideoPart>& video,
                        const std::optional<AudioPart>& audio, const RequestFacts& av,
                        v1::DecodeReply* out) {
  out->set_model(model.info().name);
  out->set_compute_dtype(model.info().compute_dtype);
  out->set_demo_weights(model.info().demo_weights);
  out->set_fps(av.fps);
  out->set_independent_lengths(av.independent_lengths);
  out->set_profile(av.profile);
  out->set_compile_decision(av.compile_decision);
  out->set_stack_decision(av.stack_decision);
  for (const std::string& k : av.output_changing) out->add_output_changing(k);
  out->set_expected_audio_latent_frames(
      static_cast<uint64_t>(std::max<int64_t>(0, av.expected_audio_latent_frames)));
  if (video) {
    for (int64_t d : video->latent.shape) out->add_latent_shape(d);
    out->set_latent_dtype(ToProto(video->latent.dtype));
    for (int64_t d : video->output.shape) out->add_output_shape(d);
    out->set_output_dtype(ToProto(video->output.dtype));
    out->set_output_bytes(video->output.size);
    out->set_frames(static_cast<uint32_t>(video->plan.frames));
    out->set_height_px(static_cast<uint32_t>(video->plan.height_px));
    out->set_width_px(static_cast<uint32_t>(video->plan.width_px));
    out->set_video_seconds(static_cast<double>(video->plan.frames) / av.fps);
  }
  if (audio) {
    v1::AudioInfo* a = out->mutable_audio();
    for (int64_t d : audio->latent.shape) a->add_latent_shape(d);
    for (int64_t d : audio->output.shape) a->add_output_shape(d);
    a->set_output_bytes(audio->output.size);
    a->set_channels(static_cast<uint32_t>(audio->plan.channels));
    a->set_latent_frames(static_cast<uint64_t>(audio->plan.latent_frames));
    a->set_samples(static_cast<uint64_t>(audio->plan.samples));
    a->set_sample_rate_hz(static_cast<uint32_t>(audio->plan.sample_rate_hz));
    a->set_seconds(static_cast<double>(audio->plan.samples) /
                   static_cast<double>(audio->plan.sample_rate_hz));
  }
}

Result<std::unique_ptr<Executor>> Executor::Create(const ExecutorOptions& options,
                                                   zmq::context_t* context,
                                                   std::string reply_endpoint) {
  if (options.intra_op_threads < 1) {
    return InvalidArgument("executor.intra_op_threads must be >= 1");
  }
  if (options.queue_capacity < 1) return InvalidArgument("executor.queue_capacity must be >= 1");
  std::unique_ptr<Executor> e(new Executor(options, context, std::move(reply_endpoint)));
  e->thread_ = std::thread([raw = e.get()] { raw->Run(); });
  return e;
}

Executor::Executor(const ExecutorOptions& options, zmq::context_t* context,
                   std::string reply_endpoint)
    : options_(options), context_(context), reply_endpoint_(std::move(reply_endpoint)) {}

Executor::~Executor() { Stop(); }

Status Executor::Submit(std::unique_ptr<DecodeJob> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fatal_error_.empty()) {
      return Unavailable("the daemon hit a sticky device error and is restarting (" +
                         fatal_error_ + "); retry once it is back");
    }
    if (stopping_) return Cancelled("the daemon is shutting down");
    if (queue_.size() >= options_.queue_capacity) {
      const uint32_t wait = EstimatedWaitMsLocked();
      return Busy("decode queue is full (" + std::to_string(queue_.size()) +
                      " waiting, executor.queue_capacity = " +
                      std::to_string(options_.queue_capacity) + "); retry after " +
                      std::to_string(wait) + " ms",
                  wait);
    }
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return Status::Ok();
}

uint32_t Executor::EstimatedWaitMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return EstimatedWaitMsLocked();
}

uint32_t Executor::EstimatedWaitMsLocked() const {
  const double ms = 1000.0 * mean_decode_seconds_ * static_cast<double>(queue_.size() + 1);
  return static_cast<uint32_t>(std::clamp(ms, 50.0, 3600.0 * 1000.0));
}

std::string Executor::fatal_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fatal_error_;
}

void Executor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t Executor::CancelClient(uint64_t client_id, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  // Queued jobs stay queued: the executor thread answers them with `why`
  // without decoding, so every request still gets exactly one reply.
  for (const std::unique_ptr<DecodeJob>& j : queue_) {
    if (j->client_id == client_id) {
      j->cancel->Cancel(why);
      ++n;
    }
  }
  if (running_cancel_ != nullptr && running_client_ == client_id) {
    running_cancel_->Cancel(why);
    ++n;
  }
  return n;
}

size_t Executor::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void Executor::Run() {
  // OpenMP thread counts are per calling thread: set them here, on the
  // thread that runs the models.
  at::set_num_threads(options_.intra_op_threads);
  zmq::socket_t replies;
  try {
    replies = zmq::socket_t(*context_, zmq::socket_type::push);
    replies.set(zmq::sockopt::linger, 0);
    replies.connect(reply_endpoint_);
  } catch (const zmq::error_t& e) {
    // Cannot happen with a live context; without a reply path the executor
    // could answer nothing, so it refuses work instead of hanging clients.
    spdlog::critical("{}", ZmqErrorStatus(e, "executor reply socket").ToString());
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
    return;
  }
  spdlog::info("executor: started with {} intra-op threads, queue capacity {}",
               at::get_num_threads(), options_.queue_capacity);

  for (;;) {
    std::unique_ptr<DecodeJob> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) {
        // Queued work is answered, not dropped: nothing a client sent is
        // lost silently.
        const Status why =
            fatal_error_.empty()
                ? Cancelled("the daemon is shutting down")
                : Unavailable("the daemon hit a sticky device error and is restarting (" +
                              fatal_error_ + "); retry once it is back");
        while (!queue_.empty()) {
          std::unique_ptr<DecodeJob> cancelled = std::move(queue_.front());
          queue_.pop_front();
          v1::Reply reply;
          reply.set_request_id(cancelled->request_id);
          *reply.mutable_error() = ToProtoError(why);
          SendReply(replies, *cancelled, reply);
        }
        break;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      running_client_ = job->client_id;
      running_cancel_ = job->cancel;
    }
    v1::Reply reply;
    reply.set_request_id(job->request_id);
    const auto t0 = SteadyClock::now();
    const bool decoded = Execute(*job, &reply);
    const double seconds = SecondsSince(t0);
    bool fatal = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_client_ = 0;
      running_cancel_.reset();
      // Moving average over decodes that ran (not instant rejections).
      if (decoded) {
        mean_decode_seconds_ = mean_decode_seconds_ == 0.0
                                   ? seconds
                                   : 0.8 * mean_decode_seconds_ + 0.2 * seconds;
      }
      if (reply.has_error() && models::IsStickyDeviceError(reply.error().message())) {
        fatal_error_ = reply.error().message();
        stopping_ = true;  // answer the queue below and take nothing more
        fatal = true;
      }
    }
    // After the health flag: whoever sees this reply sees the daemon
    // unhealthy too.
    SendReply(replies, *job, reply);
    job.reset();
    if (fatal) {
      spdlog::critical("executor: sticky device error; the daemon must restart: {}",
                       fatal_error());
      continue;  // the stopping branch answers the queue
    }
    // Bound what the memory policy retains between requests
    // (memory_policy.h).
    if (ReleaseFreedMemoryAbove(options_.retained_heap_mib << 20)) {
      spdlog::debug("executor: heap above {} MiB after a request; returned its free part",
                    options_.retained_heap_mib);
    }
  }
  spdlog::info("executor: stopped");
}

void Executor::SendReply(zmq::socket_t& socket, const DecodeJob& job, const v1::Reply& reply) {
  std::string bytes;
  reply.SerializeToString(&bytes);
  uint64_t client_id = job.client_id;
  // No exception leaves the executor thread: a failed hand-off is logged
  // (it only happens when the context is being torn down).
  try {
    socket.send(zmq::buffer(job.routing_id), zmq::send_flags::sndmore);
    socket.send(zmq::buffer(&client_id, sizeof(client_id)), zmq::send_flags::sndmore);
    socket.send(zmq::buffer(bytes), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    spdlog::error("{}", ZmqErrorStatus(e, "handing decode reply " +
                                              std::to_string(job.request_id) +
                                              " to the control loop")
                            .ToString());
  }
}

bool Executor::Execute(const DecodeJob& job, v1::Reply* reply) {
  // A job cancelled or past its deadline while queued never starts.
  if (Status s = job.cancel->Check("while queued (the decode never started)"); !s.ok()) {
    spdlog::info("decode request {} of client {} not started: {}", job.request_id,
                 job.client_id, s.ToString());
    *reply->mutable_error() = ToProtoError(s);
    return false;
  }
  v1::DecodeReply decoded;
  Status s = DecodeInto(job, &decoded);
  if (s.ok()) {
    *reply->mutable_decode() = std::move(decoded);
    return true;
  }
  spdlog::warn("decode request {} of client {} failed: {}", job.request_id, job.client_id,
               s.ToString());
  *reply->mutable_error() = ToProtoError(s);
  return true;
}

namespace {

// Copies a latent out of client memory (guarded) into a new float32 tensor.
// The copy protects a decode from a client that writes or shrinks its
// segment halfway (DESIGN.md §2.3).
Result<torch::Tensor> CopyLatentIn(const TensorRef& ref, const HostRegion& region,
                                   const std::string& field) {
  VAED_ASSIGN_OR_RETURN(
      torch::Tensor t, RunTorch("allocating " + field, [&]() -> Result<torch::Tensor> {
        return torch::empty(ref.shape, torch::TensorOptions().dtype(torch::kFloat32));
      }));
  VAED_RETURN_IF_ERROR(GuardedCopy(t.data_ptr(), region.data() + ref.offset, ref.size,
                                   "reading " + field + " from region '" + region.name() + "'"));
  return t;
}

// Non-finite latents are reported, never silently decoded.
Status CheckLatentFinite(const torch::Tensor& latent, const std::string& field) {
  VAED_ASSIGN_OR_RETURN(models::OutputStats stats, models::SummarizeValues(latent, 0));
  if (stats.nonfinite > 0) {
    return InvalidArgument(field + " contains " + std::to_string(stats.nonfinite) +
                           " non-finite values (NaN or Inf) out of " +
                           std::to_string(stats.values) + "; refusing to decode");
  }
  return Status::Ok();
}

Status CopyOut(const torch::Tensor& formatted, const TensorRef& ref, const HostRegion& region,
               const std::string& field) {
  const uint64_t bytes = static_cast<uint64_t>(formatted.numel()) * formatted.element_size();
  if (bytes != ref.size) {
    return Internal("decoded " + field + " has " + std::to_string(bytes) +
                    " bytes but the plan said " + std::to_string(ref.size));
  }
  return GuardedCopy(region.data() + ref.offset, formatted.data_ptr(), bytes,
                     "writing " + field + " to region '" + region.name() + "'");
}

void FillSanity(const models::OutputStats& stats, v1::OutputSanity* out) {
  out->set_nonfinite(static_cast<uint64_t>(stats.nonfinite));
  out->set_constant(stats.constant);
  out->set_rms(stats.rms);
  out->set_peak_abs(stats.peak_abs);
  out->set_clipped_fraction(stats.clipped_fraction);
}

}  // namespace

Status Executor::DecodeInto(const DecodeJob& job, v1::DecodeReply* out) {
  const auto t_start = SteadyClock::now();
  ResetPeakRss();
  models::ResetPeakTensorBytes();
  models::DecodeReport report;
  models::ComponentTimings& timings = report.timings;
  timings.Add("queue_wait", std::chrono::duration<double>(t_start - job.received).count());
  const models::ModelInfo& info = job.model->info();

  // Copy in, then refuse non-finite latents before any decode work.
  auto t0 = SteadyClock::now();
  torch::Tensor latent, audio_latent;
  if (job.video) {
    VAED_ASSIGN_OR_RETURN(latent, CopyLatentIn(job.video->latent, *job.video->latent_region,
                                               "latent"));
  }
  if (job.audio) {
    VAED_ASSIGN_OR_RETURN(audio_latent, CopyLatentIn(job.audio->latent,
                                                     *job.audio->latent_region, "audio_latent"));
  }
  timings.Add("copy_in", SecondsSince(t0));
  if (job.video) VAED_RETURN_IF_ERROR(CheckLatentFinite(latent, "latent"));
  if (job.audio) VAED_RETURN_IF_ERROR(CheckLatentFinite(audio_latent, "audio_latent"));

  std::vector<std::string> buckets;
  if (job.video) buckets.push_back(info.name + "/" + job.video->plan.shape_bucket);
  if (job.audio) buckets.push_back(info.name + "/" + job.audio->plan.shape_bucket);
  bool warm = true;
  for (const std::string& b : buckets) warm = warm && warm_buckets_.count(b) > 0;

  if (job.settings.faults.device_fatal > 0) {
    // What CUDA reports for a kernel that corrupted its context (tests).
    return Internal("model '" + info.name + "': decode: CUDA error: an illegal memory access "
                    "was encountered (injected fault device_fatal)");
  }

  // Decode: video first, then audio (the official pipeline's order).
  models::DecodeSettings settings = job.settings;
  settings.cancel = job.cancel.get();
  torch::Tensor raw, wave;
  if (job.video) {
    VAED_ASSIGN_OR_RETURN(raw, job.model->Decode(latent, settings, &report));
    latent = torch::Tensor();
  }
  if (job.audio) {
    VAED_RETURN_IF_ERROR(job.cancel->Check("before the audio decode (video done)"));
    VAED_ASSIGN_OR_RETURN(wave, job.model->DecodeAudio(audio_latent, &report));
    audio_latent = torch::Tensor();
  }

  // Sanity checks (reported, never fatal) and output formatting.
  t0 = SteadyClock::now();
  models::OutputStats video_stats, audio_stats;
  torch::Tensor formatted;
  if (job.video) {
    VAED_ASSIGN_OR_RETURN(video_stats, models::SummarizeValues(raw, 0));
    VAED_ASSIGN_OR_RETURN(formatted, FormatOutput(*job.model, raw, job.video->format));
    raw = torch::Tensor();
  }
  if (job.audio) {
    VAED_ASSIGN_OR_RETURN(audio_stats,
                          models::SummarizeValues(wave, job.audio->plan.clamp_level));
    VAED_ASSIGN_OR_RETURN(wave, RunTorch("formatting audio", [&]() -> Result<torch::Tensor> {
                            return wave.to(torch::kFloat32).contiguous();
                          }));
  }
  timings.Add("postprocess", SecondsSince(t0));

  VAED_RETURN_IF_ERROR(job.cancel->Check("before writing the output (decode done)"));
  t0 = SteadyClock::now();
  if (job.video) {
    VAED_RETURN_IF_ERROR(
        CopyOut(formatted, job.video->output, *job.video->output_region, "output"));
  }
  if (job.audio) {
    VAED_RETURN_IF_ERROR(
        CopyOut(wave, job.audio->output, *job.audio->output_region, "audio_output"));
  }
  timings.Add("copy_out", SecondsSince(t0));
  timings.Add("decode", SecondsSince(t_start));
  for (const std::string& b : buckets) warm_buckets_.insert(b);

  FillDecodeGeometry(*job.model, job.video, job.audio, job.av, out);
  out->set_warm(warm);
  out->set_peak_rss_bytes(PeakRssBytes());
  out->set_peak_tensor_bytes(models::PeakTensorBytes());
  out->set_memory_budget_bytes(models::TensorMemoryBudget());
  if (job.video) {
    out->set_nonfinite_outputs(static_cast<uint64_t>(video_stats.nonfinite));
    FillSanity(video_stats, out->mutable_video_sanity());
  }
  if (job.audio) FillSanity(audio_stats, out->mutable_audio()->mutable_sanity());
  const models::TilingReport& tiling = report.tiling;
  if (tiling.tiled) {
    v1::TilingInfo* t = out->mutable_tiling();
    t->set_tile_rows(static_cast<uint32_t>(tiling.tile_rows));
    t->set_tile_cols(static_cast<uint32_t>(tiling.tile_cols));
    t->set_windows(static_cast<uint32_t>(tiling.windows));
    t->set_decoder_calls(static_cast<uint32_t>(tiling.decoder_calls));
    t->set_max_tiles_per_call(static_cast<uint32_t>(tiling.max_tiles_per_call));
    t->set_stacked(tiling.stacked);
    t->set_stack_decision(tiling.stack_decision);
    t->set_planned_tiles_per_call(static_cast<uint32_t>(tiling.planned_tiles_per_call));
    t->set_final_tiles_per_call(static_cast<uint32_t>(tiling.final_tiles_per_call));
    for (const std::string& f : tiling.fallbacks) t->add_fallbacks(f);
    t->set_plan_decision(tiling.plan_decision);
    t->set_planned_calls(static_cast<uint32_t>(tiling.planned_calls));
    t->set_eager_calls(static_cast<uint32_t>(tiling.eager_calls));
    t->set_estimated_peak_bytes(tiling.estimated_peak_bytes);
  }
  for (const auto& [component, seconds] : timings.entries()) {
    v1::Timing* t = out->add_timings();
    t->set_component(component);
    t->set_seconds(seconds);
  }

  if (job.video) {
    // Each decision once per shape bucket: the model's own (tiled models)
    // or the one made without it (auto on an untiled model).
    const std::string& decision = tiling.tiled ? tiling.stack_decision : job.av.stack_decision;
    // Keyed by the mode asked (off/on/auto) and what was decided (stacked
    // or not, tiles per call, plans or not), not by the reason's figures
    // (the headroom changes every time).
    const std::string key = buckets.front() + " " + decision.substr(0, decision.find(':')) +
                            (tiling.stacked ? " stacked " : " sequential ") +
                            std::to_string(tiling.max_tiles_per_call) +
                            (tiling.planned_calls > 0 ? " planned" : " eager") +
                            (tiling.tiled ? "" : " " + decision);
    if (logged_decisions_.size() >= 4096) logged_decisions_.clear();  // bounded memory
    if (!decision.empty() && logged_decisions_.insert(key).second) {
      spdlog::info("decode: model {} bucket {} profile {}: tiles {} ({}); compile {}; {}",
                   info.name, job.video->plan.shape_bucket, job.av.profile,
                   tiling.stacked ? "stacked" : "sequential", decision, job.av.compile_decision,
                   tiling.plan_decision.empty() ? "no plans" : tiling.plan_decision);
    }
  }

  std::string what;
  if (job.video) {
    what = "latent " + ShapeToString(job.video->latent.shape) + " -> " +
           std::to_string(job.video->plan.frames) + "x" +
           std::to_string(job.video->plan.height_px) + "x" +
           std::to_string(job.video->plan.width_px);
    if (tiling.tiled) {
      what += " tiles " + std::to_string(tiling.tile_rows) + "x" +
              std::to_string(tiling.tile_cols) + " windows " + std::to_string(tiling.windows) +
              " calls " + std::to_string(tiling.decoder_calls) + " (" + tiling.stack_decision +
              ")";
    }
  }
  if (job.audio) {
    what += std::string(what.empty() ? "" : "; ") + "audio_latent " +
            ShapeToString(job.audio->latent.shape) + " -> " +
            std::to_string(job.audio->plan.channels) + "x" +
            std::to_string(job.audio->plan.samples) + " samples";
  }
  spdlog::info("decode: request {} client {} model {} {} {} {} in {:.3f} s{}", job.request_id,
               job.client_id, info.name, what, info.compute_dtype, warm ? "warm" : "cold",
               SecondsSince(t_start), info.demo_weights ? " [DEMO weights]" : "");
  for (const std::string& f : tiling.fallbacks) {
    spdlog::warn("decode: request {} client {}: fallback: {}", job.request_id, job.client_id, f);
  }
  if (video_stats.nonfinite > 0 || video_stats.constant) {
    spdlog::warn("decode: request {}: video output has {} non-finite values{}", job.request_id,
                 video_stats.nonfinite, video_stats.constant ? " and is constant" : "");
  }
  if (audio_stats.nonfinite > 0 || audio_stats.constant) {
    spdlog::warn("decode: request {}: audio output has {} non-finite values{}", job.request_id,
                 audio_stats.nonfinite, audio_stats.constant ? " and is constant (silent or "
                                                               "railed)" : "");
  }
  return Status::Ok();
}

}  // namespace vaed::engine
