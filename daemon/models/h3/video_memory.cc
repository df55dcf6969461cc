#include "daemon/models/h3/video_memory.h"

#include <algorithm>

#include "daemon/models/byte_units.h"
#include "daemon/models/h3/video_tiling.h"

namespace vaed::models::h3 {
namespace {

constexpr double kFloat32Bytes = 4;
constexpr double kRgb = 3;

// Raw tiles of one window: every tile [1, 3, 28, tile_h, tile_w] float32.
double WindowTileBytes(const TileGrid& grid) {
  double area = 0;
  for (int64_t i = 0; i < grid.num_tiles(); ++i) {
    const TileRect r = grid.tile(i);
    area += static_cast<double>(r.height_px) * static_cast<double>(r.width_px);
  }
  return kRgb * kWindowPixelFrames * area * kFloat32Bytes;
}

// One decoder call on the largest tile of the grid (a 1-tile call).
double CallBytes(const VideoDecoderConfig& c, int64_t activation_bytes, const TileGrid& grid) {
  int64_t cells = 0;
  for (int64_t i = 0; i < grid.num_tiles(); ++i) {
    const TileRect r = grid.tile(i);
    cells = std::max(cells, r.height_latent * r.width_latent);
  }
  const double tokens =
      static_cast<double>(kWindowLatentFrames * cells + c.num_register_tokens + 1);
  const double per_token = 6.0 * static_cast<double>(c.dim) + 3.0 * static_cast<double>(c.ffn_inner);
  const double attention = 2.0 * static_cast<double>(c.heads) * tokens * tokens;
  const double unpatchified = tokens * static_cast<double>(c.patch_dim()) * kFloat32Bytes;
  return (tokens * per_token + attention) * static_cast<double>(activation_bytes) + unpatchified;
}

uint64_t Bytes(double b) { return static_cast<uint64_t>(b); }

}  // namespace

uint64_t VideoMemoryEstimate::peak_bytes() const {
  return latent_bytes +
         std::max(output_bytes + window_bytes + call_bytes, output_bytes + format_bytes);
}

std::string VideoMemoryEstimate::Describe() const {
  return "output " + GiB(output_bytes) + ", one temporal window " + GiB(window_bytes) +
         ", one decoder call " + GiB(call_bytes) + ", latent " + GiB(latent_bytes) +
         ", formatting " + GiB(format_bytes);
}

Result<VideoMemoryEstimate> EstimateVideoMemory(const VideoDecoderConfig& config,
                                                int64_t activation_bytes, int64_t latent_frames,
                                                int64_t height_latent, int64_t width_latent) {
  VAED_ASSIGN_OR_RETURN(const TemporalPlan temporal, PlanTemporal(latent_frames));
  VAED_ASSIGN_OR_RETURN(const TileGrid grid, PlanTileGrid(height_latent, width_latent));
  const double height_px = static_cast<double>(grid.rows.extent_px);
  const double width_px = static_cast<double>(grid.cols.extent_px);
  const double frame = kRgb * height_px * width_px * kFloat32Bytes;  // one float32 RGB frame
  VideoMemoryEstimate e;
  e.latent_bytes = Bytes(3.0 * static_cast<double>(config.latent_channels) *
                         static_cast<double>(temporal.padded_latent_frames) *
                         static_cast<double>(height_latent) * static_cast<double>(width_latent) *
                         kFloat32Bytes);
  e.output_bytes = Bytes(static_cast<double>(temporal.output_pixel_frames) * frame);
  e.window_bytes = Bytes(WindowTileBytes(grid) +
                         static_cast<double>(kWindowPixelFrames + kTailPixelFrames) * frame);
  e.call_bytes = Bytes(CallBytes(config, activation_bytes, grid));
  e.format_bytes = Bytes(1.25 * static_cast<double>(e.output_bytes));
  return e;
}

}  // namespace vaed::models::h3
