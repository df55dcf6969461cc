// vaed_bench_h3_video: what stacked tiles and reduced compute dtypes buy
// for the H3 video decoder on this machine (CPU, or one GPU with
// --device cuda), and how close the decoder gets to the machine's matmul
// speed.
//
// One run measures, on the same seeded random latent and the same seeded
// random weights (ViT3D at full width 2048 / 32 heads / FFN 8192 by default,
// with --layers blocks instead of 36 so that it finishes on a laptop-class
// CPU; the per-block cost is the released model's):
//   * decode time (warm, in-process VideoVae) for every combination of
//     compute dtype (--dtypes: float32, float16 = the official recipe, GPU
//     only, bfloat16) x tile scheduling {sequential, stacked}, split into
//     tile_decode and tile_merge; on a GPU the decode time is wall time up
//     to a synchronised stream, and the caching allocator's peak bytes per
//     mode are reported (peak_device_bytes);
//   * whether stacked output bytes equal sequential bytes (per dtype), and
//     each reduced dtype's error against fp32 (max/mean abs of the raw
//     output, PSNR of the uint8 frames);
//   * the FLOP rate the decoder achieves (analytic FLOPs of all decoder
//     calls / tile_decode seconds) against a plain matmul of the FFN's w1
//     shape [tokens, dim] x [dim, 2*ffn] timed in the same run and dtype.
// Results print as a table (and JSON with --json). Timings are figures to
// read, not pass/fail criteria. The process uses the daemon's memory policy
// (freed activations pooled) unless --glibc-default-malloc is given.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/engine/torch_cuda.h"
#include "daemon/models/h3/video_tiling.h"
#include "daemon/models/h3/video_vae.h"
#include "daemon/models/postprocess.h"
#include "ops/bench/bench_cli.h"
#include "ops/bench/in_process_bench.h"
#include "ops/common/text_format.h"

namespace {

using vaed::Result;
using vaed::Status;
using vaed::models::DecodeReport;
using vaed::models::DecodeSettings;
using vaed::models::StackTiling;
using vaed::models::h3::VideoDecoderConfig;
using vaed::models::h3::VideoVae;
using vaed::models::h3::VideoVaeOptions;
using Clock = std::chrono::steady_clock;

// --threads upper bound (at::set_num_threads throws below 1; far more
// threads than cores only measures oversubscription). The latent geometry
// is bounded on the command line by VideoVae's own request bounds
// (kMaxLatentFrames, kMaxLatentExtent), so a size Plan() would refuse is
// refused before any weights are generated.
constexpr int kMaxThreads = 1024;

struct BenchOptions {
  int64_t layers = 2;
  int64_t latent_frames = 12;  // 2 windows
  int64_t height_latent = 20;  // 320 px: 2 tile rows
  int64_t width_latent = 20;   // 320 px: 2 tile cols
  int threads = 2;
  int iterations = 1;
  uint64_t seed = 1;
  std::vector<torch::ScalarType> dtypes = {torch::kFloat, torch::kBFloat16};
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  bool json = false;
  bool glibc_default_malloc = false;
};

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Analytic FLOPs of one decoder call on one tile of t x h x w latent cells
// (multiply-add = 2 FLOPs; matmuls only, norms/RoPE/softmax ignored).
double TileFlops(const VideoDecoderConfig& c, int64_t t, int64_t h, int64_t w) {
  const double n = double(t * h * w);
  const double s = n + double(c.num_register_tokens) + 1;
  const double d = double(c.dim), f = double(c.ffn_inner);
  const double per_block = 2 * s * d * 3 * d    // to_qkv
                           + 2 * 2 * s * s * d  // q k^T and attn v
                           + 2 * s * d * d      // to_out
                           + 2 * s * d * 2 * f  // w1 (gate and value)
                           + 2 * s * f * d;     // w2
  const double patch = double(c.out_channels * 4 * 16 * 16);
  return double(c.depth) * per_block + 2 * n * double(c.latent_channels) * d  // x_embedder
         + 2 * s * d * patch;                                                 // proj_out
}

struct ModeResult {
  std::string dtype;
  std::string scheduling;
  double decode_latent = 0, tile_decode = 0, tile_merge = 0;
  uint64_t peak_device_bytes = 0;  // CUDA: caching allocator peak over the mode; CPU: 0
  int64_t decoder_calls = 0, max_tiles_per_call = 0;
  double gflops = 0;  // achieved in tile_decode
  torch::Tensor raw;  // last output, [F, 3, H, W] float32
  torch::Tensor u8;   // the same as uint8 frames [F, H, W, 3]
};

// Waits for the work queued on `device` (CUDA: the current stream); nothing
// to wait for on the CPU.
Status Synchronize(const torch::Device& device) {
  return device.is_cuda() ? vaed::engine::SynchronizeStream(device.index(), nullptr)
                           : Status::Ok();
}

// One timed decode. On a GPU decode_latent is the wall time to a
// synchronised stream (what a caller waits); the model's tile_decode and
// tile_merge come from its CUDA event timings.
Result<torch::Tensor> TimedDecode(VideoVae& model, const torch::Tensor& latent,
                                  const DecodeSettings& settings, DecodeReport* report,
                                  double* wall) {
  VAED_RETURN_IF_ERROR(Synchronize(latent.device()));
  const auto t0 = Clock::now();
  VAED_ASSIGN_OR_RETURN(torch::Tensor out, model.Decode(latent, settings, report));
  VAED_RETURN_IF_ERROR(Synchronize(latent.device()));
  *wall = Seconds(t0);
  return out;
}

// Median-free: with one iteration per mode (the default) the figure is that
// run; with more, the minimum (least disturbed by other load).
Result<ModeResult> RunMode(VideoVae& model, const torch::Tensor& latent, StackTiling stack,
                           int iterations, double flops_per_tile) {
  ModeResult r;
  const torch::Device device = latent.device();
  r.dtype = model.info().compute_dtype;
  r.scheduling = stack == StackTiling::kOn ? "stacked" : "sequential";
  DecodeSettings settings;
  settings.stack_tiling = stack;
  {  // warm-up: oneDNN primitive creation, allocator pools
    DecodeReport warm;
    VAED_ASSIGN_OR_RETURN(torch::Tensor out, model.Decode(latent, settings, &warm));
    (void)out;
  }
  r.decode_latent = r.tile_decode = r.tile_merge = 1e300;
  if (device.is_cuda()) VAED_RETURN_IF_ERROR(vaed::engine::ResetPeakDeviceBytes(device.index()));
  for (int i = 0; i < iterations; ++i) {
    DecodeReport report;
    double wall = 0;
    VAED_ASSIGN_OR_RETURN(torch::Tensor out, TimedDecode(model, latent, settings, &report, &wall));
    if (device.is_cuda()) r.decode_latent = std::min(r.decode_latent, wall);
    for (const auto& [name, s] : report.timings.entries()) {
      if (name == "video_vae.decode_latent" && !device.is_cuda()) {
        r.decode_latent = std::min(r.decode_latent, s);
      }
      if (name == "video_vae.tile_decode") r.tile_decode = std::min(r.tile_decode, s);
      if (name == "video_vae.tile_merge") r.tile_merge = std::min(r.tile_merge, s);
    }
    r.decoder_calls = report.tiling.decoder_calls;
    r.max_tiles_per_call = report.tiling.max_tiles_per_call;
    const int64_t tiles = report.tiling.tile_rows * report.tiling.tile_cols * report.tiling.windows;
    r.gflops = flops_per_tile * double(tiles) / r.tile_decode / 1e9;
    r.raw = out.contiguous();
    VAED_ASSIGN_OR_RETURN(torch::Tensor unit, model.ToUnitRange(r.raw));
    VAED_ASSIGN_OR_RETURN(r.u8, vaed::models::ToUint8Nhwc(unit));
  }
  if (device.is_cuda()) {
    VAED_ASSIGN_OR_RETURN(vaed::engine::DeviceMemoryFigures memory,
                          vaed::engine::TorchDeviceMemory(device.index()));
    r.peak_device_bytes = memory.peak_allocated_bytes;
  }
  return r;
}

// GFLOP/s of [m, k] x [k, n] in `dtype` on `device` (best of `reps`).
Result<double> MatmulGflops(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype,
                            const torch::Device& device, int reps) {
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::randn({m, k}).to(device, dtype);
  torch::Tensor b = torch::randn({n, k}).to(device, dtype);  // weight layout, as nn.Linear
  torch::Tensor c = torch::linear(a, b);                     // warm-up
  VAED_RETURN_IF_ERROR(Synchronize(device));
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    c = torch::linear(a, b);
    VAED_RETURN_IF_ERROR(Synchronize(device));
    best = std::min(best, Seconds(t0));
  }
  return 2.0 * double(m) * double(k) * double(n) / best / 1e9;
}

Result<std::unique_ptr<VideoVae>> BuildModel(const BenchOptions& o, torch::ScalarType dtype,
                                             const torch::Device& device) {
  static VideoDecoderConfig config = VideoDecoderConfig::Official();
  config.depth = o.layers;
  VideoVaeOptions options;
  options.name = "h3_bench";
  options.config = &config;
  options.seed = o.seed;
  options.compute_dtype = dtype;
  options.device = device;
  options.default_stack_tiling = StackTiling::kOff;
  return VideoVae::Create(options);
}

// What one run measured, per compute dtype where keyed by dtype name.
struct Figures {
  std::vector<ModeResult> modes;                        // per (dtype, scheduling)
  nlohmann::json matmul = nlohmann::json::object();     // GFLOP/s, FFN w1 shape
  nlohmann::json batched = nlohmann::json::object();    // GFLOP/s, rows of all tiles
  nlohmann::json plan_cost = nlohmann::json::object();  // a compiled plan's build and gain
  nlohmann::json summary;  // stacked vs sequential, bf16 vs fp32 (set for each dtype measured)
};

// The geometry every measurement shares.
struct Geometry {
  vaed::models::h3::TileGrid grid;
  vaed::models::h3::TemporalPlan temporal;
  VideoDecoderConfig cfg;     // the official config with --layers blocks
  double flops_per_tile = 0;  // one decoder call on tile 0 (7 latent frames)
  int64_t tokens = 0;         // tokens of that call
};

// The compute dtypes --dtypes takes, by name (the names VideoVae's info
// reports as compute_dtype), in --help's order.
const vaed::ops::EnumNames<torch::ScalarType>& DtypeNames() {
  static const vaed::ops::EnumNames<torch::ScalarType> kNames = {
      {"float32", torch::kFloat}, {"float16", torch::kHalf}, {"bfloat16", torch::kBFloat16}};
  return kNames;
}

std::string DtypeName(torch::ScalarType dtype) { return vaed::ops::NameOf(DtypeNames(), dtype); }

// What a compiled plan saves per decoder call: building it (RoPE tables +
// workspace) is the per-call work a plan removes; one tile decoded eager vs
// with the plan, best of 3 each. Prints a line and records it.
void MeasurePlanCost(const VideoVae& model, const Geometry& geo, torch::ScalarType dtype,
                     Figures* figures) {
  torch::NoGradGuard no_grad;
  const vaed::models::h3::Vit3dDecoder& vit = model.decoder();
  const vaed::models::h3::TileRect tile = geo.grid.tile(0);
  const torch::Device device = model.device();
  const torch::Tensor z =
      torch::randn({1, geo.cfg.latent_channels, 7, tile.height_latent, tile.width_latent})
          .to(device);
  double build = 1e300, eager = 1e300, planned = 1e300;
  std::shared_ptr<vaed::models::h3::Vit3dDecoder::TilePlan> plan;
  // On a GPU each figure waits for the stream (a failure to wait leaves
  // the host-side figure; the decode modes already reported any error).
  auto timed = [&](auto&& work) {
    const auto t0 = Clock::now();
    work();
    (void)Synchronize(device);
    return Seconds(t0);
  };
  for (int i = 0; i < 3; ++i) {
    build = std::min(build, timed([&] {
      plan = vit.BuildTilePlan(1, 7, tile.height_latent, tile.width_latent);
    }));
  }
  for (int i = 0; i < 3; ++i) {
    eager = std::min(eager, timed([&] { (void)vit.Forward(z); }));
    planned = std::min(planned, timed([&] { (void)vit.Forward(z, plan.get()); }));
  }
  const std::string name = DtypeName(dtype);
  std::cout << "  " << name << " compiled plan: build " << vaed::ops::FormatFixed(build * 1e3, 2)
            << " ms (" << vaed::ops::HumanBytes(plan->bytes()) << "); one tile eager "
            << vaed::ops::FormatFixed(eager, 3) << " s, planned "
            << vaed::ops::FormatFixed(planned, 3) << " s (eager/planned "
            << vaed::ops::FormatFixed(eager / planned, 3) << ")\n"
            << std::flush;
  figures->plan_cost[name] = {{"build_s", build},
                              {"plan_bytes", plan->bytes()},
                              {"tile_eager_s", eager},
                              {"tile_planned_s", planned}};
}

// Every measurement of one compute dtype: both tile schedulings, the plan
// cost and the matmul references. Errors: those of building the model or
// decoding.
Status MeasureDtype(const BenchOptions& o, const Geometry& geo, const torch::Tensor& latent,
                    torch::ScalarType dtype, Figures* figures) {
  const torch::Device device = latent.device();
  VAED_ASSIGN_OR_RETURN(std::unique_ptr<VideoVae> model, BuildModel(o, dtype, device));
  for (StackTiling s : {StackTiling::kOff, StackTiling::kOn}) {
    VAED_ASSIGN_OR_RETURN(ModeResult r,
                          RunMode(*model, latent, s, o.iterations, geo.flops_per_tile));
    std::cout << "  " << r.dtype << " " << r.scheduling << ": "
              << vaed::ops::FormatFixed(r.decode_latent, 2) << " s\n"
              << std::flush;
    figures->modes.push_back(std::move(r));
  }
  MeasurePlanCost(*model, geo, dtype, figures);
  VAED_ASSIGN_OR_RETURN(figures->matmul[DtypeName(dtype)],
                        MatmulGflops(geo.tokens, geo.cfg.dim, 2 * geo.cfg.ffn_inner, dtype,
                                     device, 3));
  // What a truly batched GEMM over the stacked tiles would run at (the
  // decoder keeps one GEMM per tile: CPU GEMM bits depend on the row
  // count, see vit3d_decoder.h).
  const int64_t stacked_rows = geo.tokens * geo.grid.num_tiles();
  VAED_ASSIGN_OR_RETURN(figures->batched[DtypeName(dtype)],
                        MatmulGflops(stacked_rows, geo.cfg.dim, 2 * geo.cfg.ffn_inner, dtype,
                                     device, 2));
  return Status::Ok();
}

// The table of every (dtype, scheduling) and the matmul references.
void PrintModes(const Geometry& geo, const Figures& figures) {
  vaed::ops::TextTable table({"dtype", "tiles", "calls", "tiles/call", "decode s", "tile_decode s",
                              "tile_merge s", "GFLOP/s", "% of matmul"},
                             {false, false, true, true, true, true, true, true, true});
  for (const ModeResult& r : figures.modes) {
    const double mm = figures.matmul[r.dtype].get<double>();
    table.AddRow({r.dtype, r.scheduling, std::to_string(r.decoder_calls),
                  std::to_string(r.max_tiles_per_call), vaed::ops::FormatFixed(r.decode_latent, 3),
                  vaed::ops::FormatFixed(r.tile_decode, 3), vaed::ops::FormatFixed(r.tile_merge, 3),
                  vaed::ops::FormatFixed(r.gflops, 1),
                  vaed::ops::FormatFixed(100 * r.gflops / mm, 1)});
  }
  std::cout << "\n" << table.Render();
  for (const auto& [dtype, gflops] : figures.matmul.items()) {
    std::cout << "plain matmul [" << geo.tokens << ", " << geo.cfg.dim << "] x [" << geo.cfg.dim
              << ", " << 2 * geo.cfg.ffn_inner << "] " << dtype << ": "
              << vaed::ops::FormatFixed(gflops.get<double>(), 1) << " GFLOP/s; batched over "
              << geo.grid.num_tiles() << " tiles (" << geo.tokens * geo.grid.num_tiles()
              << " rows): " << vaed::ops::FormatFixed(figures.batched[dtype].get<double>(), 1)
              << " GFLOP/s\n";
  }
}

const ModeResult* FindMode(const Figures& figures, const std::string& dtype,
                           const std::string& scheduling) {
  for (const ModeResult& r : figures.modes) {
    if (r.dtype == dtype && r.scheduling == scheduling) return &r;
  }
  return nullptr;
}

// Per dtype: stacked vs sequential speed and bitwise equality.
void CompareScheduling(Figures* figures) {
  for (const auto& [dtype, value] : DtypeNames()) {
    const ModeResult* seq = FindMode(*figures, dtype, "sequential");
    const ModeResult* st = FindMode(*figures, dtype, "stacked");
    if (seq == nullptr || st == nullptr) continue;
    const bool same = torch::equal(seq->raw, st->raw);
    const double speedup = seq->decode_latent / st->decode_latent;
    std::cout << dtype << ": stacked / sequential speed-up " << vaed::ops::FormatFixed(speedup, 3)
              << "x; stacked output " << (same ? "bitwise equal to" : "DIFFERS from")
              << " sequential";
    if (!same) {
      std::cout << " (max abs " << (seq->raw - st->raw).abs().max().item<double>() << ")";
    }
    std::cout << "\n";
    figures->summary[dtype] = {{"stacked_speedup", speedup}, {"stacked_bitwise_equal", same}};
  }
}

// A reduced dtype (float16, bfloat16) vs float32 (sequential): speed, raw
// error, uint8 PSNR; under summary "<bf16|fp16>_vs_fp32".
void CompareDtype(const std::string& reduced, const std::string& key, Figures* figures) {
  const ModeResult* f32 = FindMode(*figures, "float32", "sequential");
  const ModeResult* low = FindMode(*figures, reduced, "sequential");
  if (f32 == nullptr || low == nullptr) return;
  const torch::Tensor diff = (f32->raw - low->raw).abs();
  const double max_abs = diff.max().item<double>();
  const double mean_abs = diff.mean().item<double>();
  const double mse =
      (f32->u8.to(torch::kDouble) - low->u8.to(torch::kDouble)).pow(2).mean().item<double>();
  const double psnr = mse == 0 ? INFINITY : 10 * std::log10(255.0 * 255.0 / mse);
  const double speedup = f32->decode_latent / low->decode_latent;
  std::cout << reduced << " vs float32 (sequential): speed-up " << vaed::ops::FormatFixed(speedup, 3)
            << "x; raw output max abs error " << max_abs << ", mean abs " << mean_abs
            << "; uint8 frames PSNR " << vaed::ops::FormatFixed(psnr, 2) << " dB\n";
  figures->summary[key] = {
      {"speedup", speedup},
      {"max_abs_error", max_abs},
      {"mean_abs_error", mean_abs},
      {"uint8_psnr_db", std::isfinite(psnr) ? nlohmann::json(psnr) : nlohmann::json(nullptr)}};
}

void CompareDtypes(Figures* figures) {
  CompareDtype("bfloat16", "bf16_vs_fp32", figures);
  CompareDtype("float16", "fp16_vs_fp32", figures);
}

// --json: {modes [{dtype, scheduling, decoder_calls, decode_latent_s,
// tile_decode_s, tile_merge_s, gflops, peak_device_bytes}], matmul_gflops,
// compiled_plan_cost, batched_matmul_gflops, summary}.
nlohmann::json FiguresToJson(const Figures& figures) {
  nlohmann::json modes = nlohmann::json::array();
  for (const ModeResult& r : figures.modes) {
    modes.push_back({{"dtype", r.dtype},
                     {"scheduling", r.scheduling},
                     {"decoder_calls", r.decoder_calls},
                     {"decode_latent_s", r.decode_latent},
                     {"tile_decode_s", r.tile_decode},
                     {"tile_merge_s", r.tile_merge},
                     {"gflops", r.gflops},
                     {"peak_device_bytes", r.peak_device_bytes}});
  }
  return {{"modes", modes},
          {"matmul_gflops", figures.matmul},
          {"compiled_plan_cost", figures.plan_cost},
          {"batched_matmul_gflops", figures.batched},
          {"summary", figures.summary}};
}

int Run(const BenchOptions& o) {
  // The plan is checked before the thread pool, the latent or any weights
  // exist (the command line already bounds every size to what VideoVae
  // accepts; this is the planner's word on the geometry).
  auto grid = vaed::models::h3::PlanTileGrid(o.height_latent, o.width_latent);
  auto temporal = vaed::models::h3::PlanTemporal(o.latent_frames);
  if (!grid.ok() || !temporal.ok()) {
    std::cerr << "vaed_bench_h3_video: "
              << (grid.ok() ? temporal.status() : grid.status()).ToString() << "\n";
    return 2;
  }
  if (o.dtypes.empty()) {
    std::cerr << "vaed_bench_h3_video: --dtypes is empty: name at least one compute dtype\n";
    return 2;
  }
  at::set_num_threads(o.threads);
  torch::NoGradGuard no_grad;
  const torch::Device device(o.device);  // --device checked the form
  if (device.is_cuda() && !vaed::engine::TorchCudaAvailable()) {
    std::cerr << "vaed_bench_h3_video: --device " << o.device
              << " needs a LibTorch built with CUDA (this one is CPU only)\n";
    return 2;
  }
  if (device.is_cuda()) {
    Status s = vaed::engine::UseExactFloat32();
    if (s.ok()) s = vaed::engine::UseCudaEventTimings();
    if (!s.ok()) {
      std::cerr << "vaed_bench_h3_video: " << s.ToString() << "\n";
      return 1;
    }
  }
  Geometry geo{*grid, *temporal, VideoDecoderConfig::Official()};
  geo.cfg.depth = o.layers;
  const auto tile0 = geo.grid.tile(0);
  geo.flops_per_tile = TileFlops(geo.cfg, 7, tile0.height_latent, tile0.width_latent);
  geo.tokens = 7 * tile0.height_latent * tile0.width_latent + 5;

  torch::Generator g = at::detail::createCPUGenerator(o.seed);
  const torch::Tensor latent =
      torch::randn({1, 24, o.latent_frames, o.height_latent, o.width_latent}, g, torch::kFloat)
          .to(device);

  std::cout << "H3 video decoder benchmark: latent [1, 24, " << o.latent_frames << ", "
            << o.height_latent << ", " << o.width_latent << "] -> "
            << geo.temporal.output_pixel_frames << " frames " << o.width_latent * 16 << "x"
            << o.height_latent * 16 << " px; " << geo.grid.num_tiles() << " tiles x "
            << geo.temporal.num_windows() << " windows; ViT3D " << o.layers << " layers x "
            << geo.cfg.dim << " (full model: 36), random weights; " << o.threads
            << " intra-op threads; device " << device.str() << "\n"
            << "analytic decoder FLOPs per tile call: " << geo.flops_per_tile / 1e12 << " TFLOP ("
            << geo.tokens << " tokens)\n"
            << std::flush;

  Figures figures;
  for (torch::ScalarType dtype : o.dtypes) {
    if (Status s = MeasureDtype(o, geo, latent, dtype, &figures); !s.ok()) {
      std::cerr << "vaed_bench_h3_video: " << s.ToString() << "\n";
      return 1;
    }
  }
  PrintModes(geo, figures);
  CompareScheduling(&figures);
  CompareDtypes(&figures);
  if (o.json) std::cout << FiguresToJson(figures).dump(2) << "\n";
  return 0;
}

// Describes the program and declares every option, bound to `*o`.
void DefineOptions(CLI::App& app, BenchOptions* o) {
  app.description(
      "H3 video decoder benchmark: sequential vs stacked tiles, float32 vs float16/bfloat16, and "
      "the "
      "decoder's FLOP rate against a plain matmul, all measured in one run (random weights)");
  vaed::bench::AddRangeOption(app, "--layers", &o->layers,
                              "ViT3D blocks (the released model has 36)", 1, 36);
  vaed::bench::AddRangeOption(app, "--latent-frames", &o->latent_frames,
                              "latent frames T (12 = 2 windows)", int64_t{3},
                              VideoVae::kMaxLatentFrames);
  vaed::bench::AddRangeOption(app, "--height-latent", &o->height_latent,
                              "latent height (cells of 16 px)", int64_t{1},
                              VideoVae::kMaxLatentExtent);
  vaed::bench::AddRangeOption(app, "--width-latent", &o->width_latent,
                              "latent width (cells of 16 px)", int64_t{1},
                              VideoVae::kMaxLatentExtent);
  vaed::bench::AddRangeOption(app, "--threads", &o->threads, "LibTorch intra-op threads", 1,
                              kMaxThreads);
  app.add_option("--iterations", o->iterations, "timed decodes per mode (min is reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o->seed, "seed of the latent and the weights")->capture_default_str();
  vaed::bench::AddEnumListOption(app, "--dtypes", &o->dtypes, DtypeNames(),
                                 "compute dtypes to measure, comma-separated: float32 (exact), "
                                 "float16 (the official recipe, spec 1.6; GPU only), bfloat16");
  app.add_option("--device", o->device, "where the decoder runs: cpu, cuda or cuda:N (a GPU "
                 "build with a CUDA LibTorch)")
      ->check([](const std::string& v) -> std::string {
        if (v == "cpu" || v == "cuda") return "";
        const std::string prefix = "cuda:";
        if (v.rfind(prefix, 0) == 0 && v.size() > prefix.size() &&
            v.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
          return "";
        }
        return "must be cpu, cuda or cuda:N";
      })
      ->capture_default_str();
  app.add_flag("--json", o->json, "also print the figures as JSON");
  app.add_flag("--glibc-default-malloc", o->glibc_default_malloc,
               "keep glibc's default malloc settings instead of the daemon's memory policy "
               "(daemon/engine/memory_policy.h)");
}

}  // namespace

int main(int argc, char** argv) {
  return vaed::bench::InProcessBenchmarkMain(argc, argv, "vaed_bench_h3_video", DefineOptions, Run);
}
