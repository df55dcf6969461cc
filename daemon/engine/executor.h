// The executor: the daemon's ranks and the decode work. It takes validated
// decode jobs from a bounded queue, copies the latent out of the client's
// region (guarded), decodes, post-processes, copies the output into the
// client's region (guarded) and hands the serialized reply back to the
// control loop over an inproc ZeroMQ socket.
//
// Ranks (issue 7): group.ranks local ranks, each a thread with its own copy
// of the models (one registry per rank) and its own communicators, one per
// VAE group it belongs to (daemon/parallel/group_layout.h). The head of the
// queue (FIFO) is given to the first group of its size (DecodeOptions.
// group_size or group.size, reduced by group.few_tiles) whose ranks are
// all idle; several requests run at once on disjoint groups. In a group of
// S > 1 the output rank copies the latent in and broadcasts it, every rank
// decodes its round-robin tiles (models/tile_group.h), rank 0 merges,
// post-processes and replies; a last gather collects each rank's figures
// for the reply (GroupReport). A failed collective aborts the group's
// communicators: the request is decoded again on the output rank alone
// (fallback, stated in the reply), the group is marked for a rebuild and
// rebuilt with generation + 1 as soon as its ranks are idle.
//
// Groups spanning daemons (group.store_address, world_nodes > 1): the
// daemon holding a group's first rank leads it and takes its requests. It
// announces each generation it builds ("<group>/latest") and each job
// ("<group>/gen<g>/job<n>") in the TCPStore; the other daemons' WatchStore
// threads poll for them and queue member runs on their ranks, ahead of
// their own queue. Such groups meet at their first request (no daemon
// waits for another at start-up) and are rebuilt by the next request after
// a failure. A member rank busy with its own daemon's request joins late;
// past group.collective_timeout_ms the leader falls back to decoding alone.
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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/engine/engine_options.h"
#include "daemon/models/cancel.h"
#include "daemon/models/model_registry.h"
#include "daemon/models/vae_model.h"
#include "daemon/parallel/communicator.h"
#include "daemon/parallel/group_layout.h"
#include "vaed/host_region.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::engine {

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
  // DecodeOptions.group_size (0 = group.size); validated as qualified.
  uint32_t requested_group_size = 0;
  // DecodeOptions.progress: send Progress messages (before the reply) after
  // each unit of work.
  bool progress = false;
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
  // `registries`: one per local rank (group.ranks of them), rank 0's first;
  // every registry holds the same models. Blocks until every rank built
  // its communicators (the rendezvous of each group). Errors:
  // kInvalidArgument for a bad group layout or registry count.
  static Result<std::unique_ptr<Executor>> Create(const ExecutorOptions& options,
                                                  const GroupOptions& group,
                                                  std::vector<models::ModelRegistry*> registries,
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
  // Decodes running now (jobs taken from the queue and not yet answered).
  size_t running() const;

  // Milliseconds until a job submitted now would likely start: (queued + 1)
  // x the moving average of recent decode times; at least 50 ms.
  uint32_t EstimatedWaitMs() const;

  // Set once a decode failed with a sticky device error
  // (models::IsStickyDeviceError): the executor then refuses all work and
  // the daemon must exit so systemd restarts it. Empty while healthy.
  std::string fatal_error() const;

  // Status: ranks and groups (state, generation, runs, failures).
  void FillGroups(v1::StatusReply* status) const;

 private:
  // One use of a group: a job (null for a rebuild only) on `spec` with
  // communicators of `generation`. Shared by the group's local rank threads.
  // On a node that does not lead the group (its output rank is on another
  // daemon) runs come from WatchStore: `member_job` = take part in the
  // leader's next job (announced through the store), else build only.
  struct GroupRun {
    std::unique_ptr<DecodeJob> job;
    const parallel::GroupSpec* spec = nullptr;
    uint64_t generation = 0;
    bool member_job = false;
  };
  struct GroupState {
    uint64_t generation = 0;
    bool busy = false;
    bool needs_rebuild = false;
    uint64_t runs = 0, failures = 0;
    std::string last_failure;
    double last_imbalance = 0.0;  // of its last run with figures from every rank
  };
  // A rank's communicator of one group. Groups spanning daemons keep the
  // store connection it was built through: the output rank announces each
  // job under "<group>/gen<g>/job<n>" (n = jobs_announced) for WatchStore
  // on the other nodes.
  struct CommEntry {
    std::unique_ptr<parallel::Communicator> comm;
    c10::intrusive_ptr<c10d::Store> store;
    int64_t jobs_announced = 0;
  };
  struct RankState {
    models::ModelRegistry* registry = nullptr;
    bool busy = false;                       // guarded by mu_
    // Work done since start-up (status: RankStatus); guarded by mu_.
    double busy_seconds = 0.0;               // model decode (tile work) seconds
    uint64_t tiles = 0;                      // tiles decoded (tiled models)
    double last_imbalance = 0.0;
    std::shared_ptr<GroupRun> task;          // guarded by mu_
    // By group name; this rank's thread only.
    std::map<std::string, CommEntry> comms;
    std::thread thread;
  };
  // Where a job runs: its group and this rank's communicator (null when
  // the group is this rank alone or its communicator could not be built).
  struct Placement {
    int local_rank = 0;
    const parallel::GroupSpec* spec = nullptr;
    uint64_t generation = 0;
    parallel::Communicator* comm = nullptr;
    CommEntry* entry = nullptr;  // comm's entry (for announcements)
  };

  Executor(const ExecutorOptions& options, const GroupOptions& group,
           parallel::GroupLayout layout, std::vector<models::ModelRegistry*> registries,
           zmq::context_t* context, std::string reply_endpoint);
  void RankLoop(int local_rank);
  // mu_ held: gives the head of the queue (or a pending rebuild) to idle
  // ranks; true when it assigned something.
  bool ScheduleLocked();
  // Runs a task on this rank: (re)builds the communicator, then decodes as
  // output rank (replies) or as member.
  void RunTask(int local_rank, const std::shared_ptr<GroupRun>& run, zmq::socket_t& replies);
  CommEntry* CommunicatorFor(int local_rank, const parallel::GroupSpec& spec,
                             uint64_t generation);
  // The output rank's first collectives of a job on a group: a header the
  // members wait for, the model name, then the latent. `latent` null = the
  // job will not run and the members stand down.
  void AnnounceJob(const Placement& where, const DecodeJob* job, const torch::Tensor* latent);
  // A group spanning daemons, through the store. Every node states its
  // group.ranks ("layout/node<k>") and reports a mismatch. The leader
  // (`leading`) watches for "<group>/rejoin" from a member daemon that
  // (re)started and then builds a new generation at the next request. A
  // member polls for the leader's generations and job announcements and
  // queues member runs; a generation it finds at start-up predates it, so
  // it asks for a new one instead of joining.
  void WatchStore(const parallel::GroupSpec* spec, bool leading);
  // Whether the group's ranks on this node are all idle (mu_ held).
  bool LocalRanksIdleLocked(const parallel::GroupSpec& spec) const;
  bool SpansNodes(const parallel::GroupSpec& spec) const;
  // Runs one job and fills `reply`; false when it was answered without
  // decoding (cancelled or past its deadline while queued).
  // `replies` carries the job's Progress messages (DecodeJob::progress).
  bool Execute(const DecodeJob& job, const Placement& where, zmq::socket_t& replies,
               v1::Reply* reply);
  uint32_t EstimatedWaitMsLocked() const;  // mu_ held
  Status DecodeInto(const DecodeJob& job, const Placement& where, zmq::socket_t& replies,
                    v1::DecodeReply* out);
  // A member rank's part of a job on a group; `job` is null when the
  // output rank is on another daemon (everything comes from AnnounceJob).
  void DecodeAsMember(int local_rank, const DecodeJob* job, const Placement& where);
  void SendReply(zmq::socket_t& socket, const DecodeJob& job, const v1::Reply& reply);
  // Adds a finished model decode on `local_rank` to its RankStatus figures
  // (tile-decode seconds, or the decode's wall time for untiled models).
  void CountRankWork(int local_rank, const models::DecodeReport& report, double started_unix,
                     double finished_unix);
  int GlobalRank(int local_rank) const { return layout_.GlobalRank(local_rank); }

  const ExecutorOptions options_;
  const GroupOptions group_options_;
  const parallel::GroupLayout layout_;
  zmq::context_t* const context_;
  const std::string reply_endpoint_;
  c10::intrusive_ptr<c10d::Store> store_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<DecodeJob>> queue_;  // guarded by mu_
  // Runs of groups led by other daemons (WatchStore), before the queue.
  std::deque<std::shared_ptr<GroupRun>> member_runs_;  // guarded by mu_
  std::vector<std::thread> watchers_;
  bool stopping_ = false;                          // guarded by mu_
  int ranks_ready_ = 0;                            // guarded by mu_ (communicators built)
  std::vector<RankState> ranks_;                   // size fixed at construction
  std::map<std::string, GroupState> groups_;       // guarded by mu_; by group name
  // Running jobs' clients and tokens, so CancelClient() reaches them.
  std::multimap<uint64_t, std::shared_ptr<models::CancelToken>> running_;  // guarded by mu_
  std::string fatal_error_;                                // guarded by mu_
  double mean_decode_seconds_ = 0.0;                       // guarded by mu_; moving average

  std::mutex report_mu_;  // the two sets below (output ranks run concurrently)
  // Shape buckets decoded at least once (model name + bucket).
  std::set<std::string> warm_buckets_;
  // (bucket, tile-scheduling decision) pairs already logged: each decision
  // is logged once per shape bucket, not per request.
  std::set<std::string> logged_decisions_;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_EXECUTOR_H_
