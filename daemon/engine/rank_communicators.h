// A rank's membership in its VAE groups: one communicator per group it
// belongs to, (re)built per generation (DESIGN.md §2 item 7: a failed
// collective aborts the communicator; the group is rebuilt as a new
// generation).
//
// Groups of one daemon rendezvous through the executor's in-process store;
// groups spanning daemons through the TCPStore (group.store_address), each
// build on a connection of its own (communicator.h: a timed-out wait spoils
// one), kept with the communicator: the output rank announces each job on
// it. Around each build of a spanning group, the store protocol
// (group_store.h): the output rank marks the generation "building" and
// then "built" or "failed"; a rank of another daemon records which
// incarnation of its daemon joined.
//
// Thread-safety: a RankCommunicators belongs to its rank's thread.
#ifndef VAED_DAEMON_ENGINE_RANK_COMMUNICATORS_H_
#define VAED_DAEMON_ENGINE_RANK_COMMUNICATORS_H_

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "daemon/engine/engine_options.h"
#include "daemon/engine/group_store.h"
#include "daemon/parallel/communicator.h"
#include "daemon/parallel/group_layout.h"
#include "vaed/status.h"

namespace vaed::engine {

// A rank's communicator of one group, at one generation.
struct GroupChannel {
  std::unique_ptr<parallel::Communicator> comm;
  // Groups spanning daemons: the store connection it was built through,
  // and how many jobs the output rank announced on it ("<G>/gen<g>/job<n>").
  std::unique_ptr<GroupStore> store;
  int64_t jobs_announced = 0;
};

// What every rank of a daemon shares for building communicators.
struct MembershipContext {
  GroupOptions options;
  const parallel::GroupLayout* layout = nullptr;
  // The in-process store of one daemon's groups (or node 0's served
  // TCPStore); groups spanning daemons connect on their own.
  c10::intrusive_ptr<c10d::Store> shared_store;
  uint64_t incarnation = 0;  // this daemon's (group_store.h)

  bool SpansNodes(const parallel::GroupSpec& spec) const;
};

class RankCommunicators {
 public:
  // `context` must outlive this object. `nccl_device`: the CUDA ordinal of
  // this rank's device (its models' device, from the UUID order of
  // rank_devices.h; never assumed to equal local_rank), where an NCCL
  // communicator runs; -1 for a CPU rank.
  RankCommunicators(const MembershipContext* context, int local_rank, int nccl_device = -1);

  // The live communicator of `spec` at `generation`, building it when this
  // rank has none of that generation (or it was aborted), or always when
  // `fresh` (a member meeting a generation the leader announced: after a
  // restart of the store, generation numbers start again, and a live
  // communicator of the same number belongs to the leader's previous
  // incarnation). Blocks for the rendezvous, up to
  // group.collective_timeout_ms. Errors: kUnavailable when the store cannot
  // be reached or the rendezvous fails or times out
  // (last_failure_was_build() tells which).
  Result<GroupChannel*> Get(const parallel::GroupSpec& spec, uint64_t generation,
                            bool fresh = false);

  // The live communicator of exactly `generation`, or null. Never builds:
  // a member's part in a leader's job needs the generation the leader
  // built with this rank.
  GroupChannel* Live(const parallel::GroupSpec& spec, uint64_t generation);

  // Whether the last Get() failure was a communicator build (counted as a
  // group failure) rather than the store connection.
  bool last_failure_was_build() const { return last_failure_was_build_; }

 private:
  Result<std::unique_ptr<GroupStore>> Connect(const parallel::GroupSpec& spec);
  Result<std::unique_ptr<parallel::Communicator>> Build(const parallel::GroupSpec& spec,
                                                        uint64_t generation,
                                                        const c10::intrusive_ptr<c10d::Store>& store);

  const MembershipContext* const context_;
  [[maybe_unused]] const int nccl_device_;  // CUDA ordinal; -1 on a CPU rank
  const int global_rank_;
  std::map<std::string, GroupChannel> channels_;  // by group name
  bool last_failure_was_build_ = false;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_RANK_COMMUNICATORS_H_
