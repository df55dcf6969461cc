// Test helper shared by integration and ops tests: runs a real `vaed` process on a private socket and stops it
// with SIGTERM, the way systemd does.
#ifndef VAED_TESTS_COMMON_DAEMON_PROCESS_H_
#define VAED_TESTS_COMMON_DAEMON_PROCESS_H_

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_paths.h"

namespace vaed::testing {

inline std::string SharedPath(const std::string& rel) {
  return std::string(VAED_SHARED_DIR) + "/" + rel;
}
inline bool SharedFileExists(const std::string& rel) {
  return std::filesystem::exists(SharedPath(rel));
}
// Writes `toml` to /tmp/vaed-<tag>-<pid>-<name>.toml (per test process, so
// parallel test binaries never share one) and returns the path.
inline std::string WriteTempConfig(const std::string& tag, const std::string& name,
                                   const std::string& toml) {
  const std::string path =
      "/tmp/vaed-" + tag + "-" + std::to_string(getpid()) + "-" + name + ".toml";
  std::ofstream(path) << toml;
  return path;
}

// `vaed` arguments that turn quarantine off (quarantine.fault_threshold =
// 0), for suites that send many bad requests on purpose: ctest runs a
// suite's tests in one process, whose deliberate faults would otherwise add
// up to a quarantine of the test process that these suites do not test.
inline std::vector<std::string> NoQuarantineArgs() {
  return {"--config", WriteTempConfig("noquarantine", "q", "[quarantine]\nfault_threshold = 0\n")};
}

// The H3 golden pack's tiny video decoder (paths under ../shared).
inline constexpr const char* kH3TinyVideoWeights = "golden/h3/video_tiny_weights.safetensors";
inline constexpr const char* kH3TinyVideoConfig = "golden/h3/video_tiny_config.json";
inline bool H3TinyVideoPresent() {
  return SharedFileExists(kH3TinyVideoWeights) && SharedFileExists(kH3TinyVideoConfig);
}

inline std::string TaefWeights() { return SharedPath("data/taef2/taef2_decoder.safetensors"); }

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally within the timeout
  std::string output;  // stdout and stderr
};

// Runs `vaed` with `args` to completion (killed after `timeout`).
inline RunResult RunVaed(const std::vector<std::string>& args,
                         std::chrono::seconds timeout = std::chrono::seconds(60)) {
  char tmpl[] = "/tmp/vaed-run-XXXXXX";
  const int fd = mkstemp(tmpl);
  std::vector<std::string> all = {std::string(VAED_BINARY_DIR) + "/daemon/vaed"};
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  RunResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream in(tmpl);
  r.output.assign(std::istreambuf_iterator<char>(in), {});
  close(fd);
  unlink(tmpl);
  return r;
}

class DaemonProcess {
 public:
  // Starts `vaed` with `--socket <tmp>/vaed.sock` plus `extra_args`, and
  // waits up to `timeout` for the socket to appear. Check ok() afterwards.
  // `before_exec` runs in the child just before exec (e.g. setrlimit).
  explicit DaemonProcess(std::vector<std::string> extra_args,
                         std::chrono::seconds timeout = std::chrono::seconds(60),
                         std::function<void()> before_exec = {}) {
    char tmpl[] = "/tmp/vaed-it-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket_ = dir_ + "/vaed.sock";
    log_ = dir_ + "/vaed.log";
    std::vector<std::string> args = {std::string(VAED_BINARY_DIR) + "/daemon/vaed", "--socket",
                                     socket_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = fork();
    if (pid_ == 0) {
      // The daemon dies with the test, even when the test is killed.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      FILE* f = freopen(log_.c_str(), "w", stderr);
      (void)f;
      dup2(fileno(stderr), fileno(stdout));
      if (before_exec) before_exec();
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      struct stat st{};
      if (stat(socket_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
        ok_ = true;
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = status;
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  ~DaemonProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  bool ok() const { return ok_; }
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Sends SIGTERM and waits up to `timeout`; returns the wait status, or -1
  // on timeout (the process is then killed).
  int Terminate(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }

 private:
  std::string dir_, socket_, log_;
  pid_t pid_ = -1;
  bool ok_ = false;
  int exit_status_ = -1;
};

}  // namespace vaed::testing

#endif  // VAED_TESTS_COMMON_DAEMON_PROCESS_H_
