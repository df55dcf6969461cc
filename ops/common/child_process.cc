#include "ops/common/child_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

extern char** environ;

namespace vaed::ops {
namespace {

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

// Waits for `pid` (retried on EINTR); the raw wait status.
Result<int> WaitFor(pid_t pid, const std::string& what) {
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus(errno, what + ": waitpid");
  }
  return wstatus;
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("ChildProcess::Spawn: empty argv");
  const std::string what = "running " + argv[0];
  // A socket rather than a pipe: send(MSG_NOSIGNAL) turns a child that
  // exits early into EPIPE instead of a process-wide SIGPIPE.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoStatus(errno, what + ": socketpair");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  // The child's stdout goes to our stderr so that our stdout stays clean.
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_err =
      ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawn_err != 0) {
    ::close(fds[0]);
    return ErrnoStatus(spawn_err, what + ": posix_spawn");
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(argv, pid, fds[0]));
}

ChildProcess::~ChildProcess() { Kill(); }

Status ChildProcess::WriteAll(std::span<const uint8_t> bytes) {
  const std::string what = "running " + argv_[0];
  if (stdin_fd_ < 0) return FailedPrecondition(what + ": its stdin is already closed");
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(stdin_fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, what + ": writing " + std::to_string(bytes.size()) +
                                    " bytes to its stdin (sent " + std::to_string(sent) + ")");
    }
    sent += static_cast<size_t>(n);
  }
  return Status::Ok();
}

void ChildProcess::CloseStdin() noexcept {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

Status ChildProcess::Wait() {
  CloseStdin();  // EOF for the child
  const std::string what = "running " + argv_[0];
  if (killed_) return IoError(what + ": killed before it finished (" + Join(argv_) + ")");
  if (pid_ < 0) return exit_status_;
  auto wstatus = WaitFor(pid_, what);
  if (!wstatus.ok()) return wstatus.status();  // not reaped: Kill() tries again
  pid_ = -1;
  if (WIFSIGNALED(*wstatus)) {
    exit_status_ = IoError(what + ": killed by signal " + std::to_string(WTERMSIG(*wstatus)) +
                           " (" + Join(argv_) + ")");
  } else if (WIFEXITED(*wstatus) && WEXITSTATUS(*wstatus) != 0) {
    exit_status_ = IoError(what + ": exited with status " + std::to_string(WEXITSTATUS(*wstatus)) +
                           " (" + Join(argv_) + ")");
  }
  return exit_status_;
}

void ChildProcess::Interrupt() noexcept {
  // Not reaped yet, so the pid cannot have been reused.
  if (pid_ >= 0) ::kill(pid_, SIGKILL);
}

void ChildProcess::Kill() noexcept {
  CloseStdin();
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  killed_ = true;
}

}  // namespace vaed::ops
