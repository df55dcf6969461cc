// What vaed_bench_matrix was asked to measure: its command line, checked as
// a whole, and the daemon configuration it implies.
//
// Thread-safety: plain values and pure functions.
#ifndef VAED_OPS_BENCH_MATRIX_OPTIONS_H_
#define VAED_OPS_BENCH_MATRIX_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/common/enum_names.h"
#include "vaed/status.h"

namespace vaed::bench {

// The closed sets of values the command line takes, each parsed from its
// names once, at its flag (AddEnumOption, ops/bench/bench_cli.h); the names
// are also what the generated daemon config and the reports print.

// --model-kind: the daemon model's kind. kH3 is the video and audio decoders
// under one name.
enum class ModelKind { kH3Video, kH3, kTaef2 };
// h3_video, h3, taef2 (the daemon config's `kind`).
const ops::EnumNames<ModelKind>& ModelKindNames();
std::string ModelKindName(ModelKind kind);
// Whether `kind` is an H3 model (h3_video or h3): a config file, compute
// dtypes other than float32, the release gates.
bool IsH3(ModelKind kind);

// --device: the daemon's executor.device.
enum class Device { kCpu, kCuda };
// cpu, cuda (the daemon config's executor.device).
const ops::EnumNames<Device>& DeviceNames();
std::string DeviceName(Device device);

// --dtypes: a model's compute dtype.
enum class ComputeDtype { kFloat32, kBFloat16, kFloat16 };
// float32, bfloat16, float16 (the daemon config's compute_dtype).
const ops::EnumNames<ComputeDtype>& ComputeDtypeNames();
std::string ComputeDtypeName(ComputeDtype dtype);

struct MatrixOptions {
  // --- The daemons (one per dtype) and their model.
  // The daemon binary to start (default: the one this build made;
  // VAED_BENCH_VAED_BINARY is set by ops/bench/CMakeLists.txt).
  std::string vaed_binary = VAED_BENCH_VAED_BINARY;
  // h3_video, h3 (video + audio decoders under one name) or taef2. With a
  // gate and no --model-kind: h3.
  ModelKind model_kind = ModelKind::kH3Video;
  // Decoder weights (safetensors). taef2: required; h3_video, h3: empty =
  // random weights (the daemon flags the model as demo).
  std::string weights;
  // h3_video, h3: video decoder config JSON; empty = the released
  // configuration.
  std::string config;
  // h3 only: the audio decoder's weights (empty = random) and config JSON
  // (empty = the released configuration).
  std::string audio_weights;
  std::string audio_config;
  // Compute dtypes, one daemon each: float32, bfloat16 (H3 only), float16
  // (H3 on cuda only).
  std::vector<ComputeDtype> dtypes = {ComputeDtype::kFloat32};
  // The daemon's executor.device: cpu or cuda (GPU builds only; the daemon
  // refuses it otherwise).
  Device device = Device::kCpu;
  // The daemon's executor.intra_op_threads.
  int threads = 2;
  // h3_video plan_cache_capacity (compiled-plan buckets kept).
  int64_t plan_cache_capacity = 8;
  // The daemon's --group-ranks (local VAE ranks; qualifies sizes 1, 2, 4,
  // ... up to it); 0 = not passed (one rank).
  uint32_t group_ranks = 0;
  // Seconds to wait for a daemon's first Hello.
  int start_timeout_s = 600;
  // The daemon's executor.memory_budget_mib (0 = no budget: a request may
  // use the host's memory minus the weights). A budget makes the daemon
  // refuse what would not fit it, and the release gate measures peaks
  // against it.
  int64_t memory_budget_mib = 0;

  // --- The release gate (ops/bench/release_gate.h) instead of the
  // benchmark: every cell of the gate once per mode, with pass criteria.
  // "" = the benchmark. Runs one compute dtype, takes no --shapes,
  // --latent or --group-sizes.
  std::string gate;
  // Divisor of every gate cell's canvas sides (latent cells, rounded up)
  // and duration, for machines that cannot afford the full sizes in
  // minutes (CPU with the tiny decoder: 5); 1 = the cells as listed.
  int gate_scale = 1;

  // --- What each daemon decodes, how often, and the report.
  // Random latent shapes in latent cells ("1x24x7x20x20"); or latent_path.
  std::vector<std::string> shapes;
  // A safetensors file holding one float32 latent (instead of shapes), and
  // the tensor's name in it.
  std::string latent_path;
  std::string latent_key = "latent";
  // Seed of the random latents.
  uint64_t seed = 20261130;
  // Modes to run (names of KnownModes()); eager is the baseline.
  std::vector<std::string> modes = {"eager", "stacked", "compiled", "compiled_stacked", "auto"};
  // VAE group sizes each mode is measured at, ascending after parsing;
  // the first is the baseline of the group speedups. Empty = requests ask
  // for no size (the daemon's group.size) and no group figures are printed.
  std::vector<uint32_t> group_sizes;
  // Untimed rounds per cell after the first requests; timed rounds per cell.
  // More rounds give steadier medians and take longer.
  int warmup = 1;
  int iterations = 5;
  // Seconds to wait for any one reply (0 = forever).
  int request_timeout_s = 3600;
  // Fractions in (0, 1] of a generation's time spent in the VAE decode, for
  // the Amdahl end-to-end speedups.
  std::vector<double> vae_shares = {0.3};
  // Also write the results as one JSON document here; "" = do not.
  std::string json_path;
};

// The one model of every daemon the benchmark starts (the generated config
// and every request name it).
inline constexpr const char* kModelName = "bench";

// Parses the command line into `*o`, checks it as a whole
// (ValidateMatrixOptions) and sorts o->group_sizes. With --gate and no
// --model-kind the model kind is "h3"; --warmup, --iterations and
// --vae-share (benchmark settings) are refused with --gate. Returns nullopt
// to go on, or the exit code to end the program with: CLI11's (0 after
// --help; its own code for a malformed command line, after printing the
// error), or 2 after printing "vaed_bench_matrix: <why>" to stderr for
// options that do not fit together.
std::optional<int> ParseMatrixCommandLine(int argc, char** argv, MatrixOptions* o);

// Whole-option checks CLI11's per-option validators cannot make (dtypes
// against the device and the model kind, distinct dtypes, config and audio files against the model
// kind, known and distinct modes, group sizes within the ranks, VAE shares in (0, 1]; with a gate:
// a known gate, an H3 model kind, one dtype, eager among the modes, no shapes, latent or group
// sizes). kInvalidArgument naming the flag otherwise.
Status ValidateMatrixOptions(const MatrixOptions& o);

// The daemon config (TOML) for one compute dtype: executor threads (and
// device and memory budget when not the defaults) and one model, named
// kModelName, with absolute paths. taef2 gets only name, kind and weights;
// h3 also its audio files.
std::string MatrixDaemonConfigToml(const MatrixOptions& o, ComputeDtype dtype);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_OPTIONS_H_
