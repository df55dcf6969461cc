#include "daemon/engine/executor.h"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cstring>

#include "daemon/engine/memory_policy.h"
#include "daemon/engine/process_memory.h"
#include "daemon/models/postprocess.h"
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

void FillDecodeGeometry(const models::VaeModel& model, const models::DecodePlan& plan,
                        DType latent_dtype, const std::vector<int64_t>& latent_shape,
                        DType output_dtype, const std::vector<int64_t>& output_shape,
                        uint64_t output_bytes, v1::DecodeReply* out) {
  out->set_model(model.info().name);
  for (int64_t d : latent_shape) out->add_latent_shape(d);
  out->set_latent_dtype(ToProto(latent_dtype));
  for (int64_t d : output_shape) out->add_output_shape(d);
  out->set_output_dtype(ToProto(output_dtype));
  out->set_output_bytes(output_bytes);
  out->set_frames(static_cast<uint32_t>(plan.frames));
  out->set_height_px(static_cast<uint32_t>(plan.height_px));
  out->set_width_px(static_cast<uint32_t>(plan.width_px));
  out->set_compute_dtype(model.info().compute_dtype);
  out->set_demo_weights(model.info().demo_weights);
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
    if (stopping_) return Cancelled("the daemon is shutting down");
    if (queue_.size() >= options_.queue_capacity) {
      return ResourceExhausted("decode queue is full (" + std::to_string(queue_.size()) +
                               " waiting, executor.queue_capacity = " +
                               std::to_string(options_.queue_capacity) + "); retry later");
    }
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return Status::Ok();
}

void Executor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t Executor::CancelClient(uint64_t client_id) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t before = queue_.size();
  std::erase_if(queue_, [&](const std::unique_ptr<DecodeJob>& j) { return j->client_id == client_id; });
  return before - queue_.size();
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
        while (!queue_.empty()) {
          std::unique_ptr<DecodeJob> cancelled = std::move(queue_.front());
          queue_.pop_front();
          v1::Reply reply;
          reply.set_request_id(cancelled->request_id);
          *reply.mutable_error() = ToProtoError(Cancelled("the daemon is shutting down"));
          SendReply(replies, *cancelled, reply);
        }
        break;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    v1::Reply reply;
    reply.set_request_id(job->request_id);
    Execute(*job, &reply);
    SendReply(replies, *job, reply);
    job.reset();
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

void Executor::Execute(const DecodeJob& job, v1::Reply* reply) {
  v1::DecodeReply decoded;
  Status s = DecodeInto(job, &decoded);
  if (s.ok()) {
    *reply->mutable_decode() = std::move(decoded);
    return;
  }
  spdlog::warn("decode request {} of client {} failed: {}", job.request_id, job.client_id,
               s.ToString());
  *reply->mutable_error() = ToProtoError(s);
}

Status Executor::DecodeInto(const DecodeJob& job, v1::DecodeReply* out) {
  const auto t_start = SteadyClock::now();
  ResetPeakRss();
  models::DecodeReport report;
  models::ComponentTimings& timings = report.timings;
  timings.Add("queue_wait", std::chrono::duration<double>(t_start - job.received).count());
  const models::ModelInfo& info = job.model->info();

  // Copy in. The latent is copied out of client memory before use so a
  // client writing or shrinking its segment cannot change or crash a decode
  // halfway (DESIGN.md §2.3).
  auto t0 = SteadyClock::now();
  VAED_ASSIGN_OR_RETURN(
      torch::Tensor latent, RunTorch("allocating latent", [&]() -> Result<torch::Tensor> {
        return torch::empty(job.latent.shape, torch::TensorOptions().dtype(torch::kFloat32));
      }));
  VAED_RETURN_IF_ERROR(GuardedCopy(latent.data_ptr(),
                                   job.latent_region->data() + job.latent.offset,
                                   job.latent.size, "reading latent from region '" +
                                                        job.latent_region->name() + "'"));
  timings.Add("copy_in", SecondsSince(t0));

  // Non-finite latents are reported, never silently decoded.
  VAED_ASSIGN_OR_RETURN(
      int64_t nonfinite, RunTorch("checking latent", [&]() -> Result<int64_t> {
        return (~torch::isfinite(latent)).sum().item<int64_t>();
      }));
  if (nonfinite > 0) {
    return InvalidArgument("latent contains " + std::to_string(nonfinite) +
                           " non-finite values (NaN or Inf) out of " +
                           std::to_string(latent.numel()) + "; refusing to decode");
  }

  const std::string bucket = info.name + "/" + job.plan.shape_bucket;
  const bool warm = warm_buckets_.count(bucket) > 0;

  VAED_ASSIGN_OR_RETURN(torch::Tensor raw, job.model->Decode(latent, job.settings, &report));

  t0 = SteadyClock::now();
  VAED_ASSIGN_OR_RETURN(
      int64_t nonfinite_out, RunTorch("checking output", [&]() -> Result<int64_t> {
        return (~torch::isfinite(raw)).sum().item<int64_t>();
      }));
  VAED_ASSIGN_OR_RETURN(torch::Tensor formatted, FormatOutput(*job.model, raw, job.format));
  timings.Add("postprocess", SecondsSince(t0));
  const uint64_t bytes = static_cast<uint64_t>(formatted.numel()) * formatted.element_size();
  if (bytes != job.output.size) {
    return Internal("decoded output has " + std::to_string(bytes) + " bytes but the plan said " +
                    std::to_string(job.output.size));
  }

  t0 = SteadyClock::now();
  VAED_RETURN_IF_ERROR(GuardedCopy(job.output_region->data() + job.output.offset,
                                   formatted.data_ptr(), bytes,
                                   "writing output to region '" + job.output_region->name() +
                                       "'"));
  timings.Add("copy_out", SecondsSince(t0));
  timings.Add("decode", SecondsSince(t_start));
  warm_buckets_.insert(bucket);

  FillDecodeGeometry(*job.model, job.plan, job.latent.dtype, job.latent.shape, job.output.dtype,
                     job.output.shape, bytes, out);
  out->set_warm(warm);
  out->set_nonfinite_outputs(static_cast<uint64_t>(nonfinite_out));
  out->set_peak_rss_bytes(PeakRssBytes());
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
  }
  for (const auto& [component, seconds] : timings.entries()) {
    v1::Timing* t = out->add_timings();
    t->set_component(component);
    t->set_seconds(seconds);
  }
  std::string tiling_note;
  if (tiling.tiled) {
    tiling_note = " tiles " + std::to_string(tiling.tile_rows) + "x" +
                  std::to_string(tiling.tile_cols) + " windows " +
                  std::to_string(tiling.windows) + " calls " +
                  std::to_string(tiling.decoder_calls) + " (" + tiling.stack_decision + ")";
  }
  spdlog::info("decode: request {} client {} model {} latent {} -> {}x{}x{} {} {} in {:.3f} s{}{}",
               job.request_id, job.client_id, info.name, ShapeToString(job.latent.shape),
               job.plan.frames, job.plan.height_px, job.plan.width_px, info.compute_dtype,
               warm ? "warm" : "cold", SecondsSince(t_start), tiling_note,
               info.demo_weights ? " [DEMO weights]" : "");
  return Status::Ok();
}

}  // namespace vaed::engine
