// A child process (no shell) fed through its stdin: the one place ops/
// starts the ffmpeg CLI (frame_writer.h, mp4_stream.h) and translates how
// it ended into a Status.
//
// The child's stdin is one end of a Unix socket pair, written with
// send(MSG_NOSIGNAL): a child that exits before reading everything is an
// EPIPE error here, never a process-wide SIGPIPE. Its stdout goes to this
// process's stderr (so `--json` output on stdout stays clean); its stderr
// is inherited.
//
// Thread-safety: a ChildProcess is not synchronized; one thread at a time
// (it may be handed between threads with external ordering), except
// Interrupt(), which may be called while another thread is in WriteAll().
#ifndef VAED_OPS_COMMON_CHILD_PROCESS_H_
#define VAED_OPS_COMMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vaed/status.h"

namespace vaed::ops {

class ChildProcess {
 public:
  // Starts `argv` (argv[0] an executable path, searched nowhere).
  // Errors: kInvalidArgument for an empty argv; the errno of socketpair or
  // posix_spawn (a missing executable is kNotFound), naming argv[0].
  static Result<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv);

  // A child not yet waited for is killed (SIGKILL) and reaped.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Writes all of `bytes` to the child's stdin, blocking while the child
  // does not read (retried on EINTR). Errors: kFailedPrecondition after
  // CloseStdin(); the errno of send (EPIPE: the child closed its stdin or
  // exited), with how many bytes were sent.
  Status WriteAll(std::span<const uint8_t> bytes);

  // Closes the child's stdin (its end of input). Idempotent.
  void CloseStdin() noexcept;

  // Closes stdin, waits for the child to exit and reaps it. kIoError naming
  // argv[0] when it exited non-zero, died from a signal or was killed by
  // Kill() (the message holds the whole command line); OK when it exited 0.
  // Calling it again returns the same Status.
  Status Wait();

  // Kills the child (SIGKILL) if it has not been reaped, then reaps it.
  // For abandoning a child: what it wrote so far is left as it is.
  void Kill() noexcept;

  // Sends SIGKILL to the child and nothing else (it is reaped by Wait(),
  // Kill() or the destructor): a WriteAll() blocked in another thread then
  // fails with EPIPE. The one member safe to call concurrently with
  // WriteAll(); not with Wait(), Kill() or the destructor.
  void Interrupt() noexcept;

  const std::vector<std::string>& argv() const { return argv_; }

 private:
  ChildProcess(std::vector<std::string> argv, pid_t pid, int stdin_fd)
      : argv_(std::move(argv)), pid_(pid), stdin_fd_(stdin_fd) {}

  std::vector<std::string> argv_;
  pid_t pid_;            // -1 once reaped
  int stdin_fd_;         // -1 once closed
  bool killed_ = false;  // reaped by Kill()
  Status exit_status_;   // how it exited, once Wait() reaped it
};

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_CHILD_PROCESS_H_
