// The H3 tiled decode assembly (blend, tile placement, temporal windows)
// with a synthetic per-tile decoder, against a literal transcription of the
// official list-and-cat algorithm (spec/h3_vae.md §2.2-2.4). The real
// decoder is covered by h3_video_vae_test against the golden vectors.
#include "daemon/models/h3/tiled_decode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace vaed::models::h3 {
namespace {

// A stand-in decoder: [n, 24, t, h, w] -> [n, 3, 4t, 16h, 16w]. Nearest
// upsampling of three latent channels plus a term that depends on the
// position INSIDE the tile, so overlapping tiles disagree and the blend
// matters (as it does for the real tile-local decoder).
torch::Tensor FakeDecode(const torch::Tensor& z) {
  torch::Tensor x = z.narrow(1, 0, 3);
  x = x.repeat_interleave(4, 2).repeat_interleave(16, 3).repeat_interleave(16, 4);
  const int64_t h = x.size(3), w = x.size(4), f = x.size(2);
  torch::Tensor ry = torch::arange(h, torch::kFloat).div(h).view({1, 1, 1, h, 1});
  torch::Tensor rx = torch::arange(w, torch::kFloat).div(w).view({1, 1, 1, 1, w});
  torch::Tensor rt = torch::arange(f, torch::kFloat).div(f).view({1, 1, f, 1, 1});
  return x + ry * 0.5 + rx * 0.25 + rt * 0.125;
}

// The official blend, transcribed as written (klvae.py `blend`).
torch::Tensor RefBlend(const torch::Tensor& a, const torch::Tensor& b, int64_t extent,
                       int64_t dim) {
  extent = std::min({a.size(dim), b.size(dim), extent});
  torch::Tensor positions = torch::arange(extent, b.options());
  torch::Tensor wa = 1 - positions / extent;
  torch::Tensor wb = positions / extent;
  std::vector<int64_t> shape(a.dim(), 1);
  const int64_t d = dim < 0 ? dim + a.dim() : dim;
  shape[d] = extent;
  torch::Tensor blended = a.narrow(d, a.size(d) - extent, extent) * wa.view(shape) +
                          b.narrow(d, 0, extent) * wb.view(shape);
  if (extent < b.size(d)) return torch::cat({blended, b.narrow(d, extent, b.size(d) - extent)}, d);
  return blended;
}

// The official tiled_decode, transcribed (rows of blended, cropped tiles, cat).
torch::Tensor RefTiledDecode(const torch::Tensor& z, const TileGrid& grid) {
  const int64_t rows = grid.rows.tiles(), cols = grid.cols.tiles();
  std::vector<std::vector<torch::Tensor>> raw(rows, std::vector<torch::Tensor>(cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      raw[i][j] = FakeDecode(z.narrow(3, grid.rows.start_latent(i),
                                      grid.rows.end_latent(i) - grid.rows.start_latent(i))
                                 .narrow(4, grid.cols.start_latent(j),
                                         grid.cols.end_latent(j) - grid.cols.start_latent(j)));
    }
  }
  std::vector<torch::Tensor> result_rows;
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<torch::Tensor> result_row;
    for (int64_t j = 0; j < cols; ++j) {
      torch::Tensor tile = raw[i][j];
      if (i > 0) tile = RefBlend(raw[i - 1][j], tile, grid.rows.overlap_px[i - 1], -2);
      if (j > 0) tile = RefBlend(raw[i][j - 1], tile, grid.cols.overlap_px[j - 1], -1);
      if (i < rows - 1) tile = tile.narrow(-2, 0, tile.size(-2) - grid.rows.overlap_px[i]);
      if (j < cols - 1) tile = tile.narrow(-1, 0, tile.size(-1) - grid.cols.overlap_px[j]);
      result_row.push_back(tile);
    }
    result_rows.push_back(torch::cat(result_row, -1));
  }
  return torch::cat(result_rows, -2);
}

// The official non-streaming decode_temporal, transcribed.
torch::Tensor RefDecodeTemporal(torch::Tensor z, const TileGrid& grid) {
  const int64_t t = z.size(2);
  const int64_t remainder = (t + 3) % 5;
  const int64_t pad = remainder == 0 ? 0 : 5 - remainder;
  const int64_t chunks = (t + 3 + pad) / 5 - 1;
  if (pad > 0) z = torch::cat({z, z.narrow(2, t - 1, 1).repeat({1, 1, pad, 1, 1})}, 2);
  std::vector<torch::Tensor> out;
  torch::Tensor overlap;
  for (int64_t i = 0; i < chunks; ++i) {
    torch::Tensor dec = RefTiledDecode(z.narrow(2, 5 * i, 7), grid);
    for (int64_t j = 0; j < 2; ++j) {
      const int64_t begin = j * 20, end = std::min<int64_t>(begin + 20, dec.size(2));
      torch::Tensor chunk = dec.narrow(2, begin, end - begin);
      chunk = chunk.narrow(2, 3, chunk.size(2) - 3);
      if (j == 0) {
        if (overlap.defined()) chunk = RefBlend(overlap, chunk, 5, -3);
        out.push_back(chunk);
      } else {
        overlap = chunk;
      }
    }
  }
  out.push_back(overlap);
  torch::Tensor dec = torch::cat(out, 2);
  int64_t pad_frames = 0;
  for (int64_t k = 0; k < pad; ++k) pad_frames += (t + k) % 5 == 0 ? 1 : 4;
  return dec.narrow(2, 0, dec.size(2) - pad_frames);
}

torch::Tensor RandomLatent(std::vector<int64_t> shape, uint64_t seed) {
  torch::Generator g = at::detail::createCPUGenerator(seed);
  return torch::randn(shape, g, torch::TensorOptions().dtype(torch::kFloat));
}

bool BitwiseEqual(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && torch::equal(a.contiguous(), b.contiguous());
}

TEST(H3TiledDecodeTest, BlendRampWeightsNeverReachOne) {
  torch::Tensor a = torch::full({1, 6}, 10.0f);
  torch::Tensor b = torch::full({1, 6}, 2.0f);
  torch::Tensor out = BlendRamp(a, b, 4, 1);
  ASSERT_EQ(out.sizes(), b.sizes());
  // p/e = 0, .25, .5, .75 -> 10, 8, 6, 4; then pure b.
  const std::vector<float> expect = {10, 8, 6, 4, 2, 2};
  for (int64_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[0][i].item<float>(), expect[i]) << i;
}

TEST(H3TiledDecodeTest, BlendRampExtentIsClippedToBothTensors) {
  torch::Tensor a = torch::full({3}, 1.0f);
  torch::Tensor b = torch::full({5}, 0.0f);
  torch::Tensor out = BlendRamp(a, b, 8, 0);  // e = min(3, 5, 8) = 3
  ASSERT_EQ(out.size(0), 5);
  EXPECT_FLOAT_EQ(out[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(out[2].item<float>(), 1.0f - 2.0f / 3.0f);
  EXPECT_FLOAT_EQ(out[3].item<float>(), 0.0f);
}

TEST(H3TiledDecodeTest, BlendRampMatchesOfficialTranscriptionBitwise) {
  torch::Tensor a = RandomLatent({2, 3, 5, 256, 256}, 1);
  torch::Tensor b = RandomLatent({2, 3, 5, 256, 256}, 2);
  for (int64_t e : {64, 112, 144, 240}) {
    EXPECT_TRUE(BitwiseEqual(BlendRamp(a, b, e, -1), RefBlend(a, b, e, -1))) << e;
    EXPECT_TRUE(BitwiseEqual(BlendRamp(a, b, e, -2), RefBlend(a, b, e, -2))) << e;
  }
}

struct GridCase {
  int64_t h, w;  // latent cells
};

class H3WindowTest : public ::testing::TestWithParam<GridCase> {};

TEST_P(H3WindowTest, DecodeWindowEqualsOfficialConcatenationBitwise) {
  const GridCase c = GetParam();
  Result<TileGrid> grid = PlanTileGrid(c.h, c.w);
  ASSERT_TRUE(grid.ok());
  torch::Tensor z = RandomLatent({1, 24, 7, c.h, c.w}, 7);
  const int64_t n = grid->num_tiles();
  const torch::Tensor ref = RefTiledDecode(z, *grid);
  BlendRamps ramps;
  const std::pair<int64_t, BlendRamps*> runs[] = {
      {kSequential, nullptr}, {2, &ramps}, {kAllTiles, &ramps}};  // the last reuses the ramps
  for (const auto& [per_call, cache] : runs) {
    {
      SCOPED_TRACE("tiles per call " + std::to_string(per_call) +
                   (cache ? ", cached ramps" : ""));
      TiledDecodeStats stats;
      torch::Tensor mine = DecodeWindow(z, *grid, FakeDecode, per_call, &stats, cache);
      EXPECT_TRUE(BitwiseEqual(mine, ref));
      const int64_t k = std::min(per_call, n);
      EXPECT_EQ(stats.tiles_per_window, n);
      EXPECT_EQ(stats.decoder_calls, (n + k - 1) / k);
      EXPECT_EQ(stats.max_tiles_per_call, k);
      EXPECT_TRUE(stats.fallbacks.empty());
    }
  }
}

// 1 tile, 2x2 with 192-px overlaps (wider than half a tile), a 3-row grid
// with 144-px overlaps (three tiles cover some rows), a small canvas.
INSTANTIATE_TEST_SUITE_P(Grids, H3WindowTest,
                         ::testing::Values(GridCase{16, 16}, GridCase{20, 20}, GridCase{30, 24},
                                           GridCase{14, 14}, GridCase{16, 17}),
                         [](const auto& info) {
                           return std::to_string(info.param.h) + "x" +
                                  std::to_string(info.param.w);
                         });

TEST(H3TiledDecodeTest, DecodeVideoEqualsOfficialTemporalAssemblyForEveryPadding) {
  Result<TileGrid> grid = PlanTileGrid(16, 17);  // two tiles per window
  ASSERT_TRUE(grid.ok());
  // T = 3..7 covers every pad count (4..0) with one window, 8..13 with
  // two or three windows.
  for (int64_t t : {3, 4, 5, 6, 7, 8, 10, 12, 13}) {
    SCOPED_TRACE("T=" + std::to_string(t));
    Result<TemporalPlan> plan = PlanTemporal(t);
    ASSERT_TRUE(plan.ok());
    torch::Tensor z = RandomLatent({1, 24, t, 16, 17}, 100 + t);
    TiledDecodeStats stats;
    int64_t progress_calls = 0;
    torch::Tensor mine = DecodeVideo(z, *plan, *grid, FakeDecode, kSequential,
                                     &stats, [&](int64_t done, int64_t total) {
                                       ++progress_calls;
                                       EXPECT_EQ(total, plan->num_windows());
                                       EXPECT_EQ(done, progress_calls);
                                     });
    torch::Tensor ref = RefDecodeTemporal(z, *grid);
    ASSERT_EQ(mine.size(2), plan->output_pixel_frames);
    EXPECT_TRUE(BitwiseEqual(mine, ref));
    EXPECT_EQ(stats.windows, plan->num_windows());
    EXPECT_EQ(stats.decoder_calls, plan->num_windows() * 2);
    EXPECT_EQ(progress_calls, plan->num_windows());
    EXPECT_GE(stats.TileMergeSeconds(), 0.0);
    EXPECT_GT(stats.TileDecodeSeconds(), 0.0);  // the decoder calls were timed
  }
}

// A decoder that runs out of memory on calls of more than `limit` tiles,
// the way a real allocation failure surfaces (c10::OutOfMemoryError).
TileDecodeFn DecodeWithMemoryFor(int64_t limit, int* failures) {
  return [limit, failures](const torch::Tensor& tiles) {
    if (tiles.size(0) > limit) {
      ++*failures;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "out of memory: test limit of ", limit,
                       " tiles, got ", tiles.size(0));
    }
    return FakeDecode(tiles);
  };
}

TEST(H3TiledDecodeTest, OutOfMemoryStepsDownTheLadderAndKeepsTheBytes) {
  Result<TileGrid> grid = PlanTileGrid(30, 24);  // 3x2 = 6 tiles per window
  Result<TemporalPlan> plan = PlanTemporal(7);  // 1 window
  ASSERT_TRUE(grid.ok() && plan.ok());
  torch::Tensor z = RandomLatent({1, 24, 7, 30, 24}, 21);
  const torch::Tensor ref = RefDecodeTemporal(z, *grid);
  int failures = 0;
  TiledDecodeStats stats;
  torch::Tensor mine =
      DecodeVideo(z, *plan, *grid, DecodeWithMemoryFor(2, &failures), kAllTiles, &stats);
  EXPECT_TRUE(BitwiseEqual(mine, ref));
  // 6 -> 3 -> 2.
  EXPECT_EQ(failures, 2);
  ASSERT_EQ(stats.fallbacks.size(), 2u);
  EXPECT_THAT(stats.fallbacks[0], ::testing::StartsWith("6 -> 3 tiles per call: "));
  EXPECT_THAT(stats.fallbacks[0], ::testing::HasSubstr("test limit of 2"));
  EXPECT_THAT(stats.fallbacks[1], ::testing::StartsWith("3 -> 2 tiles per call: "));
  EXPECT_EQ(stats.final_tiles_per_call, 2);
  EXPECT_EQ(stats.decoder_calls, 3);  // 3 calls of 2 tiles
}

TEST(H3TiledDecodeTest, OutOfMemoryAtOneTilePerCallAndOtherErrorsPropagate) {
  Result<TileGrid> grid = PlanTileGrid(20, 20);
  ASSERT_TRUE(grid.ok());
  torch::Tensor z = RandomLatent({1, 24, 7, 20, 20}, 22);
  int failures = 0;
  TiledDecodeStats stats;
  EXPECT_THROW(DecodeWindow(z, *grid, DecodeWithMemoryFor(0, &failures), kAllTiles, &stats),
               c10::OutOfMemoryError);
  EXPECT_EQ(failures, 3);  // 4, 2, then 1 tile per call
  EXPECT_EQ(stats.final_tiles_per_call, 1);
  // A non-memory error is not retried on a lower rung.
  int calls = 0;
  TiledDecodeStats other;
  EXPECT_THROW(DecodeWindow(
                   z, *grid,
                   [&calls](const torch::Tensor&) -> torch::Tensor {
                     ++calls;
                     throw std::runtime_error("broken tile");
                   },
                   kAllTiles, &other),
               std::runtime_error);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(other.fallbacks.empty());
}

TEST(H3TiledDecodeTest, PadFramesRepeatTheLastLatentFrame) {
  // T=13 pads 4 frames; replacing the last input frame changes the padded
  // window, replacing an earlier frame of the final window does too, but
  // no output depends on anything past the input.
  Result<TileGrid> grid = PlanTileGrid(16, 16);
  Result<TemporalPlan> plan = PlanTemporal(13);
  ASSERT_TRUE(grid.ok() && plan.ok());
  torch::Tensor z = RandomLatent({1, 24, 13, 16, 16}, 5);
  TiledDecodeStats stats;
  torch::Tensor a = DecodeVideo(z, *plan, *grid, FakeDecode, kSequential, &stats);
  torch::Tensor z2 = z.clone();
  z2.narrow(2, 12, 1).add_(1.0);
  torch::Tensor b = DecodeVideo(z2, *plan, *grid, FakeDecode, kSequential, &stats);
  EXPECT_EQ(a.size(2), 43);
  // Frames before window 2's influence are unchanged; the tail changes.
  EXPECT_TRUE(torch::equal(a.narrow(2, 0, 34), b.narrow(2, 0, 34)));
  EXPECT_FALSE(torch::equal(a.narrow(2, 34, 9), b.narrow(2, 34, 9)));
}

}  // namespace
}  // namespace vaed::models::h3
