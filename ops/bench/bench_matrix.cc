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
// stack_tiling + compile, see matrix/modes.h), all with the same shared
// regions: the first request of each mode, --warmup untimed rounds, then
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
// With --gate NAME it runs a release gate instead (ops/bench/
// release_gate.h: the cells and pass criteria; matrix/gate_runner.h: the
// run): every cell once per mode, one line per (cell, mode), a summary,
// exit status 1 when a cell fails.
//
// The pieces, in ops/bench/matrix/: options.h (command line, daemon
// config), modes.h, latent.h, bench_daemon.h (starting a daemon),
// cell_runner.h (measuring one cell), results.h, report_text.h,
// report_json.h and gate_runner.h. No LibTorch here (client library only),
// so it builds in seconds.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ops/bench/matrix/bench_daemon.h"
#include "ops/bench/matrix/cell_runner.h"
#include "ops/bench/matrix/gate_runner.h"
#include "ops/bench/matrix/latent.h"
#include "ops/bench/matrix/options.h"
#include "ops/bench/matrix/report_json.h"
#include "ops/bench/matrix/report_text.h"
#include "ops/bench/matrix/results.h"
#include "ops/common/text_format.h"
#include "vaed/client_protocol.h"

using vaed::client::ClientProtocol;

namespace vaed::bench {
namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

// The latents of every cell: the --latent tensor, or one random latent per
// --shapes entry. On failure prints why and returns the exit code (1 for a
// file that cannot be used, 2 for a malformed shape).
std::optional<int> LoadLatents(const MatrixOptions& o, std::vector<Latent>* latents) {
  if (!o.latent_path.empty()) {
    auto l = FileLatent(o.latent_path, o.latent_key);
    if (!l.ok()) {
      std::cerr << "vaed_bench_matrix: " << l.status().ToString() << "\n";
      return 1;
    }
    latents->push_back(std::move(l).value());
    return std::nullopt;
  }
  for (const std::string& s : o.shapes) {
    auto l = RandomLatent(s, o.seed);
    if (!l.ok()) {
      std::cerr << "vaed_bench_matrix: --shapes: " << l.status().message() << "\n";
      return 2;
    }
    latents->push_back(std::move(l).value());
  }
  return std::nullopt;
}

// The capabilities of model kModelName from the daemon's status (none when
// the status cannot be had); warns about demo weights.
std::vector<std::string> ModelCapabilities(BenchDaemon& daemon) {
  std::vector<std::string> caps;
  auto status = ClientProtocol::GetStatus(daemon.client());
  if (!status.ok()) {
    spdlog::warn("status: {}", status.status().ToString());
    return caps;
  }
  for (const auto& m : status->models()) {
    if (m.name() == kModelName) caps.assign(m.capabilities().begin(), m.capabilities().end());
    if (m.name() == kModelName && m.demo_weights()) {
      spdlog::warn("model has random (demo) weights: timings are real, images are not");
    }
  }
  spdlog::info("model capabilities: {}", ops::Join(caps, ", "));
  return caps;
}

// Every cell of `dtype` on a daemon of its own, appended to run->cells (a
// daemon that does not start fails each of them). Returns false when the
// daemon, a cell or a mode failed.
bool RunDtype(const MatrixOptions& o, ComputeDtype dtype, const std::vector<Latent>& latents,
              MatrixRun* run) {
  const std::string name = ComputeDtypeName(dtype);
  std::vector<std::string> daemon_args;
  if (o.group_ranks > 0) daemon_args = {"--group-ranks", std::to_string(o.group_ranks)};
  spdlog::info("starting {} ({} {}, {}) ...", o.vaed_binary, ModelKindName(o.model_kind), name,
               o.weights.empty() ? "random weights" : o.weights);
  auto started =
      BenchDaemon::Start(o.vaed_binary, MatrixDaemonConfigToml(o, dtype), daemon_args,
                         std::chrono::seconds(o.start_timeout_s), o.request_timeout_s * 1000);
  if (!started.ok()) {
    spdlog::error("{} daemon: {}", name, started.status().message());
    run->cold_start_s[dtype] = std::nullopt;
    for (const Latent& l : latents) {
      CellResult cell;
      cell.dtype = dtype;
      cell.latent.shape = l.shape;
      cell.latent.source = l.source;
      cell.error = "daemon did not start: " + started.status().message();
      run->cells.push_back(std::move(cell));
    }
    return false;
  }
  std::unique_ptr<BenchDaemon> daemon = std::move(started).value();
  run->cold_start_s[dtype] = daemon->cold_start_s();
  run->daemon_version = ClientProtocol::Hello(daemon->client()).daemon_version();
  spdlog::info("{} daemon ready in {} s (cold start); log {}", name,
               ops::FormatFixed(daemon->cold_start_s(), 3), daemon->log_path());
  const std::vector<std::string> caps = ModelCapabilities(*daemon);

  bool ok = true;
  for (const Latent& l : latents) {
    CellResult cell;
    cell.dtype = dtype;
    cell.latent = l;
    CellRunner runner(o, daemon.get(), caps, &cell);
    if (Status s = runner.Run(); !s.ok()) {
      cell.error = s.ToString();
      spdlog::error("{} {}: {}", name, ShapeText(l.shape), cell.error);
    }
    cell.latent.values.clear();  // keep the shape and source only
    cell.latent.values.shrink_to_fit();
    if (!cell.error.empty()) ok = false;
    for (const ModeResult& m : cell.modes) ok = ok && m.state != ModeState::kFailed;
    run->cells.push_back(std::move(cell));
  }
  if (Status s = daemon->Stop(std::chrono::seconds(60)); !s.ok()) {
    spdlog::error("{} daemon: {}", name, s.message());
    ok = false;
  }
  return ok;
}

// The whole program; returns its exit code.
int RunBenchMatrix(int argc, char** argv) {
  MatrixOptions o;
  if (std::optional<int> exit_code = ParseMatrixCommandLine(argc, argv, &o)) return *exit_code;
  // stdout is for the results; progress goes to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("vaed_bench_matrix"));
  spdlog::set_pattern("[%H:%M:%S] %v");
  if (!o.gate.empty()) return RunReleaseGate(o);

  std::vector<Latent> latents;
  if (std::optional<int> exit_code = LoadLatents(o, &latents)) return *exit_code;

  MatrixRun run;
  run.hostname = Hostname();
  run.cpus = std::thread::hardware_concurrency();
  bool failed = false;
  for (ComputeDtype dtype : o.dtypes) {
    if (!RunDtype(o, dtype, latents, &run)) failed = true;
  }

  PrintMatrixReport(o, run, std::cout);
  if (!o.json_path.empty()) {
    if (Status s = WriteJsonFile(o.json_path, MatrixRunToJson(o, run)); !s.ok()) {
      std::cerr << "vaed_bench_matrix: " << s.message() << "\n";
      return 1;
    }
    spdlog::info("wrote {}", o.json_path);
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace vaed::bench

int main(int argc, char** argv) { return vaed::bench::RunBenchMatrix(argc, argv); }
