// The TCPStore protocol of VAE groups spanning daemons (group.store_address,
// world_nodes > 1), and the adapter through which the engine uses a c10d
// store: every call returns a Status; nothing the store throws gets out.
//
// Keys of group G (all "<G>/..."), and who writes them:
//   node<k>/incarnation   daemon k's incarnation id (random, per process
//                         start), written by k's store watcher on every
//                         connection to the store, before k reports READY
//                         when the store is reachable then.
//   generation_counter    atomic counter the leader draws each new
//                         generation from (Add), so that generation numbers
//                         never repeat within one store, across restarts of
//                         the leader too (a reused number would reuse the
//                         Gloo rendezvous keys of "<G>/gen<g>/").
//   latest                the newest generation the leader started.
//   gen<g>/state          "building" (the leader's output rank is in the
//                         rendezvous), then "built" or "failed".
//   gen<g>/joined/node<k> the incarnation of daemon k whose ranks entered
//                         generation g's rendezvous.
//   gen<g>/job<n>         job n of generation g was announced (the members
//                         then enter its broadcasts; the leader deletes n-2).
//   layout/node<k>        (store-wide) daemon k's group.ranks, so that a
//                         mismatch is reported instead of timing out.
//
// The protocol (engine/store_watcher.h runs it):
//   - A member daemon meets a generation only while its state is
//     "building": a generation that is "built" without this incarnation was
//     built with its previous one (or by a restarted leader) and is never
//     joined late; one that "failed" is over.
//   - Before each job on G the leader checks that its current generation is
//     "built" and that every member node's current incarnation is the one
//     that joined it; otherwise (a member restarted, the store restarted,
//     the generation failed) the job runs on a new generation drawn from
//     generation_counter. So no job is sent to a previous incarnation, and
//     whatever the start-up order and timing, the first job after a daemon
//     reported READY meets it.
//
// Thread-safety: a GroupStore wraps one store connection; use it from one
// thread (a TCPStore connection is one socket: communicator.h).
#ifndef VAED_DAEMON_ENGINE_GROUP_STORE_H_
#define VAED_DAEMON_ENGINE_GROUP_STORE_H_

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/parallel/group_layout.h"
#include "vaed/status.h"

namespace vaed::engine {

// Generation states ("<G>/gen<g>/state").
inline constexpr const char* kGenerationBuilding = "building";
inline constexpr const char* kGenerationBuilt = "built";
inline constexpr const char* kGenerationFailed = "failed";

std::string IncarnationKey(const parallel::GroupSpec& spec, int node);
std::string GenerationCounterKey(const parallel::GroupSpec& spec);
std::string LatestKey(const parallel::GroupSpec& spec);
std::string StateKey(const parallel::GroupSpec& spec, uint64_t generation);
std::string JoinedKey(const parallel::GroupSpec& spec, uint64_t generation, int node);
std::string JobKey(const parallel::GroupSpec& spec, uint64_t generation, int64_t n);
std::string LayoutKey(int node);

// A new incarnation id for this process (random, non-zero).
uint64_t NewIncarnation();

class GroupStore {
 public:
  explicit GroupStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }

  Status Set(const std::string& key, const std::string& value);
  // The value, or nullopt when the key is absent (checked first: a c10d
  // get() of a missing key would block until the store's timeout).
  Result<std::optional<std::string>> Get(const std::string& key);
  // As Get(), parsed as a decimal integer (nullopt also when unparsable).
  Result<std::optional<int64_t>> GetInt(const std::string& key);
  // Atomically adds `delta` to the counter `key` (absent = 0); returns the
  // new value.
  Result<int64_t> Add(const std::string& key, int64_t delta);
  Result<bool> Has(const std::string& key);
  Status Delete(const std::string& key);

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_GROUP_STORE_H_
