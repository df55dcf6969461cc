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
// Production runtime (DESIGN.md §2.6-2.8):
//   compiled plans  per decoder-call bucket (dtype, tiles per call, tile
//                   shape t x h x w; t is the 7-latent-frame window): the
//                   RoPE tables and workspace buffers (Vit3dDecoder::
//                   TilePlan) and the blend ramps, built once, kept in an
//                   LRU PlanCache; same bytes as eager. Weights are not
//                   re-packed: the fp32 GEMMs go to MKL, which packs per
//                   call, and a oneDNN-packed fp32 linear returns other
//                   bits; no CUDA graphs in a CPU build.
//   failure ladder  an allocation failure in a stacked call retries the
//                   same tiles at half the stack, down to one tile per call
//                   (tiled_decode.h); an exception in a plan's build or
//                   run marks its bucket eager-only and reruns eager.
//   stack auto      memory-gated with peaks measured per tile bucket
//                   (ChooseTilesPerCall).
//
// Compute dtype: float32 (exact path), float16 (the official fp16-autocast
// recipe, spec §1.6; GPU only) or bfloat16 (the same recipe with bf16;
// faster on CPUs with oneDNN bf16, error against float32 measured in the
// tests and benchmark).
//
// Thread-safety: Plan(), info(), TilesPerUnit(), ToUnitRange(),
// ChooseTilesPerCall(), EstimateCallBytes() and plan_cache() may be called
// from any thread; Decode() by one thread at a time (the rank that owns this
// instance; vae_model.h).
#ifndef VAED_DAEMON_MODELS_H3_VIDEO_VAE_H_
#define VAED_DAEMON_MODELS_H3_VIDEO_VAE_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/models/device_placement.h"
#include "daemon/models/h3/tiled_decode.h"
#include "daemon/models/h3/video_config.h"
#include "daemon/models/h3/vit3d_decoder.h"
#include "daemon/models/plan_cache.h"
#include "daemon/models/vae_model.h"
#include "vaed/mutex.h"
#include "vaed/status.h"

namespace vaed::models::h3 {

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
  // torch::kFloat (exact), torch::kHalf (GPU only) or torch::kBFloat16.
  torch::ScalarType compute_dtype = torch::kFloat;
  // Tile scheduling when a request does not choose (kDefault means kOff).
  StackTiling default_stack_tiling = StackTiling::kOff;
  // Compiled plans (plan_cache.h): at most plan_cache_capacity buckets;
  // a bucket is built from its plan_after_sightings-th decoder call on, or
  // at once by a decode with CompileMode::kOn (the daemon's warm-up of its
  // `warm_shapes`, engine/warm_up.h, builds them that way before READY).
  size_t plan_cache_capacity = 8;
  int plan_after_sightings = 2;
  // Where the model runs (ModelDevice, device_placement.h).
  ModelDevice device = torch::kCPU;
};

class VideoVae final : public VaeModel {
 public:
  static constexpr int64_t kLatentChannels = 24;
  // Sanity bounds Plan() enforces before any arithmetic on the extents:
  // latent cells per spatial axis (16384 = 262,144 px) and latent frames
  // (16384 = 65,533 pixel frames). They are not the serving limit: that is
  // memory. Plan() estimates the decode's peak (h3/video_memory.h) and the
  // daemon refuses what cannot fit in what a request may use (while
  // the official decoder itself accepts any extent); within it, the tensor
  // memory budget (tensor_memory.h) and the stacking failure ladder bound
  // what a decode allocates.
  static constexpr int64_t kMaxLatentExtent = 16384;
  static constexpr int64_t kMaxLatentFrames = 16384;
  // Latent frames of the daemon's warm-up latent: two temporal windows
  // (12 = 5k+2 with k = 2, 39 pixel frames), so a warm-up decode runs
  // every step a request runs: the 7-frame window's tile calls, the tile
  // blend and the 5-frame cross-fade between windows. One window would
  // skip the cross-fade; more add nothing new.
  static constexpr int64_t kWarmUpLatentFrames = 12;

  // The float32 latent the daemon's warm-up decodes for the canvas
  // height_latent x width_latent (a `warm_shapes` entry):
  // [1, 24, kWarmUpLatentFrames, height_latent, width_latent].
  static std::vector<int64_t> WarmUpLatentShape(int64_t height_latent, int64_t width_latent) {
    return {1, kLatentChannels, kWarmUpLatentFrames, height_latent, width_latent};
  }

  // Loads the configuration and weights (or builds random ones). Errors:
  // the config loader's and weight loader's (kInvalidArgument naming the
  // field or tensor, kNotFound for missing files), kInvalidArgument for an
  // empty name, a compute dtype other than float32/float16/bfloat16,
  // float16 on the CPU, or
  // default_stack_tiling kDefault; LibTorch's (kResourceExhausted /
  // kInternal) when the tensors cannot be placed on options.device.
  static Result<std::unique_ptr<VideoVae>> Create(const VideoVaeOptions& options);

  ~VideoVae() override;
  VideoVae(const VideoVae&) = delete;
  VideoVae& operator=(const VideoVae&) = delete;

  const ModelInfo& info() const override { return info_; }
  torch::Device device() const override { return decoder_->device(); }
  const VideoDecoderConfig& config() const { return config_; }

  // Accepts float32 [1, 24, T, h, w] with 3 <= T <= kMaxLatentFrames and
  // 1 <= h, w <= kMaxLatentExtent. Plan: frames = official frame count,
  // channels 3, 16h x 16w px, shape bucket "<name>:<h>x<w>", and the
  // estimated peak memory (h3/video_memory.h). Errors (kInvalidArgument)
  // name the field (latent.dtype, latent.shape, latent.shape[i] (what)) and
  // the rule.
  Result<DecodePlan> Plan(DType latent_dtype,
                          const std::vector<int64_t>& latent_shape) const override;

  // Tiles of the official 256-px grid per temporal window (1 for a shape
  // Plan() refuses).
  int64_t TilesPerUnit(const std::vector<int64_t>& latent_shape,
                       const DecodeSettings& settings) const override;

  // Decodes (contract above). An out-of-memory failure while compiled plans
  // are cached releases them all and retries once eager (the step is the
  // first line of report->tiling.fallbacks). Timings: "video_vae.decode_latent" (whole
  // call), "video_vae.tile_decode" (decoder calls), "video_vae.tile_merge"
  // (slicing, blending, temporal assembly); tiling facts in
  // report->tiling. Errors: Plan()'s; kResourceExhausted / kInternal from
  // LibTorch. Never throws.
  using VaeModel::Decode;
  Result<torch::Tensor> Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                               DecodeReport* report) override;

  // Official inverse normalisation + clamp (contract above).
  Result<torch::Tensor> ToUnitRange(const torch::Tensor& raw) const override;

  // The latent de-normalisation alone: float32 [B, 24, ...] on device() ->
  // latent * std + mean per channel (multiply, then add).
  torch::Tensor Denormalize(const torch::Tensor& latent) const;

  // Tiles per decoder call (kSequential .. kAllTiles) a request with
  // `requested` gets for `grid`, and why (`reason`). auto stacks only when
  // a window has >= 2 same-shape tiles AND the memory estimate of the
  // stacked call plus the request's assembly buffers fits the headroom
  // (tensor_memory.h: budget - live, or MemAvailable without a budget);
  // the estimate comes from peaks measured on earlier calls of the same
  // tile bucket (EstimateCallBytes), never from a formula; with no
  // measurement yet, auto runs sequential and measures. When all tiles do
  // not fit, the largest halving (K/2, K/4, ...) >= 2 that fits is used.
  // `estimate` (may be null) receives the bytes the decision assumed.
  int64_t ChooseTilesPerCall(StackTiling requested, const TileGrid& grid, int64_t frames_out,
                             std::string* reason, uint64_t* estimate = nullptr) const;

  // Measured-peak estimate of one decoder call with `tiles` tiles of
  // grid's tile shape (bytes of tensors the call allocates, output and
  // workspace included); 0 when no call of this tile bucket was measured.
  // One sample at k tiles: scaled by tiles/k (over-estimates: the fixed
  // part scales too); two or more: the least-squares line through them.
  uint64_t EstimateCallBytes(const TileRect& tile, int64_t tiles) const;

  std::optional<PlanCacheSnapshot> plan_cache() const override { return plans_.Snapshot(); }

  // The ViT3D decoder (tests and benchmarks call it on single tiles).
  const Vit3dDecoder& decoder() const { return *decoder_; }

 private:
  // The constant tensors of the pre- and post-processing, on the model's
  // device.
  struct Constants {
    torch::Tensor latents_mean;    // float32 [1, 24, 1, 1, 1]
    torch::Tensor latents_std;     // float32 [1, 24, 1, 1, 1]
    torch::Tensor pixel_inv_mean;  // float32 [1, 3, 1, 1]: -m/s in double, cast
    torch::Tensor pixel_inv_std;   // float32 [1, 3, 1, 1]: 1/s in double, cast
  };
  // Builds them on the host from `config` and moves them to `device`.
  // Errors: LibTorch's, naming `what`.
  static Result<Constants> MakeConstants(const VideoDecoderConfig& config,
                                         const torch::Device& device, const std::string& what);

  VideoVae(ModelInfo info, VideoDecoderConfig config, std::unique_ptr<Vit3dDecoder> decoder,
           Constants constants, const VideoVaeOptions& options);

  // One decode attempt; Decode() adds the plan-release retry around it.
  Result<torch::Tensor> DecodeOnce(const torch::Tensor& latent, const DecodeSettings& settings,
                                   DecodeReport* report);
  // Per-request state of the decoder calls (plans, faults, counts).
  struct CallContext;
  // One decoder call on `tiles` [k, 24, t, h, w]: compiled plan or eager
  // per the policy, fault injection, peak measurement.
  torch::Tensor DecodeTiles(const torch::Tensor& tiles, CallContext* ctx);
  std::string BucketKey(int64_t tiles, int64_t t, int64_t h, int64_t w) const;
  void RecordCallPeak(int64_t t, int64_t h, int64_t w, int64_t tiles, uint64_t bytes);

  ModelInfo info_;
  VideoDecoderConfig config_;
  std::unique_ptr<Vit3dDecoder> decoder_;
  StackTiling default_stack_tiling_;
  PlanCache<Vit3dDecoder::TilePlan> plans_;
  BlendRamps ramps_;  // the owning rank's thread only (Decode())
  // Measured call peaks: tile bucket "t7 h16 w16" -> tiles per call ->
  // highest bytes seen. Guarded by peaks_mu_ (ChooseTilesPerCall is const
  // and may be asked from any thread).
  mutable Mutex peaks_mu_;
  std::map<std::string, std::map<int64_t, uint64_t>> peaks_ VAED_GUARDED_BY(peaks_mu_);
  Constants constants_;  // on device()
};

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_VIDEO_VAE_H_
