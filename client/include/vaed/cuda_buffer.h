// vaed::client::CudaBuffer: device memory the client library allocates
// itself ("managed buffers"), for latents and outputs that
// stay on the GPU. It is ordinary cuMemAlloc memory in the device's
// primary context (the context the CUDA runtime and PyTorch use), so
// legacy CUDA IPC can share it: pass data() to Client::RegisterCudaRegion
// or, from Python, the array Client.alloc_latent(..., device="cuda:N")
// returns. The robust path, as SharedRegion is for host memory: unlike a
// tensor from a caching allocator, nothing else can free or reuse it while
// the daemon has it registered.
//
// The CUDA driver is loaded at run time (dlopen("libcuda.so.1")): a program
// that never allocates one needs no driver. Unrun on a GPU.
#ifndef VAED_CUDA_BUFFER_H_
#define VAED_CUDA_BUFFER_H_

#include <cstdint>
#include <string>

#include "vaed/client_export.h"
#include "vaed/status.h"

namespace vaed::client {

// An allocation of `size()` bytes on one device, zero-filled, owned by this
// object: the destructor frees it (cuMemFree) and releases the device's
// primary context. Free it only after the daemon no longer uses it: after
// Client::UnregisterRegion of its region returned (the daemon never touches
// an unregistered region again) or after the Client is gone.
//
// Move-only; a moved-from buffer is empty (data() == nullptr, size() 0).
// Thread-safety: the accessors are const and may be called concurrently;
// the memory itself is the caller's to order (CUDA streams and events).
class VAED_CLIENT_API CudaBuffer {
 public:
  // Allocates `bytes` on the device with CUDA ordinal `device_ordinal` (as
  // this process numbers its devices under its CUDA_VISIBLE_DEVICES) and
  // zero-fills it (synchronously: the fill is done on return). Errors: kInvalidArgument for bytes == 0
  // or a negative ordinal (before the driver is loaded), and for an ordinal
  // the driver does not have; kFailedPrecondition "libcuda.so.1 could not
  // be loaded (...): this machine has no NVIDIA driver" or a driver too
  // old; kResourceExhausted when the device is out of memory; the driver's
  // other errors with their CUDA error name and code.
  static Result<CudaBuffer> Allocate(int device_ordinal, uint64_t bytes);

  CudaBuffer() = default;  // empty
  ~CudaBuffer();
  CudaBuffer(CudaBuffer&& other) noexcept;
  CudaBuffer& operator=(CudaBuffer&& other) noexcept;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  void* data() const { return data_; }  // a device pointer (CUdeviceptr)
  uint64_t size() const { return size_; }
  int device_ordinal() const { return device_ordinal_; }
  // The device's UUID, "GPU-..." (vaed/device_uuid.h), as
  // Client::Hello's cuda_devices lists the daemon's.
  const std::string& device_uuid() const { return device_uuid_; }

 private:
  void Release() noexcept;

  void* data_ = nullptr;
  void* context_ = nullptr;  // the device's primary context (a CUcontext), retained
  uint64_t size_ = 0;
  int device_ordinal_ = -1;
  std::string device_uuid_;
};

}  // namespace vaed::client

#endif  // VAED_CUDA_BUFFER_H_
