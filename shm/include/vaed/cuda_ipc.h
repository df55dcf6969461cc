// CUDA IPC regions: device memory a client exported with
// cudaIpcGetMemHandle, opened by the daemon (DESIGN.md §2 item 2).
//
// The client owns the allocation; the daemon maps it once per registration
// (CudaIpcMapping::Open) and unmaps it when the registration ends. The real
// allocation size is checked with cuMemGetAddressRange; the client's claim
// is never trusted.
//
// This header compiles in every build. With VAED_WITH_CUDA (the `cuda`
// preset) it declares the CUDA types below; in CPU builds it only offers
// CudaIpcUnavailable(), the answer to any request for a CUDA IPC region.
#ifndef VAED_CUDA_IPC_H_
#define VAED_CUDA_IPC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "vaed/status.h"

#ifdef VAED_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vaed {

#ifdef VAED_WITH_CUDA

// Size of a cudaIpcMemHandle_t as it travels on the wire (CUDA_IPC_HANDLE_SIZE).
inline constexpr size_t kCudaIpcHandleBytes = 64;

// The CUDA runtime adapter: "<context>: <error string> (<error name>, cuda
// error <n>)". Codes: kResourceExhausted for cudaErrorMemoryAllocation;
// kInvalidArgument for errors that a bad client handle, pointer or device
// causes (invalid value / resource handle / device pointer / device, map
// buffer object failed); kFailedPrecondition when no usable device or driver
// is present or peer access is unsupported; kInternal otherwise. Sticky
// errors (IsStickyCudaError) are kInternal with reason kStickyDevice and say
// that the CUDA context is lost; cudaErrorMemoryAllocation is
// kResourceExhausted with reason kOutOfMemory. For non-sticky errors it also clears the thread's last-error slot
// (cudaGetLastError) so a later unrelated check does not see it again.
// Must not be called with cudaSuccess. Thread-safe.
Status CudaStatus(cudaError_t err, std::string_view context);

// True for errors that leave the CUDA context unusable (illegal address,
// launch failure, ...). The daemon must not carry on after one (DESIGN.md
// §2 item 7): report unhealthy and exit so that systemd restarts it.
bool IsStickyCudaError(cudaError_t err);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lowercase hex), the form
// nvidia-smi prints, for a 16-byte CUDA device UUID.
std::string FormatCudaUuid(const cudaUUID_t& uuid);

// The daemon's mapping of a client's CUDA allocation, opened from an IPC
// handle.
//
// Owns one cudaIpcOpenMemHandle mapping; the destructor closes it with
// cudaIpcCloseMemHandle (errors there are ignored: the allocation is the
// client's and nothing the daemon can do would help). Move-only; a
// moved-from object has data() == nullptr and may only be destroyed or
// assigned to.
//
// Thread-safety: the const accessors are safe from any thread. The device
// memory behind data() is shared with the client; a kernel or copy that
// uses it must finish before the reply that ends the request.
class CudaIpcMapping {
 public:
  // Opens the allocation named by `handle_bytes` (exactly
  // kCudaIpcHandleBytes raw bytes of a cudaIpcMemHandle_t) on the device
  // whose UUID is `device_uuid`, and checks that it holds at least
  // `claimed_bytes` bytes from the handle's address.
  //
  // `device_uuid` is 32 hex digits, optionally with dashes and a "GPU-" or
  // "MIG-" prefix, case-insensitive (as nvidia-smi or
  // torch.cuda.get_device_properties(i).uuid print it).
  //
  // The peer mapping is opened with cudaIpcMemLazyEnablePeerAccess. The
  // calling thread's current device is restored before returning.
  // Errors:
  //   kInvalidArgument  handle_bytes is not 64 bytes, claimed_bytes is 0,
  //                     device_uuid is malformed, or CUDA rejects the handle.
  //   kNotFound         no visible device has that UUID (the message lists
  //                     the devices that are visible).
  //   kOutOfRange       claimed_bytes exceeds the allocation: "client claims N
  //                     bytes but the allocation holds M bytes from the
  //                     handle's address (cuMemGetAddressRange)".
  //   others            from CudaStatus() / the CUDA driver.
  static Result<std::unique_ptr<CudaIpcMapping>> Open(const std::string& handle_bytes,
                                                      uint64_t claimed_bytes,
                                                      const std::string& device_uuid);

  ~CudaIpcMapping();
  CudaIpcMapping(CudaIpcMapping&& other) noexcept;
  CudaIpcMapping& operator=(CudaIpcMapping&& other) noexcept;
  CudaIpcMapping(const CudaIpcMapping&) = delete;
  CudaIpcMapping& operator=(const CudaIpcMapping&) = delete;

  // Device pointer, valid in this process on device() until destruction.
  void* data() const { return data_; }
  // Bytes the client registered (units: bytes; <= allocation_bytes()).
  uint64_t size() const { return size_; }
  // Bytes of the underlying allocation from data() to its end.
  uint64_t allocation_bytes() const { return allocation_bytes_; }
  // CUDA runtime ordinal of the device that holds the memory.
  int device() const { return device_; }
  // FormatCudaUuid() of that device.
  const std::string& device_uuid() const { return device_uuid_; }

  // Overflow-safe check that [offset, offset + size) lies inside size();
  // kOutOfRange naming `what` otherwise.
  Status CheckRange(uint64_t offset, uint64_t size, std::string_view what) const;

 private:
  CudaIpcMapping(void* data, uint64_t size, uint64_t allocation_bytes, int device,
                 std::string device_uuid);
  void Close() noexcept;

  void* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t allocation_bytes_ = 0;
  int device_ = -1;
  std::string device_uuid_;
};

#else  // !VAED_WITH_CUDA

// The answer to any request for a CUDA IPC region in a CPU-only build:
// kFailedPrecondition "CUDA IPC regions need a GPU build (VAED_WITH_CUDA=ON)".
inline Status CudaIpcUnavailable() {
  return FailedPrecondition("CUDA IPC regions need a GPU build (VAED_WITH_CUDA=ON)");
}

#endif  // VAED_WITH_CUDA

}  // namespace vaed

#endif  // VAED_CUDA_IPC_H_
