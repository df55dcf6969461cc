// Conversions between the wire/file dtype vocabulary (vaed::DType) and
// LibTorch scalar types, in one place.
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_MODELS_TORCH_DTYPE_H_
#define VAED_DAEMON_MODELS_TORCH_DTYPE_H_

#include <torch/torch.h>

#include "vaed/tensor_ref.h"

namespace vaed::models {

// DType -> scalar type; kUnknown maps to float32 (callers check first).
inline torch::ScalarType ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return torch::kFloat;
    case DType::kFloat16:
      return torch::kHalf;
    case DType::kBFloat16:
      return torch::kBFloat16;
    case DType::kUInt8:
      return torch::kByte;
    case DType::kUnknown:
      break;
  }
  return torch::kFloat;
}

// Scalar type -> DType; types vaed does not carry map to kUnknown.
inline DType FromScalarType(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return DType::kFloat32;
    case torch::kHalf:
      return DType::kFloat16;
    case torch::kBFloat16:
      return DType::kBFloat16;
    case torch::kByte:
      return DType::kUInt8;
    default:
      return DType::kUnknown;
  }
}

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TORCH_DTYPE_H_
