#include "daemon/models/h3/tiled_decode.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "daemon/models/h3/final_frames.h"
#include "daemon/models/tensor_memory.h"
#include "daemon/models/torch_status.h"

namespace vaed::models::h3 {

namespace {

// The official blend weights for e positions: (1 - p/e, p/e), p/e computed
// in the tile dtype as positions / e, and 1 - that (no fused operation).
std::pair<torch::Tensor, torch::Tensor> RampWeights(int64_t e, const torch::TensorOptions& o) {
  torch::Tensor positions = torch::arange(e, o);
  return {1 - torch::div(positions, e), torch::div(positions, e)};
}

// Runs the decoder on `batch`, accounting for the call.
torch::Tensor TimedDecode(const TileDecodeFn& decode, const torch::Tensor& batch, int64_t tiles,
                          TiledDecodeStats* stats) {
  stats->decode_time.Start();
  torch::Tensor out = decode(batch);
  stats->decode_time.Stop();
  stats->decoder_calls += 1;
  stats->max_tiles_per_call = std::max(stats->max_tiles_per_call, tiles);
  return out;
}

// DecodeWindow without the merge-time bookkeeping (the caller measures the
// whole span and subtracts the decoder time). stats->final_tiles_per_call
// is the rung in effect (the ladder lowers it).
// With a `group` of size > 1 this rank decodes only the tiles it owns
// (tile_group.h), the tiles are gathered to rank 0, and ranks other than 0
// return an undefined tensor (they do not merge).
torch::Tensor DecodeWindowImpl(const torch::Tensor& z_window, const TileGrid& grid,
                               const TileDecodeFn& decode, TiledDecodeStats* stats,
                               BlendRamps* ramps, TileGroup* group) {
  const bool distributed = group != nullptr && group->size() > 1;
  const int64_t batch = z_window.size(0);
  const int64_t n = grid.num_tiles();
  const int64_t cols = grid.cols.tiles();
  std::vector<TileRect> rects;
  rects.reserve(static_cast<size_t>(n));
  for (int64_t idx = 0; idx < n; ++idx) rects.push_back(grid.tile(idx));
  auto tile_latent = [&](const TileRect& r) {
    return z_window.narrow(3, r.y_latent, r.height_latent).narrow(4, r.x_latent, r.width_latent);
  };

  // Raw decoder output of every tile, row-major. Tiles are grouped by shape
  // (row-major inside a group; the official grid has one shape per window,
  // the grouping keeps any other grid correct) and fed tiles_per_call at a
  // time.
  std::vector<torch::Tensor> raw(static_cast<size_t>(n));
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> groups;
  for (int64_t idx = 0; idx < n; ++idx) {
    if (distributed && !group->Owns(idx)) continue;
    groups[{rects[idx].height_latent, rects[idx].width_latent}].push_back(idx);
  }
  for (const auto& [shape, members] : groups) {
    const int64_t count = static_cast<int64_t>(members.size());
    int64_t pos = 0;
    while (pos < count) {
      const int64_t k = std::min(stats->final_tiles_per_call, count - pos);
      std::vector<torch::Tensor> inputs;
      inputs.reserve(static_cast<size_t>(k));
      for (int64_t m = pos; m < pos + k; ++m) inputs.push_back(tile_latent(rects[members[m]]));
      torch::Tensor out;
      try {
        out = TimedDecode(decode, k == 1 ? inputs[0].contiguous() : torch::cat(inputs, 0), k,
                          stats);
      } catch (...) {
        const std::exception_ptr e = std::current_exception();
        if (k == 1 || !IsOutOfMemory(e)) throw;
        // The failed call's temporaries are gone with the unwinding; retry
        // the same tiles on a lower rung.
        inputs.clear();
        const int64_t lower = (k + 1) / 2;
        stats->fallbacks.push_back(
            std::to_string(k) + " -> " + std::to_string(lower) + " tiles per call: " +
            std::string(CurrentTorchErrorStatus("window tile call").message()));
        stats->final_tiles_per_call = lower;
        continue;
      }
      // [k*B, ...] -> k tensors of [B, ...] (official: unflatten + unbind).
      std::vector<torch::Tensor> parts = out.split(batch, 0);
      for (int64_t m = 0; m < k; ++m) raw[members[pos + m]] = parts[m];
      pos += k;
    }
  }

  stats->tiles_per_window = n;
  if (distributed) {
    // Tile i of the window is [B, 3, 4 * latent frames, 16h, 16w] float32
    // (TileDecodeFn's contract), on every rank.
    const int64_t pixel_frames = 4 * z_window.size(2);
    auto tile_shape = [&](int64_t i) {
      const TileRect& r = rects[static_cast<size_t>(i)];
      return std::vector<int64_t>{batch, 3, pixel_frames, r.height_px, r.width_px};
    };
    std::vector<torch::Tensor> mine;
    for (int64_t idx = 0; idx < n; ++idx) {
      if (group->Owns(idx)) mine.push_back(raw[static_cast<size_t>(idx)]);
    }
    raw = GatherTiles(*group, n, tile_shape, mine, z_window.device(), &stats->communication);
    if (group->rank() != 0) return torch::Tensor();
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
      tile = BlendRamp(raw[idx - cols], tile, grid.rows.overlap_px[r.row - 1], -2, ramps);
    }
    if (r.col > 0) {
      tile = BlendRamp(raw[idx - 1], tile, grid.cols.overlap_px[r.col - 1], -1, ramps);
    }
    const int64_t keep_h = r.height_px - (r.row < last_row ? grid.rows.overlap_px[r.row] : 0);
    const int64_t keep_w = r.width_px - (r.col < last_col ? grid.cols.overlap_px[r.col] : 0);
    window.narrow(-2, r.y_px, keep_h)
        .narrow(-1, r.x_px, keep_w)
        .copy_(tile.narrow(-2, 0, keep_h).narrow(-1, 0, keep_w));
  }
  return window;
}

}  // namespace

const std::pair<torch::Tensor, torch::Tensor>& BlendRamps::Get(int64_t e,
                                                               const torch::TensorOptions& o) {
  const Key key{e, static_cast<int>(o.dtype().toScalarType()), static_cast<int>(o.device().type()),
                static_cast<int>(o.device().index())};
  auto it = ramps_.find(key);
  if (it == ramps_.end()) {
    it = ramps_.emplace(key, RampWeights(e, o)).first;
  }
  return it->second;
}

torch::Tensor BlendRamp(const torch::Tensor& a, const torch::Tensor& b, int64_t overlap,
                        int64_t dim, BlendRamps* ramps) {
  const int64_t e = std::min({a.size(dim), b.size(dim), overlap});
  std::pair<torch::Tensor, torch::Tensor> weights =
      ramps != nullptr ? ramps->Get(e, b.options()) : RampWeights(e, b.options());
  std::vector<int64_t> shape(static_cast<size_t>(a.dim()), 1);
  const int64_t axis = dim < 0 ? dim + a.dim() : dim;
  shape[static_cast<size_t>(axis)] = e;
  const torch::Tensor weight_a = weights.first.view(shape);
  const torch::Tensor weight_b = weights.second.view(shape);
  torch::Tensor blended =
      a.narrow(axis, a.size(axis) - e, e) * weight_a + b.narrow(axis, 0, e) * weight_b;
  if (e < b.size(axis)) {
    return torch::cat({blended, b.narrow(axis, e, b.size(axis) - e)}, axis);
  }
  return blended;
}

torch::Tensor DecodeWindow(const torch::Tensor& z_window, const TileGrid& grid,
                           const TileDecodeFn& decode, int64_t tiles_per_call,
                           TiledDecodeStats* stats, BlendRamps* ramps, TileGroup* group) {
  TORCH_CHECK(tiles_per_call >= 1, "tiles_per_call is ", tiles_per_call, "; must be >= 1");
  stats->span_time.Start();
  stats->final_tiles_per_call = tiles_per_call;
  torch::Tensor window = DecodeWindowImpl(z_window, grid, decode, stats, ramps, group);
  stats->windows += 1;
  stats->span_time.Stop();
  return window;
}

torch::Tensor DecodeVideo(const torch::Tensor& z, const TemporalPlan& plan, const TileGrid& grid,
                          const TileDecodeFn& decode, int64_t tiles_per_call,
                          TiledDecodeStats* stats, const WindowProgressFn& progress,
                          BlendRamps* ramps, TileGroup* group,
                          const WindowFinalFn& final_frames) {
  TORCH_CHECK(tiles_per_call >= 1, "tiles_per_call is ", tiles_per_call, "; must be >= 1");
  stats->final_tiles_per_call = tiles_per_call;
  stats->span_time.Start();
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

  // Streamed output: hands over the frames final after window `k`.
  int64_t final_end = 0;
  auto announce = [&](int64_t k) {
    const int64_t end = FinalPixelFramesAfterWindow(plan, k);
    TORCH_CHECK(end <= write_pos, "window ", k, " made frames [0, ", end, ") final but only ",
                write_pos, " are written");
    if (!final_frames || end <= final_end) return;
    final_frames(out, final_end, end);
    final_end = end;
  };

  torch::Tensor prev_tail;
  for (const TemporalWindow& w : plan.windows) {
    torch::Tensor clip =
        stream.narrow(2, w.stream_begin_latent, w.stream_end_latent - w.stream_begin_latent);
    torch::Tensor dec = DecodeWindowImpl(clip, grid, decode, stats, ramps, group);
    stats->windows += 1;
    if (!dec.defined()) {
      // Not the output rank: its tiles went to rank 0, which assembles.
      if (progress) progress(w.index + 1, plan.num_windows());
      continue;
    }
    if (!out.defined()) {
      out = torch::empty({dec.size(0), dec.size(1), plan.output_pixel_frames, dec.size(3),
                          dec.size(4)},
                         dec.options());
    }
    torch::Tensor main = dec.narrow(2, kMainBeginFrame, kMainPixelFrames);
    if (prev_tail.defined()) main = BlendRamp(prev_tail, main, kFrameOverlap, 2, ramps);
    write(main);
    // Own copy, so the decoded window can be freed now.
    prev_tail = dec.narrow(2, kTailBeginFrame, kTailPixelFrames).clone();
    const bool last = w.index + 1 == plan.num_windows();
    if (last) write(prev_tail);  // the last window's tail closes the video
    announce(w.index);
    if (progress) progress(w.index + 1, plan.num_windows());
  }
  stats->span_time.Stop();
  if (!out.defined()) return out;  // not the output rank
  TORCH_CHECK(write_pos == plan.output_pixel_frames, "temporal assembly wrote ", write_pos,
              " frames, the plan has ", plan.output_pixel_frames);
  return out;
}

}  // namespace vaed::models::h3
