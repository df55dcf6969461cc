#include "daemon/models/h3/video_tiling.h"

#include <algorithm>
#include <string>

namespace vaed::models::h3 {

Result<AxisTiles> SplitAxis(int64_t extent_px, int64_t tile_px, int64_t overlap_min_px) {
  if (extent_px < 1) {
    return InvalidArgument("extent_px is " + std::to_string(extent_px) + "; must be >= 1");
  }
  if (tile_px < 1) return InvalidArgument("tile_px is " + std::to_string(tile_px) + "; must be >= 1");
  if (overlap_min_px < 0 || overlap_min_px >= tile_px) {
    return InvalidArgument("overlap_min_px is " + std::to_string(overlap_min_px) +
                           "; must be in [0, tile_px = " + std::to_string(tile_px) + ")");
  }
  AxisTiles axis;
  axis.extent_px = extent_px;
  if (tile_px >= extent_px) {
    axis.start_px = {0};
    axis.length_px = {extent_px};
    return axis;
  }
  // Fewest tiles whose minimum-overlap span covers the axis. Each added tile
  // adds tile - overlap_min >= 1 px, so this terminates.
  int64_t n = (extent_px + tile_px - 1) / tile_px;
  while (tile_px * n - overlap_min_px * (n - 1) < extent_px) ++n;
  axis.overlap_px.assign(static_cast<size_t>(n - 1), overlap_min_px);
  const int64_t slack = tile_px * n - overlap_min_px * (n - 1) - extent_px;
  // The official loop hands out the slack in whole 16-px units; a remainder
  // is silently dropped (the last tile would then overhang: it cannot happen
  // for canvases made of whole latent cells with 16-px-multiple constants).
  for (int64_t u = 0; u < slack / kPixelsPerLatent; ++u) {
    axis.overlap_px[static_cast<size_t>(u % (n - 1))] += kPixelsPerLatent;
  }
  axis.start_px.push_back(0);
  for (int64_t i = 0; i + 1 < n; ++i) {
    axis.start_px.push_back(axis.start_px.back() + tile_px - axis.overlap_px[static_cast<size_t>(i)]);
  }
  axis.length_px.assign(static_cast<size_t>(n), tile_px);
  return axis;
}

TileRect TileGrid::tile(int64_t index) const {
  TileRect r;
  r.row = index / cols.tiles();
  r.col = index % cols.tiles();
  r.y_px = rows.start_px[static_cast<size_t>(r.row)];
  r.x_px = cols.start_px[static_cast<size_t>(r.col)];
  r.height_px = rows.length_px[static_cast<size_t>(r.row)];
  r.width_px = cols.length_px[static_cast<size_t>(r.col)];
  r.y_latent = rows.start_latent(r.row);
  r.x_latent = cols.start_latent(r.col);
  r.height_latent = rows.end_latent(r.row) - r.y_latent;
  r.width_latent = cols.end_latent(r.col) - r.x_latent;
  return r;
}

Result<TileGrid> PlanTileGrid(int64_t height_latent, int64_t width_latent) {
  TileGrid grid;
  Result<AxisTiles> rows = SplitAxis(height_latent * kPixelsPerLatent);
  if (!rows.ok()) return rows.status().WithContext("height (latent cells " +
                                                   std::to_string(height_latent) + ")");
  Result<AxisTiles> cols = SplitAxis(width_latent * kPixelsPerLatent);
  if (!cols.ok()) return cols.status().WithContext("width (latent cells " +
                                                   std::to_string(width_latent) + ")");
  grid.rows = std::move(*rows);
  grid.cols = std::move(*cols);
  return grid;
}

namespace {

std::string FrameRule() {
  return "the H3 video decoder needs T >= 3 latent frames (windows of 7 latent frames "
         "stepping by 5; T = 5k+2 decodes to 17k+5 pixel frames, other T are padded with "
         "repeats of the last latent frame as the official planner does, spec/h3_vae.md §2.2)";
}

}  // namespace

Result<TemporalPlan> PlanTemporal(int64_t latent_frames) {
  if (latent_frames <= 2) {
    return InvalidArgument("latent frames T = " + std::to_string(latent_frames) + "; " +
                           FrameRule());
  }
  TemporalPlan plan;
  plan.latent_frames = latent_frames;
  // The encoder drops kTokenDrop trailing latent frames; the planner adds
  // them back to count whole 5-frame chunks (klvae.py decode_temporal).
  const int64_t pseudo = latent_frames + kTokenDrop;
  const int64_t remainder = pseudo % kWindowStepLatentFrames;
  plan.pad_latent_frames = remainder == 0 ? 0 : kWindowStepLatentFrames - remainder;
  plan.padded_latent_frames = latent_frames + plan.pad_latent_frames;
  const int64_t num_windows = (pseudo + plan.pad_latent_frames) / kWindowStepLatentFrames - 1;
  for (int64_t i = 0; i < num_windows; ++i) {
    TemporalWindow w;
    w.index = i;
    w.stream_begin_latent = i * kWindowStepLatentFrames;
    w.stream_end_latent = w.stream_begin_latent + kWindowLatentFrames;
    w.padding_latent_frames =
        std::max<int64_t>(0, w.stream_end_latent - std::max(w.stream_begin_latent, latent_frames));
    w.main_out_begin = i * kMainPixelFrames;
    plan.windows.push_back(w);
  }
  plan.assembled_pixel_frames = num_windows * kMainPixelFrames + kTailPixelFrames;
  // A pad frame at a clip start (stream index = 0 mod 5) stands for the 3
  // pre-padding frames plus 1 real frame; the others for 4 frames each.
  const int64_t intra_tail = kClipLength % kPixelFramesPerLatent;
  for (int64_t k = 0; k < plan.pad_latent_frames; ++k) {
    plan.pad_pixel_frames += (latent_frames + k) % kWindowStepLatentFrames == 0
                                 ? intra_tail
                                 : kPixelFramesPerLatent;
  }
  plan.output_pixel_frames = plan.assembled_pixel_frames - plan.pad_pixel_frames;
  if (num_windows < 1 || plan.output_pixel_frames < 1) {
    return Internal("temporal plan for T = " + std::to_string(latent_frames) + " has " +
                    std::to_string(num_windows) + " windows and " +
                    std::to_string(plan.output_pixel_frames) + " frames");
  }
  return plan;
}

Result<int64_t> OutputPixelFrames(int64_t latent_frames) {
  VAED_ASSIGN_OR_RETURN(TemporalPlan plan, PlanTemporal(latent_frames));
  return plan.output_pixel_frames;
}

}  // namespace vaed::models::h3
