// vaed_bench_h3_video: what stacked tiles and bf16 buy for the H3 video
// decoder on this machine, and how close the decoder gets to the machine's
// matmul speed.
//
// One run measures, on the same seeded random latent and the same seeded
// random weights (ViT3D at full width 2048 / 32 heads / FFN 8192 by default,
// with --layers blocks instead of 36 so that it finishes on a laptop-class
// CPU; the per-block cost is the released model's):
//   * decode time (warm, in-process VideoVae) for every combination of
//     compute dtype {float32, bfloat16} x tile scheduling {sequential,
//     stacked}, split into tile_decode and tile_merge;
//   * whether stacked output bytes equal sequential bytes (per dtype), and
//     the bf16 error against fp32 (max/mean abs of the raw output, PSNR of
//     the uint8 frames);
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
  bool skip_bf16 = false;
  bool skip_fp32 = false;
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
  int64_t decoder_calls = 0, max_tiles_per_call = 0;
  double gflops = 0;  // achieved in tile_decode
  torch::Tensor raw;  // last output, [F, 3, H, W] float32
  torch::Tensor u8;   // the same as uint8 frames [F, H, W, 3]
};

// Median-free: with one iteration per mode (the default) the figure is that
// run; with more, the minimum (least disturbed by other load).
Result<ModeResult> RunMode(VideoVae& model, const torch::Tensor& latent, StackTiling stack,
                           int iterations, double flops_per_tile) {
  ModeResult r;
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
  for (int i = 0; i < iterations; ++i) {
    DecodeReport report;
    VAED_ASSIGN_OR_RETURN(torch::Tensor out, model.Decode(latent, settings, &report));
    for (const auto& [name, s] : report.timings.entries()) {
      if (name == "video_vae.decode_latent") r.decode_latent = std::min(r.decode_latent, s);
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
  return r;
}

// GFLOP/s of [m, k] x [k, n] in `dtype` (best of `reps`).
double MatmulGflops(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype, int reps) {
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::randn({m, k}).to(dtype);
  torch::Tensor b = torch::randn({n, k}).to(dtype);  // weight layout, as nn.Linear
  torch::Tensor c = torch::linear(a, b);             // warm-up
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    c = torch::linear(a, b);
    best = std::min(best, Seconds(t0));
  }
  return 2.0 * double(m) * double(k) * double(n) / best / 1e9;
}

Result<std::unique_ptr<VideoVae>> BuildModel(const BenchOptions& o, torch::ScalarType dtype) {
  static VideoDecoderConfig config = VideoDecoderConfig::Official();
  config.depth = o.layers;
  VideoVaeOptions options;
  options.name = "h3_bench";
  options.config = &config;
  options.seed = o.seed;
  options.compute_dtype = dtype;
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

std::string DtypeName(torch::ScalarType dtype) {
  return dtype == torch::kFloat ? "float32" : "bfloat16";
}

// What a compiled plan saves per decoder call: building it (RoPE tables +
// workspace) is the per-call work a plan removes; one tile decoded eager vs
// with the plan, best of 3 each. Prints a line and records it.
void MeasurePlanCost(const VideoVae& model, const Geometry& geo, torch::ScalarType dtype,
                     Figures* figures) {
  torch::NoGradGuard no_grad;
  const vaed::models::h3::Vit3dDecoder& vit = model.decoder();
  const vaed::models::h3::TileRect tile = geo.grid.tile(0);
  const torch::Tensor z =
      torch::randn({1, geo.cfg.latent_channels, 7, tile.height_latent, tile.width_latent});
  double build = 1e300, eager = 1e300, planned = 1e300;
  std::shared_ptr<vaed::models::h3::Vit3dDecoder::TilePlan> plan;
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    plan = vit.BuildTilePlan(1, 7, tile.height_latent, tile.width_latent);
    build = std::min(build, Seconds(t0));
  }
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    (void)vit.Forward(z);
    eager = std::min(eager, Seconds(t0));
    t0 = Clock::now();
    (void)vit.Forward(z, plan.get());
    planned = std::min(planned, Seconds(t0));
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
  VAED_ASSIGN_OR_RETURN(std::unique_ptr<VideoVae> model, BuildModel(o, dtype));
  for (StackTiling s : {StackTiling::kOff, StackTiling::kOn}) {
    VAED_ASSIGN_OR_RETURN(ModeResult r,
                          RunMode(*model, latent, s, o.iterations, geo.flops_per_tile));
    std::cout << "  " << r.dtype << " " << r.scheduling << ": "
              << vaed::ops::FormatFixed(r.decode_latent, 2) << " s\n"
              << std::flush;
    figures->modes.push_back(std::move(r));
  }
  MeasurePlanCost(*model, geo, dtype, figures);
  figures->matmul[DtypeName(dtype)] =
      MatmulGflops(geo.tokens, geo.cfg.dim, 2 * geo.cfg.ffn_inner, dtype, 3);
  // What a truly batched GEMM over the stacked tiles would run at (the
  // decoder keeps one GEMM per tile: CPU GEMM bits depend on the row
  // count, see vit3d_decoder.h).
  const int64_t stacked_rows = geo.tokens * geo.grid.num_tiles();
  figures->batched[DtypeName(dtype)] =
      MatmulGflops(stacked_rows, geo.cfg.dim, 2 * geo.cfg.ffn_inner, dtype, 2);
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
  for (const std::string dtype : {"float32", "bfloat16"}) {
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

// bfloat16 vs float32 (sequential): speed, raw error, uint8 PSNR.
void CompareDtypes(Figures* figures) {
  const ModeResult* f32 = FindMode(*figures, "float32", "sequential");
  const ModeResult* b16 = FindMode(*figures, "bfloat16", "sequential");
  if (f32 == nullptr || b16 == nullptr) return;
  const torch::Tensor diff = (f32->raw - b16->raw).abs();
  const double max_abs = diff.max().item<double>();
  const double mean_abs = diff.mean().item<double>();
  const double mse =
      (f32->u8.to(torch::kDouble) - b16->u8.to(torch::kDouble)).pow(2).mean().item<double>();
  const double psnr = mse == 0 ? INFINITY : 10 * std::log10(255.0 * 255.0 / mse);
  const double speedup = f32->decode_latent / b16->decode_latent;
  std::cout << "bfloat16 vs float32 (sequential): speed-up " << vaed::ops::FormatFixed(speedup, 3)
            << "x; raw output max abs error " << max_abs << ", mean abs " << mean_abs
            << "; uint8 frames PSNR " << vaed::ops::FormatFixed(psnr, 2) << " dB\n";
  figures->summary["bf16_vs_fp32"] = {
      {"speedup", speedup},
      {"max_abs_error", max_abs},
      {"mean_abs_error", mean_abs},
      {"uint8_psnr_db", std::isfinite(psnr) ? nlohmann::json(psnr) : nlohmann::json(nullptr)}};
}

// --json: {modes [{dtype, scheduling, decoder_calls, decode_latent_s,
// tile_decode_s, tile_merge_s, gflops}], matmul_gflops, compiled_plan_cost,
// batched_matmul_gflops, summary}.
nlohmann::json FiguresToJson(const Figures& figures) {
  nlohmann::json modes = nlohmann::json::array();
  for (const ModeResult& r : figures.modes) {
    modes.push_back({{"dtype", r.dtype},
                     {"scheduling", r.scheduling},
                     {"decoder_calls", r.decoder_calls},
                     {"decode_latent_s", r.decode_latent},
                     {"tile_decode_s", r.tile_decode},
                     {"tile_merge_s", r.tile_merge},
                     {"gflops", r.gflops}});
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
  at::set_num_threads(o.threads);
  torch::NoGradGuard no_grad;
  Geometry geo{*grid, *temporal, VideoDecoderConfig::Official()};
  geo.cfg.depth = o.layers;
  const auto tile0 = geo.grid.tile(0);
  geo.flops_per_tile = TileFlops(geo.cfg, 7, tile0.height_latent, tile0.width_latent);
  geo.tokens = 7 * tile0.height_latent * tile0.width_latent + 5;

  torch::Generator g = at::detail::createCPUGenerator(o.seed);
  const torch::Tensor latent =
      torch::randn({1, 24, o.latent_frames, o.height_latent, o.width_latent}, g, torch::kFloat);

  std::cout << "H3 video decoder benchmark: latent [1, 24, " << o.latent_frames << ", "
            << o.height_latent << ", " << o.width_latent << "] -> "
            << geo.temporal.output_pixel_frames << " frames " << o.width_latent * 16 << "x"
            << o.height_latent * 16 << " px; " << geo.grid.num_tiles() << " tiles x "
            << geo.temporal.num_windows() << " windows; ViT3D " << o.layers << " layers x "
            << geo.cfg.dim << " (full model: 36), random weights; " << o.threads
            << " intra-op threads\n"
            << "analytic decoder FLOPs per tile call: " << geo.flops_per_tile / 1e12 << " TFLOP ("
            << geo.tokens << " tokens)\n"
            << std::flush;

  Figures figures;
  std::vector<torch::ScalarType> dtypes;
  if (!o.skip_fp32) dtypes.push_back(torch::kFloat);
  if (!o.skip_bf16) dtypes.push_back(torch::kBFloat16);
  for (torch::ScalarType dtype : dtypes) {
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
      "H3 video decoder benchmark: sequential vs stacked tiles, float32 vs bfloat16, and the "
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
  // Both together would measure nothing and print an empty table.
  auto* skip_bf16 = app.add_flag("--skip-bf16", o->skip_bf16, "measure float32 only");
  app.add_flag("--skip-fp32", o->skip_fp32, "measure bfloat16 only")->excludes(skip_bf16);
  app.add_flag("--json", o->json, "also print the figures as JSON");
  app.add_flag("--glibc-default-malloc", o->glibc_default_malloc,
               "keep glibc's default malloc settings instead of the daemon's memory policy "
               "(daemon/engine/memory_policy.h)");
}

}  // namespace

int main(int argc, char** argv) {
  return vaed::bench::InProcessBenchmarkMain(argc, argv, "vaed_bench_h3_video", DefineOptions, Run);
}
