#include "daemon/models/h3/tiled_decode.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>
#include <vector>

namespace vaed::models::h3 {

namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Runs the decoder on `batch`, accounting for the call.
torch::Tensor TimedDecode(const TileDecodeFn& decode, const torch::Tensor& batch, int64_t tiles,
                          TiledDecodeStats* stats) {
  const auto t0 = SteadyClock::now();
  torch::Tensor out = decode(batch);
  stats->tile_decode_seconds += SecondsSince(t0);
  stats->decoder_calls += 1;
  stats->max_tiles_per_call = std::max(stats->max_tiles_per_call, tiles);
  return out;
}

// DecodeWindow without the merge-time bookkeeping (the caller measures the
// whole span and subtracts the decoder time).
torch::Tensor DecodeWindowImpl(const torch::Tensor& z_window, const TileGrid& grid,
                               const TileDecodeFn& decode, TileScheduling scheduling,
                               TiledDecodeStats* stats) {
  const int64_t batch = z_window.size(0);
  const int64_t n = grid.num_tiles();
  const int64_t cols = grid.cols.tiles();
  std::vector<TileRect> rects;
  rects.reserve(static_cast<size_t>(n));
  for (int64_t idx = 0; idx < n; ++idx) rects.push_back(grid.tile(idx));
  auto tile_latent = [&](const TileRect& r) {
    return z_window.narrow(3, r.y_latent, r.height_latent).narrow(4, r.x_latent, r.width_latent);
  };

  // Raw decoder output of every tile, row-major.
  std::vector<torch::Tensor> raw(static_cast<size_t>(n));
  if (scheduling == TileScheduling::kStacked) {
    // Group tiles by shape, keeping row-major order inside a group; the
    // official grid has one shape per window, the grouping keeps any other
    // grid correct.
    std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> groups;
    for (int64_t idx = 0; idx < n; ++idx) {
      groups[{rects[idx].height_latent, rects[idx].width_latent}].push_back(idx);
    }
    for (const auto& [shape, members] : groups) {
      std::vector<torch::Tensor> inputs;
      inputs.reserve(members.size());
      for (int64_t idx : members) inputs.push_back(tile_latent(rects[idx]));
      const int64_t k = static_cast<int64_t>(members.size());
      torch::Tensor out = TimedDecode(decode, torch::cat(inputs, 0), k, stats);
      // [k*B, ...] -> k tensors of [B, ...] (official: unflatten + unbind).
      std::vector<torch::Tensor> parts = out.split(batch, 0);
      for (int64_t m = 0; m < k; ++m) raw[members[m]] = parts[m];
    }
  } else {
    for (int64_t idx = 0; idx < n; ++idx) {
      raw[idx] = TimedDecode(decode, tile_latent(rects[idx]).contiguous(), 1, stats);
    }
  }

  const int64_t height_px = grid.rows.extent_px;
  const int64_t width_px = grid.cols.extent_px;
  const torch::Tensor& first = raw[0];
  torch::Tensor window = torch::empty(
      {batch, first.size(1), first.size(2), height_px, width_px}, first.options());
  const int64_t last_row = grid.rows.tiles() - 1;
  const int64_t last_col = cols - 1;
  for (int64_t idx = 0; idx < n; ++idx) {
    const TileRect& r = rects[idx];
    torch::Tensor tile = raw[idx];
    // Raw neighbours, as the official code does: the tile above and the
    // tile to the left are used before their own blending.
    if (r.row > 0) {
      tile = BlendRamp(raw[idx - cols], tile, grid.rows.overlap_px[r.row - 1], -2);
    }
    if (r.col > 0) {
      tile = BlendRamp(raw[idx - 1], tile, grid.cols.overlap_px[r.col - 1], -1);
    }
    const int64_t keep_h = r.height_px - (r.row < last_row ? grid.rows.overlap_px[r.row] : 0);
    const int64_t keep_w = r.width_px - (r.col < last_col ? grid.cols.overlap_px[r.col] : 0);
    window.narrow(-2, r.y_px, keep_h)
        .narrow(-1, r.x_px, keep_w)
        .copy_(tile.narrow(-2, 0, keep_h).narrow(-1, 0, keep_w));
  }
  stats->tiles_per_window = n;
  return window;
}

}  // namespace

torch::Tensor BlendRamp(const torch::Tensor& a, const torch::Tensor& b, int64_t overlap,
                        int64_t dim) {
  const int64_t e = std::min({a.size(dim), b.size(dim), overlap});
  // Same ops in the same order as the official blend: positions / e in the
  // tile dtype, 1 - that, two multiplies and an add (no fused multiply-add).
  torch::Tensor positions = torch::arange(e, b.options());
  torch::Tensor weight_b = torch::div(positions, e);
  torch::Tensor weight_a = 1 - torch::div(positions, e);
  std::vector<int64_t> shape(static_cast<size_t>(a.dim()), 1);
  const int64_t axis = dim < 0 ? dim + a.dim() : dim;
  shape[static_cast<size_t>(axis)] = e;
  weight_a = weight_a.view(shape);
  weight_b = weight_b.view(shape);
  torch::Tensor blended =
      a.narrow(axis, a.size(axis) - e, e) * weight_a + b.narrow(axis, 0, e) * weight_b;
  if (e < b.size(axis)) {
    return torch::cat({blended, b.narrow(axis, e, b.size(axis) - e)}, axis);
  }
  return blended;
}

torch::Tensor DecodeWindow(const torch::Tensor& z_window, const TileGrid& grid,
                           const TileDecodeFn& decode, TileScheduling scheduling,
                           TiledDecodeStats* stats) {
  const auto t0 = SteadyClock::now();
  const double decode_before = stats->tile_decode_seconds;
  torch::Tensor window = DecodeWindowImpl(z_window, grid, decode, scheduling, stats);
  stats->windows += 1;
  stats->tile_merge_seconds +=
      std::max(0.0, SecondsSince(t0) - (stats->tile_decode_seconds - decode_before));
  return window;
}

torch::Tensor DecodeVideo(const torch::Tensor& z, const TemporalPlan& plan, const TileGrid& grid,
                          const TileDecodeFn& decode, TileScheduling scheduling,
                          TiledDecodeStats* stats, const WindowProgressFn& progress) {
  const auto t0 = SteadyClock::now();
  const double decode_before = stats->tile_decode_seconds;
  torch::Tensor stream = z;
  if (plan.pad_latent_frames > 0) {
    // Official: repeat the last latent frame P times.
    torch::Tensor last = z.narrow(2, z.size(2) - 1, 1);
    stream = torch::cat({z, last.repeat({1, 1, plan.pad_latent_frames, 1, 1})}, 2);
  }

  torch::Tensor out;  // allocated on the first window, when the dtype is known
  int64_t write_pos = 0;
  auto write = [&](const torch::Tensor& part) {
    const int64_t frames = std::min(part.size(2), plan.output_pixel_frames - write_pos);
    if (frames <= 0) return;  // pad frames past the end are dropped
    out.narrow(2, write_pos, frames).copy_(part.narrow(2, 0, frames));
    write_pos += frames;
  };

  torch::Tensor prev_tail;
  for (const TemporalWindow& w : plan.windows) {
    torch::Tensor clip =
        stream.narrow(2, w.stream_begin_latent, w.stream_end_latent - w.stream_begin_latent);
    torch::Tensor dec = DecodeWindowImpl(clip, grid, decode, scheduling, stats);
    stats->windows += 1;
    if (!out.defined()) {
      out = torch::empty({dec.size(0), dec.size(1), plan.output_pixel_frames, dec.size(3),
                          dec.size(4)},
                         dec.options());
    }
    torch::Tensor main = dec.narrow(2, kMainBeginFrame, kMainPixelFrames);
    if (prev_tail.defined()) main = BlendRamp(prev_tail, main, kFrameOverlap, 2);
    write(main);
    // Own copy, so the decoded window can be freed now.
    prev_tail = dec.narrow(2, kTailBeginFrame, kTailPixelFrames).clone();
    if (progress) progress(w.index + 1, plan.num_windows());
  }
  write(prev_tail);
  stats->tile_merge_seconds +=
      std::max(0.0, SecondsSince(t0) - (stats->tile_decode_seconds - decode_before));
  TORCH_CHECK(write_pos == plan.output_pixel_frames, "temporal assembly wrote ", write_pos,
              " frames, the plan has ", plan.output_pixel_frames);
  return out;
}

}  // namespace vaed::models::h3
