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
#include "ops/bench/release_gate.h"
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
      "  G=../shared/golden/h3; vaed_bench_matrix --gate h3 --gate-scale 5 \\\n"
      "    --weights $G/video_tiny_weights.safetensors --config $G/video_tiny_config.json \\\n"
      "    --audio-weights $G/audio_tiny_weights.safetensors \\\n"
      "    --audio-config $G/audio_tiny_config.json --json out/bench/gate_h3_cpu.json\n"
      "Release gate (--gate h3; docs/benchmarks.md): every cell (task, canvas, duration) is\n"
      "decoded once per mode (eager first: the byte reference) with its stereo audio, and\n"
      "must meet: exact (video and audio bytes equal eager's), a/v (pixel frames and audio\n"
      "samples by the H3 rules at 24 fps), fallback (the reply lists none) and memory (peak\n"
      "tensor bytes within the budget, else the host's memory; device peak within the\n"
      "device). One line per (cell, mode), then a summary. A cell marked 'where the limits\n"
      "allow' that the daemon refuses for memory is skipped with the daemon's message.\n"
      "--gate-scale N divides each cell's canvas sides and duration by N (CPU: 5).\n"
      "Exit status: 0 all requested modes ran or are unsupported (--gate: every cell passed\n"
      "or was skipped); 1 a daemon, a cell or a mode failed; 2 usage.";
  return footer;
}

// Declares every option of the command line, bound to `*o`.
void DefineOptions(CLI::App& app, MatrixOptions* o) {
  app.add_option("--vaed", o->vaed_binary, "the vaed daemon binary to start")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  AddEnumOption(app, "--model-kind", &o->model_kind, ModelKindNames(),
                "model kind: h3_video, h3 (video + audio; the default with --gate) or taef2");
  app.add_option("--weights", o->weights,
                 "decoder weights (safetensors); taef2: required; h3_video, h3: empty = random "
                 "weights (flagged as demo)")
      ->check(CLI::ExistingFile);
  app.add_option("--config", o->config,
                 "h3_video, h3: video decoder config JSON; empty = the released model's "
                 "configuration (full size: ~9.7 GB of float32 weights)")
      ->check(CLI::ExistingFile);
  app.add_option("--audio-weights", o->audio_weights,
                 "h3: audio decoder weights (safetensors); empty = random weights")
      ->check(CLI::ExistingFile);
  app.add_option("--audio-config", o->audio_config,
                 "h3: audio decoder config JSON; empty = the released configuration")
      ->check(CLI::ExistingFile);
  CLI::Option* gate =
      app.add_option("--gate", o->gate,
                     "run release gate NAME instead of the benchmark: its cells once per mode, "
                     "with pass criteria (see below)")
          ->check(CLI::IsMember(GateNames()));
  AddRangeOption(app, "--gate-scale", &o->gate_scale,
                 "divide every gate cell's canvas sides and duration by N (CPU with the tiny "
                 "decoder: 5)",
                 1, 64)
      ->needs(gate);  // else the benchmark's own "give --shapes" error misleads
  AddRangeOption(app, "--memory-budget-mib", &o->memory_budget_mib,
                 "the daemon's executor.memory_budget_mib (0 = none: a request may use the "
                 "host's memory minus the weights)",
                 int64_t{0}, int64_t{1} << 30);
  AddEnumListOption(app, "--dtypes", &o->dtypes, ComputeDtypeNames(),
                    "compute dtypes, one daemon each: float32, bfloat16 (H3 only), float16 (H3 "
                    "on cuda only)");
  AddEnumOption(app, "--device", &o->device, DeviceNames(),
                "the daemon's executor.device: cpu, or cuda (a GPU build of vaed)");
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

const ops::EnumNames<ModelKind>& ModelKindNames() {
  static const ops::EnumNames<ModelKind> kNames = {
      {"h3_video", ModelKind::kH3Video}, {"h3", ModelKind::kH3}, {"taef2", ModelKind::kTaef2}};
  return kNames;
}

std::string ModelKindName(ModelKind kind) { return ops::NameOf(ModelKindNames(), kind); }

bool IsH3(ModelKind kind) { return kind == ModelKind::kH3Video || kind == ModelKind::kH3; }

const ops::EnumNames<Device>& DeviceNames() {
  static const ops::EnumNames<Device> kNames = {{"cpu", Device::kCpu}, {"cuda", Device::kCuda}};
  return kNames;
}

std::string DeviceName(Device device) { return ops::NameOf(DeviceNames(), device); }

const ops::EnumNames<ComputeDtype>& ComputeDtypeNames() {
  static const ops::EnumNames<ComputeDtype> kNames = {{"float32", ComputeDtype::kFloat32},
                                                      {"bfloat16", ComputeDtype::kBFloat16},
                                                      {"float16", ComputeDtype::kFloat16}};
  return kNames;
}

std::string ComputeDtypeName(ComputeDtype dtype) { return ops::NameOf(ComputeDtypeNames(), dtype); }

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
    return app.exit(e) == 0 ? 0 : 2;  // --help 0; usage errors 2, as documented
  }
  if (!o->gate.empty()) {
    // The gate decodes each cell once per mode: the benchmark's rounds and
    // Amdahl shares would be ignored, so they are refused.
    for (const char* name : {"--warmup", "--iterations", "--vae-share"}) {
      if (app.get_option(name)->count() > 0) {
        std::cerr << "vaed_bench_matrix: " << name
                  << " is a benchmark setting; --gate decodes each cell once per mode\n";
        return 2;
      }
    }
    if (app.get_option("--model-kind")->count() == 0) o->model_kind = ModelKind::kH3;
  }
  if (Status s = ValidateMatrixOptions(*o); !s.ok()) {
    std::cerr << "vaed_bench_matrix: " << s.message() << "\n";
    return 2;
  }
  std::sort(o->group_sizes.begin(), o->group_sizes.end());
  return std::nullopt;
}

namespace {

// The checks that only apply with --gate.
Status ValidateGateOptions(const MatrixOptions& o) {
  if (FindGateCells(o.gate) == nullptr) {
    return InvalidArgument("--gate '" + o.gate + "' is not a gate; gates are " +
                           ops::Join(GateNames(), ", "));
  }
  if (!IsH3(o.model_kind)) {
    return InvalidArgument("--gate " + o.gate +
                           " needs --model-kind h3 (or h3_video, without "
                           "audio), not " +
                           ModelKindName(o.model_kind));
  }
  if (!o.shapes.empty() || !o.latent_path.empty()) {
    return InvalidArgument("--gate decodes its own cells; drop --shapes / --latent");
  }
  if (!o.group_sizes.empty()) {
    return InvalidArgument("--gate asks for no group size (the daemon's group.size); drop "
                           "--group-sizes");
  }
  if (o.dtypes.size() != 1) {
    return InvalidArgument("--gate runs one compute dtype; run it once per dtype");
  }
  if (std::none_of(o.modes.begin(), o.modes.end(), IsBaselineMode)) {
    return InvalidArgument("--gate needs eager among --modes (the byte reference)");
  }
  if (o.gate_scale < 1) return InvalidArgument("--gate-scale must be >= 1");
  return Status::Ok();
}

}  // namespace

Status ValidateMatrixOptions(const MatrixOptions& o) {
  // The model kind, the device and the dtypes were parsed at their flags;
  // what is left is how they fit together.
  const bool h3 = IsH3(o.model_kind);
  if (o.model_kind != ModelKind::kH3 && (!o.audio_weights.empty() || !o.audio_config.empty())) {
    return InvalidArgument("--audio-weights and --audio-config are for --model-kind h3");
  }
  if (o.memory_budget_mib < 0) return InvalidArgument("--memory-budget-mib must be >= 0");
  if (!o.gate.empty()) VAED_RETURN_IF_ERROR(ValidateGateOptions(o));
  if (!h3 && o.weights.empty()) {
    return InvalidArgument("--model-kind taef2 needs --weights (taef2_decoder.safetensors)");
  }
  if (!h3 && !o.config.empty()) {
    return InvalidArgument("--config is for h3_video and h3; taef2 has no config file");
  }
  if (o.dtypes.empty()) return InvalidArgument("--dtypes is empty");
  for (ComputeDtype d : o.dtypes) {
    if (d == ComputeDtype::kFloat16 && o.device != Device::kCuda) {
      return InvalidArgument("--dtypes lists float16, which runs on --device cuda only");
    }
    if (!h3 && d != ComputeDtype::kFloat32) {
      return InvalidArgument("--dtypes lists '" + ComputeDtypeName(d) +
                             "'; taef2 computes in float32 only");
    }
  }
  if (std::set<ComputeDtype>(o.dtypes.begin(), o.dtypes.end()).size() != o.dtypes.size()) {
    return InvalidArgument("--dtypes lists a dtype twice");
  }
  if (o.gate.empty() && o.shapes.empty() && o.latent_path.empty()) {
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

std::string MatrixDaemonConfigToml(const MatrixOptions& o, ComputeDtype dtype) {
  std::ostringstream t;
  t << "# Generated by vaed_bench_matrix.\n"
    << "[executor]\nintra_op_threads = " << o.threads << "\n";
  if (o.device != Device::kCpu) t << "device = " << TomlString(DeviceName(o.device)) << "\n";
  if (o.memory_budget_mib > 0) t << "memory_budget_mib = " << o.memory_budget_mib << "\n";
  t << "\n"
    << "[models]\ndefault = " << TomlString(kModelName) << "\n\n"
    << "[[models.entry]]\nname = " << TomlString(kModelName) << "\n"
    << "kind = " << TomlString(ModelKindName(o.model_kind)) << "\n";
  if (!o.weights.empty()) t << "weights = " << TomlString(AbsolutePath(o.weights)) << "\n";
  if (!o.audio_weights.empty()) {
    t << "audio_weights = " << TomlString(AbsolutePath(o.audio_weights)) << "\n";
  }
  if (!o.audio_config.empty()) {
    t << "audio_config = " << TomlString(AbsolutePath(o.audio_config)) << "\n";
  }
  if (IsH3(o.model_kind)) {
    if (!o.config.empty()) t << "config = " << TomlString(AbsolutePath(o.config)) << "\n";
    t << "compute_dtype = " << TomlString(ComputeDtypeName(dtype)) << "\n"
      << "stack_tiling = \"off\"\n"
      << "plan_cache_capacity = " << o.plan_cache_capacity << "\n";
  }
  return t.str();
}

}  // namespace vaed::bench
