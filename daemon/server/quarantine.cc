#include "daemon/server/quarantine.h"

#include <algorithm>
#include <tuple>

namespace vaed::server {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

}  // namespace

std::string PeerIdentity::ToString() const {
  return "uid " + std::to_string(uid) + " pid " + std::to_string(pid);
}

std::string_view FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kProtocol:
      return "protocol";
    case FaultKind::kRegion:
      return "region";
    case FaultKind::kValidation:
      return "validation";
    case FaultKind::kMemory:
      return "memory";
    case FaultKind::kQuota:
      return "quota";
  }
  return "unknown";
}

void QuarantineBook::Trim(Entry* e, Clock::time_point now) const {
  while (!e->faults.empty() && now - e->faults.front() > policy_.window) e->faults.pop_front();
}

QuarantineSnapshot QuarantineBook::Snap(const PeerIdentity& who, const Entry& e,
                                        Clock::time_point now) const {
  QuarantineSnapshot s;
  s.identity = who;
  s.client_name = e.client_name;
  s.offences = e.offences;
  s.remaining = now < e.until ? duration_cast<milliseconds>(e.until - now) : milliseconds(0);
  s.duration = e.duration;
  s.last_fault = e.last_fault;
  s.client_ids = e.client_ids;
  s.faults_in_window = static_cast<uint32_t>(
      std::count_if(e.faults.begin(), e.faults.end(),
                    [&](Clock::time_point t) { return now - t <= policy_.window; }));
  return s;
}

Status QuarantineBook::Check(const PeerIdentity& who, Clock::time_point now) const {
  auto it = entries_.find(who);
  if (it == entries_.end() || now >= it->second.until) return Status::Ok();
  const Entry& e = it->second;
  const auto remaining = duration_cast<milliseconds>(e.until - now);
  // Round up so a client retrying at retry_after is really out.
  const uint32_t retry_ms =
      static_cast<uint32_t>(std::min<int64_t>(remaining.count() + 1, int64_t{UINT32_MAX}));
  return Quarantined(
      "client process " + who.ToString() + " ('" + e.client_name + "') is quarantined for " +
          std::to_string(e.duration.count()) + " ms after " +
          std::to_string(policy_.fault_threshold) + " faults within " +
          std::to_string(policy_.window.count()) + " ms (offence " + std::to_string(e.offences) +
          "; last fault: " + e.last_fault + "); retry after " + std::to_string(retry_ms) +
          " ms, or ask an operator to run `vaectl quarantine release pid:" +
          std::to_string(who.pid) + "`",
      retry_ms);
}

void QuarantineBook::EvictIfFull(Clock::time_point now) {
  if (entries_.size() < kMaxIdentities) return;
  // Forget the identity least worth keeping: not quarantined, fewest
  // offences, least recently seen.
  auto victim = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (now < it->second.until) continue;
    if (victim == entries_.end() ||
        std::tie(it->second.offences, it->second.last_seen) <
            std::tie(victim->second.offences, victim->second.last_seen)) {
      victim = it;
    }
  }
  if (victim == entries_.end()) victim = entries_.begin();  // all quarantined: oldest key
  entries_.erase(victim);
}

bool QuarantineBook::RecordFault(const PeerIdentity& who, FaultKind kind,
                                 const std::string& client_name, const std::string& what,
                                 Clock::time_point now) {
  ++total_faults_;
  ++by_kind_[static_cast<size_t>(kind)];
  if (entries_.find(who) == entries_.end()) EvictIfFull(now);
  Entry& e = entries_[who];
  e.last_seen = now;
  if (!client_name.empty()) e.client_name = client_name;
  constexpr size_t kMaxFaultText = 240;
  e.last_fault = std::string(FaultKindName(kind)) + ": " + what.substr(0, kMaxFaultText);
  if (now < e.until) return false;  // already quarantined: nothing more to decide
  e.faults.push_back(now);
  Trim(&e, now);
  if (policy_.fault_threshold == 0 || e.faults.size() < policy_.fault_threshold) return false;
  e.offences += 1;
  // base * 2^(offences - 1), capped; the shift is bounded so it cannot
  // overflow.
  const int shift = static_cast<int>(std::min<uint32_t>(e.offences - 1, 20));
  e.duration = std::min(policy_.max_duration, policy_.base_duration * (int64_t{1} << shift));
  e.until = now + e.duration;
  e.faults.clear();
  ++quarantines_;
  return true;
}

std::vector<QuarantineSnapshot> QuarantineBook::Release(
    const std::function<bool(const QuarantineSnapshot&)>& match, Clock::time_point now) {
  std::vector<QuarantineSnapshot> out;
  for (auto& [who, e] : entries_) {
    const QuarantineSnapshot s = Snap(who, e, now);
    if (s.remaining.count() == 0 && s.offences == 0) continue;  // nothing to release
    if (!match(s)) continue;
    out.push_back(s);
    e.until = Clock::time_point{};
    e.offences = 0;
    e.faults.clear();
  }
  return out;
}

void QuarantineBook::NoteClients(const PeerIdentity& who, std::vector<uint64_t> client_ids) {
  auto it = entries_.find(who);
  if (it == entries_.end()) return;
  if (client_ids.size() > kMaxClientIds) client_ids.resize(kMaxClientIds);
  it->second.client_ids = std::move(client_ids);
}

std::vector<QuarantineSnapshot> QuarantineBook::Active(Clock::time_point now) const {
  std::vector<QuarantineSnapshot> out;
  for (const auto& [who, e] : entries_) {
    if (now < e.until) out.push_back(Snap(who, e, now));
  }
  return out;
}

uint32_t QuarantineBook::FaultsInWindow(const PeerIdentity& who, Clock::time_point now) const {
  auto it = entries_.find(who);
  if (it == entries_.end()) return 0;
  return Snap(who, it->second, now).faults_in_window;
}

}  // namespace vaed::server
