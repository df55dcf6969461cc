#include "daemon/models/taef2_tiling.h"

#include <algorithm>
#include <string>
#include <utility>

namespace vaed::models {

int64_t Taef2AxisTiles::extent_px() const { return extent_latent * kTaef2PixelsPerLatent; }
int64_t Taef2AxisTiles::tile_extent_px() const {
  return tile_extent_latent * kTaef2PixelsPerLatent;
}
int64_t Taef2AxisTiles::start_px(int64_t i) const {
  return start_latent[static_cast<size_t>(i)] * kTaef2PixelsPerLatent;
}
int64_t Taef2AxisTiles::end_px(int64_t i) const { return start_px(i) + tile_extent_px(); }

std::vector<float> Taef2AxisTiles::BlendWeights(int64_t i) const {
  std::vector<float> w(static_cast<size_t>(tile_extent_px()), 1.0f);
  const int64_t origin = start_px(i);
  // A ramp value (k + 0.5) / O: exact in double, and in float32 when O is a
  // power of two (README §5: multiples of 2^-8 for O = 128).
  auto ramp = [](int64_t k, int64_t o) {
    return (static_cast<double>(k) + 0.5) / static_cast<double>(o);
  };
  if (i > 0) {  // rising over the band of seam i-1; nothing of this tile before it
    const size_t s = static_cast<size_t>(i - 1);
    const int64_t begin = blend_begin_px[s], end = blend_end_px[s];
    for (int64_t p = origin; p < end; ++p) {
      w[static_cast<size_t>(p - origin)] =
          p < begin ? 0.0f : static_cast<float>(ramp(p - begin, end - begin));
    }
  }
  if (i + 1 < tiles()) {  // falling over the band of seam i; it ends where the tile does
    const size_t s = static_cast<size_t>(i);
    const int64_t begin = blend_begin_px[s], end = blend_end_px[s];
    for (int64_t p = begin; p < end; ++p) {
      w[static_cast<size_t>(p - origin)] = static_cast<float>(1.0 - ramp(p - begin, end - begin));
    }
  }
  return w;
}

namespace {

// README §5 layout on one axis; arguments already validated.
Taef2AxisTiles PlanAxis(int64_t extent_latent, int64_t tile_latent, int64_t overlap_latent) {
  Taef2AxisTiles axis;
  axis.extent_latent = extent_latent;
  axis.tile_extent_latent = std::min(tile_latent, extent_latent);
  if (extent_latent <= tile_latent) {
    axis.start_latent = {0};
    return axis;
  }
  const int64_t step = tile_latent - overlap_latent;
  const int64_t last = extent_latent - tile_latent;
  for (int64_t s = 0; s < last; s += step) axis.start_latent.push_back(s);
  axis.start_latent.push_back(last);
  for (int64_t i = 0; i + 1 < axis.tiles(); ++i) {
    // Clipped at the end of tile i-1 so that no pixel lies in two bands
    // (possible only next to the end-aligned last tile).
    int64_t begin = axis.start_px(i + 1);
    if (i > 0) begin = std::max(begin, axis.end_px(i - 1));
    axis.blend_begin_px.push_back(begin);
    axis.blend_end_px.push_back(axis.end_px(i));
  }
  return axis;
}

}  // namespace

Result<Taef2TilePlan> PlanTaef2Tiles(int64_t height_latent, int64_t width_latent,
                                     int64_t tile_latent, int64_t overlap_latent) {
  const std::string bound = std::to_string(kTaef2MaxPlannerExtentLatent);
  const std::pair<const char*, int64_t> sizes[] = {{"height_latent", height_latent},
                                                   {"width_latent", width_latent},
                                                   {"tile_latent", tile_latent}};
  for (const auto& [field, value] : sizes) {
    if (value < 1 || value > kTaef2MaxPlannerExtentLatent) {
      return InvalidArgument(std::string("taef2 tiling: ") + field + " is " +
                             std::to_string(value) + "; must be in [1, " + bound +
                             "] latent cells");
    }
  }
  if (overlap_latent < 0 || overlap_latent >= tile_latent) {
    return InvalidArgument("taef2 tiling: overlap_latent is " + std::to_string(overlap_latent) +
                           "; must be >= 0 and < tile_latent (" + std::to_string(tile_latent) +
                           ")");
  }
  Taef2TilePlan plan;
  plan.tile_latent = tile_latent;
  plan.overlap_latent = overlap_latent;
  plan.rows = PlanAxis(height_latent, tile_latent, overlap_latent);
  plan.cols = PlanAxis(width_latent, tile_latent, overlap_latent);
  return plan;
}

}  // namespace vaed::models
