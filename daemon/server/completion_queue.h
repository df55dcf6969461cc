// The executor's answers on their way to the control loop: the server's
// engine::ResultSink. Rank threads push completed jobs, progress events and
// final ranges;
// the control loop's thread, woken through an eventfd it polls, takes them
// and turns them into replies (decode_reply.h). Only that thread touches
// the request handler and the control socket, so they need no locking.
//
// Lifetime: a queued completion holds its job, and with it the job's
// regions (mapped until the control loop has answered it).
//
// Thread-safety: the ResultSink calls from any thread; Drain() and
// fd() from the control loop's.
#ifndef VAED_DAEMON_SERVER_COMPLETION_QUEUE_H_
#define VAED_DAEMON_SERVER_COMPLETION_QUEUE_H_

#include <deque>
#include <memory>
#include <optional>

#include "daemon/engine/result_sink.h"
#include "vaed/mutex.h"
#include "vaed/status.h"

namespace vaed::server {

// One answer of the executor: a progress event, a final range of a
// streamed output, or the end of a job.
struct Completion {
  std::shared_ptr<const engine::DecodeJob> job;
  std::optional<engine::ProgressEvent> progress;    // set: a progress event
  std::optional<engine::FinalRangeEvent> final_range;  // set: a final range
  std::optional<Result<engine::DecodeResult>> result;  // set: the job ended
};

class CompletionQueue : public engine::ResultSink {
 public:
  // Errors: the eventfd could not be created (errno).
  static Result<std::unique_ptr<CompletionQueue>> Create();
  ~CompletionQueue() override;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Readable (POLLIN) while completions wait.
  int fd() const { return fd_; }

  void OnProgress(const std::shared_ptr<const engine::DecodeJob>& job,
                  const engine::ProgressEvent& event) override;
  void OnFinalRange(const std::shared_ptr<const engine::DecodeJob>& job,
                    const engine::FinalRangeEvent& event) override;
  void OnFinished(std::shared_ptr<const engine::DecodeJob> job,
                  Result<engine::DecodeResult> result) override;

  // Everything queued, oldest first; clears the eventfd.
  std::deque<Completion> Drain();

 private:
  explicit CompletionQueue(int fd) : fd_(fd) {}
  void Push(Completion c);

  const int fd_;
  Mutex mu_;
  std::deque<Completion> queue_ VAED_GUARDED_BY(mu_);
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_COMPLETION_QUEUE_H_
