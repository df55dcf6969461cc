// The Status reply: what `vaectl status` and the metrics gauges show. One
// function reads the daemon's state through StatusSources (the request
// handler's members, borrowed for the call) and fills a StatusReply:
// version, uptime and health; models with their plan caches; resident
// weights and plan entries across local ranks; the executor's ranks and
// groups (JobSink::FillGroups); outcomes and component latencies;
// request, fault and quarantine counters; the quarantine book; and at
// most 256 clients.
//
// Thread-safety: none; the request handler's thread (the control loop's).
#ifndef VAED_DAEMON_SERVER_STATUS_BUILDER_H_
#define VAED_DAEMON_SERVER_STATUS_BUILDER_H_

#include <cstdint>
#include <string>

#include "daemon/models/model_registry.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/config.h"
#include "daemon/server/job_sink.h"
#include "daemon/server/outcome_recorder.h"
#include "daemon/server/quarantine.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

// What the request handler counts as it answers (status fields of the same
// names).
// Decodes served and failed are the outcome recorder's (outcome_recorder.h).
struct RequestCounters {
  uint64_t protocol_errors = 0;
  uint64_t quarantine_rejections = 0;
  uint64_t busy_rejections = 0;
  uint64_t deadline_exceeded = 0;
  uint64_t rejected_connections = 0;  // counted by the control loop
  uint64_t dropped_replies = 0;       // replies the peer's queue had no room for
};

// The state a status reply shows; every member is borrowed for one call.
struct StatusSources {
  const DaemonOptions& options;
  const models::ModelRegistry& registry;
  const JobSink& sink;
  const ClientRegistry& clients;
  const QuarantineBook& quarantine;
  const OutcomeRecorder& outcomes;
  const RequestCounters& counters;
  Clock::time_point started;
  const std::string& health;  // "" = healthy
};

// Fills `out` (expected empty) from `src` as of `now`.
void BuildStatus(const StatusSources& src, Clock::time_point now, v1::StatusReply* out);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_STATUS_BUILDER_H_
