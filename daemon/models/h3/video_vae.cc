#include "daemon/models/h3/video_vae.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "daemon/models/h3/vit3d_decoder.h"
#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"

namespace vaed::models::h3 {

namespace {

using SteadyClock = std::chrono::steady_clock;

// ImageNet statistics of the pixel normalisation (spec §1.1 "Output space").
constexpr double kPixelMean[3] = {0.485, 0.456, 0.406};
constexpr double kPixelStd[3] = {0.229, 0.224, 0.225};

std::string DimName(size_t i) {
  static const char* const kNames[] = {"batch", "latent channels", "latent frames",
                                       "height in latent cells", "width in latent cells"};
  return "latent.shape[" + std::to_string(i) + "] (" + kNames[i] + ")";
}

const char* DtypeName(torch::ScalarType t) {
  return t == torch::kBFloat16 ? "bfloat16" : "float32";
}

}  // namespace

Result<std::unique_ptr<VideoVae>> VideoVae::Create(const VideoVaeOptions& options) {
  if (options.name.empty()) return InvalidArgument("h3 video model: name is empty");
  const std::string what = "model '" + options.name + "'";
  if (options.compute_dtype != torch::kFloat && options.compute_dtype != torch::kBFloat16) {
    return InvalidArgument(what + ": compute_dtype must be float32 or bfloat16");
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
        Vit3dDecoder::CreateRandom(config, options.seed, options.compute_dtype);
    if (!d.ok()) return d.status().WithContext(what);
    decoder = std::move(*d);
  } else {
    Result<std::unique_ptr<Vit3dDecoder>> d =
        Vit3dDecoder::Load(config, options.weights, options.compute_dtype);
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
  info.caps.tiled = true;
  info.caps.stack_tiling = true;
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
                     std::to_string(config.heads) + " heads; 256-px tiles, " +
                     info.compute_dtype + ")";
  if (demo) {
    spdlog::warn("{}: DEMO weights (seed {}), outputs are not video", what, options.seed);
  }
  return std::unique_ptr<VideoVae>(new VideoVae(std::move(info), std::move(config),
                                                std::move(decoder),
                                                options.default_stack_tiling));
}

VideoVae::VideoVae(ModelInfo info, VideoDecoderConfig config,
                   std::unique_ptr<Vit3dDecoder> decoder, StackTiling default_stack_tiling)
    : info_(std::move(info)),
      config_(std::move(config)),
      decoder_(std::move(decoder)),
      default_stack_tiling_(default_stack_tiling) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  latents_mean_ = torch::tensor(config_.latents_mean, f32).view({1, -1, 1, 1, 1});
  latents_std_ = torch::tensor(config_.latents_std, f32).view({1, -1, 1, 1, 1});
  // torchvision Normalize(mean' = -m/s, std' = 1/s): the constants are
  // computed in double, then used as float32 (golden README §8).
  std::vector<float> inv_mean, inv_std;
  for (int c = 0; c < 3; ++c) {
    inv_mean.push_back(static_cast<float>(-kPixelMean[c] / kPixelStd[c]));
    inv_std.push_back(static_cast<float>(1.0 / kPixelStd[c]));
  }
  pixel_inv_mean_ = torch::tensor(inv_mean, f32).view({1, 3, 1, 1});
  pixel_inv_std_ = torch::tensor(inv_std, f32).view({1, 3, 1, 1});
}

VideoVae::~VideoVae() = default;

Result<DecodePlan> VideoVae::Plan(DType latent_dtype,
                                  const std::vector<int64_t>& latent_shape) const {
  const std::string model = "model '" + info_.name + "'";
  VAED_RETURN_IF_ERROR(CheckLatentDtypeAndRank(
      info_, latent_dtype, latent_shape,
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
    return InvalidArgument(DimName(2) + " is " + std::to_string(latent_shape[2]) +
                           "; at most " + std::to_string(kMaxLatentFrames) + " per request");
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
  plan.shape_bucket = info_.name + ":" + std::to_string(latent_shape[3]) + "x" +
                      std::to_string(latent_shape[4]);
  return plan;
}

torch::Tensor VideoVae::Denormalize(const torch::Tensor& latent) const {
  // Multiply, then add, in float32 (the pipeline's de-normalisation that
  // produced the golden latent_denorm).
  return latent * latents_std_ + latents_mean_;
}

TileScheduling VideoVae::ChooseScheduling(StackTiling requested, const TileGrid& grid,
                                          std::string* reason) const {
  const StackTiling mode = requested == StackTiling::kDefault ? default_stack_tiling_ : requested;
  const int64_t tiles = grid.num_tiles();
  switch (mode) {
    case StackTiling::kOn:
      *reason = "on: " + std::to_string(tiles) + " tile(s) per window in one call";
      return TileScheduling::kStacked;
    case StackTiling::kAuto:
      // Stacking pays where one batched kernel replaces several launches
      // (GPU). This CPU decoder runs one GEMM per tile even in a stacked
      // call (batch-invariant bytes, vit3d_decoder.h), so stacking only
      // adds peak memory: measured 0.98x (fp32) and 0.94x (bf16) of the
      // sequential speed, 2x2 tiles x 2 windows at full width
      // (vaed_bench_h3_video). `auto` therefore keeps tiles sequential here.
      if (tiles < 2) {
        *reason = "auto: 1 tile per window, nothing to stack";
      } else {
        *reason = "auto: sequential; " + std::to_string(tiles) +
                  " tiles per window, but stacking is slower on the CPU decoder "
                  "(one GEMM per tile either way)";
      }
      return TileScheduling::kSequential;
    case StackTiling::kDefault:
    case StackTiling::kOff:
      break;
  }
  *reason = "off: one decoder call per tile";
  return TileScheduling::kSequential;
}

Result<torch::Tensor> VideoVae::Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                                       DecodeReport* report) {
  VAED_ASSIGN_OR_RETURN(DecodePlan plan, PlanCpuLatent(latent));
  VAED_ASSIGN_OR_RETURN(TemporalPlan temporal, PlanTemporal(latent.size(2)));
  VAED_ASSIGN_OR_RETURN(TileGrid grid, PlanTileGrid(latent.size(3), latent.size(4)));
  std::string reason;
  const TileScheduling scheduling = ChooseScheduling(settings.stack_tiling, grid, &reason);
  try {
    torch::NoGradGuard no_grad;
    const auto start = SteadyClock::now();
    const torch::Tensor z = Denormalize(latent.contiguous());
    TiledDecodeStats stats;
    const Vit3dDecoder& vit = *decoder_;
    torch::Tensor video = DecodeVideo(
        z, temporal, grid, [&vit](const torch::Tensor& tiles) { return vit.Forward(tiles); },
        scheduling, &stats);
    const double total = std::chrono::duration<double>(SteadyClock::now() - start).count();
    if (report != nullptr) {
      report->timings.Add("video_vae.decode_latent", total);
      report->timings.Add("video_vae.tile_decode", stats.tile_decode_seconds);
      report->timings.Add("video_vae.tile_merge", stats.tile_merge_seconds);
      TilingReport& t = report->tiling;
      t.tiled = true;
      t.tile_rows = grid.rows.tiles();
      t.tile_cols = grid.cols.tiles();
      t.windows = stats.windows;
      t.decoder_calls = stats.decoder_calls;
      t.max_tiles_per_call = stats.max_tiles_per_call;
      t.stacked = scheduling == TileScheduling::kStacked;
      t.stack_decision = reason;
    }
    if (video.size(2) != plan.frames) {
      return Internal("model '" + info_.name + "' assembled " + std::to_string(video.size(2)) +
                      " frames; the plan has " + std::to_string(plan.frames));
    }
    // [1, 3, F, H, W] -> [F, 3, H, W] (a view; the executor formats it).
    return video.select(0, 0).permute({1, 0, 2, 3});
  } catch (...) {
    return CurrentTorchErrorStatus("model '" + info_.name + "': decode of latent " +
                                   ShapeToString(latent.sizes().vec()));
  }
}

Result<torch::Tensor> VideoVae::ToUnitRange(const torch::Tensor& raw) const {
  try {
    torch::NoGradGuard no_grad;
    // torchvision Normalize semantics: (x - mean') / std', then the
    // processor's clamp to [0, 1] (vae_processor.py revert_tensor).
    return ((raw - pixel_inv_mean_) / pixel_inv_std_).clamp_(0.0, 1.0);
  } catch (...) {
    return CurrentTorchErrorStatus("model '" + info_.name + "': inverse pixel normalisation");
  }
}

}  // namespace vaed::models::h3
