// A strict, read-only reader for the safetensors file format.
//
// Format (huggingface/safetensors, as described in
// shared/data/taef2/README.md §1 "safetensors layout"): an 8-byte
// little-endian uint64 N, then N bytes of UTF-8 JSON (the header), then the
// data buffer. The header is an object mapping tensor name to
// {"dtype": "F32"|"F16"|"BF16"|"U8"|..., "shape": [d0, d1, ...],
//  "data_offsets": [begin, end]}, with offsets in bytes relative to the start
// of the data buffer, plus an optional "__metadata__" object of string to
// string. Tensor data is raw little-endian and C-contiguous (row-major).
//
// This reader does not link LibTorch (the vaectl CLI uses it). It maps the
// whole file read-only and hands out pointers into the mapping; nothing is
// copied.
//
// Validation done by Open() (every failure is a Status, nothing throws):
//   * the file is a regular file of at least 8 bytes;
//   * N fits inside the file, and the header is a JSON object with no
//     duplicate keys;
//   * every entry other than "__metadata__" is an object with exactly the
//     fields dtype, shape and data_offsets; the dtype is one vaed supports
//     (F32, F16, BF16, U8; any other dtype is rejected naming the tensor);
//     every dim is a non-negative integer; data_offsets are two integers
//     with begin <= end;
//   * end - begin == numel(shape) * dtype size;
//   * every range lies inside the data buffer, and the ranges (sorted by
//     begin) tile the buffer exactly: no gaps, no overlaps, no trailing
//     bytes;
//   * "__metadata__", if present, is an object whose values are strings.
// Format errors are kInvalidArgument; OS errors keep their errno (see
// ErrnoStatus(): kNotFound for a missing file, kIoError, ...).
//
// Lifetime: TensorEntry::data points into the mapping owned by the
// SafetensorsFile that returned it and is valid until that object is
// destroyed (moving the object keeps the pointers valid). The data pointer
// is only guaranteed to be 1-byte aligned (a header length that is not a
// multiple of 8 misaligns the buffer): copy with memcpy before reading
// multi-byte elements. If another process truncates the file while it is
// mapped, reading the data raises SIGBUS; weights files are expected to be
// immutable while the daemon runs.
//
// Thread-safety: after Open() returns, all const methods may be called from
// any number of threads concurrently.
#ifndef VAED_DAEMON_MODELS_SAFETENSORS_H_
#define VAED_DAEMON_MODELS_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed {

// One tensor of a safetensors file. Non-owning view: `data` points into the
// owning SafetensorsFile's mapping (see the lifetime note above).
struct TensorEntry {
  std::string name;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;     // elements per dim, C-contiguous
  const uint8_t* data = nullptr;  // first byte; 1-byte aligned only
  uint64_t nbytes = 0;            // == numel(shape) * DTypeSize(dtype)
};

class SafetensorsFile {
 public:
  // Maps and validates the file at `path` (rules above). On success the
  // caller owns the returned file; on failure nothing stays mapped or open.
  // Error messages start with `path`.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  // Unmaps the file. Never throws.
  ~SafetensorsFile();

  // Move-only: exactly one object owns a mapping. A moved-from object has
  // no tensors and owns nothing.
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Tensor names in lexicographic (byte) order; never contains
  // "__metadata__".
  std::vector<std::string> names() const;

  // Number of tensors.
  size_t size() const { return entries_.size(); }

  // The tensor called `name`, or nullptr when the file has none.
  const TensorEntry* Find(std::string_view name) const;

  // The tensor called `name`, checked against the expected dtype and shape.
  // Errors (the message starts with the file's base name):
  //   kNotFound         "<file>: tensor 'x' is missing"
  //   kInvalidArgument  "<file>: tensor 'x' has dtype float32, expected float16"
  //   kInvalidArgument  "<file>: tensor 'x' has shape [256, 64, 1, 1], expected [64, 256, 1, 1]"
  Result<const TensorEntry*> Require(std::string_view name, DType dtype,
                                     const std::vector<int64_t>& shape) const;

  // The "__metadata__" string map (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The path given to Open().
  const std::string& path() const { return path_; }

  // Size of the whole file in bytes (header length + header + data buffer).
  uint64_t file_bytes() const { return map_bytes_; }

 private:
  SafetensorsFile() = default;
  void Reset() noexcept;

  std::string path_;
  void* map_ = nullptr;  // the read-only mapping of the whole file; owned
  size_t map_bytes_ = 0;
  std::vector<TensorEntry> entries_;  // sorted by name
  std::map<std::string, std::string> metadata_;
};

}  // namespace vaed

#endif  // VAED_DAEMON_MODELS_SAFETENSORS_H_
