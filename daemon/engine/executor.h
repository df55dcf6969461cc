// The executor: one thread that owns the decode work. It takes validated
// decode jobs from a bounded queue, copies the latent out of the client's
// region (guarded), decodes, post-processes, copies the output into the
// client's region (guarded) and hands the serialized reply back to the
// control loop over an inproc ZeroMQ socket.
//
// The control loop validates everything it can before Submit() (shapes,
// regions, byte ranges), so a job fails here only on what cannot be known
// earlier: a client segment that faults, non-finite latents, a LibTorch
// error, or shutdown.
//
// Thread-safety: Submit(), queue_depth() and Stop() may be called from any
// thread. The models are used only on the executor thread (Plan() is const
// and may be called by the control loop concurrently).
#ifndef VAED_DAEMON_ENGINE_EXECUTOR_H_
#define VAED_DAEMON_ENGINE_EXECUTOR_H_

#include <zmq.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/models/cancel.h"
#include "daemon/models/model_registry.h"
#include "daemon/models/vae_model.h"
#include "daemon/server/config.h"
#include "vaed/host_region.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::engine {

using server::ExecutorOptions;

// The video (or image) part of a request.
struct VideoPart {
  models::DecodePlan plan;
  v1::OutputFormat format = v1::OUTPUT_FORMAT_UINT8_NHWC;
  TensorRef latent;  // checked against latent_region's bounds
  TensorRef output;  // checked against output_region's bounds (plan-only: the expected layout)
  std::shared_ptr<HostRegion> latent_region;  // null in plan-only requests
  std::shared_ptr<HostRegion> output_region;
};

// The audio part of a request: latent [channels, 32, T] in, float32
// [channels, samples] out.
struct AudioPart {
  models::AudioPlan plan;
  TensorRef latent;
  TensorRef output;
  std::shared_ptr<HostRegion> latent_region;  // null in plan-only requests
  std::shared_ptr<HostRegion> output_region;
};

// Request-wide facts the reply states: durations, the A/V length rule as
// applied (AvSync), and the resolved profile and compile decision.
struct RequestFacts {
  double fps = models::kDefaultFps;        // video frames per second used
  int64_t expected_audio_latent_frames = 0;  // 0: no video or no audio decoder
  bool independent_lengths = false;
  std::string profile;            // e.g. "safe"
  std::string compile_decision;   // e.g. "off (profile safe)"
  std::string stack_decision;     // ResolvedOptions::stack_decision
  std::vector<std::string> output_changing;  // ResolvedOptions::output_changing
};

// One accepted Decode request: a video part, an audio part, or both.
struct DecodeJob {
  std::string routing_id;  // ZeroMQ identity to reply to
  uint64_t client_id = 0;
  uint64_t request_id = 0;
  models::VaeModel* model = nullptr;
  models::DecodeSettings settings;  // validated against the model's capabilities
  std::optional<VideoPart> video;
  std::optional<AudioPart> audio;
  RequestFacts av;
  std::chrono::steady_clock::time_point received;
  // Deadline (DecodeOptions.deadline_ms, from `received`) and cancellation
  // (client gone or quarantined, shutdown); never null for queued jobs.
  std::shared_ptr<models::CancelToken> cancel = std::make_shared<models::CancelToken>();
};

// Fills the part of a DecodeReply that the plans decide: model, latent and
// output shapes/dtypes/bytes, pixel frames and size, fps and durations, the
// audio geometry (channels, samples, sample rate, seconds), the A/V rule's
// expected audio length, compute dtype and the demo flag. Used for
// plan-only replies and for finished decodes, so both always report the
// same fields.
void FillDecodeGeometry(const models::VaeModel& model, const std::optional<VideoPart>& video,
                        const std::optional<AudioPart>& audio, const RequestFacts& av,
                        v1::DecodeReply* out);

// Completed replies arrive on `reply_endpoint` (inproc PULL bound by the
// control loop) as three frames: routing id, client id (8 bytes, host
// order), serialized vaed.v1.Reply.
class Executor {
 public:
  static Result<std::unique_ptr<Executor>> Create(const ExecutorOptions& options,
                                                  zmq::context_t* context,
                                                  std::string reply_endpoint);
  ~Executor();  // Stop()s
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues a job. kBusy with a retry-after (the queue's expected drain
  // time) when the queue holds queue_capacity jobs; kCancelled after Stop();
  // kUnavailable after a sticky device error.
  Status Submit(std::unique_ptr<DecodeJob> job);

  // Cancels every job of `client_id` with `why`: queued ones are answered
  // with it without decoding, the running one stops before its next tile
  // call or frame batch (cancel.h). Returns how many jobs were cancelled.
  size_t CancelClient(uint64_t client_id, const Status& why);

  // Answers every queued job with kCancelled, lets the running one finish,
  // joins the thread. Idempotent.
  void Stop();

  size_t queue_depth() const;

  // Milliseconds until a job submitted now would likely start: (queued + 1)
  // x the moving average of recent decode times; at least 50 ms.
  uint32_t EstimatedWaitMs() const;

  // Set once a decode failed with a sticky device error
  // (models::IsStickyDeviceError): the executor then refuses all work and
  // the daemon must exit so systemd restarts it. Empty while healthy.
  std::string fatal_error() const;

 private:
  Executor(const ExecutorOptions& options, zmq::context_t* context, std::string reply_endpoint);
  void Run();
  // Runs one job and fills `reply`; false when it was answered without
  // decoding (cancelled or past its deadline while queued).
  bool Execute(const DecodeJob& job, v1::Reply* reply);
  uint32_t EstimatedWaitMsLocked() const;  // mu_ held
  Status DecodeInto(const DecodeJob& job, v1::DecodeReply* out);
  void SendReply(zmq::socket_t& socket, const DecodeJob& job, const v1::Reply& reply);

  const ExecutorOptions options_;
  zmq::context_t* const context_;
  const std::string reply_endpoint_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<DecodeJob>> queue_;  // guarded by mu_
  bool stopping_ = false;                          // guarded by mu_
  // The running job's client and token, so CancelClient() reaches it.
  uint64_t running_client_ = 0;                            // guarded by mu_
  std::shared_ptr<models::CancelToken> running_cancel_;    // guarded by mu_
  std::string fatal_error_;                                // guarded by mu_
  double mean_decode_seconds_ = 0.0;                       // guarded by mu_; moving average

  // Shape buckets decoded at least once (model name + bucket); executor
  // thread only.
  std::set<std::string> warm_buckets_;
  // (bucket, tile-scheduling decision) pairs already logged: each decision
  // is logged once per shape bucket, not per request.
  std::set<std::string> logged_decisions_;
  std::thread thread_;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_EXECUTOR_H_
