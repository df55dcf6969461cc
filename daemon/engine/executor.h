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

  // Queues a job. kResourceExhausted when the queue holds queue_capacity
  // jobs; kCancelled after Stop().
  Status Submit(std::unique_ptr<DecodeJob> job);

  // Drops the queued (not yet running) jobs of a client that has gone away
  // (its replies would have nowhere to go); returns how many. The running
  // job, if it is that client's, finishes: decodes are not interruptible.
  size_t CancelClient(uint64_t client_id);

  // Answers every queued job with kCancelled, lets the running one finish,
  // joins the thread. Idempotent.
  void Stop();

  size_t queue_depth() const;

 private:
  Executor(const ExecutorOptions& options, zmq::context_t* context, std::string reply_endpoint);
  void Run();
  // Runs one job and fills `reply`.
  void Execute(const DecodeJob& job, v1::Reply* reply);
  Status DecodeInto(const DecodeJob& job, v1::DecodeReply* out);
  void SendReply(zmq::socket_t& socket, const DecodeJob& job, const v1::Reply& reply);

  const ExecutorOptions options_;
  zmq::context_t* const context_;
  const std::string reply_endpoint_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<DecodeJob>> queue_;  // guarded by mu_
  bool stopping_ = false;                          // guarded by mu_

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
