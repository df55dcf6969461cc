#include "daemon/models/postprocess.h"

#include <string>

#include "daemon/models/torch_status.h"

namespace vaed::models {

Result<torch::Tensor> ToUint8Nhwc(const torch::Tensor& nchw_float) {
  if (!nchw_float.defined()) return InvalidArgument("output is an undefined tensor");
  if (nchw_float.scalar_type() != torch::kFloat) {
    return InvalidArgument("output.dtype is " +
                           std::string(c10::toString(nchw_float.scalar_type())) +
                           "; expected float32");
  }
  if (nchw_float.dim() != 4) {
    return InvalidArgument("output.shape has rank " + std::to_string(nchw_float.dim()) +
                           "; expected [frames, channels, height_px, width_px]");
  }
  try {
    torch::NoGradGuard no_grad;
    // nan_to_num first: clamp keeps NaN, and casting NaN to uint8 is undefined.
    torch::Tensor x = torch::nan_to_num(nchw_float, 0.0).clamp_(0.0, 1.0).mul_(255.0).round_();
    return x.to(torch::kByte).permute({0, 2, 3, 1}).contiguous();
  } catch (...) {
    return CurrentTorchErrorStatus("ToUint8Nhwc");
  }
}

}  // namespace vaed::models
