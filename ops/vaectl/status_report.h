// `vaectl status` output: the daemon's StatusReply as a human-readable
// summary or as one JSON object.
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_VAECTL_STATUS_REPORT_H_
#define VAED_OPS_VAECTL_STATUS_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "vaed/v1/vaed.pb.h"

namespace vaed::vaectl {

// Keys: healthy, daemon_version, uptime_seconds, pid, socket, default_model,
// models [{name, kind, demo_weights, weights_path, weights_sha256,
// resident_bytes, description}], clients, regions, requests_served,
// requests_failed, protocol_errors, queue_depth, intra_op_threads, health,
// client_faults, quarantines, quarantine_rejections, busy_rejections,
// deadline_exceeded, rejected_connections, quarantined [QuarantineToJson],
// client_list [{client_id, name, uid, pid, regions, region_bytes,
// in_flight, faults_in_window, idle_seconds}], ranks (the daemon's local
// VAE ranks), groups [{name, size, ranks [global rank], generation, state,
// runs, failures, last_failure}]. Sizes in bytes, durations in seconds.
nlohmann::json StatusToJson(const v1::StatusReply& status);

// {uid, pid, client_name, offences, remaining_seconds, duration_seconds,
// last_fault, faults_in_window}.
nlohmann::json QuarantineToJson(const v1::QuarantineEntry& entry);

// `vaectl quarantine list`: the quarantined processes (pid, uid, client
// name, offence number, time remaining of the total, last fault) and the
// connected clients with their recent fault counts.
std::string FormatQuarantine(const v1::StatusReply& status);

// The daemon's VAE groups as a table headed "VAE groups (N ranks)": group,
// size, ranks ("0-1"), generation, state, runs, failures, and a "last
// failure" column only when some group has one. Empty when the reply lists
// no groups (a daemon older than issue 7).
std::string FormatGroups(const v1::StatusReply& status);

// A few lines of summary, a table of models (human-readable durations and
// sizes; demo models are flagged) and FormatGroups.
std::string FormatStatus(const v1::StatusReply& status);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_STATUS_REPORT_H_
