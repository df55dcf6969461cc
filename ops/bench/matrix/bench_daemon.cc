#include "ops/bench/matrix/bench_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

namespace vaed::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "stopped (wait status " + std::to_string(status) + ")";
}

}  // namespace

Result<std::unique_ptr<BenchDaemon>> BenchDaemon::Start(const std::string& binary,
                                                        const std::string& config_toml,
                                                        const std::vector<std::string>& extra_args,
                                                        std::chrono::seconds timeout,
                                                        int request_timeout_ms) {
  char tmpl[] = "/tmp/vaed-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return ErrnoStatus(errno, "creating a temp directory");
  std::unique_ptr<BenchDaemon> d(new BenchDaemon(tmpl));
  const std::string config_path = d->dir_ + "/vaed.toml";
  {
    std::ofstream out(config_path);
    out << config_toml;
    if (!out) return ErrnoStatus(errno, "writing " + config_path);
  }
  std::vector<std::string> args = {binary, "--config", config_path, "--socket", d->socket_};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  VAED_ASSIGN_OR_RETURN(const Clock::time_point start, d->Spawn(std::move(args)));
  VAED_RETURN_IF_ERROR(d->AwaitHello(binary, start, timeout, request_timeout_ms));
  return d;
}

Result<Clock::time_point> BenchDaemon::Spawn(std::vector<std::string> args) {
  const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoStatus(errno, "creating " + log_path_);
  // argv is built before fork: the child only makes async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();

  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(log_fd);
    return ErrnoStatus(err, "fork");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  pid_ = pid;
  return start;
}

Status BenchDaemon::AwaitHello(const std::string& binary, Clock::time_point start,
                               std::chrono::seconds timeout, int request_timeout_ms) {
  client::ClientOptions copts;
  copts.socket = socket_;
  copts.client_name = "vaed_bench_matrix";
  copts.connect_timeout_ms = 1000;
  copts.request_timeout_ms = request_timeout_ms;
  const auto deadline = start + timeout;
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      keep_dir_ = true;
      return Unavailable(binary + " " + DescribeWaitStatus(status) + " before answering a Hello" +
                         (WIFEXITED(status) && WEXITSTATUS(status) == 127
                              ? " (127: could not be executed?)"
                              : "") +
                         "; log " + log_path_ + ":\n" + LogTail(30));
    }
    auto c = client::Client::Connect(copts);
    if (c.ok()) {
      cold_start_s_ = std::chrono::duration<double>(Clock::now() - start).count();
      client_ = std::move(c).value();
      return Status::Ok();
    }
    if (c.status().code() != StatusCode::kUnavailable || Clock::now() > deadline) {
      keep_dir_ = true;
      return Unavailable(binary + " did not answer a Hello within " +
                         std::to_string(timeout.count()) + " s (last: " + c.status().ToString() +
                         "); log " + log_path_ + ":\n" + LogTail(30));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

BenchDaemon::BenchDaemon(std::string dir)
    : dir_(std::move(dir)), socket_(dir_ + "/vaed.sock"), log_path_(dir_ + "/vaed.log") {}

BenchDaemon::~BenchDaemon() {
  if (pid_ > 0) (void)Stop(std::chrono::seconds(60));
  if (!keep_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

Status BenchDaemon::Stop(std::chrono::seconds timeout) {
  client_.reset();
  if (pid_ <= 0) return Status::Ok();
  kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  bool exited = false;
  while (Clock::now() < deadline) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
  if (exited && WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  keep_dir_ = true;
  return Internal(
      "vaed " +
      (exited ? DescribeWaitStatus(status)
              : "ignored SIGTERM for " + std::to_string(timeout.count()) + " s and was killed") +
      " on stop; log " + log_path_);
}

bool BenchDaemon::HasExited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  pid_ = -1;
  keep_dir_ = true;
  spdlog::error("vaed {}; log {}:\n{}", DescribeWaitStatus(status), log_path_, LogTail(30));
  return true;
}

std::string BenchDaemon::LogTail(size_t lines) const {
  std::ifstream in(log_path_);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > lines) tail.pop_front();
  }
  std::string s;
  for (const std::string& l : tail) s += "  | " + l + "\n";
  return s.empty() ? "  | (empty)\n" : s;
}

}  // namespace vaed::bench
