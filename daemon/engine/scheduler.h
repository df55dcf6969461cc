// Which rank does what next: the FIFO queue of decode jobs, the runs of
// groups other daemons lead, group rebuilds, and the state of every VAE
// group and local rank (DESIGN.md §2 item 9).
//
// Rules:
//   - Runs of groups another daemon leads come first (its output rank is
//     already waiting in a collective or a rendezvous for this node).
//   - A group of one daemon that failed is rebuilt (generation + 1) as soon
//     as its ranks are idle, before the next request.
//   - The head of the queue goes to the first idle group of its size (the
//     request's group_size, or group.size, reduced by group.few_tiles; 1 for
//     untiled decodes and for jobs already cancelled), among the groups this
//     node leads; several requests run at once on disjoint groups.
//   - A group spanning daemons takes a job only after a freshness check of
//     its generation against the store (group_store.h), made by that
//     group's store watcher: the job waits for it (CheckWanted/CheckDone),
//     and the check decides whether the job runs on the current generation
//     or on a new one.
//
// Thread-safety: none; the executor calls every method with its mutex held.
#ifndef VAED_DAEMON_ENGINE_SCHEDULER_H_
#define VAED_DAEMON_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/engine/decode_job.h"
#include "daemon/parallel/group_layout.h"

namespace vaed::engine {

// One use of a group: a job (null for a rebuild only) on `spec` with the
// communicators of `generation`, shared by the group's local ranks. On a
// daemon that does not lead the group (its output rank is on another
// daemon) runs come from its store watcher: `member_job` = take part in the
// leader's next job (announced through the store), else build only.
struct GroupRun {
  std::shared_ptr<DecodeJob> job;
  const parallel::GroupSpec* spec = nullptr;
  uint64_t generation = 0;
  bool member_job = false;
  // The job's result went to the sink (its reply may be out already): the
  // job no longer counts as running, although its ranks may still be
  // tidying up (releasing memory) until Finish().
  bool answered = false;
};

struct GroupState {
  uint64_t generation = 0;
  bool started = false;  // a generation was given to a run by this daemon
  bool busy = false;
  bool needs_rebuild = false;
  uint64_t runs = 0, failures = 0;
  std::string last_failure;
  double last_imbalance = 0.0;  // of its last run with figures from every rank
  // Groups spanning daemons, led here: the queued job (by sequence number,
  // 0 = none) that waits for a freshness check, whether the store watcher
  // is running it, and the job it was last done for.
  uint64_t check_for = 0;
  bool check_running = false;
  uint64_t checked_for = 0;
  bool check_throws = false;  // the job injects watcher_exception (tests)
};

struct RankSlot {
  bool busy = false;
  std::shared_ptr<GroupRun> task;  // given, not yet finished
  // Work done since start-up (status).
  double busy_seconds = 0.0;  // model decode (tile work) seconds
  uint64_t tiles = 0;         // tiles decoded (tiled models)
  double last_imbalance = 0.0;
};

// What a freshness check of a spanning group needs to know.
struct GenerationFacts {
  uint64_t generation = 0;
  bool started = false;
  bool needs_rebuild = false;
  bool inject_exception = false;  // FaultInjection.watcher_exception of the job
};

class Scheduler {
 public:
  // `layout` must outlive the scheduler; `ranks` local ranks.
  Scheduler(const parallel::GroupLayout* layout, parallel::FewTiles few_tiles, size_t ranks);

  // Queue (FIFO).
  void Push(std::shared_ptr<DecodeJob> job) { queue_.push_back({std::move(job), ++next_seq_}); }
  size_t queued() const { return queue_.size(); }
  // Queued jobs, oldest first.
  std::vector<std::shared_ptr<DecodeJob>> Queued() const;
  // Jobs given to ranks and not yet answered (each once).
  std::vector<std::shared_ptr<DecodeJob>> Running() const;
  // Empties the queue (shutdown: every job is answered by the caller).
  std::vector<std::shared_ptr<DecodeJob>> TakeQueue();

  // A run of a group another daemon leads (its store watcher). A build run
  // drops queued runs of that group's other generations (they could meet
  // nobody).
  void QueueMemberRun(const parallel::GroupSpec* spec, uint64_t generation, bool member_job);

  // Gives work to idle ranks; true when something was assigned (the
  // ranks' tasks, see task()).
  bool Schedule();

  const std::shared_ptr<GroupRun>& task(int local_rank) const {
    return ranks_[static_cast<size_t>(local_rank)].task;
  }
  bool busy(int local_rank) const { return ranks_[static_cast<size_t>(local_rank)].busy; }
  // `local_rank` finished its task: it is idle again, and so is its group
  // once all its local ranks are.
  void Finish(int local_rank);
  // The job of `local_rank`'s task is about to be answered: from now on it
  // is not in Running(), so that whoever reads the reply and then the
  // status never sees it running. Call before handing the result over.
  void MarkAnswered(int local_rank);

  // Failures and figures.
  // A run on `spec` at `generation` saw its communicator fail with `why`.
  // Returns true when this call marked the group for a rebuild (the first
  // rank to report it on the leading daemon).
  bool RecordCollectiveFailure(const parallel::GroupSpec& spec, uint64_t generation,
                               const std::string& why);
  // Building the communicator failed (the leading daemon rebuilds).
  void RecordBuildFailure(const parallel::GroupSpec& spec, const std::string& why,
                          bool count_failure);
  void RecordLayoutMismatch(const parallel::GroupSpec& spec, const std::string& why);
  void RecordImbalance(const parallel::GroupSpec& spec, double imbalance);
  void CountWork(int local_rank, double seconds, int64_t tiles);

  // Freshness checks of spanning groups led here (the store watcher).
  std::optional<GenerationFacts> CheckWanted(const parallel::GroupSpec& spec);
  // The check's outcome: the next job runs on `generation`; `rebuild` says
  // whether it is a new one.
  void CheckDone(const parallel::GroupSpec& spec, uint64_t generation, bool rebuild);

  const GroupState& group(const std::string& name) const { return groups_.at(name); }
  const RankSlot& rank(int local_rank) const { return ranks_[static_cast<size_t>(local_rank)]; }
  size_t ranks() const { return ranks_.size(); }
  bool SpansNodes(const parallel::GroupSpec& spec) const;

 private:
  struct QueuedJob {
    std::shared_ptr<DecodeJob> job;
    uint64_t seq = 0;  // 1, 2, ... in arrival order
  };

  bool LocalRanksIdle(const parallel::GroupSpec& spec) const;
  void Give(const std::shared_ptr<GroupRun>& run);
  // Whether the head job may run on `spec` now (spanning groups: once its
  // freshness check is done; requests it otherwise).
  bool FreshFor(const parallel::GroupSpec& spec, const QueuedJob& head);
  bool ScheduleMemberRun();
  bool ScheduleRebuild();
  bool ScheduleHead();
  // The groups led here that may take `job`: the largest size <= the
  // chosen one that has such groups.
  std::vector<const parallel::GroupSpec*> CandidateGroups(const DecodeJob& job) const;

  const parallel::GroupLayout* const layout_;
  const parallel::FewTiles few_tiles_;
  std::deque<QueuedJob> queue_;
  uint64_t next_seq_ = 0;
  std::deque<std::shared_ptr<GroupRun>> member_runs_;
  std::vector<RankSlot> ranks_;
  std::map<std::string, GroupState> groups_;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_SCHEDULER_H_
