// The geometry both tiled decoders share: one rectangle of a 2-D tile grid,
// in the two units a tiled decode needs, and the row-major walk of a grid.
//
// A tile is cut from the latent in latent cells and its decoded output is
// placed in output pixels; the rectangle carries both so that no caller
// converts (units are in the names: `_latent` latent cells, `_px` output
// pixels). Each model plans its axes its own way and hands them to
// GridTile():
//   H3 video (h3/video_tiling.h AxisTiles): planned in pixels, 16 px per
//     latent cell (official `split_tiles`);
//   TAEF2 hybrid tiling (taef2_tiling.h Taef2AxisTiles): planned in latent
//     cells, 8 px per latent cell.
//
// Thread-safety: value types and pure functions.
#ifndef VAED_DAEMON_MODELS_TILE_GEOMETRY_H_
#define VAED_DAEMON_MODELS_TILE_GEOMETRY_H_

#include <cstdint>

namespace vaed::models {

// Where one tile lies along one axis, in both units.
struct TileSpan {
  int64_t start_latent = 0, length_latent = 0;  // latent cells
  int64_t start_px = 0, length_px = 0;          // output pixels
};

// One tile of a grid; its row-major index is row * cols + col.
struct TileRect {
  int64_t row = 0, col = 0;
  int64_t y_latent = 0, x_latent = 0;  // top-left, latent cells
  int64_t height_latent = 0, width_latent = 0;
  int64_t y_px = 0, x_px = 0;  // top-left, output pixels
  int64_t height_px = 0, width_px = 0;
};

// Tile `index` of the grid rows x cols in row-major order. `Axis` is a
// model's plan of one axis: `int64_t tiles() const` and
// `TileSpan span(int64_t i) const` for 0 <= i < tiles().
// Precondition: 0 <= index < rows.tiles() * cols.tiles().
template <typename Axis>
TileRect GridTile(const Axis& rows, const Axis& cols, int64_t index) {
  TileRect r;
  r.row = index / cols.tiles();
  r.col = index % cols.tiles();
  const TileSpan y = rows.span(r.row);
  const TileSpan x = cols.span(r.col);
  r.y_latent = y.start_latent;
  r.x_latent = x.start_latent;
  r.height_latent = y.length_latent;
  r.width_latent = x.length_latent;
  r.y_px = y.start_px;
  r.x_px = x.start_px;
  r.height_px = y.length_px;
  r.width_px = x.length_px;
  return r;
}

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TILE_GEOMETRY_H_
