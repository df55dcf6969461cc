#include "daemon/engine/store_watcher.h"

#include <spdlog/spdlog.h>

#include <set>
#include <stdexcept>
#include <utility>

#include "daemon/parallel/communicator.h"

namespace vaed::engine {

namespace {

// Check-only polling: a TCPStore wait that times out would leave a reply in
// flight on the connection (communicator.h).
constexpr auto kPoll = std::chrono::milliseconds(5);
constexpr int kPollsPerGenerationCheck = 20;  // ~100 ms
constexpr int kPollsPerLayoutCheck = 200;     // ~1 s
constexpr auto kConnectTimeout = std::chrono::milliseconds(2000);
constexpr auto kReconnectPause = std::chrono::milliseconds(1000);
constexpr auto kComplaintInterval = std::chrono::seconds(30);

}  // namespace

StoreWatcher::StoreWatcher(const parallel::GroupSpec* spec, bool leading,
                           const GroupOptions& options, uint64_t incarnation, int local_ranks,
                           Listener* listener)
    : spec_(spec),
      leading_(leading),
      options_(options),
      incarnation_(incarnation),
      local_ranks_(local_ranks),
      listener_(listener) {}

void StoreWatcher::Run() {
  while (!listener_->WaitOrStop(kPoll)) {
    Status polled;
    try {
      polled = Poll();
    } catch (...) {
      // Our own code between the store calls (allocation failure, a bug):
      // the thread must not end, or the group could never meet again.
      polled = Internal("unexpected exception in the store watcher: " +
                        parallel::ExceptionMessage());
    }
    if (polled.ok()) continue;
    LostStore(polled);
    if (listener_->WaitOrStop(kReconnectPause)) break;
  }
}

Status StoreWatcher::Poll() {
  if (!store_) VAED_RETURN_IF_ERROR(Connect());
  ++polls_;
  if (!layout_checked_ && polls_ % kPollsPerLayoutCheck == 1) VAED_RETURN_IF_ERROR(CheckLayout());
  return leading_ ? AnswerCheck() : FollowLeader();
}

Status StoreWatcher::Connect() {
  const int node = static_cast<int>(options_.node_rank);
  VAED_ASSIGN_OR_RETURN(c10::intrusive_ptr<c10d::Store> store,
                        parallel::MakeStore({.address = options_.store_address,
                                             .node_rank = node,
                                             .world_nodes = static_cast<int>(options_.world_nodes),
                                             .timeout = kConnectTimeout,
                                             .serve = false}));
  auto connected = std::make_unique<GroupStore>(std::move(store));
  VAED_RETURN_IF_ERROR(
      connected->Set(IncarnationKey(*spec_, node), std::to_string(incarnation_)));
  VAED_RETURN_IF_ERROR(connected->Set(LayoutKey(node), std::to_string(local_ranks_)));
  store_ = std::move(connected);
  layout_checked_ = false;
  following_ = -1;
  next_job_ = 0;
  if (!first_contact_done_) {
    first_contact_done_ = true;
    listener_->FirstContactDone();
  }
  return Status::Ok();
}

Status StoreWatcher::CheckLayout() {
  // Every daemon states its group.ranks; a mismatch (the groups would never
  // meet) is reported instead of timing out forever.
  bool all_seen = true;
  for (int n = 0; n < static_cast<int>(options_.world_nodes); ++n) {
    VAED_ASSIGN_OR_RETURN(std::optional<int64_t> theirs, store_->GetInt(LayoutKey(n)));
    if (!theirs) {
      all_seen = false;
      continue;
    }
    if (*theirs != local_ranks_) {
      const std::string why = "group.ranks differs between daemons: node " + std::to_string(n) +
                              " has " + std::to_string(*theirs) + ", node " +
                              std::to_string(options_.node_rank) + " has " +
                              std::to_string(local_ranks_) + "; groups spanning them cannot meet";
      spdlog::error("executor: group {}: {}", spec_->name, why);
      listener_->LayoutMismatch(*spec_, why);
    }
  }
  layout_checked_ = all_seen;
  return Status::Ok();
}

Result<std::optional<std::string>> StoreWatcher::StaleBecause(const GenerationFacts& facts) {
  using Why = std::optional<std::string>;
  const std::string g = "generation " + std::to_string(facts.generation);
  if (!facts.started) return Why("the first job of this daemon on the group");
  if (facts.needs_rebuild) return Why(g + " failed");
  VAED_ASSIGN_OR_RETURN(std::optional<std::string> state,
                        store_->Get(StateKey(*spec_, facts.generation)));
  if (!state || *state != kGenerationBuilt) {
    return Why(g + " is " + (state ? *state : "unknown to the store (was it restarted?)"));
  }
  std::set<int> nodes;
  for (int r : spec_->ranks) nodes.insert(r / static_cast<int>(options_.ranks));
  nodes.erase(static_cast<int>(options_.node_rank));
  for (int node : nodes) {
    VAED_ASSIGN_OR_RETURN(std::optional<std::string> now,
                          store_->Get(IncarnationKey(*spec_, node)));
    VAED_ASSIGN_OR_RETURN(std::optional<std::string> joined,
                          store_->Get(JoinedKey(*spec_, facts.generation, node)));
    if (!joined || !now || *now != *joined) {
      return Why("node " + std::to_string(node) + " restarted since " + g + " was built");
    }
  }
  return Why();
}

void StoreWatcher::AnswerWithoutStore(const GenerationFacts& facts) {
  // Nothing can be checked: the job runs as the local facts say (a new
  // generation only when one is needed); if the store is really gone its
  // build fails or times out and the output rank falls back.
  const bool rebuild = !facts.started || facts.needs_rebuild;
  pending_check_.reset();
  listener_->CheckDone(*spec_, facts.generation + (rebuild && facts.started ? 1 : 0), rebuild);
}

Status StoreWatcher::AnswerCheck() {
  const std::optional<GenerationFacts> facts = listener_->CheckWanted(*spec_);
  if (!facts) return Status::Ok();
  // Answered on every path, also when this pass throws (Run, LostStore):
  // the job waits for it.
  pending_check_ = facts;
  if (facts->inject_exception) throw std::runtime_error("injected watcher_exception");
  VAED_ASSIGN_OR_RETURN(std::optional<std::string> stale, StaleBecause(*facts));
  if (!stale) {
    pending_check_.reset();
    listener_->CheckDone(*spec_, facts->generation, false);
    return Status::Ok();
  }
  VAED_ASSIGN_OR_RETURN(int64_t drawn, store_->Add(GenerationCounterKey(*spec_), 1));
  const uint64_t generation = static_cast<uint64_t>(drawn - 1);
  spdlog::info("executor: group {}: the next job builds generation {} ({})", spec_->name,
               generation, *stale);
  pending_check_.reset();
  listener_->CheckDone(*spec_, generation, true);
  return Status::Ok();
}

Status StoreWatcher::FollowLeader() {
  if (following_ >= 0) {
    VAED_ASSIGN_OR_RETURN(
        bool announced, store_->Has(JobKey(*spec_, static_cast<uint64_t>(following_), next_job_)));
    if (announced) {
      ++next_job_;
      listener_->JoinJob(*spec_, static_cast<uint64_t>(following_));
      return Status::Ok();
    }
  }
  if (following_ >= 0 && polls_ % kPollsPerGenerationCheck != 0) return Status::Ok();
  VAED_ASSIGN_OR_RETURN(std::optional<int64_t> latest, store_->GetInt(LatestKey(*spec_)));
  if (!latest || *latest == following_ || *latest < 0) return Status::Ok();
  // Only a generation still being built is met: one built without this
  // daemon's incarnation is the leader's to replace (its next job's
  // freshness check sees this daemon's new incarnation), one that failed
  // is over.
  VAED_ASSIGN_OR_RETURN(std::optional<std::string> state,
                        store_->Get(StateKey(*spec_, static_cast<uint64_t>(*latest))));
  if (!state || *state != kGenerationBuilding) return Status::Ok();
  following_ = *latest;
  next_job_ = 0;
  spdlog::info("executor: group {} (led by node {}): meeting at generation {}", spec_->name,
               spec_->leader_node, following_);
  listener_->MeetGeneration(*spec_, static_cast<uint64_t>(following_));
  return Status::Ok();
}

void StoreWatcher::LostStore(const Status& why) {
  if (std::chrono::steady_clock::now() - last_complaint_ > kComplaintInterval) {
    last_complaint_ = std::chrono::steady_clock::now();
    spdlog::warn("executor: group {}: cannot reach the store at {} ({}): {}; retrying",
                 spec_->name, options_.store_address,
                 leading_ ? "leading" : "led by node " + std::to_string(spec_->leader_node),
                 why.ToString());
  }
  store_.reset();
  following_ = -1;
  if (pending_check_) AnswerWithoutStore(*pending_check_);
  if (!first_contact_done_) {
    first_contact_done_ = true;
    listener_->FirstContactDone();
  }
}

}  // namespace vaed::engine
