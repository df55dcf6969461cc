// What vaed_bench_matrix measured: per (dtype, latent) cell, per (mode,
// group size). Filled by CellRunner (cell_runner.h), rendered by
// report_text.h and report_json.h. Units: seconds, bytes.
//
// Thread-safety: plain values and pure functions.
#ifndef VAED_OPS_BENCH_MATRIX_RESULTS_H_
#define VAED_OPS_BENCH_MATRIX_RESULTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/bench/matrix/latent.h"
#include "ops/bench/matrix/modes.h"
#include "ops/bench/matrix/options.h"
#include "vaed/client.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::bench {

enum class ModeState { kOk, kUnsupported, kFailed };

// "ok", "unsupported", "failed".
const char* StateName(ModeState s);

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
  std::optional<v1::TilingInfo> tiling;
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

  // VariantName(*spec, group_size).
  std::string name() const;
  bool active() const { return state == ModeState::kOk; }
  // Ran and has timed runs: the figures exist.
  bool measured() const { return active() && !wall_s.empty(); }
  // The median of a reply timing component over the timed runs; nullopt
  // when the replies never had it.
  std::optional<double> TimingMedian(const std::string& component) const;
};

// One (dtype, latent) cell of the matrix.
struct CellResult {
  ComputeDtype dtype = ComputeDtype::kFloat32;
  Latent latent;
  std::vector<int64_t> output_shape;
  uint64_t output_bytes = 0;
  std::string error;  // the cell could not run at all
  std::vector<ModeResult> modes;
};

// The whole run, as the reports render it.
struct MatrixRun {
  std::string hostname;
  unsigned cpus = 0;           // std::thread::hardware_concurrency()
  std::string daemon_version;  // from the last daemon that started; "" if none did
  // Per dtype: wall seconds from fork/exec to the first Hello; nullopt when
  // that daemon did not start.
  std::map<ComputeDtype, std::optional<double>> cold_start_s;
  std::vector<CellResult> cells;
};

// The VAE-only component of the reply timings for model `kind`.
std::string VaeComponent(ModelKind kind);

// Amdahl's law: the end-to-end speedup of a generation whose VAE decode is
// the fraction `vae_share` of its time when the decode gets `vae_speedup`
// times faster.
double EndToEndSpeedup(double vae_share, double vae_speedup);

// Whether `m` is the byte reference: eager at the baseline (first) group
// size.
bool IsReference(const MatrixOptions& o, const ModeResult& m);
// "eager", or "eager S=<baseline size>".
std::string ReferenceName(const MatrixOptions& o);

// The median of a position's decode seconds; nullopt without timed runs.
std::optional<double> RankDecodeMedian(const RankStats& r);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_RESULTS_H_
