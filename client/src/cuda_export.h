// Exporting a CUDA allocation for the daemon: from a device pointer to what
// RegisterRegion{cuda} carries (vaed.v1.CudaIpcRegion). Internal to the
// client library.
//
// A legacy CUDA IPC handle names a whole allocation (one cuMemAlloc /
// cudaMalloc), never a pointer inside it, so the region covers the
// allocation and the tensor is located by its offset there, as PyTorch's
// own tensor sharing does (torch/multiprocessing/reductions.py: the
// storage's base pointer and its offset).
//
// Unrun: written against cuda.h of CUDA 13.0 and compiled, but never run
// on a GPU (no machine it was written on had one).
#ifndef VAED_CLIENT_SRC_CUDA_EXPORT_H_
#define VAED_CLIENT_SRC_CUDA_EXPORT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "cuda_driver.h"
#include "vaed/status.h"

namespace vaed::client::internal {

// One exported allocation. Units: bytes.
struct CudaExport {
  std::string ipc_handle;         // the 64 raw bytes of its CUipcMemHandle
  uint64_t base_address = 0;      // the allocation's first byte (device address)
  uint64_t allocation_bytes = 0;  // its size (cuMemGetAddressRange)
  uint64_t offset_bytes = 0;      // device_ptr - base_address
  std::string device_uuid;        // "GPU-..." (vaed/device_uuid.h text form)
};

// Exports the allocation holding the `bytes` bytes at `device_ptr`:
// checks that the pointer is device memory (not host, managed or
// registered host memory), finds its allocation, checks that all `bytes`
// lie inside it and that it can be shared with legacy IPC, exports the
// handle and reads its device's UUID. Runs in the memory's own context
// (pushed for the call), so the caller may have any context current.
//
// Errors: kInvalidArgument naming `field` for a null pointer, bytes == 0,
// host or managed memory, a range past the allocation's end, or an
// allocation that legacy IPC cannot share (cudaMallocAsync pools,
// cuMemCreate / PyTorch's expandable segments); the driver's errors
// (CudaDriver::Check) with what was being done.
//
// Thread-safety: thread-safe (driver calls only).
Result<CudaExport> ExportCudaAllocation(const CudaDriver& driver, const void* device_ptr,
                                        uint64_t bytes, std::string_view field);

}  // namespace vaed::client::internal

#endif  // VAED_CLIENT_SRC_CUDA_EXPORT_H_
