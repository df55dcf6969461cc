// TAEF2: the tiny autoencoder for the FLUX.2 VAE latent space (decoder only).
//
// Architecture, weights and references: shared/data/taef2/README.md §4
// (decoder table and Block definition), weights from
// github.com/madebyollin/taesd commit 5cccb12 (MIT license), converted
// unchanged to taef2_decoder.safetensors (79 F16 tensors).
//
// Contract (units: latent cells in, pixels out):
//   input   float32 NCHW latent [frames, 32, height_latent, width_latent],
//           raw encoder output (no scale/shift; the decoder's first op is the
//           soft clamp 3*tanh(x/3), so callers must not apply it).
//   output  float32 NCHW [frames, 3, 8*height_latent, 8*width_latent], RGB,
//           nominally [0, 1] but NOT clamped (see postprocess.h for uint8).
// Every frame is decoded independently (frames are the batch dim), so the
// frame batch size does not change the math; the GroupNorm statistics of
// modules 3-5 cover the whole spatial extent of each frame (README §4), so
// decoding spatial tiles separately would NOT give the same output.
//
// Compute: LibTorch functional ops in float32 on the model's device (CPU
// unless created for another) with the weights cast from fp16 to fp32 at
// load (the reference path of README §3). Matches the
// official PyTorch module to <= 1e-4 max abs difference.
//
// Hybrid tiled decode (README §5, "decoded_tiled_hybrid_f32"): modules 0-5
// (the latent-resolution stage holding all three GroupNorms) run on the
// whole latent; modules 6-19, which are local, run per spatial tile of the
// resulting feature map and the tiles are blended. Plain tiling of the whole
// decoder is deliberately not offered: per-tile GroupNorm statistics make it
// a poor match (29 dB vs the untiled decode, README §5); the hybrid scheme
// matches to ~63 dB with memory bounded by the tile size after module 5.
//
// Thread-safety: Plan(), info(), TilesPerUnit() and PlanTaef2Tiles() may be
// called from any thread. Decode() and DecodeTiledHybrid() must be called by
// one thread at a time (the rank that owns this instance; vae_model.h); they
// use LibTorch's intra-op thread pool (at::get_num_threads()).
#ifndef VAED_DAEMON_MODELS_TAEF2_H_
#define VAED_DAEMON_MODELS_TAEF2_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/models/device_placement.h"
#include "daemon/models/taef2_tiling.h"
#include "daemon/models/vae_model.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::models {

struct Taef2Options {
  // Registry name reported in info() and in error messages.
  std::string name = "taef2";
  // Path of taef2_decoder.safetensors (79 tensors, original state_dict key
  // names; F16, BF16 or F32, all cast to float32). Required.
  std::string weights_path;
  // Latent frames per forward call. Larger batches use more memory
  // (activations of 64 channels at 8x resolution: about
  // frame_batch * 64 * 64*h*w * 4 bytes * ~3 live tensors) for a little
  // more throughput; the output does not depend on it. Must be in [1, 4096].
  int64_t frame_batch = 4;
  // Where the model runs (ModelDevice, device_placement.h).
  ModelDevice device = torch::kCPU;
};

class Taef2Decoder final : public VaeModel {
 public:
  // TAEF2 constants (README §4).
  static constexpr int64_t kLatentChannels = 32;
  static constexpr int64_t kOutputChannels = 3;
  static constexpr int64_t kUpscale = kTaef2PixelsPerLatent;  // pixels per latent cell, each axis
  // Upper bounds Plan() enforces, to refuse requests before any allocation:
  // latent extent per axis (latent cells; 2048 px) and frames. Peak memory
  // measured for one 256x256-latent frame (2048x2048 px): 12.1 GB; the
  // daemon's tensor memory budget (tensor_memory.h) bounds what runs.
  static constexpr int64_t kMaxLatentExtent = 256;
  // Frames per forward call are reduced so that frames x latent cells stay
  // within this (128x128 latent cells = one 1024x1024 px frame, ~3 GB peak);
  // a single frame larger than this still runs alone.
  static constexpr int64_t kMaxCellsPerForward = 128 * 128;
  static constexpr int64_t kMaxFrames = 4096;
  // Number of decoder tensors in the weights file.
  static constexpr size_t kNumWeightTensors = 79;

  // Loads the decoder weights from `options.weights_path`, computes the
  // file's SHA-256 (logged at info level and reported in
  // info().weights_sha256) and returns a ready model.
  // Errors:
  //   kInvalidArgument  options.name empty, options.weights_path empty,
  //                     options.frame_batch outside [1, 4096]; the file is
  //                     not valid safetensors; a tensor has the wrong dtype
  //                     (not F16/BF16/F32) or shape (the message names the
  //                     tensor, its shape and the expected shape); the file
  //                     holds tensors that are not TAEF2 decoder parameters
  //                     (named; e.g. the encoder file).
  //   kNotFound         the file does not exist, or a decoder tensor is
  //                     missing (named).
  //   kIoError / kResourceExhausted / kInternal  OS or LibTorch failures,
  //                     including placing the weights on options.device.
  static Result<std::unique_ptr<Taef2Decoder>> Create(const Taef2Options& options);

  // Builds the same architecture with deterministic pseudo-random weights
  // drawn from a torch CPU generator seeded with `seed` (the same seed gives
  // bitwise-identical weights and outputs on the same build and thread
  // count). The init is scaled so that outputs stay finite and mostly in
  // about [0, 1]; they are not images. info(): kind "demo",
  // demo_weights = true, weights_path/weights_sha256 empty, description
  // starting "DEMO: deterministic seeded weights, not a trained model".
  // Logs a warning. The weights are drawn on the host (the same values
  // for every device), then moved to `device`. Errors: kInvalidArgument for
  // an empty `name`; LibTorch failures as kResourceExhausted / kInternal.
  static Result<std::unique_ptr<Taef2Decoder>> CreateDemo(const std::string& name, uint64_t seed,
                                                          torch::Device device = torch::kCPU);

  ~Taef2Decoder() override;
  Taef2Decoder(const Taef2Decoder&) = delete;
  Taef2Decoder& operator=(const Taef2Decoder&) = delete;

  const ModelInfo& info() const override { return info_; }
  torch::Device device() const override { return device_; }

  // Accepts latent_dtype float32 and latent_shape
  // [frames, 32, height_latent, width_latent] with 1 <= frames <= kMaxFrames
  // (4096) and 1 <= height_latent, width_latent <= kMaxLatentExtent (256).
  // Plan: frames, channels 3, height_px = 8*height_latent,
  // width_px = 8*width_latent, shape_bucket
  // "<name>:<height_latent>x<width_latent>" ("taef2:64x64").
  // Errors (kInvalidArgument) name the field: latent.dtype, latent.shape
  // (rank), latent.shape[0..3].
  Result<DecodePlan> Plan(DType latent_dtype,
                          const std::vector<int64_t>& latent_shape) const override;

  // With settings.tiling: the hybrid tiling's tiles (per frame batch);
  // otherwise 0 (untiled).
  int64_t TilesPerUnit(const std::vector<int64_t>& latent_shape,
                       const DecodeSettings& settings) const override;

  // Decodes `latent` (float32 [N, 32, h, w] on device(), any strides) into
  // a new float32 tensor [N, 3, 8h, 8w] on device(), frame_batch frames per
  // forward pass,
  // without autograd. Adds "taef2.decode_latent" (seconds, wall clock) to the timings of
  // `report` when it is not null. Untiled unless settings.tiling is set
  // (the diagnostic knob, capability "tunable_tiling"): then it runs
  // DecodeTiledHybrid() with that tile size and overlap.
  // Errors: the Plan() errors for a bad latent; kInvalidArgument naming
  // latent.device for a latent on another device; kResourceExhausted when LibTorch fails to
  // allocate; kInternal for any other LibTorch error; settings.cancel's status when it says stop
  // (checked before each frame batch). Never throws.
  using VaeModel::Decode;
  Result<torch::Tensor> Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                               DecodeReport* report) override;

  // Hybrid tiled decode (README §5): per frame batch, modules 0-5 run on the
  // whole latent [n, 32, h, w] -> feature map [n, 64, h, w]; then for each
  // tile of PlanTaef2Tiles(h, w, options.tile_latent, options.overlap_latent)
  // in row-major order, modules 6-19 run on feat[:, :, y:y+th, x:x+tw] and
  // the result is accumulated into the output as
  //   out += (w_y(y) * w_x(x)) * tile      (float32, weights from
  //                                         Taef2AxisTiles::BlendWeights)
  // starting from zeros, without normalisation. Returns a new float32 tensor
  // [N, 3, 8h, 8w] like Decode(), raw (not clamped). Reproduces the stored
  // "decoded_tiled_hybrid_f32" reference (README §5 layout, tile 40 overlap
  // 16; measured bitwise with 2 threads, tested to 1e-5) and matches the
  // untiled decode to 63.18 dB (clamped, peak 1); with one tile covering the
  // whole latent it equals Decode() exactly. Frame batches are frame_batch frames, reduced so that
  // frames x tile cells stay within kMaxCellsPerForward; the output does not
  // depend on them.
  // Adds to `report` (may be null) the timings "taef2.stem" (modules 0-5),
  // "taef2.tiles" (modules 6-19 and blending) and "taef2.decode_latent"
  // (all; seconds, wall clock), and report->tiling (tiled, tile_rows,
  // tile_cols, decoder_calls = tiles x frame batches, max_tiles_per_call 1).
  // Errors: the Plan() errors for a bad latent (including its extent bounds);
  // the PlanTaef2Tiles() errors for bad options; kInvalidArgument naming
  // latent.device for a latent on another device; kResourceExhausted when LibTorch fails to
  // allocate; kInternal for any other LibTorch error; settings.cancel's status when it says stop
  // (checked before each frame batch). Never throws.
  Result<torch::Tensor> DecodeTiledHybrid(const torch::Tensor& latent,
                                          const Taef2TilingOptions& options, DecodeReport* report,
                                          const DecodeSettings& settings = {});

 private:
  // The weights and their state_dict layout (taef2_network.h).
  struct Weights;
  // The blend weights of one tile plan (taef2.cc).
  struct HybridBlend;

  Taef2Decoder(ModelInfo info, std::unique_ptr<Weights> weights, int64_t frame_batch,
               torch::Device device);

  // One forward pass over a batch of frames; may throw c10::Error.
  // Forward(x) == Tail(Stem(x)), op for op.
  torch::Tensor Forward(const torch::Tensor& latent) const;
  // Modules 0-5: latent [n, 32, h, w] -> features [n, 64, h, w].
  torch::Tensor Stem(const torch::Tensor& latent) const;
  // Modules 6-19: features [n, 64, h, w] -> output [n, 3, 8h, 8w].
  torch::Tensor Tail(const torch::Tensor& features) const;
  // The tiles of one frame batch of DecodeTiledHybrid(): Tail() of each
  // tile of `features` [n, 64, h, w] blended into `out` [n, 3, 8h, 8w] (a
  // view of the output; undefined on the ranks of a tile-parallel decode
  // other than rank 0, which alone blends). Returns the Tail() calls this
  // rank made. May throw c10::Error and CollectiveFailed.
  int64_t DecodeHybridTiles(const torch::Tensor& features, const Taef2TilePlan& tiles,
                            const HybridBlend& blend, TileGroup* group, torch::Tensor out,
                            TileCommunicationStats* communication) const;

  ModelInfo info_;
  std::unique_ptr<Weights> weights_;
  int64_t frame_batch_;
  torch::Device device_;
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TAEF2_H_
