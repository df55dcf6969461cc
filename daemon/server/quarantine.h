// Fault accounting and quarantine of misbehaving client processes.
//
// Identity: a client process, i.e. the peer uid and pid the kernel reports
// for its connection (SO_PEERCRED, read through ZeroMQ; peer.h), not the
// client id: a process that says Hello again after being quarantined gets
// a new client id but the same identity, so it cannot escape its
// quarantine by reconnecting. All connections of one process share it.
//
// Rule: every fault (a protocol violation, an invalid or hostile region
// reference, a validation failure, a segment that faulted in a guarded
// copy, a quota exceeded) is recorded with its time. When `fault_threshold`
// faults fall within the last `window`, the identity is quarantined for
// duration = base_duration * 2^(offences - 1), capped at max_duration
// (offences counts the quarantines of this identity; the back-off doubles on
// every repeat). Quarantine ends when the duration passes or an operator
// releases it (vaectl quarantine release), which also resets the offences.
//
// Memory: at most kMaxIdentities identities are tracked; identities with no
// recent fault and no active quarantine are forgotten first.
//
// Thread-safety: none; owned by the control-loop thread.
#ifndef VAED_DAEMON_SERVER_QUARANTINE_H_
#define VAED_DAEMON_SERVER_QUARANTINE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::server {

struct QuarantinePolicy {
  // Faults within `window` that quarantine an identity; 0 disables
  // quarantine (faults are still counted).
  uint32_t fault_threshold = 10;
  std::chrono::milliseconds window{10000};
  std::chrono::milliseconds base_duration{30000};   // first quarantine
  std::chrono::milliseconds max_duration{3600000};  // cap of the doubling
};

// The process a connection belongs to.
struct PeerIdentity {
  uint32_t uid = 0;
  int32_t pid = 0;
  auto operator<=>(const PeerIdentity&) const = default;
  std::string ToString() const;  // "uid 1000 pid 4242"
};

// What a fault was, for counters and the status listing.
enum class FaultKind { kProtocol, kRegion, kValidation, kMemory, kQuota };
std::string_view FaultKindName(FaultKind kind);  // "protocol", "region", ...

struct QuarantineSnapshot {
  PeerIdentity identity;
  std::string client_name;
  uint32_t offences = 0;
  std::chrono::milliseconds remaining{0};
  std::chrono::milliseconds duration{0};
  std::string last_fault;
  uint32_t faults_in_window = 0;
  std::vector<uint64_t> client_ids;  // its clients when it was quarantined
};

class QuarantineBook {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxIdentities = 4096;

  explicit QuarantineBook(QuarantinePolicy policy) : policy_(policy) {}

  // kQuarantined with the remaining time as retry-after when `who` is in
  // quarantine at `now`; OK otherwise.
  Status Check(const PeerIdentity& who, Clock::time_point now) const;

  // Records one fault. Returns true when this fault put `who` into
  // quarantine (the caller then unmaps its regions and cancels its work).
  // `client_name` is kept for the status listing; `what` is the error text.
  bool RecordFault(const PeerIdentity& who, FaultKind kind, const std::string& client_name,
                   const std::string& what, Clock::time_point now);

  // Lifts quarantine (and resets offences and recent faults) of every
  // identity for which `match` is true; returns the released entries.
  std::vector<QuarantineSnapshot> Release(
      const std::function<bool(const QuarantineSnapshot&)>& match, Clock::time_point now);

  // Remembers the client ids `who` had when it was quarantined, so an
  // operator can name it by one (at most kMaxClientIds are kept).
  void NoteClients(const PeerIdentity& who, std::vector<uint64_t> client_ids);
  static constexpr size_t kMaxClientIds = 16;

  // Identities in quarantine at `now`.
  std::vector<QuarantineSnapshot> Active(Clock::time_point now) const;
  // Faults of `who` within the window before `now`.
  uint32_t FaultsInWindow(const PeerIdentity& who, Clock::time_point now) const;

  uint64_t total_faults() const { return total_faults_; }
  uint64_t quarantines() const { return quarantines_; }
  uint64_t faults(FaultKind kind) const { return by_kind_[static_cast<size_t>(kind)]; }
  size_t tracked() const { return entries_.size(); }
  const QuarantinePolicy& policy() const { return policy_; }

 private:
  struct Entry {
    std::deque<Clock::time_point> faults;  // within the window, oldest first
    std::string client_name;
    std::string last_fault;
    uint32_t offences = 0;
    Clock::time_point until{};  // quarantined while now < until
    std::chrono::milliseconds duration{0};
    Clock::time_point last_seen{};
    std::vector<uint64_t> client_ids;
  };
  void Trim(Entry* e, Clock::time_point now) const;
  QuarantineSnapshot Snap(const PeerIdentity& who, const Entry& e, Clock::time_point now) const;
  void EvictIfFull(Clock::time_point now);

  QuarantinePolicy policy_;
  std::map<PeerIdentity, Entry> entries_;
  uint64_t total_faults_ = 0;
  uint64_t quarantines_ = 0;
  uint64_t by_kind_[5] = {};
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_QUARANTINE_H_
