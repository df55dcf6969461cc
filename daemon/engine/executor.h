// The executor: the daemon's ranks and their threads. It takes validated
// decode jobs (decode_job.h) into a bounded FIFO queue, gives them to
// groups of idle ranks (scheduler.h), runs each on its group's output rank
// (decode_run.h) with the other ranks decoding their tiles (group_job.h),
// and hands every result to the server's ResultSink (result_sink.h). The
// engine speaks no wire format.
//
// Ranks: group.ranks local ranks, each a thread with its own copy
// of the models (one registry per rank) and its own communicators, one per
// VAE group it belongs to (rank_communicators.h). Several requests run at
// once on disjoint groups. A failed collective aborts the group's
// communicators: the request is decoded again on the output rank alone
// (stated in its result), and the group is rebuilt as generation + 1.
//
// Groups spanning daemons (group.store_address, world_nodes > 1): the
// daemon holding a group's first rank leads it and takes its requests; a
// store watcher per such group (store_watcher.h) runs the store protocol
// (group_store.h): the members follow the leader's generations and job
// announcements, and before each job the leader checks that the group's
// generation still holds every member daemon's current incarnation. Such
// groups meet at their first request; no daemon waits for another at
// start-up beyond one bounded attempt to reach the store.
//
// The handler validates everything it can before Submit() (shapes,
// regions, byte ranges), so a job fails here only on what cannot be known
// earlier: a client segment that faults, non-finite latents, a LibTorch
// error, cancellation or shutdown.
//
// Warm-up (warm_up.h): each rank decodes the configured warm shapes with
// its own models, on its own thread, before Create() returns (so before the
// daemon reports READY); a failed warm-up fails Create().
//
// Exceptions: none leaves a rank or watcher thread. LibTorch errors become
// a Status at the torch adapter (models/torch_status.h); anything else
// thrown while a rank runs a job is caught at the rank's loop, the job is
// answered with kInternal naming the exception, and the rank serves on (a
// member rank aborts its communicator so the output rank falls back at
// once).
//
// Thread-safety: every public method may be called from any thread. Each
// model instance is used by its rank's thread only (Plan() and info() are
// const and may be called by the handler concurrently).
#ifndef VAED_DAEMON_ENGINE_EXECUTOR_H_
#define VAED_DAEMON_ENGINE_EXECUTOR_H_

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/engine/cuda_devices.h"
#include "daemon/engine/decode_history.h"
#include "daemon/engine/decode_job.h"
#include "daemon/engine/engine_options.h"
#include "daemon/engine/rank_communicators.h"
#include "daemon/engine/rank_stream.h"
#include "daemon/engine/result_sink.h"
#include "daemon/engine/scheduler.h"
#include "daemon/engine/store_watcher.h"
#include "daemon/engine/warm_up.h"
#include "daemon/models/model_registry.h"
#include "daemon/parallel/group_layout.h"
#include "vaed/mutex.h"
#include "vaed/status.h"

namespace vaed::engine {

// The executor's ranks and VAE groups, for status.
struct ExecutorStatus {
  struct Group {
    std::string name;
    int size = 1;
    std::vector<int> ranks;  // global ranks
    uint64_t generation = 0;
    std::string state;       // "idle", "busy", "rebuilding"
    uint64_t runs = 0, failures = 0;
    std::string last_failure;
    double last_imbalance = 0;
  };
  struct Rank {
    int rank = 0;              // global rank
    double busy_seconds = 0;   // model decode (tile work) seconds since start-up
    uint64_t tiles = 0;        // tiles decoded since start-up
    double last_imbalance = 0;
    RankDevice device;          // cpu, or its CUDA device
    DeviceMemory device_memory;  // CUDA ranks: cudaMemGetInfo at the snapshot
  };
  int ranks = 0;  // local ranks
  std::vector<Group> groups;
  std::vector<Rank> rank_status;
};

// Makes the RankStream of local rank `local_rank` (tests: a double of the
// device), on that rank's thread.
using RankStreamFactory = std::function<Result<std::unique_ptr<RankStream>>(int local_rank)>;

class Executor {
 public:
  // `registries`: one per local rank (group.ranks of them), rank 0's first;
  // every registry holds the same models in the same order; they and
  // `sink` must outlive the executor. Blocks until every rank built the
  // communicators of its daemon's groups (their rendezvous) and ran
  // `warm_ups` (warm_up.h; all ranks at once), and every store watcher
  // made its first attempt to reach the store. Errors: kInvalidArgument
  // for bad executor options, group layout or registry count; kUnavailable
  // when node 0 cannot serve the TCPStore; a warm-up's error (the lowest
  // rank's that failed: WarmUpRank()). `rank_streams` (tests) makes each
  // rank's RankStream on its thread; by default a CUDA rank's is
  // RankStream::OnCudaDevice, a CPU rank's has no device. `rank_devices`:
  // each local rank's device (runtime_facts.h); empty = every rank on the
  // CPU.
  static Result<std::unique_ptr<Executor>> Create(const ExecutorOptions& options,
                                                  const GroupOptions& group,
                                                  std::vector<models::ModelRegistry*> registries,
                                                  ResultSink* sink,
                                                  std::vector<WarmUp> warm_ups = {},
                                                  RankStreamFactory rank_streams = nullptr,
                                                  std::vector<RankDevice> rank_devices = {});
  ~Executor();  // Stop()s
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues a job; on OK the sink will get exactly one OnFinished() for it.
  // Errors: kBusy with a retry-after (the queue's expected drain time) when
  // the queue holds executor.queue_capacity jobs; kCancelled after Stop();
  // kUnavailable after a sticky device error.
  Status Submit(std::shared_ptr<DecodeJob> job);

  // Cancels every job of `client_id` with `why`: queued ones are answered
  // with it without decoding, running ones stop before their next tile
  // call or frame batch (cancel.h). Returns how many jobs were cancelled.
  size_t CancelClient(uint64_t client_id, const Status& why);

  // Answers every queued job with kCancelled (or kUnavailable after a sticky
  // device error), lets the running ones finish, joins every thread.
  // Idempotent.
  void Stop();

  size_t queue_depth() const;
  size_t running() const;  // jobs given to ranks and not yet answered

  // Set once a decode failed with reason ErrorReason::kStickyDevice: the
  // executor then refuses all work and the daemon must exit so that systemd
  // restarts it. Empty while healthy.
  std::string fatal_error() const;

  ExecutorStatus Snapshot() const;

 private:
  // The figures the scheduler keeps (under mu_); Snapshot() adds devices.
  ExecutorStatus SnapshotOfScheduler() const VAED_EXCLUDES(mu_);
  class WatcherListener;
  struct Rank {
    models::ModelRegistry* registry = nullptr;
    std::vector<models::VaeModel*> models;  // by model index (config order)
    std::unique_ptr<RankCommunicators> comms;
    std::thread thread;
    // The rank's device work (rank_stream.h): CUDA ranks' is set up on the
    // rank's thread before its warm-up; CPU ranks' has no device. Used by
    // the rank's thread only.
    std::unique_ptr<RankStream> stream = std::make_unique<RankStream>();
  };

  Executor(const ExecutorOptions& options, const GroupOptions& group,
           parallel::GroupLayout layout, ResultSink* sink, std::vector<WarmUp> warm_ups,
           RankStreamFactory rank_streams, std::vector<RankDevice> rank_devices);
  Status Start(std::vector<models::ModelRegistry*> registries);
  void StartWatchers();

  // The rank thread's body; never throws.
  void RankLoop(int local_rank);
  void BuildLocalCommunicators(int local_rank);
  // The rank's RankStream (rank_stream.h; a CUDA rank's device and stream),
  // on its thread before anything runs there; a failure goes to
  // warm_up_failures_ (start-up stops, naming the rank and its device).
  void SetUpRankDevice(int local_rank);
  // The rank's warm-up (warm_up.h); a failure goes to warm_up_failures_.
  void RunWarmUp(int local_rank);
  // Waits for this rank's next task; null when stopping (after answering
  // the queue).
  std::shared_ptr<GroupRun> NextTask(int local_rank);
  void AnswerQueueOnStop();
  // One task: (re)build the communicator, then run as output rank, as
  // member, or only build.
  void RunTask(int local_rank, const GroupRun& run);
  void RunAsOutputRank(int local_rank, const GroupRun& run, GroupChannel* channel,
                       const std::string& unavailable);
  Result<DecodeResult> Execute(int local_rank, const GroupRun& run, GroupChannel* channel,
                               const std::string& unavailable, bool* decoded);
  // A member's part of a job, fenced (rank_stream.h); a sticky device
  // error in it makes the daemon unhealthy like the output rank's.
  void RunAsMember(int local_rank, const parallel::GroupSpec& spec, const DecodeJob* job,
                   GroupChannel& channel);
  // RunAsMember's work: receive the job, decode its tiles, send them.
  // Returns whether it took part (false: stood down) or the first error
  // (the communicator is aborted on it).
  Result<bool> RunMemberPart(int local_rank, const parallel::GroupSpec& spec,
                             const DecodeJob* job, GroupChannel& channel);
  // A communicator of `spec` that could not be built (or met) on
  // `local_rank`: recorded for the scheduler; a sticky device error makes
  // the daemon unhealthy.
  void NoteBuildFailure(int local_rank, const parallel::GroupSpec& spec, const Status& why,
                        bool was_build);
  // Marks the executor unhealthy after a sticky device error on any of its
  // ranks (`what` names it): fatal_error() set, the queue answered, no
  // more work taken. The first error wins.
  void NoteStickyDeviceError(const std::string& what);
  void NoteGroupFailure(const GroupRun& run, GroupChannel* channel);
  void Answer(const std::shared_ptr<DecodeJob>& job, Result<DecodeResult> result);
  // Milliseconds until a job submitted now would likely start (the retry
  // hint of a Busy refusal): (queued + 1) x the moving average of recent
  // decode times, clamped to [50 ms, 1 h].
  uint32_t EstimatedWaitMsLocked() const VAED_REQUIRES(mu_);
  int GlobalRank(int local_rank) const { return layout_.GlobalRank(local_rank); }

  const ExecutorOptions options_;
  const GroupOptions group_options_;
  const std::vector<RankDevice> rank_devices_;  // empty: every rank on the CPU
  const parallel::GroupLayout layout_;
  ResultSink* const sink_;
  c10::intrusive_ptr<c10d::Store> store_;
  MembershipContext membership_;
  DecodeHistory history_;
  const std::vector<WarmUp> warm_ups_;
  const RankStreamFactory rank_streams_;  // null: the default (Create())

  mutable Mutex mu_;
  std::condition_variable_any cv_;  // waits on mu_: queue, tasks, checks, stop
  Scheduler scheduler_ VAED_GUARDED_BY(mu_);
  bool stopping_ VAED_GUARDED_BY(mu_) = false;
  int ranks_ready_ VAED_GUARDED_BY(mu_) = 0;  // ranks whose communicators are built and warm
  // Failed warm-ups by local rank (Start() reports the lowest).
  std::map<int, Status> warm_up_failures_ VAED_GUARDED_BY(mu_);
  size_t watchers_contacted_ VAED_GUARDED_BY(mu_) = 0;  // first store contact made
  std::string fatal_error_ VAED_GUARDED_BY(mu_);
  double mean_decode_seconds_ VAED_GUARDED_BY(mu_) = 0.0;  // moving average

  std::vector<Rank> ranks_;  // size fixed at construction
  std::unique_ptr<WatcherListener> listener_;
  std::vector<std::unique_ptr<StoreWatcher>> watchers_;
  std::vector<std::thread> watcher_threads_;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_EXECUTOR_H_
