// A `vaed` process that vaed_bench_matrix starts for itself, on a private
// socket with a generated config, and the one client connected to it.
#ifndef VAED_OPS_BENCH_MATRIX_BENCH_DAEMON_H_
#define VAED_OPS_BENCH_MATRIX_BENCH_DAEMON_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "vaed/client.h"
#include "vaed/status.h"

namespace vaed::bench {

// The daemon dies with this process (PR_SET_PDEATHSIG). Move-less owner of
// the child process and its temporary directory. Not thread-safe.
class BenchDaemon {
 public:
  // Makes a temporary directory (/tmp/vaed-bench-XXXXXX) holding the config
  // (`config_toml`), the socket and the daemon's log (its stdout and
  // stderr), starts `binary --config ... --socket ... <extra_args>` and
  // polls Client::Connect (client "vaed_bench_matrix", replies awaited for
  // `request_timeout_ms`, 0 = forever) until a Hello is answered, for at
  // most `timeout`; cold_start_s() is the wall time from fork to that
  // Hello. Errors: the ErrnoStatus of making the directory, writing the
  // files or forking; kUnavailable when the daemon exits or does not answer
  // in time, its message naming the log and quoting its tail (the
  // directory is then kept).
  static Result<std::unique_ptr<BenchDaemon>> Start(const std::string& binary,
                                                    const std::string& config_toml,
                                                    const std::vector<std::string>& extra_args,
                                                    std::chrono::seconds timeout,
                                                    int request_timeout_ms);

  // Stop()s a daemon still running; removes the directory unless kept.
  ~BenchDaemon();
  BenchDaemon(const BenchDaemon&) = delete;
  BenchDaemon& operator=(const BenchDaemon&) = delete;

  // Drops the client (Goodbye), sends SIGTERM and waits up to `timeout`
  // (then SIGKILL). OK when the daemon exits with status 0; otherwise
  // kInternal naming the log, which is then kept.
  Status Stop(std::chrono::seconds timeout);

  // Whether the daemon is gone (a decode failed because it died, say). The
  // first call that finds it gone logs how it ended and the log's tail
  // (spdlog error) and keeps the directory.
  bool HasExited();

  // Valid until Stop().
  client::Client& client() { return *client_; }
  double cold_start_s() const { return cold_start_s_; }
  const std::string& log_path() const { return log_path_; }

  // The last `lines` lines of the daemon's log, each as "  | <line>\n";
  // "  | (empty)\n" when there are none.
  std::string LogTail(size_t lines) const;

 private:
  explicit BenchDaemon(std::string dir);

  // Forks and execs `args` (argv[0] first) with stdout and stderr on the
  // log; sets pid_. Returns the time of the fork.
  Result<std::chrono::steady_clock::time_point> Spawn(std::vector<std::string> args);
  // Polls Connect until a Hello is answered (see Start), from `start`.
  Status AwaitHello(const std::string& binary, std::chrono::steady_clock::time_point start,
                    std::chrono::seconds timeout, int request_timeout_ms);

  std::string dir_;
  std::string socket_;
  std::string log_path_;
  pid_t pid_ = -1;
  bool keep_dir_ = false;
  double cold_start_s_ = 0;
  std::unique_ptr<client::Client> client_;
};

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_BENCH_DAEMON_H_
