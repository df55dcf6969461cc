#include "daemon/models/h3/video_vae.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include "daemon/models/byte_units.h"
#include "daemon/models/device_placement.h"
#include "daemon/models/h3/video_memory.h"
#include "daemon/models/h3/vit3d_decoder.h"
#include "daemon/models/tensor_memory.h"
#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"

namespace vaed::models::h3 {

namespace {

// ImageNet statistics of the pixel normalisation (spec §1.1 "Output space").
constexpr double kPixelMean[3] = {0.485, 0.456, 0.406};
constexpr double kPixelStd[3] = {0.229, 0.224, 0.225};

std::string DimName(size_t i) {
  static const char* const kNames[] = {"batch", "latent channels", "latent frames",
                                       "height in latent cells", "width in latent cells"};
  return "latent.shape[" + std::to_string(i) + "] (" + kNames[i] + ")";
}

const char* DtypeName(torch::ScalarType t) {
  if (t == torch::kHalf) return "float16";
  return t == torch::kBFloat16 ? "bfloat16" : "float32";
}

}  // namespace

Result<std::unique_ptr<VideoVae>> VideoVae::Create(const VideoVaeOptions& options) {
  if (options.name.empty()) return InvalidArgument("h3 video model: name is empty");
  const std::string what = "model '" + options.name + "'";
  if (options.compute_dtype != torch::kFloat && options.compute_dtype != torch::kHalf &&
      options.compute_dtype != torch::kBFloat16) {
    return InvalidArgument(what + ": compute_dtype must be float32, float16 or bfloat16");
  }
  if (options.compute_dtype == torch::kHalf && options.device.is_cpu()) {
    // fp16 is the official GPU recipe (spec §1.6); LibTorch's CPU kernels
    // are not built for it (no fp16 path vaed could call exact or fast).
    return InvalidArgument(what +
                           ": compute_dtype float16 is the GPU recipe (spec §1.6) and "
                           "this model is on the CPU; use float32 (exact) or bfloat16 there");
  }
  if (options.default_stack_tiling == StackTiling::kDefault) {
    return InvalidArgument(what + ": default_stack_tiling must be off, on or auto");
  }
  VideoDecoderConfig config = VideoDecoderConfig::Official();
  if (options.config != nullptr) {
    config = *options.config;
  } else if (!options.config_path.empty()) {
    Result<VideoDecoderConfig> loaded = VideoDecoderConfig::LoadJsonFile(options.config_path);
    if (!loaded.ok()) return loaded.status().WithContext(what);
    config = std::move(*loaded);
  }
  std::unique_ptr<Vit3dDecoder> decoder;
  const bool demo = options.weights.empty();
  if (demo) {
    Result<std::unique_ptr<Vit3dDecoder>> d =
        Vit3dDecoder::CreateRandom(config, options.seed, options.compute_dtype, options.device);
    if (!d.ok()) return d.status().WithContext(what);
    decoder = std::move(*d);
  } else {
    Result<std::unique_ptr<Vit3dDecoder>> d =
        Vit3dDecoder::Load(config, options.weights, options.compute_dtype, options.device);
    if (!d.ok()) return d.status().WithContext(what);
    decoder = std::move(*d);
  }

  ModelInfo info;
  info.name = options.name;
  info.kind = "h3_video";
  info.demo_weights = demo;
  info.latent_channels = kLatentChannels;
  info.latent_dtype = DType::kFloat32;
  info.compute_dtype = DtypeName(options.compute_dtype);
  info.device = DeviceName(options.device);
  info.caps.tiled = true;
  info.caps.stack_tiling = true;
  info.caps.spatial_sharding = true;
  info.caps.independent_group = true;
  info.caps.latent_space = true;
  info.resident_bytes = decoder->resident_bytes();
  for (const auto& [path, sha] : decoder->weight_sha256()) {
    if (!info.weights_path.empty()) info.weights_path += ",";
    if (!info.weights_sha256.empty()) info.weights_sha256 += ",";
    info.weights_path += path;
    info.weights_sha256 += sha;
  }
  info.description = std::string(demo ? "DEMO: deterministic seeded weights, not a trained "
                                        "model; "
                                      : "") +
                     "MiniMax-H3 video VAE decoder (ViT3D " + std::to_string(config.depth) +
                     " layers x " + std::to_string(config.dim) + ", " +
                     std::to_string(config.heads) + " heads; 256-px tiles, " + info.compute_dtype +
                     ")";
  if (demo) {
    spdlog::warn("{}: DEMO weights (seed {}), outputs are not video", what, options.seed);
  }
  if (options.plan_cache_capacity < 1) {
    return InvalidArgument(what + ": plan_cache_capacity must be >= 1");
  }
  if (options.plan_after_sightings < 1) {
    return InvalidArgument(what + ": plan_after_sightings must be >= 1");
  }
  info.caps.compiled_plans = true;
  VAED_ASSIGN_OR_RETURN(Constants constants, MakeConstants(config, options.device, what));
  return std::unique_ptr<VideoVae>(new VideoVae(std::move(info), std::move(config),
                                                std::move(decoder), std::move(constants), options));
}

Result<VideoVae::Constants> VideoVae::MakeConstants(const VideoDecoderConfig& config,
                                                    const torch::Device& device,
                                                    const std::string& what) {
  Constants c;
  VAED_RETURN_IF_ERROR(RunTorch(what + ": building its constants", [&]() -> Status {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    c.latents_mean = torch::tensor(config.latents_mean, f32).view({1, -1, 1, 1, 1});
    c.latents_std = torch::tensor(config.latents_std, f32).view({1, -1, 1, 1, 1});
    // torchvision Normalize(mean' = -m/s, std' = 1/s): the constants are
    // computed in double, then used as float32 (golden README §8).
    std::vector<float> inv_mean, inv_std;
    for (int i = 0; i < 3; ++i) {
      inv_mean.push_back(static_cast<float>(-kPixelMean[i] / kPixelStd[i]));
      inv_std.push_back(static_cast<float>(1.0 / kPixelStd[i]));
    }
    c.pixel_inv_mean = torch::tensor(inv_mean, f32).view({1, 3, 1, 1});
    c.pixel_inv_std = torch::tensor(inv_std, f32).view({1, 3, 1, 1});
    return Status::Ok();
  }));
  VAED_RETURN_IF_ERROR(MoveTensorsTo(
      {&c.latents_mean, &c.latents_std, &c.pixel_inv_mean, &c.pixel_inv_std}, device, what));
  return c;
}

VideoVae::VideoVae(ModelInfo info, VideoDecoderConfig config, std::unique_ptr<Vit3dDecoder> decoder,
                   Constants constants, const VideoVaeOptions& options)
    : info_(std::move(info)),
      config_(std::move(config)),
      decoder_(std::move(decoder)),
      default_stack_tiling_(options.default_stack_tiling),
      plans_(options.plan_cache_capacity, options.plan_after_sightings),
      constants_(std::move(constants)) {}

VideoVae::~VideoVae() = default;

Result<DecodePlan> VideoVae::Plan(DType latent_dtype,
                                  const std::vector<int64_t>& latent_shape) const {
  const std::string model = "model '" + info_.name + "'";
  VAED_RETURN_IF_ERROR(
      CheckLatentDtypeAndRank(info_, latent_dtype, latent_shape,
                              {"1", "24", "latent_frames", "height_latent", "width_latent"}));
  if (latent_shape[0] != 1) {
    return InvalidArgument(DimName(0) + " is " + std::to_string(latent_shape[0]) + "; " + model +
                           " decodes one video per request (batch 1)");
  }
  if (latent_shape[1] != kLatentChannels) {
    return InvalidArgument(DimName(1) + " is " + std::to_string(latent_shape[1]) + "; " + model +
                           " needs 24 latent channels (layout [1, 24, T, h, w]; a latent with "
                           "channels and frames swapped is not accepted)");
  }
  if (latent_shape[2] > kMaxLatentFrames) {
    return InvalidArgument(DimName(2) + " is " + std::to_string(latent_shape[2]) + "; at most " +
                           std::to_string(kMaxLatentFrames) + " per request");
  }
  Result<TemporalPlan> temporal = PlanTemporal(latent_shape[2]);
  if (!temporal.ok()) {
    return InvalidArgument(DimName(2) + ": " + std::string(temporal.status().message()));
  }
  for (size_t i = 3; i < 5; ++i) {
    if (latent_shape[i] < 1 || latent_shape[i] > kMaxLatentExtent) {
      return InvalidArgument(DimName(i) + " is " + std::to_string(latent_shape[i]) +
                             "; must be in [1, " + std::to_string(kMaxLatentExtent) +
                             "] (16 px per latent cell)");
    }
  }
  DecodePlan plan;
  plan.frames = temporal->output_pixel_frames;
  plan.channels = 3;
  plan.height_px = latent_shape[3] * kPixelsPerLatent;
  plan.width_px = latent_shape[4] * kPixelsPerLatent;
  plan.shape_bucket =
      info_.name + ":" + std::to_string(latent_shape[3]) + "x" + std::to_string(latent_shape[4]);
  VAED_ASSIGN_OR_RETURN(
      const VideoMemoryEstimate memory,
      EstimateVideoMemory(config_,
                          static_cast<int64_t>(c10::elementSize(decoder_->compute_dtype())),
                          latent_shape[2], latent_shape[3], latent_shape[4]));
  plan.peak_bytes_estimate = memory.peak_bytes();
  plan.peak_bytes_terms = memory.Describe();
  VAED_ASSIGN_OR_RETURN(const TileGrid grid, PlanTileGrid(latent_shape[3], latent_shape[4]));
  plan.tile_rows = grid.rows.tiles();
  plan.tile_cols = grid.cols.tiles();
  plan.windows = temporal->num_windows();
  return plan;
}

torch::Tensor VideoVae::Denormalize(const torch::Tensor& latent) const {
  // Multiply, then add, in float32 (the pipeline's de-normalisation that
  // produced the golden latent_denorm).
  return latent * constants_.latents_std + constants_.latents_mean;
}

std::string VideoVae::BucketKey(int64_t tiles, int64_t t, int64_t h, int64_t w) const {
  return std::string(DtypeName(decoder_->compute_dtype())) + " b" + std::to_string(tiles) + " t" +
         std::to_string(t) + " h" + std::to_string(h) + " w" + std::to_string(w);
}

namespace {

std::string TileBucket(int64_t t, int64_t h, int64_t w) {
  return "t" + std::to_string(t) + " h" + std::to_string(h) + " w" + std::to_string(w);
}

// Tiles of the largest same-shape group of a window.
int64_t LargestSameShapeGroup(const TileGrid& grid) {
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;
  int64_t best = 0;
  for (int64_t i = 0; i < grid.num_tiles(); ++i) {
    const TileRect r = grid.tile(i);
    best = std::max(best, ++counts[{r.height_latent, r.width_latent}]);
  }
  return best;
}

// Streamed output: the tiled decode's final frames ([1, 3, F, H, W], B = 1)
// handed to settings.final_frames as [frames, 3, H, W] views, the layout
// Decode() returns; a failed hand-over throws DecodeCancelled with its
// status. Empty when the request does not stream.
WindowFinalFn FinalFramesOf(const DecodeSettings& settings) {
  if (!settings.final_frames) return {};
  return [&settings](const torch::Tensor& video, int64_t begin, int64_t end) {
    const torch::Tensor frames =
        video.select(0, 0).narrow(1, begin, end - begin).permute({1, 0, 2, 3});
    Status s = settings.final_frames(frames, begin, end);
    if (!s.ok()) throw DecodeCancelled(std::move(s));
  };
}

}  // namespace

void VideoVae::RecordCallPeak(int64_t t, int64_t h, int64_t w, int64_t tiles, uint64_t bytes) {
  MutexLock lock(&peaks_mu_);
  uint64_t& slot = peaks_[TileBucket(t, h, w)][tiles];
  slot = std::max(slot, bytes);
}

uint64_t VideoVae::EstimateCallBytes(const TileRect& tile, int64_t tiles) const {
  MutexLock lock(&peaks_mu_);
  auto it = peaks_.find(TileBucket(kWindowLatentFrames, tile.height_latent, tile.width_latent));
  if (it == peaks_.end() || it->second.empty()) return 0;
  const std::map<int64_t, uint64_t>& samples = it->second;
  if (auto exact = samples.find(tiles); exact != samples.end()) return exact->second;
  if (samples.size() == 1) {
    const auto& [k, bytes] = *samples.begin();
    const double scaled = static_cast<double>(bytes) * static_cast<double>(tiles) / k;
    return static_cast<uint64_t>(std::max(scaled, static_cast<double>(bytes)));
  }
  // Least squares bytes = a + b * k over the samples.
  double n = 0, sk = 0, sb = 0, skk = 0, skb = 0;
  for (const auto& [k, bytes] : samples) {
    n += 1;
    sk += k;
    sb += static_cast<double>(bytes);
    skk += static_cast<double>(k) * k;
    skb += static_cast<double>(k) * static_cast<double>(bytes);
  }
  const double slope = std::max(0.0, (n * skb - sk * sb) / (n * skk - sk * sk));
  const double intercept = (sb - slope * sk) / n;
  return static_cast<uint64_t>(std::max(0.0, intercept + slope * static_cast<double>(tiles)));
}

int64_t VideoVae::ChooseTilesPerCall(StackTiling requested, const TileGrid& grid,
                                     int64_t frames_out, std::string* reason,
                                     uint64_t* estimate) const {
  const StackTiling mode = requested == StackTiling::kDefault ? default_stack_tiling_ : requested;
  const int64_t tiles = grid.num_tiles();
  const int64_t group = LargestSameShapeGroup(grid);
  if (estimate != nullptr) *estimate = 0;
  switch (mode) {
    case StackTiling::kOn:
      *reason = "on: " + std::to_string(tiles) + " tile(s) per window in one call";
      return kAllTiles;
    case StackTiling::kAuto: {
      if (group < 2) {
        *reason = "auto: 1 tile per window, nothing to stack";
        return kSequential;
      }
      const TileRect tile = grid.tile(0);
      const std::string bucket =
          TileBucket(kWindowLatentFrames, tile.height_latent, tile.width_latent);
      if (EstimateCallBytes(tile, 1) == 0) {
        *reason = "auto: sequential; no measured peak for tile bucket " + bucket +
                  " yet (this request measures it)";
        return kSequential;
      }
      // Buffers of the request besides the call: the output video and one
      // decoded window with its raw tiles (float32).
      const uint64_t assembly = 4ull * 3 * grid.rows.extent_px * grid.cols.extent_px *
                                static_cast<uint64_t>(frames_out + 2 * kWindowPixelFrames);
      const uint64_t headroom = TensorMemoryHeadroom();
      for (int64_t k = group; k >= 2; k = k / 2) {
        const uint64_t need = EstimateCallBytes(tile, k) + assembly;
        if (need <= headroom) {
          if (estimate != nullptr) *estimate = need;
          *reason = "auto: " + std::to_string(k) + " of " + std::to_string(group) +
                    " same-shape tiles per call; estimated peak " + MiB(need) +
                    " (measured on tile bucket " + bucket + ") fits the headroom " + MiB(headroom);
          return k >= group ? kAllTiles : k;
        }
      }
      const uint64_t need = EstimateCallBytes(tile, 2) + assembly;
      if (estimate != nullptr) *estimate = need;
      *reason = "auto: sequential; a stack of 2 tiles needs an estimated " + MiB(need) +
                " (measured on tile bucket " + bucket + "), more than the headroom " +
                MiB(headroom);
      return kSequential;
    }
    case StackTiling::kDefault:
    case StackTiling::kOff:
      break;
  }
  *reason = "off: one decoder call per tile";
  return kSequential;
}

// Per-request state of the decoder calls.
struct VideoVae::CallContext {
  CompileMode compile = CompileMode::kOff;
  FaultInjection faults;
  int64_t planned_calls = 0;
  int64_t eager_calls = 0;
  // What each decoder call ran on, in order of first appearance, with the
  // number of calls (DescribeDecisions: the request's plan_decision).
  std::vector<std::pair<std::string, int64_t>> decisions;
  std::vector<std::string> plan_events;  // builds, failures
};

namespace {

// "plan float32 b1 t7 h16 w16: built (1 call); plan float32 b1 t7 h16 w16:
// hit (7 calls)": every decision of the request, not only the first call's
// (the first call's alone would contradict the call counts).
std::string DescribeDecisions(const std::vector<std::pair<std::string, int64_t>>& decisions) {
  std::string out;
  for (const auto& [decision, calls] : decisions) {
    if (!out.empty()) out += "; ";
    out += decision + " (" + std::to_string(calls) + (calls == 1 ? " call)" : " calls)");
  }
  return out;
}

}  // namespace

torch::Tensor VideoVae::DecodeTiles(const torch::Tensor& tiles, CallContext* ctx) {
  const int64_t k = tiles.size(0), t = tiles.size(2), h = tiles.size(3), w = tiles.size(4);
  auto decide = [&](const std::string& decision) {
    for (auto& [seen, calls] : ctx->decisions) {
      if (seen == decision) {
        ++calls;
        return;
      }
    }
    ctx->decisions.emplace_back(decision, 1);
  };
  // Injected faults (tests): thrown where a real failure would surface.
  if (k >= 2 && ctx->faults.oom_stacked > 0) {
    ctx->faults.oom_stacked -= 1;
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     "out of memory: injected fault oom_stacked in a call of ", k, " tiles");
  }
  if (k == 1 && ctx->faults.oom_sequential > 0) {
    ctx->faults.oom_sequential -= 1;
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     "out of memory: injected fault oom_sequential in a call of 1 tile");
  }
  const bool inject_tile_exception = ctx->faults.tile_exception > 0;
  if (inject_tile_exception) ctx->faults.tile_exception -= 1;

  const std::string key = BucketKey(k, t, h, w);
  std::shared_ptr<Vit3dDecoder::TilePlan> plan;
  bool first_run = false;  // plan built by this call, not cached yet
  if (ctx->compile != CompileMode::kOff) {
    plan = plans_.Find(key);
    if (plan != nullptr) {
      decide("plan " + key + ": hit");
    } else if (const std::string why = plans_.EagerOnlyReason(key); !why.empty()) {
      decide("eager: bucket " + key + " is eager-only (" + why + ")");
    } else if (plans_.ShouldBuild(key, ctx->compile == CompileMode::kOn)) {
      try {
        if (ctx->faults.plan_build > 0) {
          ctx->faults.plan_build -= 1;
          throw std::runtime_error("injected fault plan_build");
        }
        plan = decoder_->BuildTilePlan(k, t, h, w);
        first_run = true;
        decide("plan " + key + ": built");
      } catch (...) {
        const std::exception_ptr e = std::current_exception();
        if (IsOutOfMemory(e)) throw;
        const std::string msg(CurrentTorchErrorStatus("build").message());
        plans_.MarkEagerOnly(key, "build failed: " + msg);
        ctx->plan_events.push_back("plan " + key + " marked eager-only: build failed: " + msg);
        spdlog::warn("model '{}': compiled plan {} marked eager-only: build failed: {}", info_.name,
                     key, msg);
        decide("eager: plan build of " + key + " failed (" + msg + ")");
      }
    } else {
      decide("eager: first sighting of bucket " + key + " (plans are built from a later one)");
    }
  }

  ScopedTensorPeak peak;
  const uint64_t plan_bytes = plan != nullptr ? plan->bytes() : 0;
  torch::Tensor out;
  if (plan != nullptr) {
    try {
      if (inject_tile_exception) {
        throw std::runtime_error("injected fault tile_exception in a compiled-plan tile decode");
      }
      out = decoder_->Forward(tiles, plan.get());
      if (first_run) {
        plans_.Insert(key, plan, plan_bytes);
      } else {
        plans_.CountHit();
      }
      ctx->planned_calls += 1;
    } catch (...) {
      const std::exception_ptr e = std::current_exception();
      if (IsOutOfMemory(e)) throw;
      const std::string msg(CurrentTorchErrorStatus("run").message());
      const std::string why = (first_run ? "first run failed: " : "run failed: ") + msg;
      plans_.MarkEagerOnly(key, why);
      ctx->plan_events.push_back("plan " + key + " marked eager-only: " + why);
      spdlog::warn("model '{}': compiled plan {} marked eager-only: {}; rerunning eager",
                   info_.name, key, why);
      plan.reset();
    }
  } else if (inject_tile_exception) {
    throw std::runtime_error("injected fault tile_exception in an eager tile decode");
  }
  if (!out.defined()) {
    out = decoder_->Forward(tiles);
    ctx->eager_calls += 1;
    if (ctx->compile != CompileMode::kOff) plans_.CountEagerCall();
  }
  // What the call needed: its allocations above the live bytes at entry,
  // plus the plan's preallocated buffers (so plan and eager calls measure
  // the same footprint). The live bytes are process-wide, so a request
  // decoding on another rank meanwhile skews the figure either way
  // (tensor_memory.h); an estimate that turns out low is caught by the
  // failure ladder.
  // The counters see host tensors only (tensor_memory.h): a call on a
  // device records nothing, so stack_tiling auto stays sequential there
  // until device peaks come from the device's caching allocator.
  const uint64_t used = peak.Peak() - std::min(peak.Peak(), peak.start_live());
  if (TensorMemoryTracked() && device().is_cpu()) RecordCallPeak(t, h, w, k, used + plan_bytes);
  return out;
}

int64_t VideoVae::TilesPerUnit(const std::vector<int64_t>& latent_shape,
                               const DecodeSettings& settings) const {
  (void)settings;
  if (latent_shape.size() != 5) return 1;
  Result<TileGrid> grid = PlanTileGrid(latent_shape[3], latent_shape[4]);
  return grid.ok() ? grid->num_tiles() : 1;
}

Result<torch::Tensor> VideoVae::Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                                       DecodeReport* report) {
  Result<torch::Tensor> out = DecodeOnce(latent, settings, report);
  if (out.ok() || out.status().code() != StatusCode::kResourceExhausted) return out;
  // In a group every rank must make the same collectives: no rank-local
  // retry (the engine falls back to the output rank alone).
  if (settings.group != nullptr && settings.group->size() > 1) return out;
  // Out of memory with plans cached: their buffers are memory this request
  // could not use. Release them all and retry once, eager (the last rung).
  const uint64_t freed = plans_.Clear();
  if (freed == 0) return out;
  const std::string step =
      "released the compiled-plan cache (" + MiB(freed) +
      ") after out of memory; retrying eager: " + std::string(out.status().message());
  spdlog::warn("model '{}': {}", info_.name, step);
  DecodeSettings eager = settings;
  eager.compile = CompileMode::kOff;
  eager.faults = {};  // injected faults fire on the first attempt only
  DecodeReport retry;
  Result<torch::Tensor> again = DecodeOnce(latent, eager, report != nullptr ? &retry : nullptr);
  if (report != nullptr) {
    retry.tiling.fallbacks.insert(retry.tiling.fallbacks.begin(),
                                  {.kind = FallbackKind::kOutOfMemory, .detail = step});
    for (const auto& [name, seconds] : retry.timings.entries()) report->timings.Add(name, seconds);
    report->tiling = retry.tiling;
  }
  return again;
}

Result<torch::Tensor> VideoVae::DecodeOnce(const torch::Tensor& latent,
                                           const DecodeSettings& settings, DecodeReport* report) {
  VAED_ASSIGN_OR_RETURN(DecodePlan plan, PlanLatentOnDevice(latent));
  VAED_ASSIGN_OR_RETURN(TemporalPlan temporal, PlanTemporal(latent.size(2)));
  VAED_ASSIGN_OR_RETURN(TileGrid grid, PlanTileGrid(latent.size(3), latent.size(4)));
  std::string reason;
  uint64_t estimate = 0;
  const int64_t per_call =
      ChooseTilesPerCall(settings.stack_tiling, grid, plan.frames, &reason, &estimate);
  CallContext ctx;
  ctx.compile = settings.compile;
  ctx.faults = settings.faults;
  TiledDecodeStats stats;
  // Component timings of the work on the latent's device (interval_timer.h).
  stats.decode_time = IntervalTimer(latent.device());
  stats.span_time = IntervalTimer(latent.device());
  IntervalTimer total_time(latent.device());
  auto fill_report = [&]() {
    if (report == nullptr) return;  // nothing read: no wait for the device
    const double total = total_time.Seconds();
    report->timings.Add("video_vae.decode_latent", total);
    report->timings.Add("video_vae.tile_decode", stats.TileDecodeSeconds());
    report->timings.Add("video_vae.tile_merge", stats.TileMergeSeconds());
    if (stats.communication.collectives > 0) {
      report->timings.Add("video_vae.tile_communication", stats.communication.seconds);
    }
    TilingReport& t = report->tiling;
    t.tiled = true;
    t.tile_rows = grid.rows.tiles();
    t.tile_cols = grid.cols.tiles();
    t.windows = stats.windows;
    t.decoder_calls = stats.decoder_calls;
    t.max_tiles_per_call = stats.max_tiles_per_call;
    t.stacked = per_call > kSequential;  // the decision; max_tiles_per_call says what ran
    t.stack_decision = reason;
    t.planned_tiles_per_call = std::min(per_call, grid.num_tiles());
    t.final_tiles_per_call = std::min(stats.final_tiles_per_call, grid.num_tiles());
    t.fallbacks.clear();
    for (const std::string& f : stats.fallbacks) {
      t.fallbacks.push_back({.kind = FallbackKind::kOutOfMemory, .detail = f});
    }
    for (const std::string& e : ctx.plan_events) {
      t.fallbacks.push_back({.kind = FallbackKind::kCompile, .detail = e});
    }
    t.planned_calls = ctx.planned_calls;
    t.eager_calls = ctx.eager_calls;
    t.plan_decision = settings.compile == CompileMode::kOff ? "eager (compile off)"
                                                            : DescribeDecisions(ctx.decisions);
    t.estimated_peak_bytes = estimate;
    t.tiles_decoded_here = stats.communication.collectives > 0
                               ? stats.communication.tiles_decoded_here
                               : stats.windows * grid.num_tiles();
  };
  total_time.Start();
  try {
    torch::NoGradGuard no_grad;
    const torch::Tensor z = settings.latent_space == LatentSpace::kDenormalized
                                ? latent.contiguous()
                                : Denormalize(latent.contiguous());
    torch::Tensor video = DecodeVideo(
        z, temporal, grid,
        [&](const torch::Tensor& tiles) {
          // Deadline / cancellation between tile calls, never inside one.
          ThrowIfCancelled(settings.cancel,
                           "before tile call " + std::to_string(stats.decoder_calls + 1) + " (" +
                               std::to_string(stats.decoder_calls) + " done, window " +
                               std::to_string(stats.windows + 1) + " of " +
                               std::to_string(temporal.num_windows()) + ")");
          if (settings.faults.slow_unit_ms > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(settings.faults.slow_unit_ms));
          }
          TORCH_CHECK(stats.windows == 0 || settings.faults.later_unit_exception <= 0,
                      "injected fault later_unit_exception in window ", stats.windows + 1);
          return DecodeTiles(tiles, &ctx);
        },
        per_call, &stats,
        [&](int64_t done, int64_t total) {
          if (!settings.progress) return;
          settings.progress({.done = done,
                             .total = total,
                             .unit = "window",
                             .tiles_done = done * grid.num_tiles(),
                             .tiles_total = total * grid.num_tiles()});
        },
        settings.compile == CompileMode::kOff ? nullptr : &ramps_, settings.group,
        FinalFramesOf(settings));
    total_time.Stop();
    fill_report();
    if (!video.defined()) return video;  // a rank other than the group's output rank
    if (video.size(2) != plan.frames) {
      return Internal("model '" + info_.name + "' assembled " + std::to_string(video.size(2)) +
                      " frames; the plan has " + std::to_string(plan.frames));
    }
    // [1, 3, F, H, W] -> [F, 3, H, W] (a view; the executor formats it).
    return video.select(0, 0).permute({1, 0, 2, 3});
  } catch (...) {
    Status s = CurrentTorchErrorStatus("model '" + info_.name + "': decode of latent " +
                                       ShapeToString(latent.sizes().vec()));
    total_time.Stop();
    fill_report();
    if (s.code() == StatusCode::kResourceExhausted) {
      std::string ladder;
      for (const std::string& f : stats.fallbacks) ladder += "; " + f;
      return Status(StatusCode::kResourceExhausted,
                    std::string(s.message()) + " (tiles per call at the failure: " +
                        std::to_string(std::max<int64_t>(1, stats.final_tiles_per_call)) + ladder +
                        "; tensor memory " + MiB(LiveTensorBytes()) + " live, budget " +
                        (TensorMemoryBudget() > 0 ? MiB(TensorMemoryBudget()) : "none") + ")");
    }
    return s;
  }
}

Result<torch::Tensor> VideoVae::ToUnitRange(const torch::Tensor& raw) const {
  try {
    torch::NoGradGuard no_grad;
    // torchvision Normalize semantics: (x - mean') / std', then the
    // processor's clamp to [0, 1] (vae_processor.py revert_tensor).
    return ((raw - constants_.pixel_inv_mean) / constants_.pixel_inv_std).clamp_(0.0, 1.0);
  } catch (...) {
    return CurrentTorchErrorStatus("model '" + info_.name + "': inverse pixel normalisation");
  }
}

}  // namespace vaed::models::h3
