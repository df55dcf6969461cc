#include "ops/bench/matrix/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "ops/bench/bench_cli.h"
#include "ops/bench/daemon_config_text.h"
#include "ops/bench/matrix/modes.h"
#include "ops/common/text_format.h"

namespace vaed::bench {
namespace {

// The --help footer: the modes, the units and what each column means.
std::string HelpFooter() {
  std::string footer =
      "Modes (requests to the same daemon; output bytes must not depend on them):\n";
  for (const ModeSpec& m : KnownModes()) {
    footer += std::string("  ") + m.name + ": " + m.summary + "\n";
  }
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
  return footer;
}

// Declares every option of the command line, bound to `*o`.
void DefineOptions(CLI::App& app, MatrixOptions* o) {
  app.add_option("--vaed", o->vaed_binary, "the vaed daemon binary to start")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  app.add_option("--model-kind", o->model_kind, "model kind: h3_video or taef2")
      ->capture_default_str()
      ->check(CLI::IsMember({"h3_video", "taef2"}));
  app.add_option("--weights", o->weights,
                 "decoder weights (safetensors); taef2: required; h3_video: empty = random "
                 "weights (flagged as demo)")
      ->check(CLI::ExistingFile);
  app.add_option("--config", o->config,
                 "h3_video decoder config JSON; empty = the released model's configuration "
                 "(full size: ~9.7 GB of float32 weights)")
      ->check(CLI::ExistingFile);
  app.add_option("--dtypes", o->dtypes,
                 "compute dtypes, one daemon each: float32, bfloat16 (h3_video only)")
      ->delimiter(',')
      ->capture_default_str();
  auto* shapes = app.add_option("--shapes", o->shapes,
                                "latent shapes in latent cells, e.g. 1x24x7x20x20 (H3 [1, 24, T, "
                                "h, w]) or 8x32x34x60 (TAEF2 [frames, 32, h, w]); random normal "
                                "float32 values")
                     ->delimiter(',');
  auto* latent = app.add_option("--latent", o->latent_path,
                                "safetensors file with a float32 latent in the model's layout "
                                "(instead of --shapes)")
                     ->check(CLI::ExistingFile)
                     ->excludes(shapes);
  app.add_option("--latent-key", o->latent_key, "tensor name in --latent")
      ->capture_default_str()
      ->needs(latent);
  app.add_option("--seed", o->seed, "seed of the random latents (--shapes)")->capture_default_str();
  app.add_option("--modes", o->modes, "modes to run (see below); eager is the baseline")
      ->delimiter(',')
      ->capture_default_str();
  AddRangeOption(app, "--warmup", &o->warmup, "untimed rounds per cell after the first requests", 0,
                 1000);
  AddRangeOption(app, "--iterations", &o->iterations,
                 "timed rounds per cell (every mode once each)", 1, 1000);
  app.add_option("--vae-share", o->vae_shares,
                 "fractions in (0, 1] of a generation's time spent in the VAE decode, for the "
                 "Amdahl end-to-end speedups")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--json", o->json_path, "also write the results as one JSON document to FILE");
  AddRangeOption(app, "--threads", &o->threads, "the daemon's executor.intra_op_threads", 1, 256);
  AddRangeOption(app, "--plan-cache-capacity", &o->plan_cache_capacity,
                 "h3_video plan_cache_capacity (compiled-plan buckets kept)", 1, 1024);
  AddRangeOption(app, "--start-timeout", &o->start_timeout_s,
                 "seconds to wait for a daemon to answer its first Hello", 1, 86400);
  AddRangeOption(app, "--request-timeout", &o->request_timeout_s,
                 "seconds to wait for any one reply (0 = forever)", 0, 86400);
  app.add_option("--group-ranks", o->group_ranks,
                 "start the daemon with --group-ranks W: W local VAE ranks, qualifying group "
                 "sizes 1, 2, 4, ... up to W (each rank has --threads intra-op threads)")
      ->check(CLI::Range(1, 64));
  app.add_option("--group-sizes", o->group_sizes,
                 "also measure every mode at each VAE group size S (DecodeRequest::group_size), "
                 "each at most --group-ranks; the smallest is the baseline of the group speedups "
                 "and, with eager, of the output bytes")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
}

}  // namespace

std::optional<int> ParseMatrixCommandLine(int argc, char** argv, MatrixOptions* o) {
  CLI::App app{
      "vaed_bench_matrix: eager vs stacked vs compiled decodes through a vaed daemon that\n"
      "this program starts (one per compute dtype, on a private socket, with a generated\n"
      "config), with cold start, per-mode timings, VAE speedups over eager, an output byte\n"
      "equality check and the implied end-to-end speedups. Lists are comma-separated.",
      "vaed_bench_matrix"};
  app.footer(HelpFooter());
  DefineOptions(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status s = ValidateMatrixOptions(*o); !s.ok()) {
    std::cerr << "vaed_bench_matrix: " << s.message() << "\n";
    return 2;
  }
  std::sort(o->group_sizes.begin(), o->group_sizes.end());
  return std::nullopt;
}

Status ValidateMatrixOptions(const MatrixOptions& o) {
  const bool h3 = o.model_kind == "h3_video";
  if (!h3 && o.model_kind != "taef2") {
    return InvalidArgument("--model-kind '" + o.model_kind + "' must be h3_video or taef2");
  }
  if (!h3 && o.weights.empty()) {
    return InvalidArgument("--model-kind taef2 needs --weights (taef2_decoder.safetensors)");
  }
  if (!h3 && !o.config.empty()) {
    return InvalidArgument("--config is for h3_video only; taef2 has no config file");
  }
  if (o.dtypes.empty()) return InvalidArgument("--dtypes is empty");
  for (const std::string& d : o.dtypes) {
    if (d != "float32" && d != "bfloat16") {
      return InvalidArgument("--dtypes lists '" + d + "'; compute dtypes are float32, bfloat16");
    }
    if (!h3 && d != "float32") {
      return InvalidArgument("--dtypes lists '" + d + "'; taef2 computes in float32 only");
    }
  }
  if (std::set<std::string>(o.dtypes.begin(), o.dtypes.end()).size() != o.dtypes.size()) {
    return InvalidArgument("--dtypes lists a dtype twice");
  }
  if (o.shapes.empty() && o.latent_path.empty()) {
    return InvalidArgument("give --shapes (random latents) or --latent FILE");
  }
  if (o.modes.empty()) return InvalidArgument("--modes is empty");
  std::set<std::string> seen;
  for (const std::string& m : o.modes) {
    if (FindMode(m) == nullptr) {
      return InvalidArgument("--modes lists '" + m + "'; modes are " +
                             ops::Join(KnownModeNames(), ", "));
    }
    if (!seen.insert(m).second) return InvalidArgument("--modes lists '" + m + "' twice");
  }
  if (std::set<uint32_t>(o.group_sizes.begin(), o.group_sizes.end()).size() !=
      o.group_sizes.size()) {
    return InvalidArgument("--group-sizes lists a size twice");
  }
  const uint32_t ranks = std::max<uint32_t>(o.group_ranks, 1);
  for (uint32_t size : o.group_sizes) {
    if (size > ranks) {
      return InvalidArgument("--group-sizes lists " + std::to_string(size) +
                             " but the daemon has " + std::to_string(ranks) +
                             " rank(s); raise --group-ranks");
    }
  }
  for (double s : o.vae_shares) {
    if (!(s > 0.0 && s <= 1.0)) {
      return InvalidArgument("--vae-share " + std::to_string(s) + " must be a fraction in (0, 1]");
    }
  }
  return Status::Ok();
}

std::string MatrixDaemonConfigToml(const MatrixOptions& o, const std::string& dtype) {
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

}  // namespace vaed::bench
