// What each rank thread of the executor does (executor.h): take the next
// task the scheduler gives it, build or reuse its communicator, and run its
// part: the decode as the group's output rank (decode_run.h), its tiles as
// a member (group_job.h), or a rebuild only.
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>

#include "daemon/engine/decode_run.h"
#include "daemon/engine/executor.h"
#include "daemon/engine/group_job.h"
#include "daemon/engine/memory_policy.h"
#include "daemon/engine/torch_cuda.h"
#include "daemon/parallel/communicator.h"

namespace vaed::engine {

namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// A message of `job` to the server through `hand` (a ResultSink call),
// with what it throws logged, not propagated: the rank decodes on, and the
// message (`what`) is lost.
template <typename Event>
std::function<void(const Event&)> ToSink(
    const std::shared_ptr<const DecodeJob>& job, const char* what,
    std::function<void(const std::shared_ptr<const DecodeJob>&, const Event&)> hand) {
  return [job, what, hand = std::move(hand)](const Event& event) {
    try {
      hand(job, event);
    } catch (...) {
      spdlog::error("executor: handing {} of request {} to the server: {}", what,
                    job->request_id, parallel::ExceptionMessage());
    }
  };
}

}  // namespace

void Executor::RankLoop(int local_rank) {
  try {
    // OpenMP thread counts are per calling thread: set them here, on the
    // thread that runs this rank's models.
    at::set_num_threads(options_.intra_op_threads);
    SetUpRankDevice(local_rank);
    BuildLocalCommunicators(local_rank);
  } catch (...) {
    spdlog::error("executor: rank {}: setting up: {}", GlobalRank(local_rank),
                  parallel::ExceptionMessage());
  }
  RunWarmUp(local_rank);
  {
    MutexLock lock(&mu_);
    ++ranks_ready_;
  }
  cv_.notify_all();
  if (local_rank == 0) {
    spdlog::info("executor: {} rank{} with {} intra-op threads each, queue capacity {}; groups: {}",
                 ranks_.size(), ranks_.size() == 1 ? "" : "s", options_.intra_op_threads,
                 options_.queue_capacity, layout_.groups().size());
  }
  for (;;) {
    std::shared_ptr<GroupRun> run;
    try {
      run = NextTask(local_rank);
      if (!run) break;
      RunTask(local_rank, *run);
    } catch (...) {
      // Not from a decode (those are caught where they run): the rank's own
      // bookkeeping. The task is over either way; the rank serves on.
      spdlog::error("executor: rank {}: unexpected exception: {}", GlobalRank(local_rank),
                    parallel::ExceptionMessage());
      if (!run) continue;
    }
    {
      MutexLock lock(&mu_);
      scheduler_.Finish(local_rank);
    }
    cv_.notify_all();
  }
  spdlog::debug("executor: rank {} stopped", local_rank);
}

void Executor::BuildLocalCommunicators(int local_rank) {
  // In the layout's order (the same on every rank, so the rendezvous cannot
  // deadlock). Groups spanning daemons meet at their first request instead
  // (the other daemons may start later).
  for (const parallel::GroupSpec* g : layout_.OfRank(GlobalRank(local_rank))) {
    if (g->size <= 1 || membership_.SpansNodes(*g)) continue;
    RankCommunicators& comms = *ranks_[static_cast<size_t>(local_rank)].comms;
    Result<GroupChannel*> built = comms.Get(*g, 0);
    if (built.ok()) continue;
    NoteBuildFailure(local_rank, *g, built.status(), comms.last_failure_was_build());
  }
}

void Executor::SetUpRankDevice(int local_rank) {
  const auto i = static_cast<size_t>(local_rank);
  const bool cuda = i < rank_devices_.size() && rank_devices_[i].is_cuda;
  if (!rank_streams_ && !cuda) return;  // a CPU rank: its stream has no device
  Result<std::unique_ptr<RankStream>> stream =
      rank_streams_ ? rank_streams_(local_rank)
                    : RankStream::OnCudaDevice(rank_devices_[i].cuda.ordinal);
  if (stream.ok()) {
    ranks_[i].stream = std::move(stream).value();
    return;
  }
  const std::string where = cuda ? " on " + rank_devices_[i].Describe() : "";
  MutexLock lock(&mu_);
  warm_up_failures_.emplace(local_rank, stream.status().WithContext(
                                            "rank " + std::to_string(GlobalRank(local_rank)) +
                                            where));
}

void Executor::RunWarmUp(int local_rank) {
  if (warm_ups_.empty()) return;
  Status s;
  try {
    s = WarmUpRank(GlobalRank(local_rank), ranks_[static_cast<size_t>(local_rank)].models,
                   warm_ups_, &history_);
  } catch (...) {
    s = Internal("warm-up on rank " + std::to_string(GlobalRank(local_rank)) +
                 ": unexpected exception: " + parallel::ExceptionMessage());
  }
  // What the warm-up's decodes left on the heap is bounded as after a
  // request (memory_policy.h).
  (void)ReleaseFreedMemoryAbove(options_.retained_heap_mib << 20);
  if (s.ok()) return;
  MutexLock lock(&mu_);
  warm_up_failures_.emplace(local_rank, std::move(s));
}

std::shared_ptr<GroupRun> Executor::NextTask(int local_rank) {
  {
    MutexLock lock(&mu_);
    for (;;) {
      if (scheduler_.task(local_rank) != nullptr) return scheduler_.task(local_rank);
      if (stopping_) break;
      if (!scheduler_.busy(local_rank) && scheduler_.Schedule()) {
        cv_.notify_all();  // the ranks it gave work to
        continue;
      }
      cv_.wait(mu_);
    }
  }
  AnswerQueueOnStop();
  return nullptr;
}

void Executor::AnswerQueueOnStop() {
  // Queued work is answered, not dropped: nothing a client sent is lost
  // silently.
  std::vector<std::shared_ptr<DecodeJob>> queued;
  Status why;
  {
    MutexLock lock(&mu_);
    queued = scheduler_.TakeQueue();
    why = fatal_error_.empty()
              ? Cancelled("the daemon is shutting down")
              : Unavailable("the daemon hit a sticky device error and is restarting (" +
                            fatal_error_ + "); retry once it is back");
  }
  for (const std::shared_ptr<DecodeJob>& job : queued) Answer(job, why);
}

void Executor::RunTask(int local_rank, const GroupRun& run) {
  const parallel::GroupSpec& spec = *run.spec;
  RankCommunicators& comms = *ranks_[static_cast<size_t>(local_rank)].comms;
  GroupChannel* channel = nullptr;
  std::string unavailable;
  if (run.member_job) {
    // The leader built this generation with this rank (a build run came
    // first); building it now could meet nobody, so a rank without it sits
    // the job out and the leader falls back.
    channel = comms.Live(spec, run.generation);
    if (channel == nullptr) {
      spdlog::warn("executor: rank {}: group {}: no live communicator of generation {}; "
                   "sitting out the leader's job",
                   GlobalRank(local_rank), spec.name, run.generation);
    }
  } else if (spec.size > 1) {
    // A build run from the store watcher meets a generation the leader is
    // building now: never an older communicator of the same number.
    const bool meet = !run.job && spec.leader_node != layout_.options().node_rank;
    Result<GroupChannel*> got = comms.Get(spec, run.generation, meet);
    if (got.ok()) {
      channel = *got;
    } else {
      unavailable = got.status().message();
      NoteBuildFailure(local_rank, spec, got.status(), comms.last_failure_was_build());
    }
  }
  const bool output_rank = spec.ranks.front() == GlobalRank(local_rank);
  if (run.member_job || (run.job && !output_rank)) {
    if (channel != nullptr) RunAsMember(local_rank, spec, run.job.get(), *channel);
  } else if (run.job) {
    RunAsOutputRank(local_rank, run, channel, unavailable);
  }
  NoteGroupFailure(run, channel);
  // Bound what the memory policy retains between requests (memory_policy.h).
  if (ReleaseFreedMemoryAbove(options_.retained_heap_mib << 20)) {
    spdlog::debug("executor: heap above {} MiB after a request; returned its free part",
                  options_.retained_heap_mib);
  }
}

void Executor::NoteGroupFailure(const GroupRun& run, GroupChannel* channel) {
  if (channel == nullptr || !channel->comm->aborted()) return;
  const std::string why = channel->comm->abort_reason();
  MutexLock lock(&mu_);
  if (scheduler_.RecordCollectiveFailure(*run.spec, run.generation, why)) {
    spdlog::warn("executor: group {} generation {} failed ({}); rebuilding", run.spec->name,
                 run.generation, why);
  }
}

void Executor::RunAsOutputRank(int local_rank, const GroupRun& run, GroupChannel* channel,
                               const std::string& unavailable) {
  const std::shared_ptr<DecodeJob>& job = run.job;
  const auto t0 = SteadyClock::now();
  bool decoded = false;
  Result<DecodeResult> result = Internal("request " + std::to_string(job->request_id) +
                                         " was not decoded");
  try {
    result = Execute(local_rank, run, channel, unavailable, &decoded);
  } catch (...) {
    result = Internal("decode request " + std::to_string(job->request_id) +
                      ": unexpected exception on rank " +
                      std::to_string(GlobalRank(local_rank)) + ": " +
                      parallel::ExceptionMessage());
    spdlog::error("executor: {}", result.status().message());
    // The members may be waiting for this rank's announcement or tiles:
    // closing the communicator ends their wait now (the group is rebuilt).
    if (channel != nullptr) channel->comm->Abort(result.status().message());
    // The run's fence waited while the exception unwound (rank_stream.h);
    // asked again, a sticky device error answers again, and must not be
    // lost behind the exception's message.
    result = AfterFence(std::move(result), ranks_[static_cast<size_t>(local_rank)].stream->Fence());
  }
  const double seconds = SecondsSince(t0);
  // The health flag first: once this rank counts as answered another may
  // take work, and whoever sees this answer sees the daemon unhealthy too.
  if (!result.ok() && result.status().reason() == ErrorReason::kStickyDevice) {
    NoteStickyDeviceError(result.status().message());
  }
  {
    MutexLock lock(&mu_);
    // Moving average over decodes that ran (not instant rejections).
    if (decoded) {
      mean_decode_seconds_ =
          mean_decode_seconds_ == 0.0 ? seconds : 0.8 * mean_decode_seconds_ + 0.2 * seconds;
    }
    // Before the reply goes out: a client that reads it and then asks for
    // the status must not see this job still running.
    scheduler_.MarkAnswered(local_rank);
  }
  Answer(job, std::move(result));
}

Result<DecodeResult> Executor::Execute(int local_rank, const GroupRun& run,
                                       GroupChannel* channel, const std::string& unavailable,
                                       bool* decoded) {
  const DecodeJob& job = *run.job;
  // A job cancelled or past its deadline while queued never starts.
  if (Status s = job.cancel->Check("while queued (the decode never started)"); !s.ok()) {
    spdlog::info("decode request {} of client {} not started: {}", job.request_id,
                 job.client_id, s.ToString());
    if (channel != nullptr) {  // the members stand down
      (void)AnnounceJob(*channel, *run.spec, run.generation, membership_.SpansNodes(*run.spec),
                        &job, nullptr);
    }
    return s;
  }
  if (job.settings.faults.rank_exception > 0) {
    // Tests: something on the rank's own path throws (not LibTorch).
    throw std::runtime_error("injected rank_exception");
  }
  Rank& rank = ranks_[static_cast<size_t>(local_rank)];
  std::shared_ptr<DecodeJob> shared = run.job;
  RankContext ctx{.local_rank = local_rank,
                  .global_rank = GlobalRank(local_rank),
                  .model = rank.models[job.model_index],
                  .spec = run.spec,
                  .generation = run.generation,
                  .channel = channel,
                  .unavailable = unavailable,
                  .spans_nodes = membership_.SpansNodes(*run.spec),
                  .history = &history_,
                  .progress = nullptr,
                  .final_range = nullptr,
                  .stream = rank.stream.get()};
  if (job.progress) {
    ctx.progress = ToSink<ProgressEvent>(
        shared, "a progress event",
        [this](const auto& j, const ProgressEvent& e) { sink_->OnProgress(j, e); });
  }
  if (job.stream_output) {
    ctx.final_range = ToSink<FinalRangeEvent>(
        shared, "a final range",
        [this](const auto& j, const FinalRangeEvent& e) { sink_->OnFinalRange(j, e); });
  }
  RankWork work;
  *decoded = true;
  Result<DecodeResult> result = RunDecode(job, ctx, &work);
  MutexLock lock(&mu_);
  scheduler_.CountWork(local_rank, work.seconds, work.tiles);
  if (result.ok() && result->group && result->group->ranks.size() > 1) {
    scheduler_.RecordImbalance(*run.spec, result->group->imbalance);
  }
  if (!result.ok()) {
    spdlog::warn("decode request {} of client {} failed: {}", job.request_id, job.client_id,
                 result.status().ToString());
  }
  return result;
}

void Executor::RunAsMember(int local_rank, const parallel::GroupSpec& spec, const DecodeJob* job,
                           GroupChannel& channel) {
  Rank& rank = ranks_[static_cast<size_t>(local_rank)];
  RequestFence fence(*rank.stream);  // before any device work of the part
  Result<bool> part = RunMemberPart(local_rank, spec, job, channel);
  part = AfterFence(std::move(part), fence.Release());
  // An injected failure armed for this job ends with it (the job may have
  // been stood down before the failing collective).
  if (job != nullptr && job->settings.faults.member_device_fatal > 0) {
    channel.comm->FailNthCollective(0);
  }
  if (!part.ok() && part.status().reason() == ErrorReason::kStickyDevice) {
    NoteStickyDeviceError("rank " + std::to_string(GlobalRank(local_rank)) +
                          " (a member of group " + spec.name + "): " + part.status().message());
  }
}

Result<bool> Executor::RunMemberPart(int local_rank, const parallel::GroupSpec& spec,
                                     const DecodeJob* job, GroupChannel& channel) {
  parallel::Communicator& comm = *channel.comm;
  const int global = GlobalRank(local_rank);
  try {
    Rank& rank = ranks_[static_cast<size_t>(local_rank)];
    if (job != nullptr && job->settings.faults.member_device_fatal > 0) {
      // Its first tile gather, after the header, model name and latent.
      comm.FailNthCollective(4, ErrorReason::kStickyDevice);
    }
    Result<std::optional<ReceivedJob>> received = ReceiveJob(comm, rank.registry->device());
    if (!received.ok()) return received.status();  // failed (aborted)
    if (!*received) return false;                  // stood down
    ReceivedJob& r = **received;
    // On the output rank's daemon the model was resolved once; a member of
    // a group led by another daemon knows only its name.
    models::VaeModel* model =
        job != nullptr ? rank.models[job->model_index] : rank.registry->Find(r.model_name);
    if (job != nullptr) r.settings.cancel = job->cancel.get();
    r.settings.group = &comm;
    if (job != nullptr && job->settings.faults.member_exception > 0) {
      throw std::runtime_error("injected member_exception");
    }
    models::DecodeReport report;
    const double started = UnixNow();
    Result<torch::Tensor> out =
        model != nullptr
            ? model->Decode(r.latent, r.settings, &report)
            : Result<torch::Tensor>(NotFound("model '" + r.model_name + "' on rank " +
                                             std::to_string(global)));
    const double finished = UnixNow();
    const RankWork work = WorkOf(report, started, finished);
    {
      MutexLock lock(&mu_);
      scheduler_.CountWork(local_rank, work.seconds, work.tiles);
    }
    if (!out.ok()) {
      // The output rank must not wait for this rank's tiles until its timeout.
      if (!comm.aborted()) {
        comm.Abort("rank " + std::to_string(global) + " failed its part: " +
                   out.status().message());
      }
      return out.status();
    }
    // A failure here costs the reply its figures only (the tiles went).
    VAED_RETURN_IF_ERROR(GatherFigures(comm, spec,
                                       {.rank = static_cast<uint32_t>(global),
                                        .tiles = work.tiles,
                                        .decode_seconds = work.seconds,
                                        .started_unix = started,
                                        .finished_unix = finished})
                             .status());
    return true;
  } catch (...) {
    const std::string why = parallel::ExceptionMessage();
    spdlog::error("executor: rank {}: unexpected exception in its part of a job on group {}: {}",
                  global, spec.name, why);
    comm.Abort("rank " + std::to_string(global) + " failed its part: unexpected exception: " +
               why);
    return Internal("unexpected exception: " + why);
  }
}

void Executor::NoteBuildFailure(int local_rank, const parallel::GroupSpec& spec,
                                const Status& why, bool was_build) {
  {
    MutexLock lock(&mu_);
    scheduler_.RecordBuildFailure(spec, why.message(), was_build);
  }
  if (why.reason() == ErrorReason::kStickyDevice) {
    NoteStickyDeviceError("rank " + std::to_string(GlobalRank(local_rank)) +
                          " building the communicator of group " + spec.name + ": " +
                          why.message());
  }
}

void Executor::NoteStickyDeviceError(const std::string& what) {
  {
    MutexLock lock(&mu_);
    if (!fatal_error_.empty()) return;
    fatal_error_ = what;
    stopping_ = true;  // answer the queue and take nothing more
  }
  spdlog::critical("executor: sticky device error; the daemon must restart: {}", what);
  cv_.notify_all();
}

void Executor::Answer(const std::shared_ptr<DecodeJob>& job, Result<DecodeResult> result) {
  try {
    sink_->OnFinished(job, std::move(result));
  } catch (...) {
    spdlog::error("executor: handing the result of request {} of client {} to the server: {}",
                  job->request_id, job->client_id, parallel::ExceptionMessage());
  }
}

}  // namespace vaed::engine
