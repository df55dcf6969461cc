// Where the engine hands its answers: a small interface the server owns
// (server/completion_queue.h), so that the engine speaks no wire format.
//
// Contract: every job given to Executor::Submit() that was accepted gets
// exactly one OnFinished() (a result, or the error that ended it: failure,
// cancellation, shutdown), preceded by zero or more OnProgress() when the
// job asked for progress and OnFinalRange() when it streams its output.
//
// Thread-safety: both are called from the executor's rank threads,
// concurrently for different jobs; implementations must be thread-safe,
// must not block for long (a rank waits), and must not throw (the executor
// catches and logs what they throw, which then loses that message).
#ifndef VAED_DAEMON_ENGINE_RESULT_SINK_H_
#define VAED_DAEMON_ENGINE_RESULT_SINK_H_

#include <memory>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"
#include "vaed/status.h"

namespace vaed::engine {

class ResultSink {
 public:
  virtual ~ResultSink() = default;
  // A progress event of `job` (DecodeJob::progress set).
  virtual void OnProgress(const std::shared_ptr<const DecodeJob>& job,
                          const ProgressEvent& event) = 0;
  // A final part of `job`'s output (DecodeJob::stream_output set), after
  // its bytes were written.
  virtual void OnFinalRange(const std::shared_ptr<const DecodeJob>& job,
                            const FinalRangeEvent& event) = 0;
  // The end of `job`: its result, or why it has none.
  virtual void OnFinished(std::shared_ptr<const DecodeJob> job, Result<DecodeResult> result) = 0;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_RESULT_SINK_H_
