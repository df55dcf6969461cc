// Image-quality and exactness measures on uint8 RGB frames, as used by
// vaectl and the benchmark to compare a decode with the original pixels and
// with a reference decode.
//
// Definitions follow ../shared/data/taef2/README.md §6: the MSE is taken in
// float64 over every uint8 value of a frame (height_px * width_px * 3), and
// PSNR = 10 * log10(255^2 / MSE) in dB; for video the figure reported is the
// mean of the per-frame PSNRs.
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_COMMON_PSNR_H_
#define VAED_OPS_COMMON_PSNR_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace vaed::ops {

// Mean squared error of two equally long uint8 sequences, in float64.
// Precondition: a.size() == b.size(). Returns 0 for empty input.
double MeanSquaredError(std::span<const uint8_t> a, std::span<const uint8_t> b);

// PSNR in dB with peak 255. +infinity when the inputs are identical.
// Precondition: a.size() == b.size() > 0.
double PsnrDb(std::span<const uint8_t> a, std::span<const uint8_t> b);

struct FramePsnr {
  double mean_db = 0;  // mean of the per-frame PSNRs (+inf if any frame is identical)
  double min_db = 0;
  double max_db = 0;
  size_t frames = 0;
};

// Per-frame PSNR over `a` and `b` split into frames of `values_per_frame`
// consecutive values (e.g. NHWC uint8: H*W*3).
// Preconditions: a.size() == b.size(), values_per_frame > 0 and divides
// a.size(), a is not empty.
FramePsnr MeanFramePsnr(std::span<const uint8_t> a, std::span<const uint8_t> b,
                        size_t values_per_frame);

// Exactness of `a` against a reference `b`.
struct U8Diff {
  int max_abs_diff = 0;           // 0..255
  uint64_t values_differing = 0;  // values with a != b
  uint64_t values = 0;            // values compared
};

// Precondition: a.size() == b.size().
U8Diff CompareU8(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_PSNR_H_
