// Fault accounting and quarantine of client processes (quarantine.h holds
// the book; this decides what counts and what follows).
//
// What counts as a fault of the sending process (identity: its peer
// credentials' uid and pid): protocol violations (unparsable, oversized or
// multi-frame messages, a client id of another connection), validation
// failures (invalid arguments, unknown models or regions, out-of-range byte
// ranges, region names that break the rules, segments of another process
// or owner), memory faults the executor reports (client_fault), and quota
// overruns (in-flight, region count and bytes, replies it does not read).
// Not counted: BUSY from a full queue, deadlines, daemon-side failures, and
// unknown_client (what every client sees after a daemon restart).
//
// When a process trips its quarantine, its clients are dropped at once:
// regions unmapped, queued and running decodes cancelled with the
// quarantine's status (code and retry-after). Its requests are then refused
// with QUARANTINED (but AllowedInQuarantine ones) until the quarantine ends
// or an admin releases it (Release()).
//
// Thread-safety: none; the request handler's thread (the control loop's).
#ifndef VAED_DAEMON_SERVER_FAULT_ACCOUNTING_H_
#define VAED_DAEMON_SERVER_FAULT_ACCOUNTING_H_

#include <optional>
#include <string>

#include "daemon/server/access_control.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/job_sink.h"
#include "daemon/server/peer.h"
#include "daemon/server/quarantine.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

// Requests a quarantined process may still send: they cost nothing and let
// it stay connected, see its state and leave (Heartbeat, Goodbye, Status).
bool AllowedInQuarantine(v1::Request::BodyCase body);

// A quarantine book entry as the wire lists it (status, release replies).
void FillQuarantineEntry(const QuarantineSnapshot& q, v1::QuarantineEntry* out);

class FaultAccounting {
 public:
  // `policy`: from the config's [quarantine] table. `clients`, `sink` and
  // `access` must outlive it; the request handler owns all four.
  FaultAccounting(QuarantinePolicy policy, ClientRegistry* clients, JobSink* sink,
                  const AccessPolicy* access);

  // Counts `status` as a fault of `who` when it is one: `kind` when given,
  // else by its code (the list above); OK and the uncounted codes are
  // ignored. `client_name` names the process in the book ("" = the name of
  // a client of that process, if any). When this fault trips the
  // quarantine, the process's clients are dropped and their work cancelled
  // before it returns, so client pointers the caller holds may dangle.
  void Count(const PeerIdentity& who, const std::string& client_name, const Status& status,
             std::optional<FaultKind> kind, Clock::time_point now);

  // kQuarantined (with retry-after) while `who` is in quarantine; OK
  // otherwise.
  Status Check(const PeerIdentity& who, Clock::time_point now) const {
    return book_.Check(who, now);
  }

  // The admin request ReleaseQuarantine: lifts the quarantine of what
  // `req.client` names (a client id, "pid:N", "uid:N", a client name or
  // "all") and lists what it released in reply->release_quarantine.
  // `peer`: the sender's credentials (nullopt: none, never an admin).
  // Errors: kPermissionDenied (not an admin peer, access_control.h),
  // kInvalidArgument (an empty, unprintable or malformed target),
  // kNotFound (nothing quarantined matches). Counts no fault itself.
  Status Release(const std::optional<PeerCredentials>& peer, const v1::ReleaseQuarantine& req,
                 Clock::time_point now, v1::Reply* reply);

  const QuarantineBook& book() const { return book_; }

 private:
  // Drops every client of `who` (just quarantined): work cancelled,
  // regions unmapped.
  void Quarantine(const PeerIdentity& who, Clock::time_point now);

  ClientRegistry* const clients_;
  JobSink* const sink_;
  const AccessPolicy* const access_;
  QuarantineBook book_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_FAULT_ACCOUNTING_H_
