// CUDA IPC regions: device memory a client exported with
// cudaIpcGetMemHandle, opened by the daemon (DESIGN.md §2 item 2).
//
// The client owns the allocation; the daemon maps it once per registration
// (CudaIpcMapping::Open) and unmaps it when the registration ends. The real
// allocation size is checked with cuMemGetAddressRange; the client's claim
// is never trusted.
//
// One header for both builds, with no CUDA types in it, so that code using
// it compiles the same way in CPU and GPU builds (and a GPU build reuses
// the CPU build's objects from the compiler cache). GPU builds
// (VAED_WITH_CUDA=ON, the `cuda` preset) link the implementation in
// cuda_ipc.cc; CPU builds link cuda_ipc_unavailable.cc, where Open()
// checks its arguments like the GPU build and then answers
// CudaIpcUnavailable(). The CUDA runtime adapter (CudaStatus) is in
// vaed/cuda_status.h, for GPU-build sources only.
#ifndef VAED_CUDA_IPC_H_
#define VAED_CUDA_IPC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "vaed/device_uuid.h"
#include "vaed/status.h"

namespace vaed {

// Size of a cudaIpcMemHandle_t as it travels on the wire (CUDA_IPC_HANDLE_SIZE).
inline constexpr size_t kCudaIpcHandleBytes = 64;

// True in GPU builds (CudaIpcMapping::Open can map memory), false in CPU
// builds.
bool CudaIpcAvailable();

// The answer to any request for a CUDA IPC region in a CPU-only build:
// kFailedPrecondition "CUDA IPC regions need a GPU build (VAED_WITH_CUDA=ON)".
inline Status CudaIpcUnavailable() {
  return FailedPrecondition("CUDA IPC regions need a GPU build (VAED_WITH_CUDA=ON)");
}

// The checks Open() makes before touching CUDA, in every build: the handle
// has kCudaIpcHandleBytes bytes, claimed_bytes > 0, device_uuid parses
// (device_uuid.h). Errors: kInvalidArgument naming the protocol field
// (register_region.cuda.ipc_handle, .size_bytes or .device_uuid). On success
// returns the parsed UUID.
Result<DeviceUuid> CheckCudaIpcArguments(const std::string& handle_bytes, uint64_t claimed_bytes,
                                         const std::string& device_uuid);

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
  // `device_uuid` is in the text form of device_uuid.h.
  //
  // The peer mapping is opened with cudaIpcMemLazyEnablePeerAccess. The
  // calling thread's current device is restored before returning.
  // Errors:
  //   kInvalidArgument  CheckCudaIpcArguments() refused, or CUDA rejects the
  //                     handle.
  //   kFailedPrecondition  a CPU build (CudaIpcUnavailable()), or no usable
  //                     driver/device.
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
  // FormatDeviceUuid() of that device.
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

}  // namespace vaed

#endif  // VAED_CUDA_IPC_H_
