// Where the request handler's accepted decodes go: the executor (through
// the control loop's adapter, control_loop.cc), or a stand-in in tests and
// the fuzz target, so that the protocol runs without ranks or sockets.
//
// Contract: a job Submit() took is answered exactly once, later, through
// RequestHandler::OnJobDone() (the executor's ResultSink, result_sink.h,
// and the control loop's CompletionQueue carry it there).
//
// Thread-safety: called from the control loop's thread only.
#ifndef VAED_DAEMON_SERVER_JOB_SINK_H_
#define VAED_DAEMON_SERVER_JOB_SINK_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::engine {
struct DecodeJob;  // decode_job.h (declared only: this header stays free of LibTorch)
}  // namespace vaed::engine

namespace vaed::server {

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

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_JOB_SINK_H_
