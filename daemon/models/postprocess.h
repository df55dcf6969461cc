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
// Input: float32 NCHW [frames, channels, height_px, width_px] on CPU, any
// strides, nominally in [0, 1] (values outside are clamped).
// Output: a new contiguous uint8 NHWC tensor [frames, height_px, width_px,
// channels] with
//   u8 = round_half_to_even(clamp(x, 0, 1) * 255)
// computed in float32, the rule of shared/data/taef2/README.md §1/§3
// (`torch.round` is half to even). NaN maps to 0.
// Errors: kInvalidArgument naming `output.dtype` / `output.shape` when the
// input is not float32 or not rank 4; LibTorch failures as in
// CurrentTorchErrorStatus() (kResourceExhausted when allocation fails).
Result<torch::Tensor> ToUint8Nhwc(const torch::Tensor& nchw_float);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_POSTPROCESS_H_
