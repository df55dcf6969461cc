// MiniMax-H3 video VAE decoder as a served model: latent contract, the
// official tiled decode around the ViT3D decoder, and its post-processing.
//
// Sources: spec/h3_vae.md §1 (decoder), §2 (tiling, windows, blend), the
// official code MiniMax-AI/MiniMax-H3 FL2VA/video_vae at 8d8824e; golden
// vectors in shared/golden/h3 (README §2 describes how the official decode
// was driven, which is what Decode() reproduces).
//
// Contract (units: latent cells and latent frames in; pixels and pixel
// frames out):
//   input   float32 [1, 24, T, height_latent, width_latent], the DiT's
//           normalised latent; Decode() de-normalises it per channel
//           (latent * latents_std + latents_mean, config values).
//           T >= 3; T = 5k+2 decodes to 17k+5 pixel frames, other T as the
//           official planner pads them (video_tiling.h PlanTemporal).
//   output  float32 [frames, 3, 16*height_latent, 16*width_latent], raw
//           decoder output in ImageNet-normalised RGB (not clamped).
//           ToUnitRange() applies the official inverse normalisation
//           (torchvision Normalize(-m/s, 1/s), then clamp to [0, 1]).
//
// Tiling is model semantics (256-px tiles, >= 64-px overlaps, 7-latent-frame
// windows): not configurable. Per request only the scheduling of tiles can
// change (sequential or stacked), which does not change the output in fp32
// on CPU (tests/models/h3_video_vae_test.cc checks bytes).
//
// Compute dtype: float32 (exact path) or bfloat16 (the official
// fp16-autocast recipe with bf16, spec §1.6; faster on CPUs with oneDNN
// bf16, error against float32 measured in the tests and benchmark).
//
// Thread-safety: Plan(), info() and ToUnitRange() may be called from any
// thread; Decode() by one thread at a time (the owning executor).
#ifndef VAED_DAEMON_MODELS_H3_VIDEO_VAE_H_
#define VAED_DAEMON_MODELS_H3_VIDEO_VAE_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/models/h3/tiled_decode.h"
#include "daemon/models/h3/video_config.h"
#include "daemon/models/vae_model.h"
#include "vaed/status.h"

namespace vaed::models::h3 {

class Vit3dDecoder;

struct VideoVaeOptions {
  // Registry name reported in info() and error messages.
  std::string name = "h3_video";
  // Decoder configuration file (VideoDecoderConfig::LoadJsonFile formats).
  // Empty: the released model's configuration (VideoDecoderConfig::Official()).
  std::string config_path;
  // A configuration given directly (benchmarks, tests); wins over
  // config_path. Not owned; only read during Create().
  const VideoDecoderConfig* config = nullptr;
  // Weights: one safetensors file, the shards of a diffusers checkpoint, or
  // one *.safetensors.index.json. Empty: deterministic random weights from
  // `seed` (demo; flagged in info() and every reply).
  std::vector<std::string> weights;
  uint64_t seed = 0;
  // torch::kFloat (exact) or torch::kBFloat16.
  torch::ScalarType compute_dtype = torch::kFloat;
  // Tile scheduling when a request does not choose (kDefault means kOff).
  StackTiling default_stack_tiling = StackTiling::kOff;
};

class VideoVae final : public VaeModel {
 public:
  static constexpr int64_t kLatentChannels = 24;
  // Bounds Plan() enforces before anything is allocated: latent cells per
  // spatial axis (160 = 2560 px) and latent frames (512 = 1740 pixel frames).
  // A per-request memory budget replaces these later.
  static constexpr int64_t kMaxLatentExtent = 160;
  static constexpr int64_t kMaxLatentFrames = 512;

  // Loads the configuration and weights (or builds random ones). Errors:
  // the config loader's and weight loader's (kInvalidArgument naming the
  // field or tensor, kNotFound for missing files), kInvalidArgument for an
  // empty name, a compute dtype other than float32/bfloat16, or
  // default_stack_tiling kDefault.
  static Result<std::unique_ptr<VideoVae>> Create(const VideoVaeOptions& options);

  ~VideoVae() override;
  VideoVae(const VideoVae&) = delete;
  VideoVae& operator=(const VideoVae&) = delete;

  const ModelInfo& info() const override { return info_; }
  const VideoDecoderConfig& config() const { return config_; }

  // Accepts float32 [1, 24, T, h, w] with 3 <= T <= 512 and
  // 1 <= h, w <= 160. Plan: frames = official frame count, channels 3,
  // 16h x 16w px, shape bucket "<name>:<h>x<w>". Errors (kInvalidArgument)
  // name the field (latent.dtype, latent.shape, latent.shape[i] (what)) and
  // the rule.
  Result<DecodePlan> Plan(DType latent_dtype,
                          const std::vector<int64_t>& latent_shape) const override;

  // Decodes (contract above). Timings: "video_vae.decode_latent" (whole
  // call), "video_vae.tile_decode" (decoder calls), "video_vae.tile_merge"
  // (slicing, blending, temporal assembly); tiling facts in
  // report->tiling. Errors: Plan()'s; kResourceExhausted / kInternal from
  // LibTorch. Never throws.
  using VaeModel::Decode;
  Result<torch::Tensor> Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                               DecodeReport* report) override;

  // Official inverse normalisation + clamp (contract above).
  Result<torch::Tensor> ToUnitRange(const torch::Tensor& raw) const override;

  // The latent de-normalisation alone: float32 [B, 24, ...] ->
  // latent * std + mean per channel (multiply, then add).
  torch::Tensor Denormalize(const torch::Tensor& latent) const;

  // The scheduling a request with `requested` gets for `grid`, and why.
  TileScheduling ChooseScheduling(StackTiling requested, const TileGrid& grid,
                                  std::string* reason) const;

  // The ViT3D decoder (tests and benchmarks call it on single tiles).
  const Vit3dDecoder& decoder() const { return *decoder_; }

 private:
  VideoVae(ModelInfo info, VideoDecoderConfig config, std::unique_ptr<Vit3dDecoder> decoder,
           StackTiling default_stack_tiling);

  ModelInfo info_;
  VideoDecoderConfig config_;
  std::unique_ptr<Vit3dDecoder> decoder_;
  StackTiling default_stack_tiling_;
  torch::Tensor latents_mean_;  // float32 [1, 24, 1, 1, 1]
  torch::Tensor latents_std_;   // float32 [1, 24, 1, 1, 1]
  torch::Tensor pixel_inv_mean_;  // float32 [1, 3, 1, 1]: -m/s in double, cast
  torch::Tensor pixel_inv_std_;   // float32 [1, 3, 1, 1]: 1/s in double, cast
};

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_VIDEO_VAE_H_
