// The official H3 tiled decode around a per-tile decoder: spatial tiles of
// each temporal window, the raw-neighbour blend, and the temporal assembly
// with its 5-frame cross-fade (spec/h3_vae.md §2.2-2.4; official
// `tiled_decode`, `blend` and `_decode_temporal_streaming` in
// FL2VA/video_vae/klvae.py of MiniMax-AI/MiniMax-H3 at 8d8824e).
//
// The per-tile decoder is injected (TileDecodeFn) so the assembly is tested
// on its own and the same code serves every dtype and scheduling.
//
// Layouts: latents are float32 [B, 24, latent_frames, height_latent,
// width_latent], already de-normalised; decoded video is float32
// [B, 3, pixel_frames, height_px, width_px] in the decoder's output space
// (ImageNet-normalised RGB for H3), not clamped. Any device: every tensor
// made here takes the device of the latent or of the decoded tiles.
//
// Exactness: the blend is computed as the official code does (weights
// arange(e)/e in the tile dtype, a*(1-w) and b*w as separate multiplies,
// then an add), so with the same tile outputs the assembled frames are
// bitwise those of the official implementation.
//
// Thread-safety: stateless functions; they use LibTorch's intra-op pool.
// They may throw c10::Error (callers wrap them at the model's edge).
#ifndef VAED_DAEMON_MODELS_H3_TILED_DECODE_H_
#define VAED_DAEMON_MODELS_H3_TILED_DECODE_H_

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/models/h3/video_tiling.h"
#include "daemon/models/interval_timer.h"
#include "daemon/models/tile_group.h"

namespace vaed::models::h3 {

// Decodes a batch of same-shape tiles: float32 [n, 24, 7, th, tw] ->
// float32 [n, 3, 28, 16*th, 16*tw]. Items of the batch are independent.
using TileDecodeFn = std::function<torch::Tensor(const torch::Tensor&)>;

// How the tiles of one temporal window are fed to the decoder: tiles of
// one shape go to the decoder `tiles_per_call` at a time, in row-major
// order. 1 is sequential (one call per tile, the official default);
// kAllTiles stacks every same-shape tile of a window into one call
// ("stacked tiles", official `_run_tile_tasks` with stack_tiling); values in
// between are smaller stacks. Peak activation memory grows with it.
inline constexpr int64_t kSequential = 1;
inline constexpr int64_t kAllTiles = std::numeric_limits<int64_t>::max();

// What a tiled decode did, for the reply and the logs.
struct TiledDecodeStats {
  int64_t windows = 0;
  int64_t tiles_per_window = 0;
  int64_t decoder_calls = 0;
  int64_t max_tiles_per_call = 0;
  // Time inside TileDecodeFn calls, and of the whole DecodeVideo /
  // DecodeWindow call (interval_timer.h: CUDA event pairs on a device with
  // a registered backend, the host clock otherwise; set them for the
  // latent's device before the call, read them after it).
  IntervalTimer decode_time;
  IntervalTimer span_time;
  // Seconds inside the decoder calls, and in everything else of the tiled
  // decode (slicing, blending, assembly, copies), without the gathers. The
  // gathers' seconds are host-clocked (tile_group.h): on a GPU group the
  // merge figure is approximate (clamped at 0).
  double TileDecodeSeconds() const { return decode_time.Seconds(); }
  double TileMergeSeconds() const {
    return std::max(0.0, span_time.Seconds() - decode_time.Seconds() - communication.seconds);
  }
  // The failure ladder (DecodeVideo/DecodeWindow): tiles per call in effect
  // at the end, and one line per step down, e.g. "4 -> 2 tiles per call:
  // out of memory: ...".
  int64_t final_tiles_per_call = 0;
  std::vector<std::string> fallbacks;  // out-of-memory steps of the ladder
  // Tile-parallel decode (a group of size > 1): the gathers to the output
  // rank (their seconds are neither decode nor merge time).
  TileCommunicationStats communication;
};

// Cached blend weights (a compiled plan's "blend ramps"): the weight
// vectors of BlendRamp() per (overlap, dtype, device), built once on that
// device. Not thread-safe; one per model instance, used by the rank that
// decodes with it.
class BlendRamps {
 public:
  // (1 - p/e, p/e) for p = 0..e-1, computed as BlendRamp() computes them,
  // with the dtype and device of `o`.
  const std::pair<torch::Tensor, torch::Tensor>& Get(int64_t e, const torch::TensorOptions& o);
  size_t size() const { return ramps_.size(); }

 private:
  // (e, dtype, device type, device index).
  using Key = std::tuple<int64_t, int, int, int>;
  std::map<Key, std::pair<torch::Tensor, torch::Tensor>> ramps_;
};

// Called after each temporal window with (windows done, windows total).
using WindowProgressFn = std::function<void(int64_t, int64_t)>;

// Streamed output: called when output frames [begin, end) are final, with
// `video` the output being assembled, float32 [B, 3,
// plan.output_pixel_frames, H, W]; its frames before `end` hold their
// final values and are not written again (final_frames.h). May throw (the
// decode then stops with that exception).
using WindowFinalFn =
    std::function<void(const torch::Tensor& video, int64_t begin, int64_t end)>;

// The official `blend`: returns a tensor shaped like `b` whose first
// e = min(a.size(dim), b.size(dim), overlap) entries along `dim` are
// a_last_e * (1 - p/e) + b_first_e * (p/e) for p = 0..e-1 (so the ramp never
// reaches pure b), the rest being b. overlap >= 1.
// With `ramps` the weights come from the cache (same values, same bits).
torch::Tensor BlendRamp(const torch::Tensor& a, const torch::Tensor& b, int64_t overlap,
                        int64_t dim, BlendRamps* ramps = nullptr);

// Spatially tiled decode of one temporal window: z_window float32
// [B, 24, 7, h, w] -> float32 [B, 3, 28, 16h, 16w]. Tile (i, j) is blended
// over its top rows with the RAW tile (i-1, j), then over its left columns
// with the RAW tile (i, j-1) (the diagonal neighbour is ignored, as in the
// official code), cropped by its overlaps with the next tiles and placed.
// Tiles go to `decode` `tiles_per_call` at a time (>= 1). Failure ladder:
// when a call of k > 1 tiles fails with an allocation failure
// (tensor_memory.h IsOutOfMemory: a real one or the budget), its
// temporaries are already freed by the unwinding; the same tiles are
// retried ceil(k/2) per call, down to 1 (each rung lowers the peak: fewer
// tiles' activations live at once), and the lowered rung stays in effect
// for the rest of the decode (stats->final_tiles_per_call, one line per
// step in stats->fallbacks). A failure at 1 tile per call, or any other
// exception, propagates. Adds to `stats` (not null).
// Tile-parallel (`group` of size > 1; tile_group.h): this rank decodes the
// tiles it owns (ladder and stacking apply to those), all ranks gather the
// tiles to rank 0, which merges exactly as above and returns the window;
// other ranks return an undefined tensor. Throws CollectiveFailed.
torch::Tensor DecodeWindow(const torch::Tensor& z_window, const TileGrid& grid,
                           const TileDecodeFn& decode, int64_t tiles_per_call,
                           TiledDecodeStats* stats, BlendRamps* ramps = nullptr,
                           TileGroup* group = nullptr);

// The whole temporal decode: z float32 [B, 24, T, h, w] (T = plan.latent_frames)
// -> float32 [B, 3, plan.output_pixel_frames, 16h, 16w]. The latent stream is
// padded with repeats of its last frame (plan.pad_latent_frames), each
// window's frames [3, 20) go to the output with their first 5 frames
// cross-faded with the previous window's frames [23, 28), the last window's
// [23, 28) is appended, and the pad frames are cut from the end.
// `progress` may be empty. Adds to `stats` (not null). With a `group` of
// size > 1 every window is decoded tile-parallel (DecodeWindow); rank 0
// assembles and returns the video, the other ranks return an undefined
// tensor. Throws CollectiveFailed.
// `final_frames` (may be empty; called on the assembling rank only): after
// window k is assembled, with the frames that became final, [previous end,
// FinalPixelFramesAfterWindow(plan, k)), before `progress`; a window that
// makes no new frame final gets no call. The last call ends at
// plan.output_pixel_frames.
torch::Tensor DecodeVideo(const torch::Tensor& z, const TemporalPlan& plan, const TileGrid& grid,
                          const TileDecodeFn& decode, int64_t tiles_per_call,
                          TiledDecodeStats* stats, const WindowProgressFn& progress = {},
                          BlendRamps* ramps = nullptr, TileGroup* group = nullptr,
                          const WindowFinalFn& final_frames = {});

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_TILED_DECODE_H_
