// Turning a decoder's raw output into the layout a request asked for.
//
// Thread-safety: stateless; `model` is only read (ToUnitRange is const).
#ifndef VAED_DAEMON_ENGINE_OUTPUT_FORMAT_H_
#define VAED_DAEMON_ENGINE_OUTPUT_FORMAT_H_

#include <torch/torch.h>

#include "daemon/engine/decode_job.h"
#include "daemon/models/vae_model.h"
#include "vaed/status.h"

namespace vaed::engine {

// The raw video output `raw` (float32 [frames, channels, height_px,
// width_px], any strides) as a new contiguous tensor in `format`
// (decode_job.h): kFloat32Nchw as is; kFloat32NchwUnit through the model's
// ToUnitRange (official post-processing, clamped to [0, 1]); kUint8Nhwc
// from that, round half to even (models::ToUint8Nhwc). Errors: LibTorch
// failures (kResourceExhausted when allocation fails).
Result<torch::Tensor> FormatVideo(const models::VaeModel& model, const torch::Tensor& raw,
                                  OutputFormat format);

// The audio output as contiguous float32 [channels, samples].
Result<torch::Tensor> FormatAudio(const torch::Tensor& wave);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_OUTPUT_FORMAT_H_
