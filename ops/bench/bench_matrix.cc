// vaed_bench_matrix: what do stacked tiles and compiled plans buy over the
// eager sequential decode, per compute dtype and latent shape, measured
// through a real daemon?
//
// For each dtype in --dtypes this program starts its own `vaed` (one daemon
// per dtype, because compute_dtype is a model setting) on a private socket
// with a generated --config, and measures its cold start: wall seconds from
// fork/exec until a client Hello is answered. For each latent shape it then
// decodes the same latent (random normal from a fixed seed, or a
// safetensors tensor) to uint8 NHWC under each mode (a request profile +
// stack_tiling + compile, see kModes), all with the same shared regions:
// the first request of each mode, --warmup untimed rounds, then
// --iterations timed rounds in which every mode runs once in turn, so that
// drift in machine load hits all modes alike. Reported per mode: first
// request seconds, warm client wall seconds (median, min), the daemon's
// component timings (median), peaks, the tiling the daemon chose, the
// VAE-only speedup over eager, whether the output bytes equal eager's, and
// the end-to-end speedup that implies when the VAE is a share s of a
// generation (Amdahl: 1 / ((1 - s) + s / v)).
//
// With --group-sizes (and --group-ranks W, passed to the daemon, which then
// qualifies sizes 1, 2, 4, ... W) every mode is also measured per VAE group
// size S (DecodeRequest::group_size), each (mode, S) pair once per round in
// turn like the modes; added per pair: the group the daemon used, tiles per
// rank, each rank's decode seconds, the imbalance (max / mean, from the
// reply's GroupReport), video_vae.tile_communication, and the VAE speedup
// over the same mode at the smallest size listed (S=1 when listed). Output
// bytes are compared with eager's first output at that size.
//
// No LibTorch here (client library only), so it builds in seconds.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ops/common/random_latent.h"
#include "ops/common/text_format.h"
#include "vaed/client.h"
#include "vaed/safetensors.h"
#include "vaed/tensor_ref.h"
#include "vaed/wire.h"

namespace {

using vaed::Result;
using vaed::Status;
using Clock = std::chrono::steady_clock;
namespace client = vaed::client;

constexpr const char* kModelName = "bench";

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median of a non-empty sample.
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// ------------------------------------------------------------------ modes

// One way of asking for a decode. Output bytes must not depend on it.
struct ModeSpec {
  const char* name;
  const char* profile;
  client::StackTiling stack_tiling;
  client::Compile compile;
  const char* summary;
};

const std::vector<ModeSpec>& KnownModes() {
  static const std::vector<ModeSpec> kModes = {
      {"eager", "safe", client::StackTiling::kOff, client::Compile::kOff,
       "profile safe, stack_tiling OFF, compile OFF: eager sequential tiles (the baseline)"},
      {"stacked", "diagnostic", client::StackTiling::kOn, client::Compile::kOff,
       "profile diagnostic, stack_tiling ON, compile OFF"},
      {"compiled", "optimized", client::StackTiling::kOff, client::Compile::kOn,
       "profile optimized, stack_tiling OFF, compile ON"},
      {"compiled_stacked", "optimized", client::StackTiling::kOn, client::Compile::kOn,
       "profile optimized, stack_tiling ON, compile ON"},
      {"auto", "optimized", client::StackTiling::kAuto, client::Compile::kAuto,
       "profile optimized, stack_tiling AUTO, compile AUTO (the daemon decides)"},
  };
  return kModes;
}

const ModeSpec* FindMode(const std::string& name) {
  for (const ModeSpec& m : KnownModes()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

const char* StackName(client::StackTiling s) {
  switch (s) {
    case client::StackTiling::kOff:
      return "OFF";
    case client::StackTiling::kOn:
      return "ON";
    case client::StackTiling::kAuto:
      return "AUTO";
    default:
      return "DEFAULT";
  }
}

const char* CompileName(client::Compile c) {
  switch (c) {
    case client::Compile::kOff:
      return "OFF";
    case client::Compile::kOn:
      return "ON";
    case client::Compile::kAuto:
      return "AUTO";
    default:
      return "DEFAULT";
  }
}

// The model capabilities (StatusReply.models[].capabilities) a mode's
// options need; a model without them rejects the request.
std::vector<std::string> RequiredCapabilities(const ModeSpec& m) {
  std::vector<std::string> caps;
  if (m.stack_tiling == client::StackTiling::kOn || m.stack_tiling == client::StackTiling::kAuto) {
    caps.push_back("stack_tiling");
  }
  if (m.compile == client::Compile::kOn) caps.push_back("compiled_plans");
  return caps;
}

// The label of a (mode, group size) pair: "eager", or "eager S=2" when the
// benchmark measures group sizes (`group_size` > 0).
std::string VariantName(const ModeSpec& m, uint32_t group_size) {
  return group_size == 0 ? std::string(m.name)
                         : std::string(m.name) + " S=" + std::to_string(group_size);
}

// ---------------------------------------------------------------- options

struct MatrixOptions {
  std::string vaed_binary = VAED_BENCH_VAED_BINARY;
  std::string model_kind = "h3_video";
  std::string weights;
  std::string config;
  std::vector<std::string> dtypes = {"float32"};
  std::vector<std::string> shapes;
  std::string latent_path;
  std::string latent_key = "latent";
  uint64_t seed = 20261130;
  std::vector<std::string> modes = {"eager", "stacked", "compiled", "compiled_stacked", "auto"};
  int warmup = 1;
  int iterations = 5;
  std::vector<double> vae_shares = {0.3};
  std::string json_path;
  int threads = 2;
  int64_t plan_cache_capacity = 8;
  int start_timeout_s = 600;
  int request_timeout_s = 3600;
  // The daemon's --group-ranks (local VAE ranks; qualifies sizes 1, 2, 4,
  // ... up to it); 0 = not passed (one rank).
  uint32_t group_ranks = 0;
  // VAE group sizes each mode is measured at, ascending after validation;
  // the first is the baseline of the group speedups. Empty = requests ask
  // for no size (the daemon's group.size) and no group figures are printed.
  std::vector<uint32_t> group_sizes;
};

// Whole-option checks CLI11's per-option validators cannot make.
Status ValidateOptions(const MatrixOptions& o) {
  const bool h3 = o.model_kind == "h3_video";
  if (!h3 && o.model_kind != "taef2") {
    return vaed::InvalidArgument("--model-kind '" + o.model_kind + "' must be h3_video or taef2");
  }
  if (!h3 && o.weights.empty()) {
    return vaed::InvalidArgument("--model-kind taef2 needs --weights (taef2_decoder.safetensors)");
  }
  if (!h3 && !o.config.empty()) {
    return vaed::InvalidArgument("--config is for h3_video only; taef2 has no config file");
  }
  if (o.dtypes.empty()) return vaed::InvalidArgument("--dtypes is empty");
  for (const std::string& d : o.dtypes) {
    if (d != "float32" && d != "bfloat16") {
      return vaed::InvalidArgument("--dtypes lists '" + d +
                                   "'; compute dtypes are float32, bfloat16");
    }
    if (!h3 && d != "float32") {
      return vaed::InvalidArgument("--dtypes lists '" + d + "'; taef2 computes in float32 only");
    }
  }
  if (std::set<std::string>(o.dtypes.begin(), o.dtypes.end()).size() != o.dtypes.size()) {
    return vaed::InvalidArgument("--dtypes lists a dtype twice");
  }
  if (o.shapes.empty() && o.latent_path.empty()) {
    return vaed::InvalidArgument("give --shapes (random latents) or --latent FILE");
  }
  if (o.modes.empty()) return vaed::InvalidArgument("--modes is empty");
  std::set<std::string> seen;
  for (const std::string& m : o.modes) {
    if (FindMode(m) == nullptr) {
      std::vector<std::string> known;
      for (const ModeSpec& k : KnownModes()) known.push_back(k.name);
      return vaed::InvalidArgument("--modes lists '" + m + "'; modes are " + JoinNames(known));
    }
    if (!seen.insert(m).second) return vaed::InvalidArgument("--modes lists '" + m + "' twice");
  }
  if (std::set<uint32_t>(o.group_sizes.begin(), o.group_sizes.end()).size() !=
      o.group_sizes.size()) {
    return vaed::InvalidArgument("--group-sizes lists a size twice");
  }
  const uint32_t ranks = std::max<uint32_t>(o.group_ranks, 1);
  for (uint32_t size : o.group_sizes) {
    if (size > ranks) {
      return vaed::InvalidArgument("--group-sizes lists " + std::to_string(size) +
                                   " but the daemon has " + std::to_string(ranks) +
                                   " rank(s); raise --group-ranks");
    }
  }
  for (double s : o.vae_shares) {
    if (!(s > 0.0 && s <= 1.0)) {
      return vaed::InvalidArgument("--vae-share " + std::to_string(s) +
                                   " must be a fraction in (0, 1]");
    }
  }
  return Status::Ok();
}

// A TOML basic string.
std::string TomlString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.string();
}

// The daemon config for one compute dtype: one model, named kModelName.
// taef2 accepts only name, kind and weights.
std::string DaemonConfigToml(const MatrixOptions& o, const std::string& dtype) {
  std::ostringstream t;
  t << "# Generated by vaed_bench_matrix.\n"
    << "[executor]\nintra_op_threads = " << o.threads << "\n\n"
    << "[models]\ndefault = " << TomlString(kModelName) << "\n\n"
    << "[[models.entry]]\nname = " << TomlString(kModelName) << "\n"
    << "kind = " << TomlString(o.model_kind) << "\n";
  if (!o.weights.empty()) t << "weights = " << TomlString(AbsolutePath(o.weights)) << "\n";
  if (o.model_kind == "h3_video") {
    if (!o.config.empty()) t << "config = " << TomlString(AbsolutePath(o.config)) << "\n";
    t << "compute_dtype = " << TomlString(dtype) << "\n"
      << "stack_tiling = \"off\"\n"
      << "plan_cache_capacity = " << o.plan_cache_capacity << "\n";
  }
  return t.str();
}

// ----------------------------------------------------------------- daemon

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "stopped (wait status " + std::to_string(status) + ")";
}

// A `vaed` process started by this benchmark on a private socket, and the
// one client connected to it. The daemon dies with this process
// (PR_SET_PDEATHSIG). Not thread-safe.
class BenchDaemon {
 public:
  // Makes a temporary directory holding the config (`config_toml`), the
  // socket and the daemon's log (its stdout and stderr), starts `binary
  // --config ... --socket ... <extra_args>` and polls Client::Connect until
  // a Hello is answered, for at most `timeout`. Errors: kIoError (directory, files,
  // fork), kUnavailable when the daemon exits or does not answer in time;
  // the message then names the log and quotes its tail, and the directory
  // is kept.
  static Result<std::unique_ptr<BenchDaemon>> Start(const std::string& binary,
                                                    const std::string& config_toml,
                                                    const std::vector<std::string>& extra_args,
                                                    std::chrono::seconds timeout,
                                                    int request_timeout_ms) {
    char tmpl[] = "/tmp/vaed-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return vaed::ErrnoStatus(errno, "creating a temp directory");
    std::unique_ptr<BenchDaemon> d(new BenchDaemon(tmpl));
    const std::string config_path = d->dir_ + "/vaed.toml";
    {
      std::ofstream out(config_path);
      out << config_toml;
      if (!out) return vaed::ErrnoStatus(errno, "writing " + config_path);
    }
    const int log_fd = open(d->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return vaed::ErrnoStatus(errno, "creating " + d->log_path_);
    // argv is built before fork: the child only makes async-signal-safe calls.
    std::vector<std::string> args = {binary, "--config", config_path, "--socket", d->socket_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();

    const auto start = Clock::now();
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      close(log_fd);
      return vaed::ErrnoStatus(err, "fork");
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
    d->pid_ = pid;

    client::ClientOptions copts;
    copts.socket = d->socket_;
    copts.client_name = "vaed_bench_matrix";
    copts.connect_timeout_ms = 1000;
    copts.request_timeout_ms = request_timeout_ms;
    const auto deadline = start + timeout;
    for (;;) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        d->pid_ = -1;
        d->keep_dir_ = true;
        return vaed::Unavailable(
            binary + " " + DescribeWaitStatus(status) + " before answering a Hello" +
            (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (127: could not be executed?)"
                                                             : "") +
            "; log " + d->log_path_ + ":\n" + d->LogTail(30));
      }
      auto c = client::Client::Connect(copts);
      if (c.ok()) {
        d->cold_start_s_ = SecondsSince(start);
        d->client_ = std::move(c).value();
        return d;
      }
      if (c.status().code() != vaed::StatusCode::kUnavailable || Clock::now() > deadline) {
        d->keep_dir_ = true;
        return vaed::Unavailable(binary + " did not answer a Hello within " +
                                 std::to_string(timeout.count()) +
                                 " s (last: " + c.status().ToString() + "); log " + d->log_path_ +
                                 ":\n" + d->LogTail(30));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Stop()s a daemon still running; removes the directory unless kept.
  ~BenchDaemon() {
    if (pid_ > 0) (void)Stop(std::chrono::seconds(60));
    if (!keep_dir_) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  BenchDaemon(const BenchDaemon&) = delete;
  BenchDaemon& operator=(const BenchDaemon&) = delete;

  // Says Goodbye, sends SIGTERM and waits up to `timeout` (then SIGKILL).
  // OK when the daemon exits with status 0; otherwise kInternal naming the
  // log, which is then kept.
  Status Stop(std::chrono::seconds timeout) {
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
    return vaed::Internal(
        "vaed " +
        (exited ? DescribeWaitStatus(status)
                : "ignored SIGTERM for " + std::to_string(timeout.count()) + " s and was killed") +
        " on stop; log " + log_path_);
  }

  // Whether the daemon is gone (a decode failed because it died, say).
  bool HasExited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = -1;
    keep_dir_ = true;
    spdlog::error("vaed {}; log {}:\n{}", DescribeWaitStatus(status), log_path_, LogTail(30));
    return true;
  }

  client::Client& client() { return *client_; }
  double cold_start_s() const { return cold_start_s_; }
  const std::string& log_path() const { return log_path_; }

  // The last `lines` lines of the daemon's log.
  std::string LogTail(size_t lines) const {
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

 private:
  explicit BenchDaemon(std::string dir)
      : dir_(std::move(dir)), socket_(dir_ + "/vaed.sock"), log_path_(dir_ + "/vaed.log") {}

  std::string dir_;
  std::string socket_;
  std::string log_path_;
  pid_t pid_ = -1;
  bool keep_dir_ = false;
  double cold_start_s_ = 0;
  std::unique_ptr<client::Client> client_;
};

// ----------------------------------------------------------------- latent

// A float32 latent in the model's layout (H3: [1, 24, T, h, w]; TAEF2:
// [frames, 32, h, w]; latent cells, not pixels).
struct Latent {
  std::vector<int64_t> shape;
  std::vector<float> values;
  std::string source;  // "random normal, seed N" or "FILE:KEY"
};

Result<Latent> RandomLatent(const std::string& shape_text, uint64_t seed) {
  VAED_ASSIGN_OR_RETURN(std::vector<int64_t> shape, vaed::ops::ParseShape(shape_text));
  VAED_ASSIGN_OR_RETURN(const uint64_t count, vaed::NumElements(shape, "--shapes"));
  return Latent{shape, vaed::ops::RandomNormalLatent(count, seed),
                "random normal, seed " + std::to_string(seed)};
}

Result<Latent> FileLatent(const std::string& path, const std::string& key) {
  VAED_ASSIGN_OR_RETURN(auto file, vaed::SafetensorsFile::Open(path));
  const vaed::TensorEntry* e = file->Find(key);
  if (e == nullptr) {
    return vaed::NotFound(path + ": no tensor '" + key + "' (tensors: " + JoinNames(file->names()) +
                          ")");
  }
  if (e->dtype != vaed::DType::kFloat32) {
    return vaed::InvalidArgument(path + ": tensor '" + key + "' is " +
                                 std::string(vaed::DTypeName(e->dtype)) +
                                 "; the benchmark sends float32 latents");
  }
  Latent latent;
  latent.shape = e->shape;
  latent.values.resize(e->nbytes / sizeof(float));
  // The file's data pointer is only 1-byte aligned: copy, do not cast.
  std::memcpy(latent.values.data(), e->data, e->nbytes);
  latent.source = path + ":" + key;
  return latent;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// ------------------------------------------------------------ measurement

enum class ModeState { kOk, kUnsupported, kFailed };

const char* StateName(ModeState s) {
  switch (s) {
    case ModeState::kOk:
      return "ok";
    case ModeState::kUnsupported:
      return "unsupported";
    case ModeState::kFailed:
      return "failed";
  }
  return "?";
}

// The figures of one position in the group (0 = the output rank), from the
// replies' GroupReports. By position, not global rank: successive requests
// of one size may run on different blocks (s1.b0, then s1.b1).
struct RankStats {
  uint32_t rank = 0;             // global rank, last run
  uint32_t tiles = 0;            // last run
  std::vector<double> decode_s;  // timed runs
};

// Everything measured for one mode (at one group size) of one (dtype,
// shape) cell.
struct ModeResult {
  const ModeSpec* spec = nullptr;
  uint32_t group_size = 0;  // 0: not measured per group size
  client::DecodeRequest request;
  ModeState state = ModeState::kOk;
  std::string reason;  // why unsupported or failed: the daemon's message
  std::optional<double> first_request_s;
  bool first_request_warm = false;
  std::vector<double> wall_s;                           // timed runs, client side
  std::map<std::string, std::vector<double>> timing_s;  // timed runs, reply timings
  uint64_t peak_tensor_bytes = 0;                       // max over all runs
  uint64_t peak_rss_bytes = 0;                          // max over all runs
  // From the last run.
  std::optional<vaed::v1::TilingInfo> tiling;
  std::string compile_decision;
  std::string profile;
  std::string compute_dtype;
  // Output equality against eager's first output, over every run.
  int runs_compared = 0;
  uint64_t max_bytes_differing = 0;
  // Derived after the runs.
  std::optional<double> vae_median_s;
  std::optional<double> vae_speedup;   // eager VAE median / this VAE median
  std::optional<double> wall_speedup;  // eager wall median / this wall median
  // VAE groups (replies' GroupReport). All runs: the groups used (name ->
  // last generation) and fallbacks; per position in the group (output rank
  // first): see RankStats; timed runs: imbalance.
  std::map<std::string, uint64_t> groups_used;
  std::vector<RankStats> rank_stats;
  std::vector<double> imbalance;
  int fallbacks = 0;
  std::string last_fallback;
  // Same mode at the baseline (first) group size: its median / this one's.
  std::optional<double> group_vae_speedup;
  std::optional<double> group_wall_speedup;

  std::string name() const { return VariantName(*spec, group_size); }
  bool active() const { return state == ModeState::kOk; }
  std::optional<double> TimingMedian(const std::string& component) const {
    auto it = timing_s.find(component);
    if (it == timing_s.end() || it->second.empty()) return std::nullopt;
    return Median(it->second);
  }
};

// One (dtype, latent) cell of the matrix.
struct CellResult {
  std::string dtype;
  Latent latent;
  std::vector<int64_t> output_shape;
  uint64_t output_bytes = 0;
  std::string error;  // the cell could not run at all
  std::vector<ModeResult> modes;
};

enum class Phase { kFirst, kWarmup, kTimed };

// The VAE-only component of the reply timings for `kind`.
std::string VaeComponent(const std::string& kind) {
  return kind == "taef2" ? "taef2.decode_latent" : "video_vae.decode_latent";
}

uint64_t CountDifferingBytes(const uint8_t* a, const uint8_t* b, uint64_t n) {
  uint64_t diff = 0;
  for (uint64_t i = 0; i < n; ++i) diff += a[i] != b[i];
  return diff;
}

// Runs every mode of one cell against the daemon `daemon`. Errors are the
// ones that stop the whole cell (the daemon rejects the latent, regions
// cannot be made); a mode's own failure is recorded in its ModeResult.
class CellRunner {
 public:
  CellRunner(const MatrixOptions& o, BenchDaemon* daemon, const std::vector<std::string>& caps,
             CellResult* cell)
      : o_(o), daemon_(daemon), caps_(caps), cell_(cell) {}

  Status Run() {
    client::Client& c = daemon_->client();
    const std::vector<int64_t>& shape = cell_->latent.shape;
    VAED_ASSIGN_OR_RETURN(
        const vaed::v1::DecodeReply plan,
        c.PlanDecode(kModelName, vaed::DType::kFloat32, shape, client::OutputFormat::kUInt8NHWC));
    cell_->output_shape.assign(plan.output_shape().begin(), plan.output_shape().end());
    cell_->output_bytes = plan.output_bytes();
    const uint64_t latent_bytes = cell_->latent.values.size() * sizeof(float);
    VAED_ASSIGN_OR_RETURN(in_, client::SharedRegion::Create(latent_bytes));
    VAED_ASSIGN_OR_RETURN(out_, client::SharedRegion::Create(plan.output_bytes()));
    VAED_ASSIGN_OR_RETURN(in_id_, c.RegisterRegion(*in_));
    VAED_ASSIGN_OR_RETURN(out_id_, c.RegisterRegion(*out_));
    std::memcpy(in_->data(), cell_->latent.values.data(), latent_bytes);

    // Eager first: its first output is the reference for every mode.
    std::vector<std::string> order = o_.modes;
    std::stable_partition(order.begin(), order.end(),
                          [](const std::string& m) { return m == "eager"; });
    // Each mode at each group size, the baseline size first: eager at it
    // is the byte reference.
    std::vector<uint32_t> sizes = o_.group_sizes;
    if (sizes.empty()) sizes.push_back(0);
    for (const std::string& name : order) {
      for (uint32_t size : sizes) {
        ModeResult m;
        m.spec = FindMode(name);
        m.group_size = size;
        m.request.group_size = size;
        m.request.model = kModelName;
        m.request.latent = {in_id_, 0, vaed::DType::kFloat32, shape};
        m.request.output = {out_id_, 0, vaed::FromProto(plan.output_dtype()), cell_->output_shape};
        m.request.format = client::OutputFormat::kUInt8NHWC;
        m.request.profile = m.spec->profile;
        m.request.stack_tiling = m.spec->stack_tiling;
        m.request.compile = m.spec->compile;
        CheckSupported(&m);
        cell_->modes.push_back(std::move(m));
      }
    }

    for (ModeResult& m : cell_->modes) {
      if (m.active()) RunOnce(&m, Phase::kFirst, 0);
    }
    for (int i = 0; i < o_.warmup; ++i) {
      for (ModeResult& m : cell_->modes) {
        if (m.active()) RunOnce(&m, Phase::kWarmup, i);
      }
    }
    for (int i = 0; i < o_.iterations; ++i) {
      for (ModeResult& m : cell_->modes) {
        if (m.active()) RunOnce(&m, Phase::kTimed, i);
      }
    }
    Summarize();
    if (!daemon_->HasExited()) {
      (void)c.UnregisterRegion(in_id_);
      (void)c.UnregisterRegion(out_id_);
    }
    return Status::Ok();
  }

 private:
  std::string Label() const { return cell_->dtype + " " + ShapeText(cell_->latent.shape); }

  // A mode whose options the model lacks is "unsupported", with the
  // daemon's reason (a plan-only request resolves the options the same way
  // a decode does).
  void CheckSupported(ModeResult* m) {
    std::vector<std::string> missing;
    std::vector<std::string> required = RequiredCapabilities(*m->spec);
    if (m->group_size > 1) required.push_back("spatial_sharding");
    for (const std::string& cap : required) {
      if (std::find(caps_.begin(), caps_.end(), cap) == caps_.end()) missing.push_back(cap);
    }
    auto planned = daemon_->client().PlanDecode(m->request);
    if (planned.ok()) {
      if (!missing.empty()) {
        spdlog::warn("{}: mode {}: the model lacks capability {} but the daemon accepts it",
                     Label(), m->name(), JoinNames(missing));
      }
      return;
    }
    if (planned.status().code() == vaed::StatusCode::kInvalidArgument) {
      m->state = ModeState::kUnsupported;
      m->reason = planned.status().message();
      if (!missing.empty()) m->reason += " [model capabilities lack: " + JoinNames(missing) + "]";
      spdlog::info("{}: mode {} unsupported: {}", Label(), m->name(), m->reason);
      return;
    }
    m->state = ModeState::kFailed;
    m->reason = "plan: " + planned.status().ToString();
  }

  void RunOnce(ModeResult* m, Phase phase, int index) {
    // A mode that writes nothing must not pass the equality check on the
    // previous mode's bytes.
    std::memset(out_->data(), 0, out_->size());
    const auto start = Clock::now();
    auto reply = daemon_->client().Decode(m->request);
    const double wall = SecondsSince(start);
    const char* phase_name = phase == Phase::kFirst    ? "first"
                             : phase == Phase::kWarmup ? "warmup"
                                                       : "timed";
    if (!reply.ok()) {
      if (phase == Phase::kFirst && reply.status().code() == vaed::StatusCode::kInvalidArgument) {
        m->state = ModeState::kUnsupported;
        m->reason = reply.status().message();
        spdlog::info("{}: mode {} unsupported: {}", Label(), m->name(), m->reason);
      } else {
        m->state = ModeState::kFailed;
        m->reason = std::string(phase_name) + " request: " + reply.status().ToString();
        spdlog::error("{}: mode {} failed: {}", Label(), m->name(), m->reason);
        (void)daemon_->HasExited();
      }
      return;
    }
    const vaed::v1::DecodeReply& r = *reply;
    if (phase == Phase::kFirst) {
      m->first_request_s = wall;
      m->first_request_warm = r.warm();
    }
    std::optional<double> vae;
    for (const auto& t : r.timings()) {
      if (t.component() == VaeComponent(o_.model_kind)) vae = t.seconds();
      if (phase == Phase::kTimed) m->timing_s[t.component()].push_back(t.seconds());
    }
    if (phase == Phase::kTimed) m->wall_s.push_back(wall);
    m->peak_tensor_bytes = std::max<uint64_t>(m->peak_tensor_bytes, r.peak_tensor_bytes());
    m->peak_rss_bytes = std::max<uint64_t>(m->peak_rss_bytes, r.peak_rss_bytes());
    if (r.has_tiling()) m->tiling = r.tiling();
    m->compile_decision = r.compile_decision();
    m->profile = r.profile();
    m->compute_dtype = r.compute_dtype();
    if (r.has_group()) RecordGroup(r.group(), phase, m);

    const uint8_t* out = out_->data();
    const uint64_t n = cell_->output_bytes;
    if (!reference_.empty()) {
      const uint64_t diff = CountDifferingBytes(out, reference_.data(), n);
      m->max_bytes_differing = std::max(m->max_bytes_differing, diff);
      ++m->runs_compared;
    } else if (std::string(m->spec->name) == "eager" && phase == Phase::kFirst) {
      reference_.assign(out, out + n);
    }

    std::string progress = Label() + " [" + phase_name;
    if (phase != Phase::kFirst) {
      progress += " " + std::to_string(index + 1) + "/" +
                  std::to_string(phase == Phase::kWarmup ? o_.warmup : o_.iterations);
    }
    progress += "] " + m->name() + ": " + vaed::ops::FormatFixed(wall, 3) + " s";
    if (vae) progress += " (vae " + vaed::ops::FormatFixed(*vae, 3) + " s)";
    if (m->group_size > 0 && r.has_group()) {
      progress += " group " + r.group().name() + " imbalance " +
                  vaed::ops::FormatFixed(r.group().imbalance(), 2);
    }
    if (phase == Phase::kFirst) progress += r.warm() ? " warm" : " cold";
    spdlog::info("{}", progress);
  }

  // The group figures of one reply: the group used and its fallbacks from
  // every run, the per-rank times and the imbalance from timed runs only.
  static void RecordGroup(const vaed::v1::GroupReport& g, Phase phase, ModeResult* m) {
    m->groups_used[g.name()] = g.generation();
    if (m->rank_stats.size() < static_cast<size_t>(g.ranks_size())) {
      m->rank_stats.resize(g.ranks_size());
    }
    for (int i = 0; i < g.ranks_size(); ++i) {
      RankStats& stats = m->rank_stats[i];
      stats.rank = g.ranks(i).rank();
      stats.tiles = g.ranks(i).tiles();
      if (phase == Phase::kTimed) stats.decode_s.push_back(g.ranks(i).decode_seconds());
    }
    if (phase == Phase::kTimed) m->imbalance.push_back(g.imbalance());
    if (!g.fallback().empty()) {
      ++m->fallbacks;
      m->last_fallback = g.fallback();
    }
  }

  void Summarize() {
    const std::string vae = VaeComponent(o_.model_kind);
    auto measured = [](const ModeResult& m) { return m.active() && !m.wall_s.empty(); };
    for (ModeResult& m : cell_->modes) {
      if (measured(m)) m.vae_median_s = m.TimingMedian(vae);
    }
    for (ModeResult& m : cell_->modes) {
      if (!measured(m)) continue;
      // Against eager at the same group size, and against the same mode at
      // the baseline group size.
      const ModeResult* eager = nullptr;
      const ModeResult* baseline = nullptr;
      for (const ModeResult& other : cell_->modes) {
        if (!measured(other)) continue;
        if (std::string(other.spec->name) == "eager" && other.group_size == m.group_size) {
          eager = &other;
        }
        if (!o_.group_sizes.empty() && other.spec == m.spec &&
            other.group_size == o_.group_sizes.front()) {
          baseline = &other;
        }
      }
      if (eager != nullptr) {
        if (eager->vae_median_s && m.vae_median_s && *m.vae_median_s > 0) {
          m.vae_speedup = *eager->vae_median_s / *m.vae_median_s;
        }
        m.wall_speedup = Median(eager->wall_s) / Median(m.wall_s);
      }
      if (baseline != nullptr) {
        if (baseline->vae_median_s && m.vae_median_s && *m.vae_median_s > 0) {
          m.group_vae_speedup = *baseline->vae_median_s / *m.vae_median_s;
        }
        m.group_wall_speedup = Median(baseline->wall_s) / Median(m.wall_s);
      }
    }
  }

  const MatrixOptions& o_;
  BenchDaemon* daemon_;
  const std::vector<std::string>& caps_;
  CellResult* cell_;
  std::unique_ptr<client::SharedRegion> in_;
  std::unique_ptr<client::SharedRegion> out_;
  uint64_t in_id_ = 0;
  uint64_t out_id_ = 0;
  std::vector<uint8_t> reference_;  // eager's first output
};

// Amdahl's law: the end-to-end speedup of a generation whose VAE decode is
// the fraction `vae_share` of its time when the decode gets `vae_speedup`
// times faster.
double EndToEndSpeedup(double vae_share, double vae_speedup) {
  return 1.0 / ((1.0 - vae_share) + vae_share / vae_speedup);
}

std::string FormatSpeedup(double v) {
  return "x" + vaed::ops::FormatFixed(v, 2) + (v >= 1.0 ? " faster" : " (slower)");
}

std::string OrDash(const std::optional<double>& v, int decimals) {
  return v ? vaed::ops::FormatFixed(*v, decimals) : "-";
}

// The byte reference: eager's first output at the baseline (first) group
// size.
bool IsReference(const MatrixOptions& o, const ModeResult& m) {
  return std::string(m.spec->name) == "eager" &&
         m.group_size == (o.group_sizes.empty() ? 0 : o.group_sizes.front());
}

std::string ReferenceName(const MatrixOptions& o) {
  return o.group_sizes.empty() ? "eager" : "eager S=" + std::to_string(o.group_sizes.front());
}

std::string BytesVerdict(const MatrixOptions& o, const ModeResult& m) {
  if (m.runs_compared == 0)
    return IsReference(o, m) && m.first_request_s ? "reference" : "not compared";
  if (m.max_bytes_differing == 0) {
    return IsReference(o, m) ? "reference (repeatable)" : "identical to " + ReferenceName(o);
  }
  return std::to_string(m.max_bytes_differing) + " bytes differ from " + ReferenceName(o);
}

// "a/b/c" over the group's positions (output rank first).
std::string PerRank(const ModeResult& m, const std::function<std::string(const RankStats&)>& f) {
  std::string s;
  for (const RankStats& r : m.rank_stats) s += (s.empty() ? "" : "/") + f(r);
  return s.empty() ? "-" : s;
}

// "s1.b0 g0, s1.b1 g0": the groups a (mode, size) ran on, with generations.
std::string GroupsUsed(const ModeResult& m) {
  std::string s;
  for (const auto& [name, generation] : m.groups_used) {
    s += (s.empty() ? "" : ", ") + name + " g" + std::to_string(generation);
  }
  return s.empty() ? "-" : s;
}

std::optional<double> RankDecodeMedian(const RankStats& r) {
  return r.decode_s.empty() ? std::nullopt : std::optional<double>(Median(r.decode_s));
}

// Per (mode, group size): the group the daemon used and how evenly its
// ranks worked.
void PrintGroups(const MatrixOptions& o, const CellResult& cell, std::ostream& out) {
  vaed::ops::TextTable t(
      {"mode", "S", "group", "warm med s", "decode s", "vae s", "tile_dec s", "tile_comm s",
       "tiles/rank", "rank decode s", "imbalance",
       "vae vs S=" + std::to_string(o.group_sizes.front()), "bytes"},
      {false, true, false, true, true, true, true, true, false, false, true, false, false});
  for (const ModeResult& m : cell.modes) {
    if (m.state != ModeState::kOk || m.wall_s.empty()) {
      t.AddRow({m.spec->name, std::to_string(m.group_size), StateName(m.state)});
      continue;
    }
    std::string speed = "-";
    if (m.group_size == o.group_sizes.front()) {
      speed = "baseline";
    } else if (m.group_vae_speedup) {
      speed = FormatSpeedup(*m.group_vae_speedup);
    }
    t.AddRow({m.spec->name, std::to_string(m.group_size), GroupsUsed(m),
              vaed::ops::FormatFixed(Median(m.wall_s), 3), OrDash(m.TimingMedian("decode"), 3),
              OrDash(m.vae_median_s, 3), OrDash(m.TimingMedian("video_vae.tile_decode"), 3),
              OrDash(m.TimingMedian("video_vae.tile_communication"), 3),
              PerRank(m, [](const RankStats& r) { return std::to_string(r.tiles); }),
              PerRank(m, [](const RankStats& r) { return OrDash(RankDecodeMedian(r), 3); }),
              m.imbalance.empty() ? "-" : vaed::ops::FormatFixed(Median(m.imbalance), 3), speed,
              BytesVerdict(o, m)});
  }
  out << "   VAE groups ('group': the groups used, 'g' generation; tiles/rank, rank decode s:\n"
         "   per position in the group, output rank first; rank decode s and imbalance\n"
         "   (max/mean of them): medians of the timed runs):\n"
      << t.Render();
  for (const ModeResult& m : cell.modes) {
    if (m.fallbacks > 0) {
      out << "   " << m.name() << ": " << m.fallbacks
          << " run(s) fell back to one rank; last: " << m.last_fallback << "\n";
    }
  }
}

// ------------------------------------------------------------------ output

void PrintCell(const MatrixOptions& o, const CellResult& cell, std::ostream& out) {
  out << "\n== " << cell.dtype << "  latent " << vaed::ShapeToString(cell.latent.shape) << " ("
      << cell.latent.source << ")";
  if (!cell.output_shape.empty()) {
    out << " -> uint8 " << vaed::ShapeToString(cell.output_shape) << " ("
        << vaed::ops::HumanBytes(cell.output_bytes) << ")";
  }
  out << "\n";
  if (!cell.error.empty()) {
    out << "   FAILED: " << cell.error << "\n";
    return;
  }
  vaed::ops::TextTable t(
      {"mode", "first s", "warm med s", "warm min s", "decode s", "vae s", "tile_dec s", "merge s",
       "tiles/call", "calls", "peak tensor", "peak rss", "vae vs eager", "bytes"},
      {false, true, true, true, true, true, true, true, true, true, true, true, false, false});
  for (const ModeResult& m : cell.modes) {
    if (m.state != ModeState::kOk || m.wall_s.empty()) {
      t.AddRow({m.name(), StateName(m.state)});
      continue;
    }
    std::string first = OrDash(m.first_request_s, 3) + (m.first_request_warm ? " (warm)" : "");
    std::string speed = "-";
    if (std::string(m.spec->name) == "eager") {
      speed = "baseline";
    } else if (m.vae_speedup) {
      speed = FormatSpeedup(*m.vae_speedup);
    }
    t.AddRow({m.name(), first, vaed::ops::FormatFixed(Median(m.wall_s), 3),
              vaed::ops::FormatFixed(*std::min_element(m.wall_s.begin(), m.wall_s.end()), 3),
              OrDash(m.TimingMedian("decode"), 3), OrDash(m.vae_median_s, 3),
              OrDash(m.TimingMedian("video_vae.tile_decode"), 3),
              OrDash(m.TimingMedian("video_vae.tile_merge"), 3),
              m.tiling ? std::to_string(m.tiling->max_tiles_per_call()) : "-",
              m.tiling ? std::to_string(m.tiling->decoder_calls()) : "-",
              vaed::ops::HumanBytes(m.peak_tensor_bytes), vaed::ops::HumanBytes(m.peak_rss_bytes),
              speed, BytesVerdict(o, m)});
  }
  out << t.Render();
  for (const ModeResult& m : cell.modes) {
    out << "   " << m.name() << ": ";
    if (m.state != ModeState::kOk) {
      out << StateName(m.state) << ": " << m.reason << "\n";
      continue;
    }
    out << "profile " << m.profile << "; compile: " << m.compile_decision;
    if (m.tiling) {
      out << "; grid " << m.tiling->tile_rows() << "x" << m.tiling->tile_cols() << " x "
          << m.tiling->windows() << " windows; stack: " << m.tiling->stack_decision()
          << "; plans: " << m.tiling->plan_decision();
    }
    out << "\n";
  }
  bool any = false;
  vaed::ops::TextTable a({"mode", "vae speedup", "vae share", "end-to-end"},
                         {false, true, true, false});
  for (const ModeResult& m : cell.modes) {
    if (!m.vae_speedup || std::string(m.spec->name) == "eager") continue;
    for (double s : o.vae_shares) {
      any = true;
      a.AddRow({m.name(), vaed::ops::FormatFixed(*m.vae_speedup, 3), vaed::ops::FormatFixed(s, 2),
                FormatSpeedup(EndToEndSpeedup(s, *m.vae_speedup))});
    }
  }
  if (any) out << "   Amdahl (end-to-end = 1 / ((1 - s) + s / v)):\n" << a.Render();
  if (!o.group_sizes.empty()) PrintGroups(o, cell, out);
}

nlohmann::json OptJson(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The "group" object of a measured (mode, group size): size, groups_used
// {name: last generation}, ranks [{rank, tiles, decode_s_median,
// decode_s_runs}] per position in the group (output rank first),
// imbalance_median / imbalance_runs (max / mean), tile_communication_median_s,
// baseline_size, vae_ / wall_speedup_vs_baseline_size, output_reference,
// output_identical_to_reference, fallbacks, last_fallback. Seconds.
nlohmann::json GroupJson(const MatrixOptions& o, const ModeResult& m) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankStats& r : m.rank_stats) {
    ranks.push_back({{"rank", r.rank},
                     {"tiles", r.tiles},
                     {"decode_s_median", OptJson(RankDecodeMedian(r))},
                     {"decode_s_runs", r.decode_s}});
  }
  return {
      {"size", m.group_size},
      {"groups_used", m.groups_used},
      {"ranks", ranks},
      {"imbalance_median",
       m.imbalance.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(m.imbalance))},
      {"imbalance_runs", m.imbalance},
      {"tile_communication_median_s", OptJson(m.TimingMedian("video_vae.tile_communication"))},
      {"baseline_size", o.group_sizes.front()},
      {"vae_speedup_vs_baseline_size", OptJson(m.group_vae_speedup)},
      {"wall_speedup_vs_baseline_size", OptJson(m.group_wall_speedup)},
      {"output_reference", ReferenceName(o)},
      {"output_identical_to_reference",
       m.runs_compared > 0 ? nlohmann::json(m.max_bytes_differing == 0) : nlohmann::json(nullptr)},
      {"fallbacks", m.fallbacks},
      {"last_fallback",
       m.last_fallback.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.last_fallback)},
  };
}

nlohmann::json ModeJson(const MatrixOptions& o, const CellResult& cell, const ModeResult& m) {
  nlohmann::json j = {
      {"dtype", cell.dtype},
      {"latent_shape", cell.latent.shape},
      {"latent_source", cell.latent.source},
      {"output_shape", cell.output_shape},
      {"output_bytes", cell.output_bytes},
      {"mode", m.spec->name},
      {"request",
       {{"profile", m.spec->profile},
        {"stack_tiling", StackName(m.spec->stack_tiling)},
        {"compile", CompileName(m.spec->compile)}}},
      {"status", StateName(m.state)},
      {"reason", m.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.reason)},
  };
  if (!o.group_sizes.empty()) j["request"]["group_size"] = m.group_size;
  if (m.state != ModeState::kOk || m.wall_s.empty()) return j;
  nlohmann::json components = nlohmann::json::object();
  for (const auto& [name, seconds] : m.timing_s) components[name] = Median(seconds);
  j["first_request_s"] = OptJson(m.first_request_s);
  j["first_request_warm"] = m.first_request_warm;
  j["warm_wall_s"] = {{"median", Median(m.wall_s)},
                      {"min", *std::min_element(m.wall_s.begin(), m.wall_s.end())},
                      {"runs", m.wall_s}};
  j["timings_median_s"] = components;
  j["vae_component"] = VaeComponent(o.model_kind);
  j["vae_median_s"] = OptJson(m.vae_median_s);
  j["vae_speedup_vs_eager"] = OptJson(m.vae_speedup);
  j["wall_speedup_vs_eager"] = OptJson(m.wall_speedup);
  j["peak_tensor_bytes"] = m.peak_tensor_bytes;
  j["peak_rss_bytes"] = m.peak_rss_bytes;
  j["profile"] = m.profile;
  j["compute_dtype"] = m.compute_dtype;
  j["compile_decision"] = m.compile_decision;
  if (m.tiling) {
    j["tiling"] = {{"tile_rows", m.tiling->tile_rows()},
                   {"tile_cols", m.tiling->tile_cols()},
                   {"windows", m.tiling->windows()},
                   {"decoder_calls", m.tiling->decoder_calls()},
                   {"max_tiles_per_call", m.tiling->max_tiles_per_call()},
                   {"stacked", m.tiling->stacked()},
                   {"stack_decision", m.tiling->stack_decision()},
                   {"plan_decision", m.tiling->plan_decision()},
                   {"planned_calls", m.tiling->planned_calls()},
                   {"eager_calls", m.tiling->eager_calls()}};
  } else {
    j["tiling"] = nullptr;
  }
  j["output_runs_compared"] = m.runs_compared;
  j["output_bytes_differing_from_eager"] =
      m.runs_compared > 0 ? nlohmann::json(m.max_bytes_differing) : nlohmann::json(nullptr);
  j["output_identical_to_eager"] =
      m.runs_compared > 0 ? nlohmann::json(m.max_bytes_differing == 0) : nlohmann::json(nullptr);
  if (!o.group_sizes.empty()) j["group"] = GroupJson(o, m);
  return j;
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  MatrixOptions o;
  std::vector<std::string> mode_help;
  for (const ModeSpec& m : KnownModes())
    mode_help.push_back(std::string("  ") + m.name + ": " + m.summary);
  std::string footer =
      "Modes (requests to the same daemon; output bytes must not depend on them):\n";
  for (const std::string& l : mode_help) footer += l + "\n";
  footer +=
      "A mode the model does not support (e.g. taef2: no stacked tiles, no compiled plans) is\n"
      "reported as unsupported with the daemon's reason, not as a failure.\n\n"
      "Units: seconds for every time (wall seconds on the client for whole requests; the\n"
      "daemon's reply timings for components), bytes for memory, latent cells for latent\n"
      "shapes (H3: [1, 24, latent frames, h, w], 16 px per cell; TAEF2: [frames, 32, h, w],\n"
      "8 px per cell).\n"
      "Per (dtype, shape, mode): 'first' is the first request of the mode (eager's is the\n"
      "first of the shape on a fresh daemon; later modes' first requests find the shape\n"
      "warm but may build plans), then --warmup untimed rounds, then --iterations timed\n"
      "rounds; each round runs every mode once in turn. 'warm med/min s': client wall\n"
      "seconds of the timed runs; 'decode s': the daemon's whole decode; 'vae s': VAE only\n"
      "(video_vae.decode_latent, or taef2.decode_latent); 'tile_dec s'/'merge s':\n"
      "video_vae.tile_decode / tile_merge (medians). 'peak tensor'/'peak rss': max over\n"
      "runs of the daemon's LibTorch tensor bytes and VmHWM. 'vae vs eager': eager's\n"
      "median VAE seconds / the mode's (x1.10 faster = 10% less time), same run. 'bytes':\n"
      "every run's output compared with eager's first output, byte for byte.\n"
      "Amdahl: with the VAE a share s of a generation's time and a VAE speedup v, the\n"
      "end-to-end speedup is 1 / ((1 - s) + s / v).\n"
      "VAE groups (--group-sizes): every mode runs at every size S, interleaved; the table\n"
      "'VAE groups' adds per (mode, S): the groups used ('s2.b0 g0': size 2, block 0,\n"
      "communicator generation 0), 'tile_comm s' (video_vae.tile_communication), tiles and\n"
      "decode seconds per position in the group (the replies' GroupReport; output rank\n"
      "first), 'imbalance' (max / mean of the ranks' decode seconds) and 'vae vs S=...'\n"
      "(the same mode's median VAE seconds at the smallest size / this size's). Bytes are\n"
      "compared with eager's first output at the smallest size.\n\n"
      "Examples:\n"
      "  vaed_bench_matrix --model-kind h3_video \\\n"
      "    --weights ../shared/golden/h3/video_tiny_weights.safetensors \\\n"
      "    --config ../shared/golden/h3/video_tiny_config.json --shapes 1x24x12x20x20\n"
      "  vaed_bench_matrix --model-kind taef2 \\\n"
      "    --weights ../shared/data/taef2/taef2_decoder.safetensors \\\n"
      "    --latent ../shared/data/taef2/video_bikes.safetensors --latent-key latent\n"
      "  vaed_bench_matrix --model-kind h3_video \\\n"
      "    --weights ../shared/golden/h3/video_tiny_weights.safetensors \\\n"
      "    --config ../shared/golden/h3/video_tiny_config.json --shapes 1x24x12x20x20 \\\n"
      "    --modes eager --group-ranks 2 --group-sizes 1,2\n"
      "Exit status: 0 all requested modes ran or are unsupported; 1 a daemon, a cell or a\n"
      "mode failed; 2 usage.";
  CLI::App app{
      "vaed_bench_matrix: eager vs stacked vs compiled decodes through a vaed daemon that\n"
      "this program starts (one per compute dtype, on a private socket, with a generated\n"
      "config), with cold start, per-mode timings, VAE speedups over eager, an output byte\n"
      "equality check and the implied end-to-end speedups. Lists are comma-separated.",
      "vaed_bench_matrix"};
  app.footer(footer);
  app.add_option("--vaed", o.vaed_binary, "the vaed daemon binary to start")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  app.add_option("--model-kind", o.model_kind, "model kind: h3_video or taef2")
      ->capture_default_str()
      ->check(CLI::IsMember({"h3_video", "taef2"}));
  app.add_option("--weights", o.weights,
                 "decoder weights (safetensors); taef2: required; h3_video: empty = random "
                 "weights (flagged as demo)")
      ->check(CLI::ExistingFile);
  app.add_option("--config", o.config,
                 "h3_video decoder config JSON; empty = the released model's configuration "
                 "(full size: ~9.7 GB of float32 weights)")
      ->check(CLI::ExistingFile);
  app.add_option("--dtypes", o.dtypes,
                 "compute dtypes, one daemon each: float32, bfloat16 (h3_video only)")
      ->delimiter(',')
      ->capture_default_str();
  auto* shapes = app.add_option("--shapes", o.shapes,
                                "latent shapes in latent cells, e.g. 1x24x7x20x20 (H3 [1, 24, T, "
                                "h, w]) or 8x32x34x60 (TAEF2 [frames, 32, h, w]); random normal "
                                "float32 values")
                     ->delimiter(',');
  auto* latent = app.add_option("--latent", o.latent_path,
                                "safetensors file with a float32 latent in the model's layout "
                                "(instead of --shapes)")
                     ->check(CLI::ExistingFile)
                     ->excludes(shapes);
  app.add_option("--latent-key", o.latent_key, "tensor name in --latent")
      ->capture_default_str()
      ->needs(latent);
  app.add_option("--seed", o.seed, "seed of the random latents (--shapes)")->capture_default_str();
  app.add_option("--modes", o.modes, "modes to run (see below); eager is the baseline")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed rounds per cell after the first requests")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--iterations", o.iterations, "timed rounds per cell (every mode once each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--vae-share", o.vae_shares,
                 "fractions in (0, 1] of a generation's time spent in the VAE decode, for the "
                 "Amdahl end-to-end speedups")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--json", o.json_path, "also write the results as one JSON document to FILE");
  app.add_option("--threads", o.threads, "the daemon's executor.intra_op_threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--plan-cache-capacity", o.plan_cache_capacity,
                 "h3_video plan_cache_capacity (compiled-plan buckets kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--start-timeout", o.start_timeout_s,
                 "seconds to wait for a daemon to answer its first Hello")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--request-timeout", o.request_timeout_s,
                 "seconds to wait for any one reply (0 = forever)")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  app.add_option("--group-ranks", o.group_ranks,
                 "start the daemon with --group-ranks W: W local VAE ranks, qualifying group "
                 "sizes 1, 2, 4, ... up to W (each rank has --threads intra-op threads)")
      ->check(CLI::Range(1, 64));
  app.add_option("--group-sizes", o.group_sizes,
                 "also measure every mode at each VAE group size S (DecodeRequest::group_size), "
                 "each at most --group-ranks; the smallest is the baseline of the group speedups "
                 "and, with eager, of the output bytes")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  // stdout is for the results; progress goes to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("vaed_bench_matrix"));
  spdlog::set_pattern("[%H:%M:%S] %v");

  if (Status s = ValidateOptions(o); !s.ok()) {
    std::cerr << "vaed_bench_matrix: " << s.message() << "\n";
    return 2;
  }
  std::sort(o.group_sizes.begin(), o.group_sizes.end());
  std::vector<std::string> daemon_args;
  if (o.group_ranks > 0) daemon_args = {"--group-ranks", std::to_string(o.group_ranks)};

  std::vector<Latent> latents;
  if (!o.latent_path.empty()) {
    auto l = FileLatent(o.latent_path, o.latent_key);
    if (!l.ok()) {
      std::cerr << "vaed_bench_matrix: " << l.status().ToString() << "\n";
      return 1;
    }
    latents.push_back(std::move(l).value());
  } else {
    for (const std::string& s : o.shapes) {
      auto l = RandomLatent(s, o.seed);
      if (!l.ok()) {
        std::cerr << "vaed_bench_matrix: --shapes: " << l.status().message() << "\n";
        return 2;
      }
      latents.push_back(std::move(l).value());
    }
  }

  bool failed = false;
  std::string daemon_version;
  nlohmann::json cold_start = nlohmann::json::object();
  std::vector<CellResult> cells;
  for (const std::string& dtype : o.dtypes) {
    spdlog::info("starting {} ({} {}, {}) ...", o.vaed_binary, o.model_kind, dtype,
                 o.weights.empty() ? "random weights" : o.weights);
    auto started =
        BenchDaemon::Start(o.vaed_binary, DaemonConfigToml(o, dtype), daemon_args,
                           std::chrono::seconds(o.start_timeout_s), o.request_timeout_s * 1000);
    if (!started.ok()) {
      spdlog::error("{} daemon: {}", dtype, started.status().message());
      cold_start[dtype] = nullptr;
      failed = true;
      for (const Latent& l : latents) {
        CellResult cell;
        cell.dtype = dtype;
        cell.latent.shape = l.shape;
        cell.latent.source = l.source;
        cell.error = "daemon did not start: " + started.status().message();
        cells.push_back(std::move(cell));
      }
      continue;
    }
    std::unique_ptr<BenchDaemon> daemon = std::move(started).value();
    cold_start[dtype] = daemon->cold_start_s();
    daemon_version = daemon->client().hello().daemon_version();
    spdlog::info("{} daemon ready in {} s (cold start); log {}", dtype,
                 vaed::ops::FormatFixed(daemon->cold_start_s(), 3), daemon->log_path());

    std::vector<std::string> caps;
    auto status = daemon->client().GetStatus();
    if (status.ok()) {
      for (const auto& m : status->models()) {
        if (m.name() == kModelName) caps.assign(m.capabilities().begin(), m.capabilities().end());
        if (m.name() == kModelName && m.demo_weights()) {
          spdlog::warn("model has random (demo) weights: timings are real, images are not");
        }
      }
      spdlog::info("model capabilities: {}", JoinNames(caps));
    } else {
      spdlog::warn("status: {}", status.status().ToString());
    }

    for (const Latent& l : latents) {
      CellResult cell;
      cell.dtype = dtype;
      cell.latent = l;
      CellRunner runner(o, daemon.get(), caps, &cell);
      if (Status s = runner.Run(); !s.ok()) {
        cell.error = s.ToString();
        spdlog::error("{} {}: {}", dtype, ShapeText(l.shape), cell.error);
      }
      cell.latent.values.clear();  // keep the shape and source only
      cell.latent.values.shrink_to_fit();
      if (!cell.error.empty()) failed = true;
      for (const ModeResult& m : cell.modes) failed = failed || m.state == ModeState::kFailed;
      cells.push_back(std::move(cell));
    }
    if (Status s = daemon->Stop(std::chrono::seconds(60)); !s.ok()) {
      spdlog::error("{} daemon: {}", dtype, s.message());
      failed = true;
    }
  }

  // ---- report
  std::cout << "vaed_bench_matrix: " << o.model_kind << " "
            << (o.weights.empty() ? "(random weights)" : o.weights) << "\n"
            << "daemon    " << o.vaed_binary << (daemon_version.empty() ? "" : " ")
            << daemon_version << ", intra_op_threads " << o.threads << ", host " << Hostname()
            << " (" << std::thread::hardware_concurrency() << " CPUs)\n"
            << "runs      first request + " << o.warmup << " warm-up + " << o.iterations
            << " timed per mode, modes interleaved\n";
  if (o.group_ranks > 0 || !o.group_sizes.empty()) {
    std::string sizes;
    for (uint32_t size : o.group_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
    std::cout << "groups    --group-ranks " << std::max<uint32_t>(o.group_ranks, 1)
              << (sizes.empty() ? std::string(", the daemon's group size")
                                : ", sizes " + sizes + " (each mode at each size, interleaved)")
              << "\n";
  }
  std::cout << "cold start (fork/exec to first Hello):";
  for (const std::string& dtype : o.dtypes) {
    std::cout << "  " << dtype << " "
              << (cold_start[dtype].is_null()
                      ? std::string("FAILED")
                      : vaed::ops::FormatFixed(cold_start[dtype].get<double>(), 3) + " s");
  }
  std::cout << "\n";
  for (const CellResult& cell : cells) PrintCell(o, cell, std::cout);

  if (!o.json_path.empty()) {
    nlohmann::json runs = nlohmann::json::array();
    nlohmann::json amdahl = nlohmann::json::array();
    for (const CellResult& cell : cells) {
      if (!cell.error.empty()) {
        runs.push_back({{"dtype", cell.dtype},
                        {"latent_shape", cell.latent.shape},
                        {"latent_source", cell.latent.source},
                        {"status", "failed"},
                        {"reason", cell.error}});
        continue;
      }
      for (const ModeResult& m : cell.modes) {
        runs.push_back(ModeJson(o, cell, m));
        if (!m.vae_speedup) continue;
        for (double s : o.vae_shares) {
          amdahl.push_back({{"dtype", cell.dtype},
                            {"latent_shape", cell.latent.shape},
                            {"mode", m.name()},
                            {"vae_share", s},
                            {"vae_speedup", *m.vae_speedup},
                            {"end_to_end_speedup", EndToEndSpeedup(s, *m.vae_speedup)}});
        }
      }
    }
    nlohmann::json doc = {
        {"machine",
         {{"threads", o.threads},
          {"hostname", Hostname()},
          {"hardware_concurrency", std::thread::hardware_concurrency()}}},
        {"daemon", {{"binary", o.vaed_binary}, {"version", daemon_version}}},
        {"model",
         {{"kind", o.model_kind},
          {"weights", o.weights},
          {"config", o.config},
          {"plan_cache_capacity", o.plan_cache_capacity}}},
        {"settings",
         {{"warmup", o.warmup},
          {"iterations", o.iterations},
          {"seed", o.seed},
          {"modes", o.modes},
          {"vae_shares", o.vae_shares},
          {"output_format", "uint8_nhwc"}}},
        {"cold_start_s", cold_start},
        {"runs", runs},
        {"amdahl", amdahl},
    };
    if (o.group_ranks > 0 || !o.group_sizes.empty()) {
      doc["settings"]["group_ranks"] = std::max<uint32_t>(o.group_ranks, 1);
      doc["settings"]["group_sizes"] = o.group_sizes;
    }
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(o.json_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::ofstream out(o.json_path);
    out << doc.dump(2) << "\n";
    if (!out) {
      std::cerr << "vaed_bench_matrix: writing " << o.json_path << ": " << std::strerror(errno)
                << "\n";
      return 1;
    }
    spdlog::info("wrote {}", o.json_path);
  }
  return failed ? 1 : 0;
}
