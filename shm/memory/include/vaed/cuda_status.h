// The CUDA runtime adapter: CUDA error codes into vaed::Status, for the
// sources of GPU builds only (VAED_WITH_CUDA=ON; it includes the CUDA
// runtime header). Everything else uses the CUDA-free vaed/cuda_ipc.h and
// vaed/device_uuid.h.
#ifndef VAED_CUDA_STATUS_H_
#define VAED_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "vaed/device_uuid.h"
#include "vaed/status.h"

namespace vaed {

// "<context>: <error string> (<error name>, cuda error <n>)". Code and
// reason from the one classification (vaed/cuda_error_class.h
// CudaErrorCodeStatus, CudaErrorCodeReason): kResourceExhausted with reason
// kOutOfMemory for cudaErrorMemoryAllocation, kInvalidArgument for a bad
// handle, pointer or device, kFailedPrecondition for no usable device or
// driver, kInternal otherwise. Sticky errors (IsStickyCudaError) are
// kInternal with reason kStickyDevice and say that the CUDA context is
// lost. For non-sticky
// errors it also clears the thread's last-error slot (cudaGetLastError) so
// a later unrelated check does not see it again. Must not be called with
// cudaSuccess. Thread-safe.
Status CudaStatus(cudaError_t err, std::string_view context);

// IsStickyCudaErrorCode (vaed/cuda_error_class.h) for a runtime error:
// the CUDA context is unusable, the daemon must restart.
bool IsStickyCudaError(cudaError_t err);

// The UUID CUDA reports for a device (cudaDeviceProp::uuid).
DeviceUuid ToDeviceUuid(const cudaUUID_t& uuid);

// Makes a device current on the calling thread for its lifetime (Set) and
// restores the caller's device afterwards, so that a call leaves no lasting
// effect on the thread. Not movable; one thread.
class ScopedCudaDevice {
 public:
  ScopedCudaDevice() = default;
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;

  // cudaSetDevice(ordinal), remembering the previous device. Errors from
  // CudaStatus.
  Status Set(int ordinal);

 private:
  int previous_ = -1;
};

}  // namespace vaed

#endif  // VAED_CUDA_STATUS_H_
