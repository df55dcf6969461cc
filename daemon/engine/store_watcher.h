// The store watcher of one VAE group spanning daemons: a thread per such
// group on every daemon that has ranks in it, running the side of the store
// protocol (group_store.h) that is not a rank's.
//
//   On every daemon: connects to the store (its own connection), states
//   this daemon's incarnation for the group and its group.ranks, and
//   reports a group.ranks mismatch between daemons (the groups would never
//   meet). The first connection attempt happens before the executor
//   reports ready (FirstContactDone), so that a daemon that (re)starts is
//   known to the store before it serves.
//   On the leading daemon: answers the scheduler's freshness checks
//   (scheduler.h): whether the next job may run on the current generation,
//   or on a new one drawn from the store's generation counter.
//   On the other daemons: follows the leader's generations (meets one only
//   while it is "building") and its job announcements, and queues the
//   matching runs for this daemon's ranks.
//
// Lost store (node 0 down or restarting): reconnects every second,
// complaining at most every 30 s; a member then follows the next generation
// that is built.
//
// Thread-safety: Run() is the thread's body; the Listener is called from it.
#ifndef VAED_DAEMON_ENGINE_STORE_WATCHER_H_
#define VAED_DAEMON_ENGINE_STORE_WATCHER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daemon/engine/engine_options.h"
#include "daemon/engine/group_store.h"
#include "daemon/engine/scheduler.h"
#include "daemon/parallel/group_layout.h"
#include "vaed/status.h"

namespace vaed::engine {

class StoreWatcher {
 public:
  // What the watcher tells the executor, and asks it (its mutex is taken
  // inside each call; none blocks).
  class Listener {
   public:
    virtual ~Listener() = default;
    // Member: generation `generation` of `spec` is being built: queue a
    // build run for this daemon's ranks of the group.
    virtual void MeetGeneration(const parallel::GroupSpec& spec, uint64_t generation) = 0;
    // Member: the leader announced a job on `generation`: queue a run that
    // takes part in it.
    virtual void JoinJob(const parallel::GroupSpec& spec, uint64_t generation) = 0;
    virtual void LayoutMismatch(const parallel::GroupSpec& spec, const std::string& why) = 0;
    // Leader: a job waits for a freshness check; the facts to check.
    virtual std::optional<GenerationFacts> CheckWanted(const parallel::GroupSpec& spec) = 0;
    virtual void CheckDone(const parallel::GroupSpec& spec, uint64_t generation,
                           bool rebuild) = 0;
    // The first connection attempt is over (connected or not).
    virtual void FirstContactDone() = 0;
    // Waits up to `d`; true when the watcher must end (shutdown).
    virtual bool WaitOrStop(std::chrono::milliseconds d) = 0;
  };

  // `spec` must outlive the watcher; `leading`: this daemon leads it.
  StoreWatcher(const parallel::GroupSpec* spec, bool leading, const GroupOptions& options,
               uint64_t incarnation, int local_ranks, Listener* listener);

  // The thread's body: returns once WaitOrStop() says stop. Never throws:
  // an unexpected exception is logged and the loop goes on after a pause.
  void Run();

 private:
  // One pass: connect if needed, then the periodic work. Errors mean the
  // store connection is lost.
  Status Poll();
  Status Connect();
  Status CheckLayout();
  Status AnswerCheck();
  void AnswerWithoutStore(const GenerationFacts& facts);
  // Leader: whether the generation in `facts` may take the next job, and
  // if not, why (for the log).
  Result<std::optional<std::string>> StaleBecause(const GenerationFacts& facts);
  Status FollowLeader();
  void LostStore(const Status& why);

  const parallel::GroupSpec* const spec_;
  const bool leading_;
  const GroupOptions options_;
  const uint64_t incarnation_;
  const int local_ranks_;
  Listener* const listener_;

  std::unique_ptr<GroupStore> store_;
  // Leader: a check taken from the scheduler and not yet answered.
  std::optional<GenerationFacts> pending_check_;
  bool first_contact_done_ = false;
  bool layout_checked_ = false;
  int polls_ = 0;
  // Member: the generation followed (-1: the next one that is building),
  // and the next job number of it to wait for.
  int64_t following_ = -1;
  int64_t next_job_ = 0;
  std::chrono::steady_clock::time_point last_complaint_{};
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_STORE_WATCHER_H_
