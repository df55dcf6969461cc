#include "daemon/models/h3/video_tiling.h"

#include <algorithm>
#include <string>
#include <utility>

namespace vaed::models::h3 {

Result<AxisTiles> SplitAxis(int64_t extent_px, int64_t tile_px, int64_t overlap_min_px) {
  // The extent bound comes first: every product below (tile_px * n, ...) is
  // then far from int64 overflow, since tile_px < extent_px in the loop.
  if (extent_px < 1 || extent_px > kMaxAxisExtentPx) {
    return InvalidArgument("extent_px is " + std::to_string(extent_px) + "; must be in [1, " +
                           std::to_string(kMaxAxisExtentPx) + "] (kMaxAxisExtentPx)");
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
  // The loop below finds the smallest n with tile*n - overlap_min*(n-1) >=
  // extent, i.e. n = ceil((extent - overlap_min) / (tile - overlap_min)).
  // Checking that count first keeps a tiny tile_px - overlap_min_px from
  // turning the loop and the vectors into one entry per pixel.
  const int64_t tiles_needed =
      (extent_px - overlap_min_px + (tile_px - overlap_min_px) - 1) / (tile_px - overlap_min_px);
  if (tiles_needed > kMaxTilesPerAxis) {
    return InvalidArgument("extent_px " + std::to_string(extent_px) + " with tile_px " +
                           std::to_string(tile_px) + " and overlap_min_px " +
                           std::to_string(overlap_min_px) + " needs " +
                           std::to_string(tiles_needed) + " tiles; at most " +
                           std::to_string(kMaxTilesPerAxis) + " per axis (kMaxTilesPerAxis)");
  }
  // Fewest tiles whose minimum-overlap span covers the axis (the official
  // loop). Each added tile adds tile - overlap_min >= 1 px, so this
  // terminates, at n = tiles_needed.
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
  axis.start_px.reserve(static_cast<size_t>(n));
  axis.start_px.push_back(0);
  for (int64_t i = 0; i + 1 < n; ++i) {
    axis.start_px.push_back(axis.start_px.back() + tile_px - axis.overlap_px[static_cast<size_t>(i)]);
  }
  axis.length_px.assign(static_cast<size_t>(n), tile_px);
  return axis;
}

namespace {

// Splits one axis given in latent cells. The range is checked before the
// pixel extent is computed: latent * 16 overflows int64 for huge values.
Result<AxisTiles> SplitLatentAxis(const char* axis_name, int64_t extent_latent) {
  const std::string what =
      std::string(axis_name) + " (latent cells " + std::to_string(extent_latent) + ")";
  if (extent_latent < 1 || extent_latent > kMaxAxisExtentLatent) {
    return InvalidArgument(what + ": must be in [1, " + std::to_string(kMaxAxisExtentLatent) +
                           "] latent cells of " + std::to_string(kPixelsPerLatent) +
                           " px (kMaxAxisExtentLatent)");
  }
  Result<AxisTiles> tiles = SplitAxis(extent_latent * kPixelsPerLatent);
  if (!tiles.ok()) return tiles.status().WithContext(what);
  return tiles;
}

}  // namespace

Result<TileGrid> PlanTileGrid(int64_t height_latent, int64_t width_latent) {
  TileGrid grid;
  VAED_ASSIGN_OR_RETURN(grid.rows, SplitLatentAxis("height", height_latent));
  VAED_ASSIGN_OR_RETURN(grid.cols, SplitLatentAxis("width", width_latent));
  return grid;
}

namespace {

std::string FrameRule() {
  return "the H3 video decoder needs T >= 3 latent frames (windows of 7 latent frames "
         "stepping by 5; T = 5k+2 decodes to 17k+5 pixel frames, other T are padded with "
         "repeats of the last latent frame as the official planner does, spec/h3_vae.md §2.2)";
}

// The range check of PlanTemporal(), before any arithmetic on T:
// T + kTokenDrop overflows near INT64_MAX, and the plan holds one window per
// 5 latent frames.
Status CheckLatentFrames(int64_t latent_frames) {
  if (latent_frames <= 2) {
    return InvalidArgument("latent frames T = " + std::to_string(latent_frames) + "; " +
                           FrameRule());
  }
  if (latent_frames > kMaxPlannedLatentFrames) {
    return InvalidArgument("latent frames T = " + std::to_string(latent_frames) +
                           "; the H3 video planner accepts 3 <= T <= " +
                           std::to_string(kMaxPlannedLatentFrames) +
                           " latent frames (kMaxPlannedLatentFrames bounds the plan's size; "
                           "T = 5k+2 decodes to 17k+5 pixel frames)");
  }
  return Status::Ok();
}

// The temporal plan without its window list, and the window count.
struct PlanCounts {
  TemporalPlan plan;  // windows empty
  int64_t num_windows = 0;
};

Result<PlanCounts> CountTemporal(int64_t latent_frames) {
  VAED_RETURN_IF_ERROR(CheckLatentFrames(latent_frames));
  PlanCounts counts;
  TemporalPlan& plan = counts.plan;
  plan.latent_frames = latent_frames;
  // The encoder drops kTokenDrop trailing latent frames; the planner adds
  // them back to count whole 5-frame chunks (klvae.py decode_temporal).
  const int64_t pseudo = latent_frames + kTokenDrop;
  const int64_t remainder = pseudo % kWindowStepLatentFrames;
  plan.pad_latent_frames = remainder == 0 ? 0 : kWindowStepLatentFrames - remainder;
  plan.padded_latent_frames = latent_frames + plan.pad_latent_frames;
  counts.num_windows = (pseudo + plan.pad_latent_frames) / kWindowStepLatentFrames - 1;
  plan.assembled_pixel_frames = counts.num_windows * kMainPixelFrames + kTailPixelFrames;
  // A pad frame at a clip start (stream index = 0 mod 5) stands for the 3
  // pre-padding frames plus 1 real frame; the others for 4 frames each.
  const int64_t intra_tail = kClipLength % kPixelFramesPerLatent;
  for (int64_t k = 0; k < plan.pad_latent_frames; ++k) {
    plan.pad_pixel_frames += (latent_frames + k) % kWindowStepLatentFrames == 0
                                 ? intra_tail
                                 : kPixelFramesPerLatent;
  }
  plan.output_pixel_frames = plan.assembled_pixel_frames - plan.pad_pixel_frames;
  if (counts.num_windows < 1 || plan.output_pixel_frames < 1) {
    return Internal("temporal plan for T = " + std::to_string(latent_frames) + " has " +
                    std::to_string(counts.num_windows) + " windows and " +
                    std::to_string(plan.output_pixel_frames) + " frames");
  }
  return counts;
}

}  // namespace

Result<TemporalPlan> PlanTemporal(int64_t latent_frames) {
  VAED_ASSIGN_OR_RETURN(PlanCounts counts, CountTemporal(latent_frames));
  TemporalPlan plan = std::move(counts.plan);
  plan.windows.reserve(static_cast<size_t>(counts.num_windows));
  for (int64_t i = 0; i < counts.num_windows; ++i) {
    TemporalWindow w;
    w.index = i;
    w.stream_begin_latent = i * kWindowStepLatentFrames;
    w.stream_end_latent = w.stream_begin_latent + kWindowLatentFrames;
    w.padding_latent_frames =
        std::max<int64_t>(0, w.stream_end_latent - std::max(w.stream_begin_latent, latent_frames));
    w.main_out_begin = i * kMainPixelFrames;
    plan.windows.push_back(w);
  }
  return plan;
}

Result<int64_t> OutputPixelFrames(int64_t latent_frames) {
  VAED_ASSIGN_OR_RETURN(PlanCounts counts, CountTemporal(latent_frames));
  return counts.plan.output_pixel_frames;
}

}  // namespace vaed::models::h3
