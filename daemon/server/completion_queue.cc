#include "daemon/server/completion_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace vaed::server {

Result<std::unique_ptr<CompletionQueue>> CompletionQueue::Create() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "creating the executor's completion eventfd");
  return std::unique_ptr<CompletionQueue>(new CompletionQueue(fd));
}

CompletionQueue::~CompletionQueue() { ::close(fd_); }

void CompletionQueue::OnProgress(const std::shared_ptr<const engine::DecodeJob>& job,
                                 const engine::ProgressEvent& event) {
  Push({.job = job, .progress = event, .final_range = std::nullopt, .result = std::nullopt});
}

void CompletionQueue::OnFinalRange(const std::shared_ptr<const engine::DecodeJob>& job,
                                   const engine::FinalRangeEvent& event) {
  Push({.job = job, .progress = std::nullopt, .final_range = event, .result = std::nullopt});
}

void CompletionQueue::OnFinished(std::shared_ptr<const engine::DecodeJob> job,
                                 Result<engine::DecodeResult> result) {
  Push({.job = std::move(job),
        .progress = std::nullopt,
        .final_range = std::nullopt,
        .result = std::move(result)});
}

void CompletionQueue::Push(Completion c) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(c));
  }
  // Wakes the control loop. The counter cannot overflow (it is drained
  // long before 2^64 - 1), so a failed write is EINTR at most.
  const uint64_t one = 1;
  while (::write(fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

std::deque<Completion> CompletionQueue::Drain() {
  uint64_t count = 0;
  while (::read(fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
  }
  MutexLock lock(&mu_);
  return std::exchange(queue_, {});
}

}  // namespace vaed::server
