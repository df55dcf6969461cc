#include "daemon/server/fault_accounting.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/server/printable_name.h"

namespace vaed::server {

namespace {

// Fault kind by error code, for errors that are the client's doing; nullopt
// for the others (daemon-side, capacity, deadlines, unknown_client).
std::optional<FaultKind> FaultKindOf(StatusCode code) {
  switch (code) {
    case StatusCode::kProtocolError:
      return FaultKind::kProtocol;
    case StatusCode::kClientFault:
      return FaultKind::kMemory;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kVersionMismatch:
    case StatusCode::kPermissionDenied:
      return FaultKind::kValidation;
    default:
      return std::nullopt;
  }
}

bool AllDigits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// What a ReleaseQuarantine names, parsed once.
struct ReleaseTarget {
  std::string what;                      // as sent
  std::optional<uint64_t> client_id;     // all digits: a client id...
  std::optional<PeerIdentity> by_id;     // ...and the process it belongs to now
  std::optional<uint64_t> pid, uid;      // "pid:N", "uid:N"

  bool Matches(const QuarantineSnapshot& q) const {
    if (what == "all") return true;
    if (by_id && q.identity == *by_id) return true;
    if (client_id &&
        std::find(q.client_ids.begin(), q.client_ids.end(), *client_id) != q.client_ids.end()) {
      return true;
    }
    if (pid && static_cast<uint64_t>(q.identity.pid) == *pid) return true;
    if (uid && q.identity.uid == *uid) return true;
    return q.client_name == what;
  }
};

// The decimal number after `prefix` in `what`, or nullopt (no such prefix,
// or not a number of at most 10 digits).
std::optional<uint64_t> PrefixedNumber(const std::string& what, std::string_view prefix) {
  if (what.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string digits = what.substr(prefix.size());
  if (digits.empty() || digits.size() > 10 || !AllDigits(digits)) return std::nullopt;
  return std::stoull(digits);
}

Result<ReleaseTarget> ParseReleaseTarget(const std::string& what, ClientRegistry& clients) {
  if (what.empty()) {
    return InvalidArgument(
        "release_quarantine.client is empty; give a client id, pid:N, uid:N, "
        "a client name, or 'all'");
  }
  ReleaseTarget t;
  t.what = what;
  // A client id names the process it belonged to when it was quarantined
  // (or belongs to now).
  if (AllDigits(what) && what.size() < 19) {
    t.client_id = std::stoull(what);
    if (const ClientState* c = clients.Find(*t.client_id)) t.by_id = c->identity;
  }
  t.pid = PrefixedNumber(what, "pid:");
  t.uid = PrefixedNumber(what, "uid:");
  if ((what.rfind("pid:", 0) == 0 && !t.pid) || (what.rfind("uid:", 0) == 0 && !t.uid)) {
    return InvalidArgument("release_quarantine.client '" + what +
                           "' is malformed: pid:N and uid:N take a decimal number");
  }
  return t;
}

}  // namespace

bool AllowedInQuarantine(v1::Request::BodyCase body) {
  return body == v1::Request::kHeartbeat || body == v1::Request::kGoodbye ||
         body == v1::Request::kStatus;
}

void FillQuarantineEntry(const QuarantineSnapshot& q, v1::QuarantineEntry* out) {
  out->set_uid(q.identity.uid);
  out->set_pid(q.identity.pid);
  out->set_client_name(q.client_name);
  out->set_offences(q.offences);
  out->set_remaining_ms(static_cast<uint64_t>(q.remaining.count()));
  out->set_duration_ms(static_cast<uint64_t>(q.duration.count()));
  out->set_last_fault(q.last_fault);
  out->set_faults_in_window(q.faults_in_window);
}

FaultAccounting::FaultAccounting(QuarantinePolicy policy, ClientRegistry* clients, JobSink* sink,
                                 const AccessPolicy* access)
    : clients_(clients), sink_(sink), access_(access), book_(policy) {}

void FaultAccounting::Count(const PeerIdentity& who, const std::string& client_name,
                            const Status& status, std::optional<FaultKind> kind,
                            Clock::time_point now) {
  if (status.ok()) return;
  if (!kind) kind = FaultKindOf(status.code());
  if (!kind) return;
  std::string name = client_name;
  if (name.empty()) {
    // Garbage carries no client id; name the process by a Hello of it.
    for (const ClientState* c : std::as_const(*clients_).All()) {
      if (c->identity == who) {
        name = c->name;
        break;
      }
    }
  }
  if (book_.RecordFault(who, *kind, name, status.message(), now)) Quarantine(who, now);
}

void FaultAccounting::Quarantine(const PeerIdentity& who, Clock::time_point now) {
  // Its queued and running decodes end with the quarantine's own status
  // (code and retry-after).
  const Status why = book_.Check(who, now);
  spdlog::warn("quarantine: {}", why.message());
  std::vector<uint64_t> ids;
  for (const ClientState* c : std::as_const(*clients_).All()) {
    if (c->identity == who) ids.push_back(c->id);
  }
  book_.NoteClients(who, ids);
  // Its clients are dropped: regions unmapped, work cancelled. Until the
  // quarantine ends every request of the process is refused; afterwards its
  // client library sees unknown_client and says Hello again, re-registering
  // its regions (as after a daemon restart).
  for (ClientState* c : clients_->All()) {
    if (c->identity != who) continue;
    const size_t cancelled = sink_->CancelClient(c->id, why);
    spdlog::warn("quarantine: client {} ('{}') dropped: unmapped {} regions, cancelled {} decodes",
                 c->id, c->name, c->regions.size(), cancelled);
    clients_->Remove(c->id);
  }
}

Status FaultAccounting::Release(const std::optional<PeerCredentials>& sender,
                                const v1::ReleaseQuarantine& req, Clock::time_point now,
                                v1::Reply* reply) {
  const PeerCredentials peer =
      sender.value_or(PeerCredentials{std::numeric_limits<uint32_t>::max(), 0, 0});
  if (!access_->IsAdmin(peer)) {
    return PermissionDenied("release_quarantine needs an admin peer (uid 0, the daemon's uid " +
                            std::to_string(geteuid()) +
                            ", or server.admin_uids); this peer is "
                            "uid " +
                            std::to_string(peer.uid));
  }
  VAED_RETURN_IF_ERROR(CheckPrintableName(req.client(), "release_quarantine.client"));
  VAED_ASSIGN_OR_RETURN(const ReleaseTarget target, ParseReleaseTarget(req.client(), *clients_));
  const std::vector<QuarantineSnapshot> released =
      book_.Release([&](const QuarantineSnapshot& q) { return target.Matches(q); }, now);
  for (const QuarantineSnapshot& q : released) {
    spdlog::warn("quarantine: released {} ('{}') by request of uid {}", q.identity.ToString(),
                 q.client_name, peer.uid);
    FillQuarantineEntry(q, reply->mutable_release_quarantine()->add_released());
  }
  if (released.empty()) {
    return NotFound("release_quarantine.client '" + target.what +
                    "' matches no quarantined client (see `vaectl quarantine list`)");
  }
  return Status::Ok();
}

}  // namespace vaed::server
