// Decode admission: turns a Decode request of a known client into a job for
// the executor (engine::DecodeJob), or into a plan-only reply, or into the
// error that refuses it. Everything that can be checked before decoding is
// checked here, so that a job fails in the engine only on what cannot be
// known earlier (decode_job.h):
//   1. names (model, profile: printable_name.h), the model, the options against
//      the profiles and the model's capabilities (decode_options.h), a
//      requested group size against the group layout;
//   2. the plans: the latents' dtypes and shapes against the model, the
//      output layout the output format implies, the video plan's
//      estimated peak memory against what one request may use
//      (engine/request_memory.h), the A/V length rule (models/av_sync.h);
//      a plan-only request ends here;
//   3. placement: every tensor reference resolved against the client's own
//      regions (client_registry.h; none awaiting unregister: a region
//      being unregistered is refused), its bytes inside the region now (the
//      segment may have shrunk since it was registered), the output's dtype
//      and shape as the plan says, and nothing the daemon writes overlapping
//      anything else of the request (also through two registrations of one
//      segment);
//   4. the client's in-flight limit (server.max_in_flight_per_client).
// Messages name the request field ("output", "audio_latent.region_id",
// "options.profile") and the rule.
//
// Not checked here: the daemon's health, and whether the executor has room
// (JobSink::Submit answers BUSY); the request handler does both.
//
// Thread-safety: none; the request handler's thread (the control loop's).
// Admit() is const: it changes nothing, not even the client's count.
#ifndef VAED_DAEMON_SERVER_DECODE_ADMISSION_H_
#define VAED_DAEMON_SERVER_DECODE_ADMISSION_H_

#include <memory>
#include <optional>
#include <string>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/request_memory.h"
#include "daemon/models/model_registry.h"
#include "daemon/parallel/group_layout.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/config.h"
#include "daemon/server/quarantine.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

// What an admitted Decode request became: exactly one of the two is set.
struct Admission {
  // Decode.plan_only: the reply's geometry (decode_reply.h:
  // FillDecodeGeometry) with planned_only set.
  std::optional<v1::DecodeReply> planned;
  // Otherwise: the job to submit, its regions resolved and held.
  std::unique_ptr<engine::DecodeJob> job;
};

class DecodeAdmission {
 public:
  // `options` (with a validated options.group), `request_memory` (what one
  // request may hold; runtime_facts.h), `registry` (rank 0's) and `clients`
  // must outlive the admission; the request handler owns them.
  DecodeAdmission(const DaemonOptions& options, const engine::RequestMemory& request_memory,
                  const models::ModelRegistry* registry, const ClientRegistry* clients);

  // Admits `req` (a Decode request) of `client`, which arrived on
  // connection `routing_id` at `now` (the deadline counts from it).
  // Errors: kInvalidArgument, kNotFound, kOutOfRange, kFailedPrecondition
  // (the request breaks a rule), kResourceExhausted (the video's
  // estimated peak exceeds what a request may use; not a client fault),
  // kBusy (the client's in-flight limit, retry-after 100 ms). `kind` is set to the fault kind an error counts
  // as when it is not the one its code implies (fault_accounting.h):
  // kRegion for errors of placement (step 3), kQuota for the in-flight
  // limit; nullopt otherwise.
  Result<Admission> Admit(const ClientState& client, const std::string& routing_id,
                          const v1::Request& req, Clock::time_point now,
                          std::optional<FaultKind>* kind) const;

 private:
  struct Planned;  // steps 1 and 2
  Result<Planned> Plan(const v1::Decode& d) const;
  Status Place(const ClientState& client, const v1::Decode& d, Planned* p) const;
  std::unique_ptr<engine::DecodeJob> MakeJob(const ClientState& client,
                                             const std::string& routing_id,
                                             const v1::Request& req, Clock::time_point now,
                                             Planned p) const;

  const DaemonOptions& options_;
  const engine::RequestMemory& request_memory_;
  const parallel::GroupLayout layout_;  // of options_.group
  const models::ModelRegistry* const registry_;
  const ClientRegistry* const clients_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_DECODE_ADMISSION_H_
