// The tile plan of TAEF2's hybrid tiled decode (taef2.h
// Taef2Decoder::DecodeTiledHybrid): where the tiles of the feature map after
// module 5 lie and how their outputs are blended (shared/data/taef2/
// README.md §5). Pure: no LibTorch, so the planner is testable on its own.
//
// Units: `_latent` is latent cells, `_px` is output pixels; one latent cell
// is kTaef2PixelsPerLatent = 8 pixels along each axis.
//
// Thread-safety: value types and pure functions.
#ifndef VAED_DAEMON_MODELS_TAEF2_TILING_H_
#define VAED_DAEMON_MODELS_TAEF2_TILING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/models/tile_geometry.h"
#include "vaed/status.h"

namespace vaed::models {

// Output pixels per latent cell along each axis (Taef2Decoder::kUpscale).
inline constexpr int64_t kTaef2PixelsPerLatent = 8;

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
  // Tile i in both units (tile_geometry.h); 0 <= i < tiles().
  TileSpan span(int64_t i) const {
    return {start_latent[static_cast<size_t>(i)], tile_extent_latent, start_px(i),
            tile_extent_px()};
  }

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

struct Taef2TilePlan {
  int64_t tile_latent = 0;     // as requested
  int64_t overlap_latent = 0;  // as requested
  Taef2AxisTiles rows;         // height axis
  Taef2AxisTiles cols;         // width axis

  int64_t num_tiles() const { return rows.tiles() * cols.tiles(); }
  // Tile `index` in row-major order; precondition 0 <= index < num_tiles().
  TileRect tile(int64_t index) const { return GridTile(rows, cols, index); }
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

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TAEF2_TILING_H_
