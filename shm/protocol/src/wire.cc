#include "vaed/wire.h"

#include <string>

namespace vaed {

v1::DType ToProto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return v1::DTYPE_FLOAT32;
    case DType::kFloat16: return v1::DTYPE_FLOAT16;
    case DType::kBFloat16: return v1::DTYPE_BFLOAT16;
    case DType::kUInt8: return v1::DTYPE_UINT8;
    case DType::kUnknown: return v1::DTYPE_UNSPECIFIED;
  }
  return v1::DTYPE_UNSPECIFIED;
}

DType FromProto(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_FLOAT32: return DType::kFloat32;
    case v1::DTYPE_FLOAT16: return DType::kFloat16;
    case v1::DTYPE_BFLOAT16: return DType::kBFloat16;
    case v1::DTYPE_UINT8: return DType::kUInt8;
    default: return DType::kUnknown;
  }
}

v1::Error ToProtoError(const Status& status) {
  v1::Error e;
  e.set_code(static_cast<v1::ErrorCode>(status.code()));
  e.set_message(status.message());
  e.set_retry_after_ms(status.retry_after_ms());
  e.set_field(status.field());
  e.set_final_frames(status.final_frames());
  e.set_final_samples(status.final_samples());
  return e;
}

Status FromProtoError(const v1::Error& error) {
  const int code = error.code();
  if (code <= 0 || code > static_cast<int>(StatusCode::kUnknownClient)) {
    return Internal("daemon replied with error code " + std::to_string(code) + ": " +
                    error.message());
  }
  return Status(static_cast<StatusCode>(code), error.message())
      .WithRetryAfter(error.retry_after_ms())
      .WithField(error.field())
      .WithFinalOutput(error.final_frames(), error.final_samples());
}

void ToProto(const TensorRef& ref, v1::TensorRef* out) {
  out->set_region_id(ref.region_id);
  out->set_offset_bytes(ref.offset);
  out->set_size_bytes(ref.size);
  out->set_dtype(ToProto(ref.dtype));
  out->clear_shape();
  for (int64_t d : ref.shape) out->add_shape(d);
}

Result<TensorRef> FromProto(const v1::TensorRef& ref, std::string_view what) {
  const std::string w(what);
  TensorRef r;
  r.region_id = ref.region_id();
  r.offset = ref.offset_bytes();
  r.size = ref.size_bytes();
  r.dtype = FromProto(ref.dtype());
  if (r.dtype == DType::kUnknown) {
    return InvalidArgument(w + ".dtype is " + std::to_string(ref.dtype()) +
                           "; expected one of float32, float16, bfloat16, uint8");
  }
  r.shape.assign(ref.shape().begin(), ref.shape().end());
  if (r.shape.empty()) return InvalidArgument(w + ".shape is empty; a tensor needs at least one dim");
  VAED_ASSIGN_OR_RETURN(uint64_t bytes, ContiguousBytes(r.dtype, r.shape, w));
  if (bytes != r.size) {
    return InvalidArgument(w + ".size_bytes is " + std::to_string(r.size) + " but " +
                           std::string(DTypeName(r.dtype)) + " " + ShapeToString(r.shape) +
                           " needs " + std::to_string(bytes) + " bytes");
  }
  return r;
}

}  // namespace vaed
