// The control channel's protocol, without sockets: the dispatcher that
// turns one framed message into a reply or a job, and owns the protocol's
// state (clients and their regions, the quarantine book, counters). The
// control loop (control_loop.h) feeds it messages and sends what it
// returns; the fuzz target (fuzz/) and request_handler_test feed it bytes
// the same way.
//
// The walk of a decode request (each step's file):
//   client     vaed::Client (client/src/client.cc, libvaed_client) writes
//              the latents into its regions, frames a vaed.v1.Request and
//              sends it;
//   socket     control_loop.cc receives the bytes, connections.h admitted
//              the connection, vaed/framing.h cuts the messages;
//   handler    Handle() here: size, parse, quarantine (fault_accounting.h),
//              the client's identity (client_registry.h), then the Decode
//              to decode_admission.h, which makes an engine::DecodeJob;
//   scheduler  JobSink::Submit (job_sink.h) -> engine::Executor::Submit
//              queues it; engine/scheduler.h gives it to a group of ranks;
//   rank       engine/rank_loop.cc runs it on the group's output rank,
//   model      engine/decode_run.h decodes it with the models::VaeModel,
//   region     engine/region_io.h copies latents in and outputs out;
//   reply      the engine's ResultSink (completion_queue.h) wakes the
//              control loop, which calls OnJobDone() here: decode_reply.h
//              builds the reply, outcome_recorder.h counts and logs it,
//              client_registry.h releases the regions it used (answering
//              the unregisters that waited for it), and the control loop
//              sends the replies.
//
// Jobs of this file (dispatch, Hello, region registration, client
// lifetime); the rest lives in its own room: decode admission
// (decode_admission.h), fault accounting and quarantine
// (fault_accounting.h: which errors count, see there), outcomes, metrics
// and log records (outcome_recorder.h), the status reply
// (status_builder.h).
//
// Contract: every call of Handle() either returns the reply to send now,
// or hands exactly one job to the JobSink, whose completion is reported
// back through OnJobDone(), or (an UnregisterRegion of a region that queued
// or running decodes use) defers its reply: OnJobDone() of the last of
// those decodes returns it after the decode's own reply
// (client_registry.h: region lifetime). So every request gets exactly one
// reply while its client is known; a client that goes (Goodbye, closed
// connection, expiry, quarantine) gets no deferred reply. When a process
// is quarantined its clients are dropped (regions unmapped, queued and
// running decodes cancelled); its requests are refused with QUARANTINED
// (Heartbeat, Goodbye and Status of a dropped client get unknown_client)
// until the quarantine ends.
//
// Thread-safety: none; one thread (the control loop's) uses it.
#ifndef VAED_DAEMON_SERVER_REQUEST_HANDLER_H_
#define VAED_DAEMON_SERVER_REQUEST_HANDLER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"
#include "daemon/engine/runtime_facts.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/access_control.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/cuda_mappings.h"
#include "daemon/server/cuda_region.h"
#include "daemon/server/config.h"
#include "daemon/server/decode_admission.h"
#include "daemon/server/fault_accounting.h"
#include "daemon/server/job_sink.h"
#include "daemon/server/metrics.h"
#include "daemon/server/outcome_recorder.h"
#include "daemon/server/peer.h"
#include "daemon/server/quarantine.h"
#include "daemon/server/status_builder.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

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

  // `registry`, `sink` and `access` must outlive the handler. `facts`: the
  // ranks' devices (CUDA regions are checked against them) and the request
  // memory limit (admission); the default is CPU ranks and no limit.
  RequestHandler(const DaemonOptions& options, models::ModelRegistry* registry, JobSink* sink,
                 const AccessPolicy* access, PidAlive pid_alive = ProcessExists,
                 engine::RuntimeFacts facts = {});

  // Handles one message. Returns the reply to send to in.routing_id now, or
  // nullopt when the request became a job (the sink replies) or is an
  // UnregisterRegion whose reply is deferred (OnJobDone() returns it).
  std::optional<v1::Reply> Handle(const Incoming& in, Clock::time_point now);

  // Metrics (metrics.h) to feed: decode outcomes and component timings as
  // replies go out, gauges from Tick() once a second. Null = none (status
  // then has no component latencies). Must outlive the handler.
  void set_metrics(Metrics* metrics, std::string url) {
    outcomes_.set_metrics(metrics, std::move(url));
  }

  // What the end of a job sends to the job's connection (job.routing_id),
  // in this order.
  struct JobReplies {
    v1::Reply decode;  // the job's own reply (decode_reply.h)
    // OK replies of the UnregisterRegion requests that waited for this job
    // (the last decode using their regions); their regions are dropped.
    std::vector<v1::Reply> unregistered;
  };
  // The end of a job the sink took: returns its replies and does the
  // accounting: the client's in-flight count, the regions it used
  // (released; client_registry.h) and the counters, the request's outcome
  // and the fallbacks it took (by their typed kinds), metrics and its log
  // record; a client_fault / invalid_argument result counts as the
  // client's fault.
  JobReplies OnJobDone(const engine::DecodeJob& job, const Result<engine::DecodeResult>& result,
                       Clock::time_point now);
  // A progress event of a job: returns the message to forward (the client
  // counts as heard from).
  v1::Reply OnJobProgress(const engine::DecodeJob& job, const engine::ProgressEvent& event,
                          Clock::time_point now);
  // A final range of a streamed job: returns the message to forward (the
  // client counts as heard from).
  v1::Reply OnJobFinalRange(const engine::DecodeJob& job, const engine::FinalRangeEvent& event,
                            Clock::time_point now);

  // A reply to `routing_id` could not be queued (the peer does not read its
  // replies and its queue is at server.send_hwm): a quota fault of that
  // client's process.
  void OnReplyDropped(const std::string& routing_id, Clock::time_point now);
  uint64_t dropped_replies() const { return counters_.dropped_replies; }

  // The connection `routing_id` closed (the peer closed its socket or
  // exited): its clients are dropped at once, their queued and running
  // work cancelled and their regions unmapped.
  void OnDisconnected(const std::string& routing_id);
  // True when a client said Hello on connection `routing_id` and is still
  // known (the control loop closes idle connections without one).
  bool HasClientOn(const std::string& routing_id) const;

  // Drops clients whose process exited or that were silent for longer than
  // server.client_timeout_ms with nothing in flight; their work is
  // cancelled and their regions unmapped. Publishes the metrics' gauges at
  // most once a second. Call a few times a second.
  void Tick(Clock::time_point now);

  // The Status reply (status_builder.h).
  void FillStatus(v1::StatusReply* status, Clock::time_point now) const;

  // "" = healthy; otherwise why not (status shows it; decodes are refused).
  void set_health(std::string why) { health_ = std::move(why); }
  const std::string& health() const { return health_; }

  const ClientRegistry& clients() const { return clients_; }
  // Replaces how CUDA IPC regions are opened (default
  // IpcCudaRegionOpener(); tests register fake allocations).
  void set_cuda_region_opener(CudaRegionOpener open) {
    cuda_mappings_ = CudaMappings(std::move(open));
  }
  const QuarantineBook& quarantine() const { return faults_.book(); }
  // Decode requests answered (outcome_recorder.h served()/failed()).
  uint64_t requests_served() const { return outcomes_.served(); }
  uint64_t requests_failed() const { return outcomes_.failed(); }
  uint64_t protocol_errors() const { return counters_.protocol_errors; }
  // Counted by the control loop (connections are refused before any
  // message of them is read).
  void CountRejectedConnection() { ++counters_.rejected_connections; }

 private:
  // Identity of a message's sender: its peer credentials' uid and pid, or
  // without them the one shared identity {uid -1, pid 0}.
  PeerIdentity IdentityOf(const Incoming& in) const;
  // Handle() without the outcome recording of Decode requests.
  std::optional<v1::Reply> HandleMessage(const Incoming& in, Clock::time_point now);
  // The checks before a message is a request: its size, whether it parses,
  // the sender's quarantine. Returns the reply that ends it (an error), or
  // nullopt with `req` parsed.
  std::optional<v1::Reply> Gate(const Incoming& in, Clock::time_point now, v1::Request* req);
  // A request of an authenticated client (`client`): the body's handler.
  // `reply` carries the request id.
  std::optional<v1::Reply> HandleClientRequest(const Incoming& in, ClientState* client,
                                               const v1::Request& req, Clock::time_point now,
                                               v1::Reply reply);
  // The refusal record of a request that is not a Decode (logging.h
  // LogRefusalRecord), within the log's refusal rate limit.
  void LogRefusal(const Incoming& in, const v1::Reply& reply);
  // `reply` with `s` as its error, counted as a fault of `who` where it is
  // one (FaultAccounting::Count).
  v1::Reply Refuse(const PeerIdentity& who, const std::string& client_name, const Status& s,
                   std::optional<FaultKind> kind, Clock::time_point now, v1::Reply reply);

  void HandleHello(const Incoming& in, const v1::Request& req, Clock::time_point now,
                   v1::Reply* reply);
  Status HandleRegister(ClientState* client, const v1::RegisterRegion& req, v1::Reply* reply,
                        std::optional<FaultKind>* kind);
  // RegisterRegion{host}: a POSIX shm segment the client's uid owns.
  Status RegisterHostRegion(ClientState* client, const v1::HostShmRegion& host,
                            v1::Reply* reply, std::optional<FaultKind>* kind);
  // RegisterRegion{cuda}: checked (cuda_region.h CudaRegionDevice) and
  // mapped on the rank device it names, sharing the mapping of an
  // allocation registered before (cuda_mappings.h); refused when another
  // process has the same handle registered.
  Status RegisterCudaRegion(ClientState* client, const v1::CudaIpcRegion& cuda,
                            v1::Reply* reply, std::optional<FaultKind>* kind);
  // The daemon-wide and per-client region limits for one more region of
  // `bytes` named by `field` (server.max_regions, max_regions_per_client,
  // max_region_bytes_per_client): kResourceExhausted, `kind` set to kQuota
  // for the client's own limits.
  Status CheckRegionLimits(const ClientState& client, uint64_t bytes, const std::string& field,
                           std::optional<FaultKind>* kind) const;
  // Returns true when the request became a job (the sink replies).
  Result<bool> HandleDecode(ClientState* client, const std::string& routing_id,
                            const v1::Request& req, Clock::time_point now, v1::Reply* reply,
                            std::optional<FaultKind>* kind);

  // Declaration order is construction order: the rooms below borrow the
  // members above them.
  const DaemonOptions options_;
  const engine::RuntimeFacts facts_;
  models::ModelRegistry* const registry_;
  JobSink* const sink_;
  const Clock::time_point started_;

  ClientRegistry clients_;
  CudaMappings cuda_mappings_{IpcCudaRegionOpener()};  // one per allocation
  FaultAccounting faults_;
  DecodeAdmission admission_;
  OutcomeRecorder outcomes_;
  RequestCounters counters_;
  std::string health_;
  Clock::time_point metrics_published_{};

  // The Decode request HandleMessage() is handling (set once the request
  // parsed), for its outcome.
  struct DecodeInFlight {
    std::string model;  // as sent ("" = the default model)
    uint64_t client_id = 0;
    uint64_t request_id = 0;
    bool plan_only = false;  // recorded only when refused
  };
  std::optional<DecodeInFlight> decode_;
  // What the message being handled is, for refusal records; named only
  // when one is logged (MessageKindName: the body's field name
  // "register_region", ..., "oversized", "unparsable" or "no_body").
  enum class MessageKind { kUnparsable, kOversized, kParsed };
  MessageKind message_kind_ = MessageKind::kUnparsable;
  int request_body_ = 0;  // v1::Request::BodyCase when kParsed
  std::string MessageKindName() const;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_REQUEST_HANDLER_H_
