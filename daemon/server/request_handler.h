// The control channel's protocol state machine, without sockets: message
// decoding, client and region registry, request validation, limits, fault
// accounting and quarantine. The control loop (control_loop.h) feeds it
// messages and sends what it returns; the fuzz target (fuzz/) feeds it
// arbitrary bytes the same way.
//
// Contract: every call of Handle() either returns the reply to send now or
// hands exactly one job to the JobSink, whose completion is reported back
// through OnJobDone(); so every request gets exactly one reply.
//
// Faults (quarantine.h) counted against the sending process: protocol
// violations (unparsable, oversized or multi-frame messages, a client id
// of another connection), validation failures (invalid arguments, unknown
// models or regions, out-of-range byte ranges, region names that break the
// rules, segments of another process or owner), memory faults reported by
// the executor (client_fault), and quota overruns (in-flight, region count
// and bytes). Not counted: BUSY from a full queue, deadlines, daemon-side
// failures, and unknown_client (what every client sees after a daemon
// restart). When a process is quarantined its clients are dropped (regions
// unmapped, queued and running decodes cancelled); its requests are refused
// with QUARANTINED (Heartbeat, Goodbye and Status of a dropped client get
// unknown_client) until the quarantine ends.
//
// Thread-safety: none; one thread (the control loop's) uses it.
#ifndef VAED_DAEMON_SERVER_REQUEST_HANDLER_H_
#define VAED_DAEMON_SERVER_REQUEST_HANDLER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "daemon/engine/executor.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/access_control.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/config.h"
#include "daemon/server/metrics.h"
#include "daemon/server/peer.h"
#include "daemon/server/quarantine.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

// Where accepted decodes go (the executor, or a stand-in in tests and the
// fuzz target).
class JobSink {
 public:
  virtual ~JobSink() = default;
  // Takes the job, or returns why not (BUSY, shutting down, unhealthy).
  virtual Status Submit(std::unique_ptr<engine::DecodeJob> job) = 0;
  // Cancels the client's queued and running jobs with `why`; each is still
  // answered. Returns how many.
  virtual size_t CancelClient(uint64_t client_id, const Status& why) = 0;
  virtual size_t queue_depth() const = 0;
  // Status: the ranks and VAE groups serving the jobs.
  virtual void FillGroups(v1::StatusReply* status) const { (void)status; }
  // Jobs running now.
  virtual size_t running() const { return 0; }
};

// One message as the control socket received it.
struct Incoming {
  std::string routing_id;               // ZeroMQ identity of the connection
  std::optional<PeerCredentials> peer;  // SO_PEERCRED; nullopt if the transport has none
  std::string_view payload;             // one framed message (vaed/framing.h)
  // A message over the framing cap: its declared length in bytes (its
  // payload was skipped unread and `payload` is empty); 0 otherwise.
  uint64_t oversized_bytes = 0;
};

class RequestHandler {
 public:
  using Clock = std::chrono::steady_clock;

  // `registry`, `sink` and `access` must outlive the handler.
  RequestHandler(const DaemonOptions& options, models::ModelRegistry* registry, JobSink* sink,
                 const AccessPolicy* access, PidAlive pid_alive = ProcessExists);

  // Handles one message. Returns the reply to send to in.routing_id now, or
  // nullopt when the request became a job (the sink replies).
  std::optional<v1::Reply> Handle(const Incoming& in, Clock::time_point now);

  // Metrics (metrics.h) to feed: decode outcomes and component timings as
  // replies go out, gauges from Tick() once a second. Null = none (status
  // then has no component latencies). Must outlive the handler.
  void set_metrics(Metrics* metrics, std::string url) {
    metrics_ = metrics;
    metrics_url_ = std::move(url);
  }

  // The end of a job the sink took: returns its reply (decode_reply.h) and
  // does the accounting: the client's in-flight count and the counters, the
  // request's outcome and the fallbacks it took (by their typed kinds),
  // metrics and its log record; a client_fault / invalid_argument result
  // counts as the client's fault.
  v1::Reply OnJobDone(const engine::DecodeJob& job, const Result<engine::DecodeResult>& result,
                      Clock::time_point now);
  // A progress event of a job: returns the message to forward (the client
  // counts as heard from).
  v1::Reply OnJobProgress(const engine::DecodeJob& job, const engine::ProgressEvent& event,
                          Clock::time_point now);

  // A reply to `routing_id` could not be queued (the peer does not read its
  // replies and its queue is at server.send_hwm): a quota fault of that
  // client's process.
  void OnReplyDropped(const std::string& routing_id, Clock::time_point now);
  uint64_t dropped_replies() const { return dropped_replies_; }

  // The connection `routing_id` closed (the peer closed its socket or
  // exited): its clients are dropped at once, their queued and running
  // work cancelled and their regions unmapped.
  void OnDisconnected(const std::string& routing_id);
  // True when a client said Hello on connection `routing_id` and is still
  // known (the control loop closes idle connections without one).
  bool HasClientOn(const std::string& routing_id) const;

  // Drops clients whose process exited or that were silent for longer than
  // server.client_timeout_ms with nothing in flight; their work is
  // cancelled and their regions unmapped. Call a few times a second.
  void Tick(Clock::time_point now);

  void FillStatus(v1::StatusReply* status, Clock::time_point now) const;

  // "" = healthy; otherwise why not (status shows it; decodes are refused).
  void set_health(std::string why) { health_ = std::move(why); }
  const std::string& health() const { return health_; }

  const ClientRegistry& clients() const { return clients_; }
  const QuarantineBook& quarantine() const { return quarantine_; }
  uint64_t requests_served() const { return requests_served_; }
  uint64_t requests_failed() const { return requests_failed_; }
  uint64_t protocol_errors() const { return protocol_errors_; }
  // Counted by the control loop (connections are refused before any
  // message of them is read).
  void CountRejectedConnection() { ++rejected_connections_; }

 private:
  // Identity of a message's sender: its peer credentials' uid and pid, or
  // without them the one shared identity {uid -1, pid 0}.
  PeerIdentity IdentityOf(const Incoming& in) const;
  // Handle() without the per-request accounting below.
  std::optional<v1::Reply> HandleMessage(const Incoming& in, Clock::time_point now);
  // The end of a Decode request (not plan-only): counts its outcome (and,
  // for a decode, the fallbacks it took), observes its timings and writes
  // its one log record (logging.h). `client` may be null (unknown).
  // `fallbacks`: the outcome names of the fallbacks a decode took
  // (FallbackOutcomes), counted besides "ok".
  void FinishDecode(const std::string& model, const ClientState* client, const v1::Reply& reply,
                    const std::vector<const char*>& fallbacks = {});
  // Outcomes of the decodes answered so far ("ok", "busy", ...).
  std::map<std::string, uint64_t> outcomes_;
  // Sets the metrics gauges and counters from the daemon's state.
  void PublishMetrics(Clock::time_point now);
  // Counts `status` as a fault of `who` when its code is a client's fault
  // (see the header comment); quarantines and acts when it trips.
  void CountFault(const PeerIdentity& who, const std::string& client_name, const Status& status,
                  std::optional<FaultKind> kind, Clock::time_point now);
  void ApplyQuarantine(const PeerIdentity& who, Clock::time_point now);

  void HandleHello(const Incoming& in, const v1::Request& req, Clock::time_point now,
                   v1::Reply* reply);
  Status HandleRegister(ClientState* client, const v1::RegisterRegion& req, v1::Reply* reply,
                        std::optional<FaultKind>* kind);
  // Returns true when the request became a job.
  Result<bool> HandleDecode(ClientState* client, const std::string& routing_id,
                            const v1::Request& req, Clock::time_point now, v1::Reply* reply,
                            std::optional<FaultKind>* kind);
  Status HandleReleaseQuarantine(const Incoming& in, const v1::ReleaseQuarantine& req,
                                 Clock::time_point now, v1::Reply* reply);

  const DaemonOptions options_;
  const parallel::GroupLayout layout_;  // of options_.group (validated)
  models::ModelRegistry* const registry_;
  JobSink* const sink_;
  const AccessPolicy* const access_;
  const Clock::time_point started_;

  ClientRegistry clients_;
  QuarantineBook quarantine_;
  std::string health_;

  uint64_t requests_served_ = 0;
  uint64_t requests_failed_ = 0;
  uint64_t protocol_errors_ = 0;
  uint64_t quarantine_rejections_ = 0;
  uint64_t busy_rejections_ = 0;
  uint64_t deadline_exceeded_ = 0;
  uint64_t rejected_connections_ = 0;
  uint64_t dropped_replies_ = 0;
  uint64_t peak_rss_bytes_ = 0;  // highest DecodeReply.peak_rss_bytes

  Metrics* metrics_ = nullptr;
  std::set<std::string> resolution_labels_;  // output sizes with a label of their own
  std::string metrics_url_;
  Clock::time_point metrics_published_{};
  // The Decode request HandleMessage() is handling (set once the request
  // parsed; plan-only requests leave it unset).
  struct DecodeInFlight {
    std::string model;  // as sent ("" = the default model)
    uint64_t client_id = 0;
    uint64_t request_id = 0;
  };
  std::optional<DecodeInFlight> decode_;
  // Request ids of Decode jobs in flight, with their model as sent, to
  // label their outcome when the sink replies.
  std::map<std::pair<uint64_t, uint64_t>, std::string> job_models_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_REQUEST_HANDLER_H_
