#include "vaed/tensor_ref.h"

#include <limits>

namespace vaed {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kUInt8: return 1;
    case DType::kUnknown: return 0;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kUInt8: return "uint8";
    case DType::kUnknown: return "unknown";
  }
  return "unknown";
}

Result<DType> ParseDType(std::string_view name) {
  if (name == "float32" || name == "F32") return DType::kFloat32;
  if (name == "float16" || name == "F16") return DType::kFloat16;
  if (name == "bfloat16" || name == "BF16") return DType::kBFloat16;
  if (name == "uint8" || name == "U8") return DType::kUInt8;
  return InvalidArgument("unknown dtype '" + std::string(name) +
                         "' (expected float32, float16, bfloat16 or uint8)");
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<uint64_t> NumElements(const std::vector<int64_t>& shape, std::string_view what) {
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return InvalidArgument(std::string(what) + ".shape[" + std::to_string(i) + "] is " +
                             std::to_string(shape[i]) + "; dims must be >= 0");
    }
    uint64_t d = static_cast<uint64_t>(shape[i]);
    if (d != 0 && n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / d) {
      return InvalidArgument(std::string(what) + ".shape " + ShapeToString(shape) +
                             " has more elements than fit in int64");
    }
    n *= d;
  }
  return n;
}

Result<uint64_t> ContiguousBytes(DType dtype, const std::vector<int64_t>& shape,
                                 std::string_view what) {
  const uint64_t elem = DTypeSize(dtype);
  if (elem == 0) return InvalidArgument(std::string(what) + ".dtype is unknown");
  VAED_ASSIGN_OR_RETURN(uint64_t n, NumElements(shape, what));
  if (n > std::numeric_limits<uint64_t>::max() / elem) {
    return InvalidArgument(std::string(what) + " byte size overflows uint64");
  }
  return n * elem;
}

Status CheckByteRange(uint64_t offset, uint64_t size, uint64_t region_bytes,
                      std::string_view what) {
  // offset + size may wrap; compare without adding.
  if (offset > region_bytes || size > region_bytes - offset) {
    return OutOfRange(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset) + " + " + std::to_string(size) +
                      ") do not fit in a region of " + std::to_string(region_bytes) +
                      " bytes");
  }
  return Status::Ok();
}

}  // namespace vaed
