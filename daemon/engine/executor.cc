#include "daemon/engine/executor.h"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "daemon/engine/memory_policy.h"
#include "daemon/engine/process_memory.h"
#include "daemon/models/postprocess.h"
#include "daemon/models/tensor_memory.h"
#include "daemon/models/torch_status.h"
#include "daemon/parallel/nccl_communicator.h"
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

// Store keys of a group spanning daemons: the generation its leader is
// building, and job n of generation g.
std::string LatestKey(const parallel::GroupSpec& spec) { return spec.name + "/latest"; }
std::string JobKey(const parallel::GroupSpec& spec, uint64_t generation, int64_t n) {
  return spec.name + "/gen" + std::to_string(generation) + "/job" + std::to_string(n);
}
std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

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
                                                   const GroupOptions& group,
                                                   std::vector<models::ModelRegistry*> registries,
                                                   zmq::context_t* context,
                                                   std::string reply_endpoint) {
  if (options.intra_op_threads < 1) {
    return InvalidArgument("executor.intra_op_threads must be >= 1");
  }
  if (options.queue_capacity < 1) return InvalidArgument("executor.queue_capacity must be >= 1");
  VAED_ASSIGN_OR_RETURN(parallel::GroupLayout layout, MakeGroupLayout(group));
  if (registries.size() != group.ranks || registries.empty()) {
    return InvalidArgument("executor: " + std::to_string(registries.size()) +
                           " model registries for group.ranks = " + std::to_string(group.ranks));
  }
  std::unique_ptr<Executor> e(new Executor(options, group, std::move(layout), std::move(registries),
                                           context, std::move(reply_endpoint)));
  if (!group.store_address.empty() && group.node_rank == 0) {
    // Node 0 serves the store for as long as this executor lives; the
    // others connect per communicator and per watcher, when it is up.
    VAED_ASSIGN_OR_RETURN(
        e->store_, parallel::MakeStore(
                       {.address = group.store_address,
                        .node_rank = static_cast<int>(group.node_rank),
                        .world_nodes = static_cast<int>(group.world_nodes),
                        .timeout = std::chrono::milliseconds(group.collective_timeout_ms)}));
  } else if (e->layout_.world_ranks() > 1) {
    VAED_ASSIGN_OR_RETURN(e->store_, parallel::MakeStore({}));
  }
  for (size_t r = 0; r < e->ranks_.size(); ++r) {
    e->ranks_[r].thread = std::thread([raw = e.get(), r] { raw->RankLoop(static_cast<int>(r)); });
  }
  for (const parallel::GroupSpec& g : e->layout_.groups()) {
    bool member_here = false;
    for (int r : g.ranks) member_here = member_here || e->layout_.IsLocal(r);
    if (member_here && e->SpansNodes(g)) {
      const bool leading = g.leader_node == static_cast<int>(group.node_rank);
      e->watchers_.emplace_back(
          [raw = e.get(), spec = &g, leading] { raw->WatchStore(spec, leading); });
    }
  }
  // Serve only once every rank built its communicators (a group's
  // rendezvous needs all its ranks).
  std::unique_lock<std::mutex> lock(e->mu_);
  e->cv_.wait(lock, [&] { return e->ranks_ready_ == static_cast<int>(e->ranks_.size()); });
  return e;
}

Executor::Executor(const ExecutorOptions& options, const GroupOptions& group,
                   parallel::GroupLayout layout, std::vector<models::ModelRegistry*> registries,
                   zmq::context_t* context, std::string reply_endpoint)
    : options_(options),
      group_options_(group),
      layout_(std::move(layout)),
      context_(context),
      reply_endpoint_(std::move(reply_endpoint)),
      ranks_(registries.size()) {
  for (size_t r = 0; r < registries.size(); ++r) ranks_[r].registry = registries[r];
  for (const parallel::GroupSpec& g : layout_.groups()) groups_[g.name];
}

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
  cv_.notify_all();
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
  for (RankState& r : ranks_) {
    if (r.thread.joinable()) r.thread.join();
  }
  for (std::thread& w : watchers_) {
    if (w.joinable()) w.join();
  }
}

size_t Executor::CancelClient(uint64_t client_id, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  // Queued jobs stay queued: a rank answers them with `why` without
  // decoding, so every request still gets exactly one reply.
  for (const std::unique_ptr<DecodeJob>& j : queue_) {
    if (j->client_id == client_id) {
      j->cancel->Cancel(why);
      ++n;
    }
  }
  auto [begin, end] = running_.equal_range(client_id);
  for (auto it = begin; it != end; ++it) {
    it->second->Cancel(why);
    ++n;
  }
  return n;
}

size_t Executor::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void Executor::FillGroups(v1::StatusReply* status) const {
  std::lock_guard<std::mutex> lock(mu_);
  status->set_ranks(static_cast<uint32_t>(ranks_.size()));
  for (const parallel::GroupSpec& g : layout_.groups()) {
    const GroupState& st = groups_.at(g.name);
    v1::GroupStatus* out = status->add_groups();
    out->set_name(g.name);
    out->set_size(static_cast<uint32_t>(g.size));
    for (int r : g.ranks) out->add_ranks(static_cast<uint32_t>(r));
    out->set_generation(st.generation);
    out->set_state(st.busy ? "busy" : (st.needs_rebuild ? "rebuilding" : "idle"));
    out->set_runs(st.runs);
    out->set_failures(st.failures);
    out->set_last_failure(st.last_failure);
    out->set_last_imbalance(st.last_imbalance);
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    v1::RankStatus* r = status->add_rank_status();
    r->set_rank(static_cast<uint32_t>(GlobalRank(static_cast<int>(i))));
    r->set_busy_seconds(ranks_[i].busy_seconds);
    r->set_tiles(ranks_[i].tiles);
    r->set_last_imbalance(ranks_[i].last_imbalance);
  }
}

size_t Executor::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_.size();
}

void Executor::CountRankWork(int local_rank, const models::DecodeReport& report,
                             double started_unix, double finished_unix) {
  double work = report.timings.Get("video_vae.tile_decode");
  if (work <= 0) work = report.timings.Get("taef2.tiles");
  if (work <= 0) work = std::max(0.0, finished_unix - started_unix);
  std::lock_guard<std::mutex> lock(mu_);
  RankState& rank = ranks_[static_cast<size_t>(local_rank)];
  rank.busy_seconds += work;
  rank.tiles += static_cast<uint64_t>(std::max<int64_t>(0, report.tiling.tiles_decoded_here));
}

bool Executor::SpansNodes(const parallel::GroupSpec& spec) const {
  for (int r : spec.ranks) {
    if (!layout_.IsLocal(r)) return true;
  }
  return false;
}

bool Executor::LocalRanksIdleLocked(const parallel::GroupSpec& spec) const {
  for (int r : spec.ranks) {
    if (layout_.IsLocal(r) && ranks_[static_cast<size_t>(layout_.LocalRank(r))].busy) {
      return false;
    }
  }
  return true;
}

bool Executor::ScheduleLocked() {
  const int node = layout_.options().node_rank;
  auto give = [&](const std::shared_ptr<GroupRun>& run) {
    GroupState& st = groups_[run->spec->name];
    st.busy = true;
    if (run->job || run->member_job) ++st.runs;
    for (int r : run->spec->ranks) {
      if (!layout_.IsLocal(r)) continue;
      RankState& rank = ranks_[static_cast<size_t>(layout_.LocalRank(r))];
      rank.busy = true;
      rank.task = run;
    }
  };
  auto assign = [&](std::shared_ptr<GroupRun> run) {
    GroupState& st = groups_[run->spec->name];
    if (st.needs_rebuild) {
      ++st.generation;
      st.needs_rebuild = false;
    }
    run->generation = st.generation;
    give(run);
  };
  // Runs of groups other daemons lead come first: their leader is already
  // waiting in a collective (or a rendezvous) for this node's ranks.
  for (auto it = member_runs_.begin(); it != member_runs_.end(); ++it) {
    if (!LocalRanksIdleLocked(*(*it)->spec)) continue;
    std::shared_ptr<GroupRun> run = std::move(*it);
    member_runs_.erase(it);
    groups_[run->spec->name].generation = run->generation;
    give(run);
    return true;
  }
  // Groups that failed are rebuilt as soon as their ranks are idle, before
  // the next request (which then sees the new generation). A group spanning
  // daemons is rebuilt by its next request instead (its leader announces
  // the generation; the other nodes' ranks may be busy for a while).
  for (const parallel::GroupSpec& g : layout_.groups()) {
    if (g.size > 1 && g.leader_node == node && !SpansNodes(g) && groups_[g.name].needs_rebuild &&
        LocalRanksIdleLocked(g)) {
      auto run = std::make_shared<GroupRun>();
      run->spec = &g;
      assign(std::move(run));
      return true;
    }
  }
  if (queue_.empty()) return false;
  DecodeJob& job = *queue_.front();
  int size = 1;
  if (job.video && !job.cancel->Check("scheduling").ok()) {
    size = 1;  // answered without decoding by whichever rank takes it
  } else if (job.video && job.model->info().caps.spatial_sharding) {
    // An untiled decode (0 tiles) cannot be spread: one rank.
    const int64_t tiles = job.model->TilesPerUnit(job.video->latent.shape, job.settings);
    Result<int> chosen = parallel::ChooseGroupSize(
        layout_, static_cast<int>(job.requested_group_size), tiles,
        group_options_.few_tiles == "shrink" ? parallel::FewTiles::kShrink
                                             : parallel::FewTiles::kPad);
    size = chosen.ok() && tiles > 0 ? *chosen : 1;
  }
  // Only groups this node leads take its requests: the largest size <= the
  // chosen one that has such a group (size 1 always does).
  std::vector<const parallel::GroupSpec*> led;
  for (; size >= 1; --size) {
    for (const parallel::GroupSpec* g : layout_.OfSize(size)) {
      if (g->leader_node == node) led.push_back(g);
    }
    if (!led.empty()) break;
  }
  for (const parallel::GroupSpec* g : led) {
    if (!LocalRanksIdleLocked(*g)) continue;
    auto run = std::make_shared<GroupRun>();
    run->job = std::move(queue_.front());
    queue_.pop_front();
    run->spec = g;
    running_.emplace(run->job->client_id, run->job->cancel);
    assign(std::move(run));
    return true;
  }
  return false;
}

void Executor::RankLoop(int local_rank) {
  // OpenMP thread counts are per calling thread: set them here, on the
  // thread that runs this rank's models.
  at::set_num_threads(options_.intra_op_threads);
  RankState& me = ranks_[static_cast<size_t>(local_rank)];
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
    ++ranks_ready_;
    cv_.notify_all();
    return;
  }
  // This rank's communicators, in the layout's order (the same on every
  // rank, so the rendezvous cannot deadlock).
  // Groups spanning daemons meet at their first request instead (the other
  // daemons may start later).
  for (const parallel::GroupSpec* g : layout_.OfRank(GlobalRank(local_rank))) {
    if (g->size > 1 && !SpansNodes(*g)) (void)CommunicatorFor(local_rank, *g, 0);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++ranks_ready_;
  }
  cv_.notify_all();
  if (local_rank == 0) {
    spdlog::info("executor: {} rank{} with {} intra-op threads each, queue capacity {}; groups: {}",
                 ranks_.size(), ranks_.size() == 1 ? "" : "s", at::get_num_threads(),
                 options_.queue_capacity, layout_.groups().size());
  }

  for (;;) {
    std::shared_ptr<GroupRun> run;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        if (me.task != nullptr || stopping_) break;
        if (!me.busy && ScheduleLocked()) {
          cv_.notify_all();  // the ranks it gave work to
          continue;
        }
        cv_.wait(lock);
      }
      if (me.task == nullptr && stopping_) {
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
      run = me.task;
    }
    RunTask(local_rank, run, replies);
    {
      std::lock_guard<std::mutex> lock(mu_);
      me.task.reset();
      me.busy = false;
      if (LocalRanksIdleLocked(*run->spec)) groups_[run->spec->name].busy = false;
    }
    cv_.notify_all();
  }
  spdlog::debug("executor: rank {} stopped", local_rank);
}

Executor::CommEntry* Executor::CommunicatorFor(int local_rank, const parallel::GroupSpec& spec,
                                               uint64_t generation) {
  CommEntry& entry = ranks_[static_cast<size_t>(local_rank)].comms[spec.name];
  std::unique_ptr<parallel::Communicator>& c = entry.comm;
  if (c && c->generation() == generation && !c->aborted()) return &entry;
  c.reset();
  entry.store.reset();
  entry.jobs_announced = 0;
  const int global = GlobalRank(local_rank);
  const int index = static_cast<int>(
      std::find(spec.ranks.begin(), spec.ranks.end(), global) - spec.ranks.begin());
  c10::intrusive_ptr<c10d::Store> store = store_;
  if (!group_options_.store_address.empty()) {
    // Its own connection (communicator.h: a timed-out wait spoils one).
    Result<c10::intrusive_ptr<c10d::Store>> connected = parallel::MakeStore(
        {.address = group_options_.store_address,
         .node_rank = static_cast<int>(group_options_.node_rank),
         .world_nodes = static_cast<int>(group_options_.world_nodes),
         .timeout = std::chrono::milliseconds(group_options_.collective_timeout_ms),
         .serve = false});
    if (!connected.ok()) {
      spdlog::error("executor: rank {}: group {}: {}", global, spec.name,
                    connected.status().ToString());
      std::lock_guard<std::mutex> lock(mu_);
      GroupState& st = groups_[spec.name];
      if (spec.leader_node == layout_.options().node_rank) st.needs_rebuild = true;
      st.last_failure = std::string(connected.status().message());
      return nullptr;
    }
    store = std::move(connected).value();
    if (index == 0 && SpansNodes(spec)) {
      // Tell the other daemons which generation to meet at (WatchStore).
      try {
        store->set(LatestKey(spec), Bytes(std::to_string(generation)));
      } catch (...) {
        spdlog::error("executor: group {}: announcing generation {}: {}", spec.name,
                      generation, models::CurrentTorchErrorStatus("store").ToString());
      }
    }
  }
  const parallel::CommunicatorOptions comm_options{
      .group_name = spec.name,
      .rank = index,
      .size = spec.size,
      .generation = generation,
      .timeout = std::chrono::milliseconds(group_options_.collective_timeout_ms),
      .host = group_options_.host};
#if defined(VAED_WITH_NCCL)
  // GPU builds with group.backend = "nccl": local rank r drives device r.
  Result<std::unique_ptr<parallel::Communicator>> built =
      group_options_.backend == "nccl"
          ? parallel::CreateNcclCommunicator(store, comm_options, local_rank)
          : parallel::CreateGlooCommunicator(store, comm_options);
#else
  Result<std::unique_ptr<parallel::Communicator>> built =
      parallel::CreateGlooCommunicator(store, comm_options);
#endif
  if (!built.ok()) {
    spdlog::error("executor: rank {}: {}", global, built.status().ToString());
    std::lock_guard<std::mutex> lock(mu_);
    GroupState& st = groups_[spec.name];
    // The leader's node rebuilds; other nodes follow its announcements.
    if (spec.leader_node == layout_.options().node_rank) st.needs_rebuild = true;
    ++st.failures;
    st.last_failure = std::string(built.status().message());
    return nullptr;
  }
  if ((generation > 0 || SpansNodes(spec)) && index == 0) {
    spdlog::info("executor: group {} {} (generation {})", spec.name,
                 generation > 0 ? "rebuilt" : "built", generation);
  }
  c = std::move(built).value();
  entry.store = std::move(store);
  return &entry;
}

void Executor::WatchStore(const parallel::GroupSpec* spec, bool leading) {
  // Check-only polling: a TCPStore wait that times out would leave a reply
  // in flight on the connection (communicator.h).
  constexpr auto kPoll = std::chrono::milliseconds(5);
  constexpr int kPollsPerGenerationCheck = 20;  // ~100 ms
  constexpr int kPollsPerLayoutCheck = 200;     // ~1 s
  const int node = static_cast<int>(group_options_.node_rank);
  c10::intrusive_ptr<c10d::Store> store;
  // The generation followed (>= 0), or: not looked at the store yet (a
  // generation found then predates this daemon), or: follow the next one
  // published (none was; or the store connection was lost, perhaps to a
  // restarted leader with a new store).
  constexpr int64_t kNeverLooked = -1, kFollowNext = -2;
  int64_t generation = kNeverLooked;
  int64_t next_job = 0;
  int polls = 0;
  bool layout_checked = false;
  SteadyClock::time_point last_complaint{};
  auto wait = [&](std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, d, [&] { return stopping_; });
  };
  auto queue_run = [&](bool member_job) {
    auto run = std::make_shared<GroupRun>();
    run->spec = spec;
    run->generation = static_cast<uint64_t>(generation);
    run->member_job = member_job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!member_job) {
        // Runs of other generations could meet nobody.
        std::erase_if(member_runs_, [&](const std::shared_ptr<GroupRun>& r) {
          return r->spec == spec && r->generation != run->generation;
        });
      }
      member_runs_.push_back(std::move(run));
    }
    cv_.notify_all();
  };
  auto read_int = [&](const std::string& key) {
    const std::vector<uint8_t> value = store->get(key);
    int64_t v = -1;
    std::from_chars(reinterpret_cast<const char*>(value.data()),
                    reinterpret_cast<const char*>(value.data()) + value.size(), v);
    return v;
  };
  while (!wait(kPoll)) {
    try {
      if (!store) {
        Result<c10::intrusive_ptr<c10d::Store>> connected = parallel::MakeStore(
            {.address = group_options_.store_address,
             .node_rank = node,
             .world_nodes = static_cast<int>(group_options_.world_nodes),
             .timeout = std::chrono::milliseconds(2000),
             .serve = false});
        if (!connected.ok()) throw std::runtime_error(connected.status().ToString());
        store = std::move(connected).value();
        // Every node states its group.ranks, so that a mismatch (the groups
        // would never meet) is reported instead of timing out forever.
        store->set("layout/node" + std::to_string(node), Bytes(std::to_string(ranks_.size())));
        layout_checked = false;
      }
      ++polls;
      if (!layout_checked && polls % kPollsPerLayoutCheck == 1) {
        bool all_seen = true;
        for (int n = 0; n < static_cast<int>(group_options_.world_nodes); ++n) {
          const std::string key = "layout/node" + std::to_string(n);
          if (!store->check({key})) {
            all_seen = false;
            continue;
          }
          const int64_t theirs = read_int(key);
          if (theirs != static_cast<int64_t>(ranks_.size())) {
            const std::string why = "group.ranks differs between daemons: node " +
                                    std::to_string(n) + " has " + std::to_string(theirs) +
                                    ", node " + std::to_string(node) + " has " +
                                    std::to_string(ranks_.size()) +
                                    "; groups spanning them cannot meet";
            spdlog::error("executor: group {}: {}", spec->name, why);
            std::lock_guard<std::mutex> lock(mu_);
            groups_[spec->name].last_failure = why;
          }
        }
        layout_checked = all_seen;
      }
      if (leading) {
        // A member daemon that (re)started asks for a new generation: the
        // one built before holds its previous incarnation.
        if (polls % kPollsPerGenerationCheck == 0 && store->check({spec->name + "/rejoin"})) {
          store->deleteKey(spec->name + "/rejoin");
          std::lock_guard<std::mutex> lock(mu_);
          GroupState& st = groups_[spec->name];
          if (!st.needs_rebuild) {
            st.needs_rebuild = true;
            spdlog::info("executor: group {}: a member daemon (re)joined; the next request "
                         "builds generation {}",
                         spec->name, st.generation + 1);
          }
        }
        continue;
      }
      if (generation >= 0 &&
          store->check({JobKey(*spec, static_cast<uint64_t>(generation), next_job)})) {
        ++next_job;
        queue_run(true);
        continue;
      }
      if (generation < 0 || polls % kPollsPerGenerationCheck == 0) {
        if (store->check({LatestKey(*spec)})) {
          const int64_t latest = read_int(LatestKey(*spec));
          if (generation == kNeverLooked) {
            // Built before this daemon started: its peer there is gone.
            // Ask the leader for a new generation instead of joining it.
            generation = latest;
            store->set(spec->name + "/rejoin", Bytes(std::to_string(node)));
            spdlog::info("executor: group {} (led by node {}): generation {} predates this "
                         "daemon; asked the leader for a new one",
                         spec->name, spec->leader_node, latest);
          } else if (latest != generation) {
            // Newer, or lower after the leader restarted (a new store).
            generation = latest;
            next_job = 0;
            spdlog::info("executor: group {} (led by node {}): meeting at generation {}",
                         spec->name, spec->leader_node, generation);
            queue_run(false);
          }
        } else if (generation == kNeverLooked) {
          generation = kFollowNext;  // nothing built yet: meet the first one
        }
      }
    } catch (...) {
      // The store (node 0) is down or restarting: retry, complaining at
      // most every 30 s.
      const std::string why = models::CurrentTorchErrorStatus("store").ToString();
      if (SteadyClock::now() - last_complaint > std::chrono::seconds(30)) {
        last_complaint = SteadyClock::now();
        spdlog::warn("executor: group {}: cannot reach the store at {} ({}): {}; retrying",
                     spec->name, group_options_.store_address,
                     leading ? "leading" : "led by node " + std::to_string(spec->leader_node),
                     why);
      }
      store.reset();
      if (generation != kNeverLooked) generation = kFollowNext;
      if (wait(std::chrono::milliseconds(1000))) break;
    }
  }
}

void Executor::RunTask(int local_rank, const std::shared_ptr<GroupRun>& run,
                       zmq::socket_t& replies) {
  const parallel::GroupSpec& spec = *run->spec;
  Placement where{
      .local_rank = local_rank, .spec = &spec, .generation = run->generation, .comm = nullptr};
  if (run->member_job) {
    // The leader built this generation with this rank (a build run came
    // first); rebuilding it now could not meet anyone, so a rank without it
    // sits the job out and the leader falls back.
    CommEntry& entry = ranks_[static_cast<size_t>(local_rank)].comms[spec.name];
    if (entry.comm && entry.comm->generation() == run->generation && !entry.comm->aborted()) {
      where.entry = &entry;
      where.comm = entry.comm.get();
    } else {
      spdlog::warn("executor: rank {}: group {}: no live communicator of generation {}; "
                   "sitting out the leader's job",
                   GlobalRank(local_rank), spec.name, run->generation);
    }
  } else if (spec.size > 1) {
    where.entry = CommunicatorFor(local_rank, spec, run->generation);
    if (where.entry != nullptr) where.comm = where.entry->comm.get();
  }
  const bool output_rank = spec.ranks.front() == GlobalRank(local_rank);
  if (run->member_job) {
    if (where.comm != nullptr) DecodeAsMember(local_rank, nullptr, where);
  } else if (run->job == nullptr) {
    // A rebuild only.
  } else if (!output_rank) {
    if (where.comm != nullptr) DecodeAsMember(local_rank, run->job.get(), where);
  } else {
    const DecodeJob& job = *run->job;
    v1::Reply reply;
    reply.set_request_id(job.request_id);
    const auto t0 = SteadyClock::now();
    const bool decoded = Execute(job, where, replies, &reply);
    const double seconds = SecondsSince(t0);
    bool fatal = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto [begin, end] = running_.equal_range(job.client_id);
      for (auto it = begin; it != end; ++it) {
        if (it->second == job.cancel) {
          running_.erase(it);
          break;
        }
      }
      // Moving average over decodes that ran (not instant rejections).
      if (decoded) {
        mean_decode_seconds_ = mean_decode_seconds_ == 0.0
                                   ? seconds
                                   : 0.8 * mean_decode_seconds_ + 0.2 * seconds;
      }
      if (reply.has_error() && models::IsStickyDeviceError(reply.error().message())) {
        fatal_error_ = reply.error().message();
        stopping_ = true;  // answer the queue and take nothing more
        fatal = true;
      }
    }
    // After the health flag: whoever sees this reply sees the daemon
    // unhealthy too.
    SendReply(replies, job, reply);
    if (fatal) {
      spdlog::critical("executor: sticky device error; the daemon must restart: {}",
                       fatal_error());
      cv_.notify_all();
    }
  }
  if (where.comm != nullptr && where.comm->aborted()) {
    std::lock_guard<std::mutex> lock(mu_);
    GroupState& st = groups_[spec.name];
    if (spec.leader_node != layout_.options().node_rank) {
      // Led by another daemon: it announces the next generation.
      if (st.last_failure != where.comm->abort_reason()) ++st.failures;
      st.last_failure = where.comm->abort_reason();
    } else if (!st.needs_rebuild && st.generation == run->generation) {
      // The first rank to get here marks the group (all of its ranks see
      // the failure, since a failed collective closes the communicator).
      st.needs_rebuild = true;
      ++st.failures;
      st.last_failure = where.comm->abort_reason();
      spdlog::warn("executor: group {} generation {} failed ({}); rebuilding", spec.name,
                   run->generation, st.last_failure);
    }
  }
  // Bound what the memory policy retains between requests
  // (memory_policy.h).
  if (ReleaseFreedMemoryAbove(options_.retained_heap_mib << 20)) {
    spdlog::debug("executor: heap above {} MiB after a request; returned its free part",
                  options_.retained_heap_mib);
  }
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

bool Executor::Execute(const DecodeJob& job, const Placement& where, zmq::socket_t& replies,
                       v1::Reply* reply) {
  // A job cancelled or past its deadline while queued never starts.
  if (Status s = job.cancel->Check("while queued (the decode never started)"); !s.ok()) {
    spdlog::info("decode request {} of client {} not started: {}", job.request_id,
                 job.client_id, s.ToString());
    *reply->mutable_error() = ToProtoError(s);
    if (where.comm != nullptr) AnnounceJob(where, &job, nullptr);  // the members stand down
    return false;
  }
  v1::DecodeReply decoded;
  Status s = DecodeInto(job, where, replies, &decoded);
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

// The header of a job on a group (AnnounceJob), int64 [kHeaderSize]:
// go (0 = stand down), the latent's rank and dims (at most 5), the model
// name's length in bytes, then the settings a member decodes with.
enum HeaderField : int64_t {
  kGo = 0,
  kLatentDims = 1,
  kShape0 = 2,  // .. kShape0 + 4
  kNameBytes = 7,
  kStackTiling = 8,
  kCompile = 9,
  kHasTiling = 10,
  kTileLatent = 11,
  kOverlapLatent = 12,
  kSlowUnitMs = 13,
  kHeaderSize = 16,
};

// Each rank's figures of a job, gathered to the output rank after the
// decode: float64 [5] = tiles, decode seconds (the tile decode itself when
// the model reports it: waiting in collectives is not work), start and end
// (Unix seconds), ok.
torch::Tensor RankFigures(const models::DecodeReport& report, double started_unix,
                          double finished_unix, bool ok) {
  torch::Tensor t = torch::zeros({5}, torch::kDouble);
  t[0] = static_cast<double>(report.tiling.tiles_decoded_here);
  double work = report.timings.Get("video_vae.tile_decode");
  if (work <= 0) work = report.timings.Get("taef2.tiles");
  t[1] = work > 0 ? work : finished_unix - started_unix;
  t[2] = started_unix;
  t[3] = finished_unix;
  t[4] = ok ? 1.0 : 0.0;
  return t;
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Executor::AnnounceJob(const Placement& where, const DecodeJob* job,
                           const torch::Tensor* latent) {
  parallel::Communicator* comm = where.comm;
  if (where.entry != nullptr && where.entry->store && SpansNodes(*where.spec)) {
    // Wakes the other daemons' ranks (WatchStore), which then enter the
    // broadcasts below.
    try {
      where.entry->store->set(JobKey(*where.spec, where.generation, where.entry->jobs_announced),
                              Bytes("1"));
      if (where.entry->jobs_announced >= 2) {
        where.entry->store->deleteKey(
            JobKey(*where.spec, where.generation, where.entry->jobs_announced - 2));
      }
    } catch (...) {
      comm->Abort("announcing a job to the other daemons: " +
                  std::string(models::CurrentTorchErrorStatus("store").message()));
      return;
    }
    ++where.entry->jobs_announced;
  }
  torch::Tensor header = torch::zeros({kHeaderSize}, torch::kLong);
  const bool go = latent != nullptr && job != nullptr;
  const std::string name = job != nullptr ? job->model->info().name : "";
  if (go) {
    const models::DecodeSettings& s = job->settings;
    header[kGo] = 1;
    header[kLatentDims] = latent->dim();
    for (int64_t d = 0; d < latent->dim() && d < 5; ++d) header[kShape0 + d] = latent->size(d);
    header[kNameBytes] = static_cast<int64_t>(name.size());
    header[kStackTiling] = static_cast<int64_t>(s.stack_tiling);
    header[kCompile] = static_cast<int64_t>(s.compile);
    header[kHasTiling] = s.tiling.has_value() ? 1 : 0;
    if (s.tiling) {
      header[kTileLatent] = s.tiling->tile_latent;
      header[kOverlapLatent] = s.tiling->overlap_latent;
    }
    // Injected faults fire on the output rank only, but slowness on all.
    header[kSlowUnitMs] = s.faults.slow_unit_ms;
  }
  if (!comm->Broadcast(header, 0).ok() || !go) return;
  torch::Tensor name_bytes = torch::empty({static_cast<int64_t>(name.size())}, torch::kUInt8);
  std::memcpy(name_bytes.data_ptr(), name.data(), name.size());
  if (!comm->Broadcast(name_bytes, 0).ok()) return;
  torch::Tensor copy = *latent;
  (void)comm->Broadcast(copy, 0);
}

void Executor::DecodeAsMember(int local_rank, const DecodeJob* job, const Placement& where) {
  parallel::Communicator* comm = where.comm;
  torch::Tensor header = torch::zeros({kHeaderSize}, torch::kLong);
  if (!comm->Broadcast(header, 0).ok() || header[kGo].item<int64_t>() == 0) return;
  auto field = [&](HeaderField f) { return header[f].item<int64_t>(); };
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < field(kLatentDims) && d < 5; ++d) {
    shape.push_back(header[kShape0 + d].item<int64_t>());
  }
  const int64_t name_size = std::clamp<int64_t>(field(kNameBytes), 0, 4096);
  torch::Tensor name_bytes = torch::empty({name_size}, torch::kUInt8);
  if (!comm->Broadcast(name_bytes, 0).ok()) return;
  const std::string name(static_cast<const char*>(name_bytes.data_ptr()),
                         static_cast<size_t>(name_size));
  torch::Tensor latent = torch::empty(shape, torch::kFloat);
  if (!comm->Broadcast(latent, 0).ok()) return;
  models::VaeModel* model = ranks_[static_cast<size_t>(local_rank)].registry->Find(name);
  models::DecodeSettings settings;
  settings.stack_tiling = static_cast<models::StackTiling>(field(kStackTiling));
  settings.compile = static_cast<models::CompileMode>(field(kCompile));
  if (field(kHasTiling) != 0) {
    settings.tiling = models::TilingOverride{.tile_latent = field(kTileLatent),
                                             .overlap_latent = field(kOverlapLatent)};
  }
  settings.faults.slow_unit_ms = static_cast<int>(field(kSlowUnitMs));
  // A member on the output rank's daemon stops with the request; one on
  // another daemon stops at its next collective once the output rank gave
  // up (the communicator is aborted).
  if (job != nullptr) settings.cancel = job->cancel.get();
  settings.group = comm;
  models::DecodeReport report;
  const double started = UnixNow();
  Result<torch::Tensor> out = model != nullptr
                                  ? model->Decode(latent, settings, &report)
                                  : Result<torch::Tensor>(NotFound("model on this rank"));
  const double finished = UnixNow();
  CountRankWork(local_rank, report, started, finished);
  if (!out.ok()) {
    // The output rank must not wait for this rank's tiles until its timeout.
    if (!comm->aborted()) {
      comm->Abort("rank " + std::to_string(GlobalRank(local_rank)) +
                  " failed its part: " + std::string(out.status().message()));
    }
    return;
  }
  (void)comm->Gather(RankFigures(report, started, finished, true), 0);
}

namespace {

// Fills the reply's GroupReport from every rank's figures (RankFigures),
// in group order.
void FillGroupReport(const parallel::GroupSpec& spec, uint64_t generation,
                     const std::vector<torch::Tensor>& figures, v1::GroupReport* out) {
  out->set_name(spec.name);
  out->set_size(static_cast<uint32_t>(spec.size));
  out->set_generation(generation);
  double max_s = 0, sum_s = 0;
  for (size_t i = 0; i < figures.size() && i < spec.ranks.size(); ++i) {
    const torch::Tensor& f = figures[i];
    v1::RankReport* r = out->add_ranks();
    r->set_rank(static_cast<uint32_t>(spec.ranks[i]));
    r->set_tiles(static_cast<uint32_t>(f[0].item<double>()));
    r->set_decode_seconds(f[1].item<double>());
    r->set_started_unix(f[2].item<double>());
    r->set_finished_unix(f[3].item<double>());
    max_s = std::max(max_s, r->decode_seconds());
    sum_s += r->decode_seconds();
  }
  const double mean = figures.empty() ? 0 : sum_s / static_cast<double>(figures.size());
  out->set_imbalance(mean > 0 ? max_s / mean : 1.0);
}

}  // namespace

Status Executor::DecodeInto(const DecodeJob& job, const Placement& where, zmq::socket_t& replies,
                            v1::DecodeReply* out) {
  const auto t_start = SteadyClock::now();
  // Progress (DecodeOptions.progress): the fraction of the request done,
  // over its stages: the video's units, then the audio counted as one more
  // unit of the video's size (the whole request when there is no video).
  // Kept monotonic: a retry after a failure reports from 0 again and is
  // not forwarded until it passes what was sent.
  double progress_sent = -1.0;
  auto send_progress = [&](const char* stage, const models::DecodeProgress& p) {
    if (!job.progress || p.total <= 0) return;
    const double units = job.video && job.audio ? double(p.total) + 1.0 : double(p.total);
    double fraction = std::string_view(stage) == "audio"
                          ? 1.0
                          : std::min(1.0, double(p.done) / units);
    if (fraction <= progress_sent) return;
    progress_sent = fraction;
    const double elapsed = SecondsSince(t_start);
    v1::Reply message;
    message.set_request_id(job.request_id);
    v1::Progress* pr = message.mutable_progress();
    pr->set_stage(stage);
    pr->set_done(static_cast<uint32_t>(p.done));
    pr->set_total(static_cast<uint32_t>(p.total));
    pr->set_unit(p.unit);
    pr->set_fraction(fraction);
    pr->set_elapsed_seconds(elapsed);
    pr->set_eta_seconds(fraction >= 1.0 ? 0.0 : elapsed * (1.0 - fraction) / fraction);
    pr->set_tiles_done(static_cast<uint32_t>(p.tiles_done));
    pr->set_tiles_total(static_cast<uint32_t>(p.tiles_total));
    SendReply(replies, job, message);
  };
  ResetPeakRss();
  models::ResetPeakTensorBytes();
  models::DecodeReport report;
  models::ComponentTimings& timings = report.timings;
  timings.Add("queue_wait", std::chrono::duration<double>(t_start - job.received).count());
  const models::ModelInfo& info = job.model->info();
  // This rank's own instance of the model (ranks never share one).
  models::VaeModel* model = ranks_[static_cast<size_t>(where.local_rank)].registry->Find(info.name);
  if (model == nullptr) model = job.model;
  // On a group the members wait for the latent (AnnounceJob); any return
  // before it tells them to stand down.
  struct StandDown {
    Executor* executor;
    const Placement& where;
    const DecodeJob& job;
    bool announced = false;
    ~StandDown() {
      if (where.comm != nullptr && !announced) executor->AnnounceJob(where, &job, nullptr);
    }
  } stand_down{this, where, job};

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
  {
    std::lock_guard<std::mutex> lock(report_mu_);
    for (const std::string& b : buckets) warm = warm && warm_buckets_.count(b) > 0;
  }

  if (job.settings.faults.device_fatal > 0) {
    // What CUDA reports for a kernel that corrupted its context (tests).
    return Internal("model '" + info.name + "': decode: CUDA error: an illegal memory access "
                    "was encountered (injected fault device_fatal)");
  }

  // Decode: video first, then audio (the official pipeline's order).
  models::DecodeSettings settings = job.settings;
  settings.cancel = job.cancel.get();
  if (job.progress) {
    settings.progress = [&](const models::DecodeProgress& p) { send_progress("video", p); };
  }
  torch::Tensor raw, wave;
  v1::GroupReport group_report;
  if (job.video) {
    parallel::Communicator* comm = where.comm;
    if (comm != nullptr) {
      if (settings.faults.collective_failure > 0) {
        // Header, model name, latent, then the first tile gather fails.
        comm->FailNthCollective(4);
      }
      stand_down.announced = true;
      AnnounceJob(where, &job, &latent);
      if (!comm->aborted()) settings.group = comm;
    }
    std::string unavailable;  // a group whose communicator could not be built
    if (comm == nullptr && where.spec->size > 1) {
      std::lock_guard<std::mutex> lock(mu_);
      unavailable = "group " + where.spec->name + " generation " +
                    std::to_string(where.generation) + " unavailable (" +
                    groups_[where.spec->name].last_failure + "); decoded on rank " +
                    std::to_string(GlobalRank(where.local_rank)) + " alone";
    }
    const double started = UnixNow();
    Result<torch::Tensor> decoded = model->Decode(latent, settings, &report);
    double finished = UnixNow();
    if (!unavailable.empty()) {
      report.tiling.fallbacks.insert(report.tiling.fallbacks.begin(), "group: " + unavailable);
    }
    std::string fallback;
    if (comm != nullptr && settings.group == nullptr) {
      fallback = comm->abort_reason();
    }
    if (!decoded.ok() && settings.group != nullptr) {
      if (comm->aborted()) {
        fallback = comm->abort_reason();
      } else {
        // Not the group's fault (cancelled, out of memory, ...): the members
        // must not wait for this rank's gathers until their timeout.
        comm->Abort("the output rank failed: " + std::string(decoded.status().message()));
      }
    }
    if (!fallback.empty()) {
      // The group failed: decode on this rank alone (compiled plans and
      // weights are untouched); the group is rebuilt afterwards.
      fallback += "; decoded on rank " + std::to_string(GlobalRank(where.local_rank)) + " alone";
      spdlog::warn("decode: request {} client {}: fallback: {}", job.request_id, job.client_id,
                   fallback);
      models::DecodeSettings alone = settings;
      alone.group = nullptr;
      alone.faults = {};
      models::DecodeReport retry;
      decoded = model->Decode(latent, alone, &retry);
      finished = UnixNow();
      for (const auto& [name, seconds] : retry.timings.entries()) timings.Add(name, seconds);
      report.tiling = retry.tiling;
      report.tiling.fallbacks.insert(report.tiling.fallbacks.begin(), "group: " + fallback);
    }
    CountRankWork(where.local_rank, report, started, finished);
    VAED_ASSIGN_OR_RETURN(raw, std::move(decoded));
    latent = torch::Tensor();
    std::vector<torch::Tensor> figures;
    if (settings.group != nullptr && fallback.empty()) {
      // Every rank's figures, for the reply. A failure here costs only them.
      Result<std::vector<torch::Tensor>> all =
          comm->Gather(RankFigures(report, started, finished, true), 0);
      if (all.ok()) figures = std::move(all).value();
    }
    if (!figures.empty()) {
      FillGroupReport(*where.spec, where.generation, figures, &group_report);
      std::lock_guard<std::mutex> lock(mu_);
      groups_[where.spec->name].last_imbalance = group_report.imbalance();
      for (int r : where.spec->ranks) {
        if (layout_.IsLocal(r)) {
          ranks_[static_cast<size_t>(layout_.LocalRank(r))].last_imbalance =
              group_report.imbalance();
        }
      }
    } else {
      // This rank alone (a group of one, or after a fallback).
      parallel::GroupSpec alone = *where.spec;
      alone.ranks = {GlobalRank(where.local_rank)};
      FillGroupReport(alone, where.generation, {RankFigures(report, started, finished, true)},
                      &group_report);
      group_report.set_size(static_cast<uint32_t>(where.spec->size));
      group_report.set_fallback(fallback.empty() ? unavailable : fallback);
    }
  }
  if (job.audio) {
    VAED_RETURN_IF_ERROR(job.cancel->Check("before the audio decode (video done)"));
    VAED_ASSIGN_OR_RETURN(wave, model->DecodeAudio(audio_latent, &report));
    audio_latent = torch::Tensor();
    send_progress("audio", {.done = 1, .total = 1, .unit = "audio"});
  }

  // Sanity checks (reported, never fatal) and output formatting.
  t0 = SteadyClock::now();
  models::OutputStats video_stats, audio_stats;
  torch::Tensor formatted;
  if (job.video) {
    VAED_ASSIGN_OR_RETURN(video_stats, models::SummarizeValues(raw, 0));
    VAED_ASSIGN_OR_RETURN(formatted, FormatOutput(*model, raw, job.video->format));
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
  {
    std::lock_guard<std::mutex> lock(report_mu_);
    for (const std::string& b : buckets) warm_buckets_.insert(b);
  }

  FillDecodeGeometry(*job.model, job.video, job.audio, job.av, out);
  if (job.video) *out->mutable_group() = std::move(group_report);
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
    std::unique_lock<std::mutex> lock(report_mu_);
    if (logged_decisions_.size() >= 4096) logged_decisions_.clear();  // bounded memory
    const bool first = !decision.empty() && logged_decisions_.insert(key).second;
    lock.unlock();
    if (first) {
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
  // The request's info-level record comes from the control loop
  // (RequestHandler::FinishDecode, logging.h); this is the geometry detail.
  spdlog::debug("decode: request {} client {} model {} {} {} {} in {:.3f} s{}", job.request_id,
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
