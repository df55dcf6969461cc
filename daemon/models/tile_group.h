// Tile-parallel decode across the ranks of a VAE group (DESIGN.md
// §2 item 9).
//
// Every rank of the group runs the same decode plan on the same latent.
// Assignment rule: tile t of a unit of work (an H3 temporal window, a
// TAEF2 frame batch) is decoded by rank t mod S, t being the row-major tile
// index: round-robin, as the official `_local_tile_indices`
// (range(sp_rank, num_tiles, sp_size) in FL2VA/video_vae/klvae.py of
// MiniMax-AI/MiniMax-H3 at 8d8824e). Each rank decodes its tiles (stacked
// or sequential per the model's policy), the results are gathered to rank
// 0 (the output rank), and rank 0 merges them in the fixed tile order, so
// the output bytes do not depend on S. A rank with no tile in a unit still
// takes part in the gather with an empty (zero-padded) payload, so fewer
// tiles than ranks never hangs.
//
// Unlike the official all-gather (every rank receives every tile and
// merges redundantly), results go to rank 0 only: the others never merge.
//
// Thread-safety: a TileGroup is used by one thread (its rank's) at a time.
#ifndef VAED_DAEMON_MODELS_TILE_GROUP_H_
#define VAED_DAEMON_MODELS_TILE_GROUP_H_

#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::models {

// A collective of the group failed or timed out, thrown out of model code
// by TileGroup implementations: model code reports errors by exception
// inside its LibTorch adapter (tile loops, as DecodeCancelled), and
// CurrentTorchErrorStatus() returns the Status it carries unchanged but for
// the context (code kUnavailable, reason kCollective; a sticky device error
// keeps code and reason kStickyDevice), so the error keeps its type through
// the unwinding. The communicator is aborted by then; the
// engine falls back to decoding on the output rank alone.
class CollectiveFailed : public std::exception {
 public:
  // A sticky device error keeps its reason (the daemon must restart);
  // every other failure of a collective is kCollective.
  explicit CollectiveFailed(Status status)
      : status_(status.reason() == ErrorReason::kStickyDevice
                    ? std::move(status)
                    : std::move(status).WithReason(ErrorReason::kCollective)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

class TileGroup {
 public:
  virtual ~TileGroup() = default;

  // This rank's index in the group (0 = the output rank) and the group size.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Collective: gathers every rank's `packed` (float32, 1-D, contiguous, the
  // same length on every rank) to rank 0. Returns size() tensors on rank 0
  // (index r = rank r's buffer) and none elsewhere. Throws
  // CollectiveFailed.
  virtual std::vector<torch::Tensor> GatherToOutputRank(const torch::Tensor& packed) = 0;

  // True when rank() decodes tile `tile` (the round-robin rule above).
  bool Owns(int64_t tile) const { return tile % size() == rank(); }
};

// Seconds spent inside GatherTiles (packing, the collective, unpacking),
// for the `video_vae.tile_communication` component.
struct TileCommunicationStats {
  double seconds = 0;
  int64_t collectives = 0;
  int64_t tiles_decoded_here = 0;  // tiles this rank decoded
};

// Gathers the tiles of one unit of work to the output rank. `count` tiles
// in all; tile i is float32 of shape `tile_shape(i)` (the same on every
// rank, from the shared plan); `mine` holds this rank's tiles (those with
// group.Owns(i)) in increasing i. Every rank packs its tiles into one
// buffer on `device` (the rank's: where its tiles are) padded to the
// largest rank's element count and takes part in one gather. Returns on
// rank 0 all `count` tiles in index order (its own unchanged, the others
// views of the gathered buffers, on the device the group returns them on),
// elsewhere {}. Throws CollectiveFailed (from the group) or c10::Error.
std::vector<torch::Tensor> GatherTiles(
    TileGroup& group, int64_t count, const std::function<std::vector<int64_t>(int64_t)>& tile_shape,
    const std::vector<torch::Tensor>& mine, const torch::Device& device,
    TileCommunicationStats* stats);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TILE_GROUP_H_
