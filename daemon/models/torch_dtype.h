// Conversions between the wire/file dtype vocabulary (vaed::DType) and
// LibTorch scalar types, and the one copy of a safetensors tensor out of its
// mapping, in one place.
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_MODELS_TORCH_DTYPE_H_
#define VAED_DAEMON_MODELS_TORCH_DTYPE_H_

#include <torch/torch.h>

#include <cstring>

#include "daemon/models/safetensors.h"
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

// True for the floating dtypes weights may be stored in (F32, F16, BF16).
inline bool IsFloatDType(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

// Copies a safetensors tensor out of its mapping (which may be misaligned)
// into a new contiguous tensor of the stored dtype. Precondition: e.dtype is
// not kUnknown. May throw c10::Error (allocation).
inline torch::Tensor CopyOutOfMapping(const TensorEntry& e) {
  torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(ToScalarType(e.dtype)));
  if (e.nbytes > 0) std::memcpy(t.data_ptr(), e.data, e.nbytes);
  return t;
}

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TORCH_DTYPE_H_
