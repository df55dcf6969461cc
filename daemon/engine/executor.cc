// The executor's life cycle, public API and status; what each rank thread
// does is in rank_loop.cc.
#include "daemon/engine/executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "daemon/parallel/communicator.h"

namespace vaed::engine {

// The store watchers' view of the executor (store_watcher.h): each call
// takes the executor's mutex.
class Executor::WatcherListener : public StoreWatcher::Listener {
 public:
  explicit WatcherListener(Executor* e) : e_(e) {}

  void MeetGeneration(const parallel::GroupSpec& spec, uint64_t generation) override {
    Queue(spec, generation, false);
  }
  void JoinJob(const parallel::GroupSpec& spec, uint64_t generation) override {
    Queue(spec, generation, true);
  }
  void LayoutMismatch(const parallel::GroupSpec& spec, const std::string& why) override {
    MutexLock lock(&e_->mu_);
    e_->scheduler_.RecordLayoutMismatch(spec, why);
  }
  std::optional<GenerationFacts> CheckWanted(const parallel::GroupSpec& spec) override {
    MutexLock lock(&e_->mu_);
    return e_->scheduler_.CheckWanted(spec);
  }
  void CheckDone(const parallel::GroupSpec& spec, uint64_t generation, bool rebuild) override {
    {
      MutexLock lock(&e_->mu_);
      e_->scheduler_.CheckDone(spec, generation, rebuild);
    }
    e_->cv_.notify_all();
  }
  void FirstContactDone() override {
    {
      MutexLock lock(&e_->mu_);
      ++e_->watchers_contacted_;
    }
    e_->cv_.notify_all();
  }
  bool WaitOrStop(std::chrono::milliseconds d) override {
    MutexLock lock(&e_->mu_);
    if (!e_->stopping_) e_->cv_.wait_for(e_->mu_, d);
    return e_->stopping_;
  }

 private:
  void Queue(const parallel::GroupSpec& spec, uint64_t generation, bool member_job) {
    {
      MutexLock lock(&e_->mu_);
      e_->scheduler_.QueueMemberRun(&spec, generation, member_job);
    }
    e_->cv_.notify_all();
  }

  Executor* const e_;
};

Result<std::unique_ptr<Executor>> Executor::Create(const ExecutorOptions& options,
                                                   const GroupOptions& group,
                                                   std::vector<models::ModelRegistry*> registries,
                                                   ResultSink* sink,
                                                   std::vector<WarmUp> warm_ups,
                                                   RankStreamFactory rank_streams,
                                                   std::vector<RankDevice> rank_devices) {
  if (options.intra_op_threads < 1) {
    return InvalidArgument("executor.intra_op_threads must be >= 1");
  }
  if (options.queue_capacity < 1) return InvalidArgument("executor.queue_capacity must be >= 1");
  VAED_ASSIGN_OR_RETURN(parallel::GroupLayout layout, MakeGroupLayout(group));
  if (registries.size() != group.ranks || registries.empty()) {
    return InvalidArgument("executor: " + std::to_string(registries.size()) +
                           " model registries for group.ranks = " + std::to_string(group.ranks));
  }
  std::unique_ptr<Executor> e(
      new Executor(options, group, std::move(layout), sink, std::move(warm_ups),
                   std::move(rank_streams), std::move(rank_devices)));
  VAED_RETURN_IF_ERROR(e->Start(std::move(registries)));
  return e;
}

Executor::Executor(const ExecutorOptions& options, const GroupOptions& group,
                   parallel::GroupLayout layout, ResultSink* sink,
                   std::vector<WarmUp> warm_ups, RankStreamFactory rank_streams,
                   std::vector<RankDevice> rank_devices)
    : options_(options),
      group_options_(group),
      rank_devices_(std::move(rank_devices)),
      layout_(std::move(layout)),
      sink_(sink),
      warm_ups_(std::move(warm_ups)),
      rank_streams_(std::move(rank_streams)),
      scheduler_(&layout_, group.few_tiles, group.ranks),
      ranks_(group.ranks) {}

Status Executor::Start(std::vector<models::ModelRegistry*> registries) {
  // Every rank's own instance of each model, by its index in rank 0's
  // registry (the handler resolves the index once per request).
  const std::vector<const models::VaeModel*> order = registries.front()->models();
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r].registry = registries[r];
    for (const models::VaeModel* m : order) {
      models::VaeModel* mine = registries[r]->Find(m->info().name);
      if (mine == nullptr) {
        return InvalidArgument("executor: rank " + std::to_string(r) + " has no model '" +
                               m->info().name + "' (registries must hold the same models)");
      }
      ranks_[r].models.push_back(mine);
    }
  }
  if (!group_options_.store_address.empty() && group_options_.node_rank == 0) {
    // Node 0 serves the store for as long as this executor lives; every
    // build and watcher connects on its own (communicator.h).
    VAED_ASSIGN_OR_RETURN(
        store_, parallel::MakeStore(
                    {.address = group_options_.store_address,
                     .node_rank = static_cast<int>(group_options_.node_rank),
                     .world_nodes = static_cast<int>(group_options_.world_nodes),
                     .timeout = std::chrono::milliseconds(group_options_.collective_timeout_ms)}));
  } else if (layout_.world_ranks() > 1) {
    VAED_ASSIGN_OR_RETURN(store_, parallel::MakeStore({}));
  }
  membership_ = MembershipContext{.options = group_options_,
                                  .layout = &layout_,
                                  .shared_store = store_,
                                  .incarnation = NewIncarnation()};
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r].comms = std::make_unique<RankCommunicators>(&membership_, static_cast<int>(r),
                                                          CudaOrdinalOfRank(rank_devices_, r));
  }
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r].thread = std::thread([this, r] { RankLoop(static_cast<int>(r)); });
  }
  StartWatchers();
  // Serve once every rank built its communicators (a group's rendezvous
  // needs all its ranks) and warmed up, and the store knows this daemon's
  // incarnation.
  MutexLock lock(&mu_);
  while (ranks_ready_ != static_cast<int>(ranks_.size()) ||
         watchers_contacted_ != watchers_.size()) {
    cv_.wait(mu_);
  }
  // The caller destroys this executor, which stops and joins every thread.
  if (!warm_up_failures_.empty()) return warm_up_failures_.begin()->second;
  return Status::Ok();
}

void Executor::StartWatchers() {
  listener_ = std::make_unique<WatcherListener>(this);
  const int node = static_cast<int>(group_options_.node_rank);
  for (const parallel::GroupSpec& g : layout_.groups()) {
    const bool member_here = std::any_of(g.ranks.begin(), g.ranks.end(),
                                         [&](int r) { return layout_.IsLocal(r); });
    if (!member_here || !membership_.SpansNodes(g)) continue;
    watchers_.push_back(std::make_unique<StoreWatcher>(&g, g.leader_node == node,
                                                       group_options_, membership_.incarnation,
                                                       static_cast<int>(ranks_.size()),
                                                       listener_.get()));
  }
  for (const std::unique_ptr<StoreWatcher>& w : watchers_) {
    watcher_threads_.emplace_back([watcher = w.get()] { watcher->Run(); });
  }
}

Executor::~Executor() { Stop(); }

Status Executor::Submit(std::shared_ptr<DecodeJob> job) {
  {
    MutexLock lock(&mu_);
    if (!fatal_error_.empty()) {
      return Unavailable("the daemon hit a sticky device error and is restarting (" +
                         fatal_error_ + "); retry once it is back");
    }
    if (stopping_) return Cancelled("the daemon is shutting down");
    if (scheduler_.queued() >= options_.queue_capacity) {
      const uint32_t wait = EstimatedWaitMsLocked();
      return Busy("decode queue is full (" + std::to_string(scheduler_.queued()) +
                      " waiting, executor.queue_capacity = " +
                      std::to_string(options_.queue_capacity) + "); retry after " +
                      std::to_string(wait) + " ms",
                  wait);
    }
    if (job->model_index >= ranks_.front().models.size()) {
      return Internal("decode job names model index " + std::to_string(job->model_index) +
                      " of " + std::to_string(ranks_.front().models.size()));
    }
    scheduler_.Push(std::move(job));
  }
  cv_.notify_all();
  return Status::Ok();
}

uint32_t Executor::EstimatedWaitMsLocked() const {
  const double ms =
      1000.0 * mean_decode_seconds_ * static_cast<double>(scheduler_.queued() + 1);
  return static_cast<uint32_t>(std::clamp(ms, 50.0, 3600.0 * 1000.0));
}

std::string Executor::fatal_error() const {
  MutexLock lock(&mu_);
  return fatal_error_;
}

void Executor::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (Rank& r : ranks_) {
    if (r.thread.joinable()) r.thread.join();
  }
  for (std::thread& w : watcher_threads_) {
    if (w.joinable()) w.join();
  }
}

size_t Executor::CancelClient(uint64_t client_id, const Status& why) {
  MutexLock lock(&mu_);
  size_t n = 0;
  // Queued jobs stay queued: a rank answers them with `why` without
  // decoding, so every request still gets exactly one reply.
  for (const std::vector<std::shared_ptr<DecodeJob>>& jobs :
       {scheduler_.Queued(), scheduler_.Running()}) {
    for (const std::shared_ptr<DecodeJob>& j : jobs) {
      if (j->client_id != client_id) continue;
      j->cancel->Cancel(why);
      ++n;
    }
  }
  return n;
}

size_t Executor::queue_depth() const {
  MutexLock lock(&mu_);
  return scheduler_.queued();
}

size_t Executor::running() const {
  MutexLock lock(&mu_);
  return scheduler_.Running().size();
}

ExecutorStatus Executor::Snapshot() const {
  ExecutorStatus out = SnapshotOfScheduler();
  // Outside the lock: a device query must not hold up the ranks.
  for (ExecutorStatus::Rank& r : out.rank_status) {
    if (!r.device.is_cuda) continue;
    Result<DeviceMemory> memory = CudaDeviceMemory(r.device.cuda.ordinal);
    if (memory.ok()) r.device_memory = *memory;
  }
  return out;
}

ExecutorStatus Executor::SnapshotOfScheduler() const {
  MutexLock lock(&mu_);
  ExecutorStatus out;
  out.ranks = static_cast<int>(ranks_.size());
  for (const parallel::GroupSpec& g : layout_.groups()) {
    const GroupState& st = scheduler_.group(g.name);
    out.groups.push_back({.name = g.name,
                          .size = g.size,
                          .ranks = g.ranks,
                          .generation = st.generation,
                          .state = st.busy ? "busy" : (st.needs_rebuild ? "rebuilding" : "idle"),
                          .runs = st.runs,
                          .failures = st.failures,
                          .last_failure = st.last_failure,
                          .last_imbalance = st.last_imbalance});
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const RankSlot& r = scheduler_.rank(static_cast<int>(i));
    out.rank_status.push_back({.rank = GlobalRank(static_cast<int>(i)),
                               .busy_seconds = r.busy_seconds,
                               .tiles = r.tiles,
                               .last_imbalance = r.last_imbalance,
                               .device = i < rank_devices_.size()
                                             ? rank_devices_[i]
                                             : RankDevice{},
                               .device_memory = {}});
  }
  return out;
}

}  // namespace vaed::engine
