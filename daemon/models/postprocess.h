// Post-processing of raw decoder output into displayable pixels.
//
// Thread-safety: pure functions; safe from any thread.
#ifndef VAED_DAEMON_MODELS_POSTPROCESS_H_
#define VAED_DAEMON_MODELS_POSTPROCESS_H_

#include <torch/torch.h>

#include "vaed/status.h"

namespace vaed::models {

// Converts raw decoder output to 8-bit RGB frames.
//
// Input: float32 NCHW [frames, channels, height_px, width_px] on any
// device, any strides, nominally in [0, 1] (values outside are clamped).
// Output: a new contiguous uint8 NHWC tensor [frames, height_px, width_px,
// channels] on the input's device, with
//   u8 = round_half_to_even(clamp(x, 0, 1) * 255)
// computed in float32, the rule of shared/data/taef2/README.md §1/§3
// (`torch.round` is half to even). NaN maps to 0.
// Errors: kInvalidArgument naming `output.dtype` / `output.shape` when the
// input is not float32 or not rank 4; LibTorch failures as in
// CurrentTorchErrorStatus() (kResourceExhausted when allocation fails).
Result<torch::Tensor> ToUint8Nhwc(const torch::Tensor& nchw_float);

// Value statistics of a decoded output (or a latent), for the sanity
// checks every reply reports (they never fail a request).
struct OutputStats {
  int64_t values = 0;
  int64_t nonfinite = 0;      // NaN, +Inf or -Inf
  // sqrt(mean(x^2)) and max |x| over the finite values, in double; NaN
  // when there are values but none is finite (an all-NaN output is not
  // silence), 0 for an empty tensor.
  double rms = 0;
  double peak_abs = 0;
  double clipped_fraction = 0;  // finite values with |x| >= clip_level, / values
  bool constant = false;      // values > 0, all finite and all equal
};

// Computes OutputStats of a float32 tensor of any shape and strides, on
// any device, in slices of at most 4M elements along dim 0 and within each
// slice, so the extra memory stays bounded (about 50 MB) however large
// the tensor is. The reductions run on the tensor's device and are read
// back to the host once, at the end (on a GPU that one read waits for the
// device's work so far: the figures are host values for the reply).
// `clip_level` <= 0 disables the clipping count.
// Errors: kInvalidArgument for a non-float32 tensor; LibTorch failures as
// in CurrentTorchErrorStatus().
Result<OutputStats> SummarizeValues(const torch::Tensor& x, double clip_level);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_POSTPROCESS_H_
