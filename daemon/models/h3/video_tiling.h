// The official MiniMax-H3 video decode plan: spatial tiles and temporal
// windows (spec/h3_vae.md §2.2-2.4; official `split_tiles`,
// `decode_temporal` and `_decode_temporal_pad_frames` in
// FL2VA/video_vae/klvae.py of MiniMax-AI/MiniMax-H3 at 8d8824e).
//
// These are model semantics, not tunables: the decoder's RoPE grid is local
// to a tile and a temporal window (spec §1.4), so the 256-px tile, the 64-px
// minimum overlap and the 7-latent-frame window are what the decoder was
// trained on. The functions here are pure (no LibTorch) so the planner is
// testable on its own and usable by plan-only requests.
//
// Units are in the names: `_px` is pixels, `_latent` is latent cells (one
// latent cell is 16x16 px), `latent_frames` vs `pixel_frames`.
//
// Thread-safety: everything here is a pure function or a value type.
#ifndef VAED_DAEMON_MODELS_H3_VIDEO_TILING_H_
#define VAED_DAEMON_MODELS_H3_VIDEO_TILING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/models/tile_geometry.h"
#include "vaed/status.h"

namespace vaed::models::h3 {

// The tile rectangle both tiled models share (tile_geometry.h).
using models::TileRect;

// Official constants of the released video VAE (spec §1.1, §2.1-2.2).
inline constexpr int64_t kPixelsPerLatent = 16;       // vae_ratio (spatial)
inline constexpr int64_t kPixelFramesPerLatent = 4;   // vae_ratio_t (temporal)
inline constexpr int64_t kTilePx = 256;               // vae_tile_size
inline constexpr int64_t kTileOverlapMinPx = 64;      // vae_tile_overlap_min
inline constexpr int64_t kClipLength = 17;            // vae_clip_length, pixel frames
inline constexpr int64_t kTokenDrop = 3;              // vae_token_drop, latent frames
// Derived (klvae.py:99-106, spec §2.2 table):
//   frame_pre_padding = (-L) mod r = 3 pixel frames discarded at each window start
//   tokens_chunk_size = ceil(L / r) = 5 latent frames: the window step
//   token_overlap     = (-d) mod 5 = 2 look-ahead latent frames per window
//   frame_overlap     = token_overlap*r - frame_pre_padding = 5 pixel frames
//                       cross-faded at each seam
inline constexpr int64_t kFramePrePadding =
    ((-kClipLength) % kPixelFramesPerLatent + kPixelFramesPerLatent) % kPixelFramesPerLatent;
inline constexpr int64_t kWindowStepLatentFrames =
    (kClipLength + kPixelFramesPerLatent - 1) / kPixelFramesPerLatent;
inline constexpr int64_t kTokenOverlapLatentFrames =
    ((-kTokenDrop) % kWindowStepLatentFrames + kWindowStepLatentFrames) % kWindowStepLatentFrames;
inline constexpr int64_t kWindowLatentFrames = kWindowStepLatentFrames + kTokenOverlapLatentFrames;
inline constexpr int64_t kWindowPixelFrames = kWindowLatentFrames * kPixelFramesPerLatent;  // 28
// Frames [3, 20) of a decoded window are its main part (17 frames) and
// frames [23, 28) its look-ahead tail (5 frames), blended into the next
// window's first 5 main frames (or appended after the last window).
inline constexpr int64_t kMainBeginFrame = kFramePrePadding;  // 3
inline constexpr int64_t kMainEndFrame =
    kWindowStepLatentFrames * kPixelFramesPerLatent;           // 20
inline constexpr int64_t kTailBeginFrame = kMainEndFrame + kFramePrePadding;  // 23
inline constexpr int64_t kMainPixelFrames = kMainEndFrame - kMainBeginFrame;  // 17
inline constexpr int64_t kTailPixelFrames = kWindowPixelFrames - kTailBeginFrame;  // 5
inline constexpr int64_t kFrameOverlap =
    kTokenOverlapLatentFrames * kPixelFramesPerLatent - kFramePrePadding;  // 5

static_assert(kFramePrePadding == 3 && kWindowStepLatentFrames == 5 &&
              kTokenOverlapLatentFrames == 2 && kWindowLatentFrames == 7 &&
              kWindowPixelFrames == 28 && kMainPixelFrames == 17 && kTailPixelFrames == 5 &&
              kFrameOverlap == 5);

// Input bounds of the planner itself. They are above anything a served
// model accepts (VideoVae::kMaxLatentExtent, VideoVae::kMaxLatentFrames) and
// exist so that the pure functions below stay total: with inputs inside them
// no arithmetic overflows int64 and no plan allocates more than a few MiB,
// whatever the caller passed.
//   kMaxAxisExtentPx: pixels along one spatial axis given to SplitAxis()
//     (2^24 px = 2^20 latent cells; with the official 256/64 tiles that is
//     87,381 tiles, about 2 MiB of AxisTiles).
//   kMaxAxisExtentLatent: the same bound in latent cells, for PlanTileGrid().
//   kMaxTilesPerAxis: tiles along one axis, which bounds SplitAxis() with
//     a small tile_px / large overlap_min_px (each tile adds tile_px -
//     overlap_min_px >= 1 px, so such a split could otherwise need one tile
//     per pixel).
//   kMaxPlannedLatentFrames: T given to PlanTemporal() / OutputPixelFrames()
//     (2^20 latent frames, about 3.6 M pixel frames; 209,715 windows, about
//     8 MiB of TemporalWindow).
inline constexpr int64_t kMaxAxisExtentPx = int64_t{1} << 24;
inline constexpr int64_t kMaxAxisExtentLatent = kMaxAxisExtentPx / kPixelsPerLatent;
inline constexpr int64_t kMaxTilesPerAxis = int64_t{1} << 20;
inline constexpr int64_t kMaxPlannedLatentFrames = int64_t{1} << 20;

// Tiles along one spatial axis, in pixels (official `split_tiles`).
struct AxisTiles {
  int64_t extent_px = 0;
  // Per tile: start and length. Every tile is `tile_px` long except when the
  // whole axis fits in one tile, which then has the axis's length (no
  // padding; a 224-px axis is one 224-px tile).
  std::vector<int64_t> start_px;
  std::vector<int64_t> length_px;
  // Overlap between tile i and tile i+1, pixels; size() == tiles() - 1.
  std::vector<int64_t> overlap_px;

  int64_t tiles() const { return static_cast<int64_t>(start_px.size()); }
  // Latent slice of tile i: [start_px/16, (start_px+length_px)/16).
  int64_t start_latent(int64_t i) const { return start_px[i] / kPixelsPerLatent; }
  int64_t end_latent(int64_t i) const {
    return (start_px[i] + length_px[i]) / kPixelsPerLatent;
  }
  // Tile i in both units (its latent slice as above); 0 <= i < tiles().
  TileSpan span(int64_t i) const {
    return {start_latent(i), end_latent(i) - start_latent(i), start_px[i], length_px[i]};
  }
};

// The official split of one axis of `extent_px` pixels (spec §2.3):
//   extent <= tile: one tile [0, extent).
//   else N = ceil(extent/tile), grown until tile*N - overlap_min*(N-1) >= extent;
//   overlaps start at overlap_min, and the slack tile*N - sum(overlaps) -
//   extent is handed out 16 px at a time, round-robin from the first
//   overlap (a remainder below 16 px is dropped, as the official code does).
// Errors (kInvalidArgument, naming the argument and the rule): extent_px
// outside [1, kMaxAxisExtentPx], tile_px < 1, overlap_min_px < 0 or >=
// tile_px, or a split that needs more than kMaxTilesPerAxis tiles.
Result<AxisTiles> SplitAxis(int64_t extent_px, int64_t tile_px = kTilePx,
                            int64_t overlap_min_px = kTileOverlapMinPx);

// The spatial grid of a canvas: rows (height axis) x cols (width axis).
struct TileGrid {
  AxisTiles rows;  // height
  AxisTiles cols;  // width
  int64_t num_tiles() const { return rows.tiles() * cols.tiles(); }
  // Tile `index` in row-major order; precondition 0 <= index < num_tiles().
  TileRect tile(int64_t index) const { return GridTile(rows, cols, index); }
};

// The grid for a latent canvas of height_latent x width_latent cells
// (pixel extents = 16x those). Errors (kInvalidArgument, naming the axis):
// height_latent or width_latent outside [1, kMaxAxisExtentLatent] (checked
// before the pixel extent is computed), and the SplitAxis ones.
Result<TileGrid> PlanTileGrid(int64_t height_latent, int64_t width_latent);

// One temporal window of the decode (spec §2.2).
struct TemporalWindow {
  int64_t index = 0;
  // Latent frames [begin, end) of the padded latent stream (end - begin = 7).
  int64_t stream_begin_latent = 0;
  int64_t stream_end_latent = 0;
  // Of those, how many are padding (repeats of the last input frame).
  int64_t padding_latent_frames = 0;
  // Output pixel frames [main_out_begin, main_out_begin + 17) receive this
  // window's main frames; for index > 0 the first 5 of them are cross-faded
  // with the previous window's tail.
  int64_t main_out_begin = 0;
};

// The temporal plan for T latent frames (official planner, spec §2.2 and
// golden README §7):
//   P = (5 - (T+3) mod 5) mod 5 pad latent frames (repeats of frame T-1)
//   W = (T+3+P)/5 - 1 windows, window i = padded frames [5i, 5i+7)
//   total = 17W + 5 pixel frames decoded and assembled
//   pad_pixel_frames: each pad frame whose stream index is = 0 (mod 5)
//   counts 1 frame, every other counts 4; they are cut from the end.
//   output = total - pad_pixel_frames (T = 5n+2 -> 17n+5, no padding).
struct TemporalPlan {
  int64_t latent_frames = 0;          // T as given
  int64_t pad_latent_frames = 0;      // P
  int64_t padded_latent_frames = 0;   // T + P = 5W + 2
  std::vector<TemporalWindow> windows;
  int64_t assembled_pixel_frames = 0; // 17W + 5
  int64_t pad_pixel_frames = 0;       // dropped from the end
  int64_t output_pixel_frames = 0;    // assembled - pad
  int64_t num_windows() const { return static_cast<int64_t>(windows.size()); }
};

// Plans T = `latent_frames`. Errors (kInvalidArgument, the message names T
// and states the rule "T >= 3 latent frames; T = 5k+2 gives 17k+5 frames"):
//   T <= 2: the official planner yields no window or a non-positive frame
//           count there;
//   T > kMaxPlannedLatentFrames: the planner's own bound (above), checked
//           before any arithmetic on T or any allocation.
Result<TemporalPlan> PlanTemporal(int64_t latent_frames);

// Output pixel frames for T latent frames without building the plan's
// window list (no allocation); the same rule and errors as PlanTemporal().
Result<int64_t> OutputPixelFrames(int64_t latent_frames);

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_VIDEO_TILING_H_
