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
// Compute: LibTorch functional ops on CPU in float32 with the weights cast
// from fp16 to fp32 at load (the reference path of README §3). Matches the
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
// Thread-safety: Plan(), info() and PlanTaef2Tiles() may be called from any
// thread. Decode() and DecodeTiledHybrid() must be called by one thread at a
// time (the owning executor); they use LibTorch's intra-op thread pool
// (at::get_num_threads()).
#ifndef VAED_DAEMON_MODELS_TAEF2_H_
#define VAED_DAEMON_MODELS_TAEF2_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/models/vae_model.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::models {

// ---- Tile plan for the hybrid tiled decode (pure; no LibTorch) ----
//
// Units: `_latent` is latent cells, `_px` is output pixels; one latent cell
// is Taef2Decoder::kUpscale = 8 pixels along each axis.

// Tiles along one axis. Layout (README §5, "To apply the rule to another
// layout"): when the axis fits in one tile (extent_latent <= tile_latent)
// there is a single tile [0, extent_latent); otherwise the starts are 0,
// then every tile_latent - overlap_latent cells while the tile would end
// before the axis does, and the last tile is aligned to the end
// (start = extent_latent - tile_latent). Starts strictly increase and every
// tile has length tile_extent_latent. The last overlap may therefore be
// larger than overlap_latent (64 cells, tile 40, overlap 16: starts {0, 24},
// exactly overlap 16; 50 cells: starts {0, 10}, overlap 30).
struct Taef2AxisTiles {
  int64_t extent_latent = 0;
  int64_t tile_extent_latent = 0;  // min(tile_latent, extent_latent)
  std::vector<int64_t> start_latent;
  // Blend band of seam i, between tile i and tile i+1, in output pixels:
  // [blend_begin_px[i], blend_end_px[i]); size tiles() - 1. The band is the
  // overlap of the two tiles, [start_px(i+1), end_px(i)), except that it
  // begins no earlier than end_px(i-1): when the end-aligned last tile
  // overlaps two earlier tiles, the bands must stay disjoint for the
  // weights to sum to 1 (tile i+1 then has weight 0 in front of its band).
  // An empty band (overlap 0) is a hard seam.
  std::vector<int64_t> blend_begin_px;
  std::vector<int64_t> blend_end_px;

  int64_t tiles() const { return static_cast<int64_t>(start_latent.size()); }
  int64_t extent_px() const;
  int64_t tile_extent_px() const;
  // Output pixels [start_px(i), end_px(i)) of tile i; 0 <= i < tiles().
  int64_t start_px(int64_t i) const;
  int64_t end_px(int64_t i) const;

  // The blend weight of tile i along this axis for each of its
  // tile_extent_px() output pixels (README §5 "Blend rule"): 1 outside the
  // blend bands; over the band of its seam with tile i-1 the rising ramp
  // (k + 0.5) / O and over the band of its seam with tile i+1 the falling
  // ramp 1 - (k + 0.5) / O, where k is the pixel's offset into the band and
  // O the band width in pixels; 0 before its rising band (the clipped case
  // above). Computed in double and rounded to float32: when O is a power of
  // two up to 2^16 (overlap 16 latents = O 128 px in the reference) every
  // weight is an exact multiple of 2^-(log2 O + 1) and, per pixel, the
  // weights of all tiles sum to exactly 1; otherwise to 1 within float32
  // rounding. Precondition: 0 <= i < tiles().
  std::vector<float> BlendWeights(int64_t i) const;
};

// One tile of the 2-D grid (row-major index = row * cols + col).
struct Taef2TileRect {
  int64_t row = 0, col = 0;
  int64_t y_latent = 0, x_latent = 0;  // top-left, latent cells
  int64_t height_latent = 0, width_latent = 0;
  int64_t y_px = 0, x_px = 0;  // top-left, output pixels (8x)
  int64_t height_px = 0, width_px = 0;
};

struct Taef2TilePlan {
  int64_t tile_latent = 0;     // as requested
  int64_t overlap_latent = 0;  // as requested
  Taef2AxisTiles rows;         // height axis
  Taef2AxisTiles cols;         // width axis

  int64_t num_tiles() const { return rows.tiles() * cols.tiles(); }
  // Tile `index` in row-major order; precondition 0 <= index < num_tiles().
  Taef2TileRect tile(int64_t index) const;
};

// Upper bound of every PlanTaef2Tiles() argument, in latent cells (2^20; far
// above what Taef2Decoder::Plan() accepts). It keeps the planner total: no
// int64 overflow, and a plan holds at most ~2^20 tiles per axis.
inline constexpr int64_t kTaef2MaxPlannerExtentLatent = int64_t{1} << 20;

// Plans the tiles of a height_latent x width_latent latent (layout and
// blend bands as Taef2AxisTiles describes; the same tile_latent and
// overlap_latent on both axes). README §5's layout is
// PlanTaef2Tiles(64, 64, 40, 16): starts {0, 24} on both axes, blend band
// [192, 320) px.
// Errors (kInvalidArgument, naming the argument and the rule):
// height_latent, width_latent or tile_latent outside
// [1, kTaef2MaxPlannerExtentLatent]; overlap_latent < 0 or >= tile_latent.
Result<Taef2TilePlan> PlanTaef2Tiles(int64_t height_latent, int64_t width_latent,
                                     int64_t tile_latent, int64_t overlap_latent);

// Per-request options of Taef2Decoder::DecodeTiledHybrid(); defaults are
// README §5's reference layout.
struct Taef2TilingOptions {
  // Tile edge in latent cells (8x in pixels), both axes. Smaller tiles bound
  // memory more tightly (modules 6-19 hold about 3 live tensors of
  // 64 channels * (8 * tile_latent)^2 * 4 bytes per frame: ~80 MB for 40) but
  // cost more overlap work and more seams.
  int64_t tile_latent = 40;
  // Overlap between neighbouring tiles in latent cells, in [0, tile_latent).
  // The receptive field of modules 6-19 is about +-8 latent cells (README
  // §4), so overlaps below that leave visible seams; 16 gives 63 dB vs the
  // untiled decode on astronaut.
  int64_t overlap_latent = 16;
};

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
};

class Taef2Decoder final : public VaeModel {
 public:
  // TAEF2 constants (README §4).
  static constexpr int64_t kLatentChannels = 32;
  static constexpr int64_t kOutputChannels = 3;
  static constexpr int64_t kUpscale = 8;  // pixels per latent cell, each axis
  // Upper bounds Plan() enforces, to refuse requests before any allocation:
  // latent extent per axis (latent cells; 2048 px) and frames. Peak memory
  // measured for one 256x256-latent frame (2048x2048 px): 12.1 GB; a
  // per-request memory budget replaces this bound later.
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
  //   kIoError / kResourceExhausted / kInternal  OS or LibTorch failures.
  static Result<std::unique_ptr<Taef2Decoder>> Create(const Taef2Options& options);

  // Builds the same architecture with deterministic pseudo-random weights
  // drawn from a torch CPU generator seeded with `seed` (the same seed gives
  // bitwise-identical weights and outputs on the same build and thread
  // count). The init is scaled so that outputs stay finite and mostly in
  // about [0, 1]; they are not images. info(): kind "demo",
  // demo_weights = true, weights_path/weights_sha256 empty, description
  // starting "DEMO: deterministic seeded weights, not a trained model".
  // Logs a warning. Errors: kInvalidArgument for an empty `name`; LibTorch
  // failures as kResourceExhausted / kInternal.
  static Result<std::unique_ptr<Taef2Decoder>> CreateDemo(const std::string& name, uint64_t seed);

  ~Taef2Decoder() override;
  Taef2Decoder(const Taef2Decoder&) = delete;
  Taef2Decoder& operator=(const Taef2Decoder&) = delete;

  const ModelInfo& info() const override { return info_; }

  // Accepts latent_dtype float32 and latent_shape
  // [frames, 32, height_latent, width_latent] with 1 <= frames <= 4096 and
  // 1 <= height_latent, width_latent <= 1024. Plan: frames, channels 3,
  // height_px = 8*height_latent, width_px = 8*width_latent, shape_bucket
  // "<name>:<height_latent>x<width_latent>" ("taef2:64x64").
  // Errors (kInvalidArgument) name the field: latent.dtype, latent.shape
  // (rank), latent.shape[0..3].
  // With settings.tiling: the hybrid tiling's tiles (per frame batch);
  // otherwise 0 (untiled).
  int64_t TilesPerUnit(const std::vector<int64_t>& latent_shape,
                       const DecodeSettings& settings) const override;

  Result<DecodePlan> Plan(DType latent_dtype,
                          const std::vector<int64_t>& latent_shape) const override;

  // Decodes `latent` (CPU float32 [N, 32, h, w], any strides) into a new
  // float32 tensor [N, 3, 8h, 8w], frame_batch frames per forward pass,
  // without autograd. Adds "taef2.decode_latent" (seconds, wall clock) to the timings of
  // `report` when it is not null. Untiled unless settings.tiling is set
  // (the diagnostic knob, capability "tunable_tiling"): then it runs
  // DecodeTiledHybrid() with that tile size and overlap.
  // Errors: the Plan() errors for a bad latent; kInvalidArgument for a
  // non-CPU latent; kResourceExhausted when LibTorch fails to allocate;
  // kInternal for any other LibTorch error. Never throws.
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
  // the PlanTaef2Tiles() errors for bad options; kInvalidArgument for a
  // non-CPU latent; kResourceExhausted when LibTorch fails to allocate;
  // kInternal for any other LibTorch error; settings.cancel's status when it
  // says stop (checked before each frame batch). Never throws.
  Result<torch::Tensor> DecodeTiledHybrid(const torch::Tensor& latent,
                                          const Taef2TilingOptions& options, DecodeReport* report,
                                          const DecodeSettings& settings = {});

 private:
  struct Weights;

  Taef2Decoder(ModelInfo info, std::unique_ptr<Weights> weights, int64_t frame_batch);

  // One forward pass over a batch of frames; may throw c10::Error.
  // Forward(x) == Tail(Stem(x)), op for op.
  torch::Tensor Forward(const torch::Tensor& latent) const;
  // Modules 0-5: latent [n, 32, h, w] -> features [n, 64, h, w].
  torch::Tensor Stem(const torch::Tensor& latent) const;
  // Modules 6-19: features [n, 64, h, w] -> output [n, 3, 8h, 8w].
  torch::Tensor Tail(const torch::Tensor& features) const;

  ModelInfo info_;
  std::unique_ptr<Weights> weights_;
  int64_t frame_batch_;
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TAEF2_H_
