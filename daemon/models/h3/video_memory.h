// How much memory one H3 video decode needs at its peak, estimated from the
// request's shape before anything is allocated. The daemon's
// admission compares it with what a request may use (the memory budget, or
// the host's memory, minus the resident weights) and refuses a request that
// cannot fit with an error naming the budget, instead of a fixed cap on the
// latent's extents.
//
// What is counted (bytes; float32 = 4, the compute dtype's size for the
// decoder's activations), following the buffers the decode really holds
// (tiled_decode.cc, decode_run.cc, engine/output_format.cc):
//   latent:  the float32 latent, its de-normalised copy and the padded
//            stream: 3 x 24 x (T + P) x h x w x 4;
//   output:  the raw float32 video [1, 3, frames, H, W] that the temporal
//            assembly fills (frames = official frame count, H = 16 h,
//            W = 16 w);
//   window:  one decoded temporal window: the raw tiles of its 28 pixel
//            frames (each tile [1, 3, 28, tile_h, tile_w], overlaps counted
//            twice as they are held twice), the assembled window
//            [1, 3, 28, H, W] and the 5-frame tail carried to the next;
//   call:    one sequential decoder call on the largest tile: the tokens
//            (7 x tile_h/16 x tile_w/16 + registers + 1) through a block
//            (residual, norms, q/k/v/out: 6 x dim; gated FFN: 3 x
//            ffn_inner) and eager attention's score and softmax matrices
//            (2 x heads x tokens^2), in the compute dtype;
//   format:  converting the raw video to the output (engine/
//            output_format.h): the unit-range float32 copy next to the raw
//            video, and the uint8 frames (a quarter of it).
// peak = latent + max(output + window + call, 2 x output + output / 4).
//
// It is an estimate (allocator rounding, LibTorch temporaries and BLAS
// scratch are not modelled; stacked tiles are chosen later, against the
// headroom measured then, and fall back to sequential), good to a few tens
// of percent: it separates what fits from what cannot, it does not replace
// the budget check at allocation time (tensor_memory.h) or the failure
// ladder.
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_MODELS_H3_VIDEO_MEMORY_H_
#define VAED_DAEMON_MODELS_H3_VIDEO_MEMORY_H_

#include <cstdint>
#include <string>

#include "daemon/models/h3/video_config.h"
#include "vaed/status.h"

namespace vaed::models::h3 {

struct VideoMemoryEstimate {
  uint64_t latent_bytes = 0;
  uint64_t output_bytes = 0;
  uint64_t window_bytes = 0;
  uint64_t call_bytes = 0;
  uint64_t format_bytes = 0;  // what formatting adds on top of the output
  // latent + max(output + window + call, output + format).
  uint64_t peak_bytes() const;
  // "output 5.1 GiB, one window 2.6 GiB, one decoder call 0.9 GiB, latent
  // 0.1 GiB, formatting 6.4 GiB": the terms, for error messages.
  std::string Describe() const;
};

// The estimate for the latent [1, 24, latent_frames, height_latent,
// width_latent] decoded by a decoder of `config` whose activations take
// `activation_bytes` per element (4 for float32, 2 for bfloat16/float16).
// Errors: the planner's (PlanTemporal, PlanTileGrid: kInvalidArgument) for
// extents it does not accept.
Result<VideoMemoryEstimate> EstimateVideoMemory(const VideoDecoderConfig& config,
                                                int64_t activation_bytes, int64_t latent_frames,
                                                int64_t height_latent, int64_t width_latent);

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_VIDEO_MEMORY_H_
