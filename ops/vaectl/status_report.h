// `vaectl status` output: the daemon's StatusReply as a human-readable
// summary or as one JSON object.
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_VAECTL_STATUS_REPORT_H_
#define VAED_OPS_VAECTL_STATUS_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "vaed/replies.h"

namespace vaed::vaectl {

// Keys: healthy, daemon_version, uptime_seconds, pid, socket, default_model,
// models [{name, kind, demo_weights, weights_path, weights_sha256,
// weights_verification ("verified", "unverified", "generated"),
// resident_bytes, description}], clients, regions, requests_served,
// requests_failed, protocol_errors, queue_depth, intra_op_threads, health,
// client_faults, quarantines, quarantine_rejections, busy_rejections,
// deadline_exceeded, rejected_connections, quarantined [QuarantineToJson],
// client_list [{client_id, name, uid, pid, regions, region_bytes,
// in_flight, faults_in_window, idle_seconds}], ranks (the daemon's local
// VAE ranks), groups [{name, size, ranks [global rank], generation, state,
// runs, failures, last_failure, last_imbalance}], and the observability
// fields: components {<component>: {count, sum_seconds, p50_seconds,
// p95_seconds, mean_seconds}} (daemon lifetime; empty when the daemon runs
// with metrics disabled), outcomes {<outcome>: count}, in_flight,
// resident_weight_bytes, plan_cache_entries, peak_rss_bytes, rank_status
// [{rank (global), busy_seconds, tiles, last_imbalance}], metrics_url (""
// when the Prometheus endpoint is off). Imbalances are max / mean rank
// decode time (1.0 = even; 0 = no grouped run yet). Sizes in bytes,
// durations in seconds.
nlohmann::json StatusToJson(const client::StatusReply& status);

// {uid, pid, client_name, offences, remaining_seconds, duration_seconds,
// last_fault, faults_in_window}.
nlohmann::json QuarantineToJson(const client::QuarantineEntry& entry);

// `vaectl quarantine list`: the quarantined processes (pid, uid, client
// name, offence number, time remaining of the total, last fault) and the
// connected clients with their recent fault counts.
std::string FormatQuarantine(const client::StatusReply& status);

// The daemon's VAE groups as a table headed "VAE groups (N ranks)": group,
// size, ranks ("0-1"), generation, state, runs, failures, and a "last
// failure" column only when some group has one. Empty when the reply lists
// no groups (a daemon older than VAE groups).
std::string FormatGroups(const client::StatusReply& status);

// "1.07x" for a max / mean imbalance, "-" for 0 (no grouped run yet) or a
// value that is not finite.
std::string FormatImbalance(double imbalance);

// "ok 120, busy 1, deadline 2": the reply's outcome counts in its order,
// those with a zero count left out except "ok"; "-" when it has none.
std::string FormatOutcomes(const client::StatusReply& status);

// Per-component latency over the daemon's lifetime as a table headed
// "latency (since start)": component, count, p50, p95, mean (human
// durations). Empty when the reply has no components.
std::string FormatLatency(const client::StatusReply& status);

// A few lines of summary (requests, outcomes, in flight, resident weights,
// plan-cache entries, peak RSS, metrics endpoint), a table of models
// (human-readable durations and sizes; demo models are flagged),
// FormatLatency, per-rank busy time, tiles and last imbalance, and
// FormatGroups.
std::string FormatStatus(const client::StatusReply& status);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_STATUS_REPORT_H_
