// Runs every mode of one (dtype, latent) cell of vaed_bench_matrix against
// one daemon and fills the cell's CellResult.
#ifndef VAED_OPS_BENCH_MATRIX_CELL_RUNNER_H_
#define VAED_OPS_BENCH_MATRIX_CELL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/bench/matrix/bench_daemon.h"
#include "ops/bench/matrix/options.h"
#include "ops/bench/matrix/results.h"
#include "vaed/client.h"
#include "vaed/status.h"

namespace vaed::bench {

// One use: construct, Run(). Borrows `o`, `daemon`, `caps` (the model's
// capabilities from the daemon's status) and `cell` (whose dtype and latent
// are set) for its lifetime. Not thread-safe.
class CellRunner {
 public:
  CellRunner(const MatrixOptions& o, BenchDaemon* daemon, const std::vector<std::string>& caps,
             CellResult* cell)
      : o_(o), daemon_(daemon), caps_(caps), cell_(cell) {}

  // Plans the output (uint8 NHWC), copies the latent into a registered
  // shared region, then runs each mode of o.modes at each of o.group_sizes
  // (eager first: its first output is the byte reference): the first
  // request of each, o.warmup untimed rounds, o.iterations timed rounds,
  // every (mode, size) once per round in turn. Then derives the medians and
  // speedups. A mode the daemon rejects as invalid (kInvalidArgument: the
  // model lacks the option) is kUnsupported, any other failure kFailed,
  // with the daemon's reason; both are recorded in the ModeResult, not
  // returned. Errors: what stops the whole cell (the daemon rejects the
  // latent in the plan, regions cannot be made or registered).
  Status Run();

 private:
  enum class Phase { kFirst, kWarmup, kTimed };
  // "first", "warmup", "timed".
  static const char* PhaseName(Phase phase);

  // "float32 1x24x7x20x20": the cell in progress lines.
  std::string Label() const;
  // The plan, the regions and the latent copied in.
  Status PrepareRegions(client::Client& c, v1::DecodeReply* plan);
  // One ModeResult per (mode, group size), eager first, the baseline size
  // first within each mode.
  void AddModes(const v1::DecodeReply& plan);
  // A mode whose options the model lacks is "unsupported", with the
  // daemon's reason (a plan-only request resolves the options the same way
  // a decode does).
  void CheckSupported(ModeResult* m);
  void RunOnce(ModeResult* m, Phase phase, int index);
  // Compares the output region with the reference (or keeps it as the
  // reference when `m` is eager's first request).
  void CompareOutput(ModeResult* m, Phase phase);
  // Logs one progress line for a successful request.
  void LogProgress(const ModeResult& m, const v1::DecodeReply& r, Phase phase, int index,
                   double wall, std::optional<double> vae) const;
  // The group figures of one reply: the group used and its fallbacks from
  // every run, the per-rank times and the imbalance from timed runs only.
  static void RecordGroup(const v1::GroupReport& g, Phase phase, ModeResult* m);
  // The medians and speedups of every measured mode.
  void Summarize();

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

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_CELL_RUNNER_H_
