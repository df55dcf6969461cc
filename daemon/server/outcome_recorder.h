// The end of every Decode request (not plan-only), in one place: its
// outcome counted ("ok", "busy", "validation_error", ... and, for a decode,
// the fallbacks it took), its timings observed in the metrics (metrics.h),
// and its one log record written (logging.h: LogDecodeRecord). Also the
// gauges and counters the daemon publishes once a second, from a status
// reply.
//
// Label values stay bounded whatever clients send: the model is a
// configured one or "unknown", the first 16 output sizes keep a resolution
// label of their own and later ones are "other".
//
// Thread-safety: none; the request handler's thread (the control loop's).
#ifndef VAED_DAEMON_SERVER_OUTCOME_RECORDER_H_
#define VAED_DAEMON_SERVER_OUTCOME_RECORDER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/metrics.h"
#include "daemon/server/refusal_rate_limit.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

// The outcome names of the fallbacks a successful decode took, once each,
// by their typed kinds (models::FallbackKind): "oom_fallback" (the failure
// ladder stepped down, or plans were released, after out of memory),
// "compile_fallback" (a compiled plan failed to build or run and the bucket
// went eager), "collective_fallback" (the VAE group failed or was
// unavailable and the output rank decoded alone).
std::vector<const char*> FallbackOutcomes(const engine::DecodeResult& result);

// The outcome label of a request answered with `code` ("ok",
// "validation_error", "quarantined", "busy", "deadline",
// "resource_exhausted", "cancelled", "client_fault", "error").
const char* OutcomeName(StatusCode code);

class OutcomeRecorder {
 public:
  // `registry` (for the model labels) must outlive the recorder.
  explicit OutcomeRecorder(const models::ModelRegistry* registry) : registry_(registry) {}

  // The metrics to feed and the URL status shows for them; null = none
  // (outcomes are still counted and logged). Must outlive the recorder.
  void set_metrics(Metrics* metrics, std::string url) {
    metrics_ = metrics;
    metrics_url_ = std::move(url);
  }
  const Metrics* metrics() const { return metrics_; }
  const std::string& metrics_url() const { return metrics_url_; }

  // A Decode request answered with `reply` (a DecodeReply or an error).
  // Plan-only requests are recorded when refused (a client that plans
  // first, as the Python client does, sees its decode refused at that
  // step), never when answered with a plan. `model`: as sent ("" = the
  // default model). `client` may be null (unknown). `fallbacks`:
  // FallbackOutcomes() of a decode, counted besides "ok".
  void Record(const std::string& model, const ClientState* client, const v1::Reply& reply,
              const std::vector<const char*>& fallbacks = {});

  // A Decode request that became a job: its model as sent is kept until
  // RecordJob() (at most 65536 are kept; more, never expected, clears them).
  void ExpectJob(uint64_t client_id, uint64_t request_id, std::string model);
  // The end of a job: Record() with its fallbacks, when ExpectJob() named
  // it (a job sink's stand-in may answer jobs it never had).
  void RecordJob(const engine::DecodeJob& job, const ClientState* client,
                 const Result<engine::DecodeResult>& result, const v1::Reply& reply);

  // Sets the metrics' gauges and counters from `status` (a full status
  // reply); nothing without metrics.
  void Publish(const v1::StatusReply& status);

  // Outcomes of the decodes answered so far, by name.
  const std::map<std::string, uint64_t>& outcomes() const { return outcomes_; }
  // The one definition of the status counters: every Record()
  // is one Decode request answered; "served" = answered with a DecodeReply
  // (outcome "ok"), "failed" = answered with an error (every other outcome
  // but the fallbacks, which count beside "ok"). So served + failed = the
  // sum of the non-fallback outcomes = vaed_requests_total = the decode log
  // records.
  uint64_t served() const { return served_; }
  uint64_t failed() const { return failed_; }

  // The log's rate limit for refusals: decode records with an error go
  // through it here, and the request handler's refusals of other requests
  // share it (one budget for the log).
  RefusalRateLimit& refusal_limit() { return refusal_limit_; }
  // The highest DecodeReply.peak_rss_bytes so far.
  uint64_t peak_rss_bytes() const { return peak_rss_bytes_; }

 private:
  // Observes a decode's timings and counts its fallbacks in the metrics.
  void Observe(const std::string& label, const v1::DecodeReply& d, const std::string& stack,
               uint32_t group_size, const std::vector<const char*>& fallbacks);

  const models::ModelRegistry* const registry_;
  Metrics* metrics_ = nullptr;
  std::string metrics_url_;
  std::map<std::string, uint64_t> outcomes_;
  uint64_t served_ = 0;
  uint64_t failed_ = 0;
  RefusalRateLimit refusal_limit_;
  uint64_t peak_rss_bytes_ = 0;
  std::set<std::string> resolution_labels_;  // output sizes with a label of their own
  // (client id, request id) of Decode jobs in flight -> model as sent.
  std::map<std::pair<uint64_t, uint64_t>, std::string> job_models_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_OUTCOME_RECORDER_H_
