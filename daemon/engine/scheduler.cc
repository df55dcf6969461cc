#include "daemon/engine/scheduler.h"

#include <algorithm>
#include <set>

namespace vaed::engine {

Scheduler::Scheduler(const parallel::GroupLayout* layout, parallel::FewTiles few_tiles,
                     size_t ranks)
    : layout_(layout), few_tiles_(few_tiles), ranks_(ranks) {
  for (const parallel::GroupSpec& g : layout_->groups()) groups_[g.name];
}

std::vector<std::shared_ptr<DecodeJob>> Scheduler::Queued() const {
  std::vector<std::shared_ptr<DecodeJob>> out;
  out.reserve(queue_.size());
  for (const QueuedJob& q : queue_) out.push_back(q.job);
  return out;
}

std::vector<std::shared_ptr<DecodeJob>> Scheduler::Running() const {
  std::vector<std::shared_ptr<DecodeJob>> out;
  std::set<const DecodeJob*> seen;
  for (const RankSlot& r : ranks_) {
    if (r.task && r.task->job && !r.task->answered && seen.insert(r.task->job.get()).second) {
      out.push_back(r.task->job);
    }
  }
  return out;
}

std::vector<std::shared_ptr<DecodeJob>> Scheduler::TakeQueue() {
  std::vector<std::shared_ptr<DecodeJob>> out = Queued();
  queue_.clear();
  return out;
}

bool Scheduler::SpansNodes(const parallel::GroupSpec& spec) const {
  return std::any_of(spec.ranks.begin(), spec.ranks.end(),
                     [&](int r) { return !layout_->IsLocal(r); });
}

bool Scheduler::LocalRanksIdle(const parallel::GroupSpec& spec) const {
  for (int r : spec.ranks) {
    if (layout_->IsLocal(r) && ranks_[static_cast<size_t>(layout_->LocalRank(r))].busy) {
      return false;
    }
  }
  return true;
}

void Scheduler::Give(const std::shared_ptr<GroupRun>& run) {
  GroupState& st = groups_[run->spec->name];
  st.busy = true;
  if (run->job || run->member_job) ++st.runs;
  for (int r : run->spec->ranks) {
    if (!layout_->IsLocal(r)) continue;
    RankSlot& rank = ranks_[static_cast<size_t>(layout_->LocalRank(r))];
    rank.busy = true;
    rank.task = run;
  }
}

void Scheduler::QueueMemberRun(const parallel::GroupSpec* spec, uint64_t generation,
                               bool member_job) {
  auto run = std::make_shared<GroupRun>();
  run->spec = spec;
  run->generation = generation;
  run->member_job = member_job;
  if (!member_job) {
    std::erase_if(member_runs_, [&](const std::shared_ptr<GroupRun>& r) {
      return r->spec == spec && r->generation != generation;
    });
  }
  member_runs_.push_back(std::move(run));
}

bool Scheduler::Schedule() {
  return ScheduleMemberRun() || ScheduleRebuild() || ScheduleHead();
}

bool Scheduler::ScheduleMemberRun() {
  // Their leader is already waiting in a collective (or a rendezvous) for
  // this node's ranks: they go first.
  for (auto it = member_runs_.begin(); it != member_runs_.end(); ++it) {
    if (!LocalRanksIdle(*(*it)->spec)) continue;
    std::shared_ptr<GroupRun> run = std::move(*it);
    member_runs_.erase(it);
    groups_[run->spec->name].generation = run->generation;
    Give(run);
    return true;
  }
  return false;
}

bool Scheduler::ScheduleRebuild() {
  // Groups of this daemon that failed are rebuilt as soon as their ranks
  // are idle, so the next request sees the new generation. A group spanning
  // daemons is rebuilt by its next job instead (its freshness check draws
  // the generation; the other daemons' ranks may be busy for a while).
  const int node = layout_->options().node_rank;
  for (const parallel::GroupSpec& g : layout_->groups()) {
    GroupState& st = groups_[g.name];
    if (g.size > 1 && g.leader_node == node && !SpansNodes(g) && st.needs_rebuild &&
        LocalRanksIdle(g)) {
      ++st.generation;
      st.needs_rebuild = false;
      auto run = std::make_shared<GroupRun>();
      run->spec = &g;
      run->generation = st.generation;
      Give(run);
      return true;
    }
  }
  return false;
}

std::vector<const parallel::GroupSpec*> Scheduler::CandidateGroups(const DecodeJob& job) const {
  int size = 1;
  if (job.video && !job.cancel->Check("scheduling").ok()) {
    size = 1;  // answered without decoding by whichever rank takes it
  } else if (job.video && job.model->info().caps.spatial_sharding) {
    // An untiled decode (0 tiles) cannot be spread: one rank.
    const int64_t tiles = job.model->TilesPerUnit(job.video->latent.shape, job.settings);
    Result<int> chosen = parallel::ChooseGroupSize(
        *layout_, static_cast<int>(job.requested_group_size), tiles, few_tiles_);
    size = chosen.ok() && tiles > 0 ? *chosen : 1;
  }
  // Only groups this node leads take its requests (size 1 always has one).
  const int node = layout_->options().node_rank;
  std::vector<const parallel::GroupSpec*> led;
  for (; size >= 1 && led.empty(); --size) {
    for (const parallel::GroupSpec* g : layout_->OfSize(size)) {
      if (g->leader_node == node) led.push_back(g);
    }
  }
  return led;
}

bool Scheduler::FreshFor(const parallel::GroupSpec& spec, const QueuedJob& head) {
  if (!SpansNodes(spec)) return true;
  GroupState& st = groups_[spec.name];
  if (st.checked_for == head.seq) return true;
  if (st.check_for != head.seq) {
    st.check_for = head.seq;
    st.check_running = false;
    st.check_throws = head.job->settings.faults.watcher_exception > 0;
  }
  return false;
}

bool Scheduler::ScheduleHead() {
  if (queue_.empty()) return false;
  const QueuedJob& head = queue_.front();
  for (const parallel::GroupSpec* g : CandidateGroups(*head.job)) {
    if (!LocalRanksIdle(*g) || !FreshFor(*g, head)) continue;
    GroupState& st = groups_[g->name];
    auto run = std::make_shared<GroupRun>();
    run->job = head.job;
    run->spec = g;
    if (!SpansNodes(*g) && st.needs_rebuild) {
      ++st.generation;
      st.needs_rebuild = false;
    }
    st.started = true;
    run->generation = st.generation;
    queue_.pop_front();
    Give(run);
    return true;
  }
  return false;
}

void Scheduler::Finish(int local_rank) {
  RankSlot& me = ranks_[static_cast<size_t>(local_rank)];
  const std::shared_ptr<GroupRun> run = std::move(me.task);
  me.task.reset();
  me.busy = false;
  if (run && LocalRanksIdle(*run->spec)) groups_[run->spec->name].busy = false;
}

void Scheduler::MarkAnswered(int local_rank) {
  const std::shared_ptr<GroupRun>& run = ranks_[static_cast<size_t>(local_rank)].task;
  if (run) run->answered = true;  // shared by the run's local ranks
}

bool Scheduler::RecordCollectiveFailure(const parallel::GroupSpec& spec, uint64_t generation,
                                        const std::string& why) {
  GroupState& st = groups_[spec.name];
  if (spec.leader_node != layout_->options().node_rank) {
    // Led by another daemon: it draws the next generation.
    if (st.last_failure != why) ++st.failures;
    st.last_failure = why;
    return false;
  }
  if (st.needs_rebuild || st.generation != generation) return false;
  // The first rank to get here marks the group (all of its ranks see the
  // failure, since a failed collective closes the communicator).
  st.needs_rebuild = true;
  ++st.failures;
  st.last_failure = why;
  return true;
}

void Scheduler::RecordBuildFailure(const parallel::GroupSpec& spec, const std::string& why,
                                   bool count_failure) {
  GroupState& st = groups_[spec.name];
  // The leader's daemon rebuilds; the others follow its generations.
  if (spec.leader_node == layout_->options().node_rank) st.needs_rebuild = true;
  if (count_failure) ++st.failures;
  st.last_failure = why;
}

void Scheduler::RecordLayoutMismatch(const parallel::GroupSpec& spec, const std::string& why) {
  groups_[spec.name].last_failure = why;
}

void Scheduler::RecordImbalance(const parallel::GroupSpec& spec, double imbalance) {
  groups_[spec.name].last_imbalance = imbalance;
  for (int r : spec.ranks) {
    if (layout_->IsLocal(r)) {
      ranks_[static_cast<size_t>(layout_->LocalRank(r))].last_imbalance = imbalance;
    }
  }
}

void Scheduler::CountWork(int local_rank, double seconds, int64_t tiles) {
  RankSlot& rank = ranks_[static_cast<size_t>(local_rank)];
  rank.busy_seconds += seconds;
  rank.tiles += static_cast<uint64_t>(std::max<int64_t>(0, tiles));
}

std::optional<GenerationFacts> Scheduler::CheckWanted(const parallel::GroupSpec& spec) {
  GroupState& st = groups_[spec.name];
  if (st.check_for == 0 || st.check_for == st.checked_for || st.check_running) {
    return std::nullopt;
  }
  st.check_running = true;
  return GenerationFacts{.generation = st.generation,
                         .started = st.started,
                         .needs_rebuild = st.needs_rebuild,
                         .inject_exception = st.check_throws};
}

void Scheduler::CheckDone(const parallel::GroupSpec& spec, uint64_t generation, bool rebuild) {
  GroupState& st = groups_[spec.name];
  st.generation = generation;
  if (rebuild) st.needs_rebuild = false;
  st.checked_for = st.check_for;
  st.check_running = false;
}

}  // namespace vaed::engine
