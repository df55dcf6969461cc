// Decoding with the TAEF2 decoder: the latent contract (Plan), the untiled
// decode in frame batches and the hybrid tiled decode (taef2.h).
#include "daemon/models/taef2.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "daemon/models/taef2_network.h"
#include "daemon/models/torch_status.h"

namespace vaed::models {
namespace {

using Clock = std::chrono::steady_clock;

std::string DimName(size_t i) {
  static const char* const kNames[] = {"frames", "channels", "height_latent", "width_latent"};
  return std::string("latent.shape[") + std::to_string(i) + "] (" + kNames[i] + ")";
}

// Deadline / cancellation (and the slow_tiles test fault) before a frame
// batch; throws DecodeCancelled, caught with the LibTorch errors.
void BeforeFrameBatch(const DecodeSettings& settings, int64_t begin, int64_t frames) {
  ThrowIfCancelled(settings.cancel, "before frame " + std::to_string(begin) + " of " +
                                        std::to_string(frames));
  if (settings.faults.slow_unit_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(settings.faults.slow_unit_ms));
  }
  TORCH_CHECK(begin == 0 || settings.faults.later_unit_exception <= 0,
              "injected fault later_unit_exception before frame ", begin, " of ", frames);
}

// After a frame batch: output frames [begin, end) of `frames` are final
// (streamed output: handed to settings.final_frames from `out`, the whole
// output, undefined on a rank that holds none; a failed hand-over throws
// DecodeCancelled with its status), then progress.
void AfterFrameBatch(const DecodeSettings& settings, const torch::Tensor& out, int64_t begin,
                     int64_t end, int64_t frames) {
  if (settings.final_frames && out.defined()) {
    Status s = settings.final_frames(out.narrow(0, begin, end - begin), begin, end);
    if (!s.ok()) throw DecodeCancelled(std::move(s));
  }
  if (settings.progress) settings.progress({.done = end, .total = frames, .unit = "frames"});
}

}  // namespace

int64_t Taef2Decoder::TilesPerUnit(const std::vector<int64_t>& latent_shape,
                                   const DecodeSettings& settings) const {
  if (!settings.tiling || latent_shape.size() != 4) return 0;
  Result<Taef2TilePlan> tiles = PlanTaef2Tiles(latent_shape[2], latent_shape[3],
                                               settings.tiling->tile_latent,
                                               settings.tiling->overlap_latent);
  return tiles.ok() ? tiles->num_tiles() : 1;
}

Result<DecodePlan> Taef2Decoder::Plan(DType latent_dtype,
                                      const std::vector<int64_t>& latent_shape) const {
  const std::string model = "model '" + info_.name + "'";
  VAED_RETURN_IF_ERROR(CheckLatentDtypeAndRank(info_, latent_dtype, latent_shape,
                                               {"frames", "32", "height_latent", "width_latent"}));
  for (size_t i = 0; i < 4; ++i) {
    if (latent_shape[i] < 1) {
      return InvalidArgument(DimName(i) + " is " + std::to_string(latent_shape[i]) +
                             "; must be >= 1");
    }
  }
  if (latent_shape[1] != kLatentChannels) {
    return InvalidArgument(DimName(1) + " is " + std::to_string(latent_shape[1]) + "; " + model +
                           " needs 32 latent channels");
  }
  if (latent_shape[0] > kMaxFrames) {
    return InvalidArgument(DimName(0) + " is " + std::to_string(latent_shape[0]) + "; " + model +
                           " accepts at most " + std::to_string(kMaxFrames) +
                           " frames per request");
  }
  for (size_t i = 2; i < 4; ++i) {
    if (latent_shape[i] > kMaxLatentExtent) {
      return InvalidArgument(DimName(i) + " is " + std::to_string(latent_shape[i]) + "; " + model +
                             " accepts at most " + std::to_string(kMaxLatentExtent) +
                             " latent cells (" + std::to_string(kMaxLatentExtent * kUpscale) +
                             " px)");
    }
  }
  DecodePlan plan;
  plan.frames = latent_shape[0];
  plan.channels = kOutputChannels;
  plan.height_px = latent_shape[2] * kUpscale;
  plan.width_px = latent_shape[3] * kUpscale;
  plan.shape_bucket =
      info_.name + ":" + std::to_string(latent_shape[2]) + "x" + std::to_string(latent_shape[3]);
  return plan;
}

Result<torch::Tensor> Taef2Decoder::Decode(const torch::Tensor& latent,
                                           const DecodeSettings& settings,
                                           DecodeReport* report) {
  if (settings.tiling) {
    // The diagnostic knob (decode_options.h): the hybrid tiled decode.
    return DecodeTiledHybrid(latent,
                             Taef2TilingOptions{.tile_latent = settings.tiling->tile_latent,
                                                .overlap_latent = settings.tiling->overlap_latent},
                             report, settings);
  }
  VAED_ASSIGN_OR_RETURN(DecodePlan plan, PlanLatentOnDevice(latent));
  try {
    torch::NoGradGuard no_grad;
    const auto start = std::chrono::steady_clock::now();
    // Peak memory grows with frames x latent cells per forward call, so
    // large frames go through in smaller batches (kMaxCellsPerForward).
    const int64_t cells = latent.size(2) * latent.size(3);
    const int64_t batch =
        std::clamp<int64_t>(kMaxCellsPerForward / std::max<int64_t>(cells, 1), 1, frame_batch_);
    torch::Tensor out;
    if (plan.frames <= batch) {
      BeforeFrameBatch(settings, 0, plan.frames);
      out = Forward(latent);
      AfterFrameBatch(settings, out, 0, plan.frames, plan.frames);
    } else {
      out = torch::empty({plan.frames, plan.channels, plan.height_px, plan.width_px},
                         latent.options());
      for (int64_t begin = 0; begin < plan.frames; begin += batch) {
        const int64_t n = std::min(batch, plan.frames - begin);
        BeforeFrameBatch(settings, begin, plan.frames);
        out.narrow(0, begin, n).copy_(Forward(latent.narrow(0, begin, n)));
        AfterFrameBatch(settings, out, begin, begin + n, plan.frames);
      }
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (report != nullptr) report->timings.Add("taef2.decode_latent", elapsed.count());
    return out;
  } catch (...) {
    return CurrentTorchErrorStatus("model '" + info_.name + "': decode of latent " +
                                   ShapeToString(latent.sizes().vec()));
  }
}

// 2-D blend weights w_y(y) * w_x(x) per tile, kept as their factors: a row
// vector [th, 1] per tile row and a column vector [1, tw] per tile column
// (Taef2AxisTiles::BlendWeights), float32 on the decode's device.
struct Taef2Decoder::HybridBlend {
  std::vector<torch::Tensor> row_w, col_w;

  // May throw c10::Error.
  HybridBlend(const Taef2TilePlan& tiles, const torch::Device& device) {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    auto weights = [&](const std::vector<float>& w) { return torch::tensor(w, f32).to(device); };
    for (int64_t i = 0; i < tiles.rows.tiles(); ++i) {
      row_w.push_back(weights(tiles.rows.BlendWeights(i)).view({-1, 1}));
    }
    for (int64_t i = 0; i < tiles.cols.tiles(); ++i) {
      col_w.push_back(weights(tiles.cols.BlendWeights(i)).view({1, -1}));
    }
  }

  // out[tile r] += (w_y * w_x) * tile_out. The 2-D weights are formed
  // before they meet the tile so that each output term is one rounding of
  // (exact weight) x tile, as in the reference; add_ of a separately
  // rounded product, not addcmul_, which may fuse.
  void Accumulate(torch::Tensor& out, const TileRect& r, const torch::Tensor& tile_out) const {
    out.narrow(2, r.y_px, r.height_px)
        .narrow(3, r.x_px, r.width_px)
        .add_(tile_out.mul(row_w[static_cast<size_t>(r.row)] * col_w[static_cast<size_t>(r.col)]));
  }
};

int64_t Taef2Decoder::DecodeHybridTiles(const torch::Tensor& features, const Taef2TilePlan& tiles,
                                        const HybridBlend& blend, TileGroup* group,
                                        torch::Tensor out,
                                        TileCommunicationStats* communication) const {
  int64_t calls = 0;
  auto tail = [&](int64_t i) {
    const TileRect r = tiles.tile(i);
    ++calls;
    return Tail(features.narrow(2, r.y_latent, r.height_latent)
                    .narrow(3, r.x_latent, r.width_latent)
                    .contiguous());
  };
  if (group == nullptr || group->size() <= 1) {
    // One tile's output alive at a time.
    for (int64_t i = 0; i < tiles.num_tiles(); ++i) blend.Accumulate(out, tiles.tile(i), tail(i));
    return calls;
  }
  // Tile-parallel (tile_group.h): the tails of this rank's tiles go to
  // rank 0, which blends all of them in tile order as the single-rank path
  // does.
  std::vector<torch::Tensor> mine;
  for (int64_t i = 0; i < tiles.num_tiles(); ++i) {
    if (group->Owns(i)) mine.push_back(tail(i));
  }
  const int64_t n = features.size(0);
  std::vector<torch::Tensor> all = GatherTiles(
      *group, tiles.num_tiles(),
      [&](int64_t i) {
        const TileRect r = tiles.tile(i);
        return std::vector<int64_t>{n, kOutputChannels, r.height_px, r.width_px};
      },
      mine, features.device(), communication);
  if (group->rank() == 0) {
    for (int64_t i = 0; i < tiles.num_tiles(); ++i) {
      blend.Accumulate(out, tiles.tile(i), all[static_cast<size_t>(i)]);
    }
  }
  return calls;
}

Result<torch::Tensor> Taef2Decoder::DecodeTiledHybrid(const torch::Tensor& latent,
                                                      const Taef2TilingOptions& options,
                                                      DecodeReport* report,
                                                      const DecodeSettings& settings) {
  VAED_ASSIGN_OR_RETURN(DecodePlan plan, PlanLatentOnDevice(latent));
  VAED_ASSIGN_OR_RETURN(
      Taef2TilePlan tiles,
      PlanTaef2Tiles(latent.size(2), latent.size(3), options.tile_latent, options.overlap_latent));
  try {
    torch::NoGradGuard no_grad;
    const auto start = Clock::now();
    std::chrono::duration<double> stem_seconds{0}, tiles_seconds{0};
    const HybridBlend blend(tiles, latent.device());
    // After the stem, peak memory follows frames x tile cells (the stem's
    // own activations are 64 channels at latent resolution, 1/64 of that).
    const int64_t tile_cells = tiles.rows.tile_extent_latent * tiles.cols.tile_extent_latent;
    const int64_t batch = std::clamp<int64_t>(
        kMaxCellsPerForward / std::max<int64_t>(tile_cells, 1), 1, frame_batch_);
    // Tile-parallel: every rank runs the stem on the whole batch (it is
    // global) and the tails of its own tiles; rank 0 alone holds the output.
    TileGroup* group = settings.group;
    const bool output_rank = group == nullptr || group->size() <= 1 || group->rank() == 0;
    TileCommunicationStats communication;
    torch::Tensor out;
    if (output_rank) {
      out = torch::zeros({plan.frames, plan.channels, plan.height_px, plan.width_px},
                         latent.options());
    }
    int64_t calls = 0;
    for (int64_t begin = 0; begin < plan.frames; begin += batch) {
      const int64_t n = std::min(batch, plan.frames - begin);
      BeforeFrameBatch(settings, begin, plan.frames);
      const auto t0 = Clock::now();
      const torch::Tensor features = Stem(latent.narrow(0, begin, n));
      const auto t1 = Clock::now();
      stem_seconds += t1 - t0;
      const double communication_before = communication.seconds;
      calls += DecodeHybridTiles(features, tiles, blend, group,
                                 output_rank ? out.narrow(0, begin, n) : torch::Tensor(),
                                 &communication);
      tiles_seconds += Clock::now() - t1 -
                       std::chrono::duration<double>(communication.seconds - communication_before);
      AfterFrameBatch(settings, out, begin, begin + n, plan.frames);
    }
    if (report != nullptr) {
      report->timings.Add("taef2.stem", stem_seconds.count());
      report->timings.Add("taef2.tiles", tiles_seconds.count());
      if (communication.collectives > 0) {
        report->timings.Add("taef2.tile_communication", communication.seconds);
      }
      report->timings.Add("taef2.decode_latent",
                          std::chrono::duration<double>(Clock::now() - start).count());
      report->tiling.tiled = true;
      report->tiling.tile_rows = tiles.rows.tiles();
      report->tiling.tile_cols = tiles.cols.tiles();
      report->tiling.decoder_calls = calls;
      report->tiling.tiles_decoded_here = calls;
      report->tiling.max_tiles_per_call = 1;
    }
    return out;
  } catch (...) {
    return CurrentTorchErrorStatus("model '" + info_.name + "': hybrid tiled decode of latent " +
                                   ShapeToString(latent.sizes().vec()) + " (tile_latent " +
                                   std::to_string(options.tile_latent) + ", overlap_latent " +
                                   std::to_string(options.overlap_latent) + ")");
  }
}

}  // namespace vaed::models
