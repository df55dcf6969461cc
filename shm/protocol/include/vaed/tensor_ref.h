// The memory vocabulary shared by client and daemon: element types, tensor
// descriptors and the overflow-safe byte-range arithmetic every bounds check
// uses.
//
// A tensor in vaed always lives in a client-owned region: it is named by
// (region id, byte offset, dtype, shape) and is C-contiguous (row-major)
// unless a model states otherwise. The byte size is derived from dtype and
// shape, never trusted from the client; a client-sent byte size must agree
// with it.
//
// Thread-safety: plain values and pure functions; safe from any thread.
#ifndef VAED_TENSOR_REF_H_
#define VAED_TENSOR_REF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vaed/status.h"

namespace vaed {

// Element types. Values mirror vaed.v1.DType on the wire.
enum class DType : int32_t {
  kUnknown = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kUInt8 = 4,
};

// Bytes per element; 0 for kUnknown.
size_t DTypeSize(DType dtype);
// "float32", "float16", "bfloat16", "uint8", "unknown".
std::string_view DTypeName(DType dtype);
// Parses the names above (and safetensors' "F32", "F16", "BF16", "U8").
Result<DType> ParseDType(std::string_view name);

// "[16, 32, 34, 80]".
std::string ShapeToString(const std::vector<int64_t>& shape);

// Number of elements of `shape`. Fails with kInvalidArgument naming `what`
// when a dim is negative or the product overflows int64.
Result<uint64_t> NumElements(const std::vector<int64_t>& shape, std::string_view what);

// Bytes of a C-contiguous tensor: NumElements(shape) * DTypeSize(dtype),
// overflow-checked. Fails with kInvalidArgument naming `what`.
Result<uint64_t> ContiguousBytes(DType dtype, const std::vector<int64_t>& shape,
                                 std::string_view what);

// Checks that [offset, offset + size) lies inside a region of
// `region_bytes` bytes without overflowing uint64. On failure returns
// kOutOfRange naming `what`, the offset, the size and the region size.
Status CheckByteRange(uint64_t offset, uint64_t size, uint64_t region_bytes,
                      std::string_view what);

// A tensor inside a registered region. Units: bytes for offset/size,
// elements for shape.
struct TensorRef {
  uint64_t region_id = 0;
  uint64_t offset = 0;  // bytes from the start of the region
  uint64_t size = 0;    // bytes; must equal ContiguousBytes(dtype, shape)
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
};

}  // namespace vaed

#endif  // VAED_TENSOR_REF_H_
