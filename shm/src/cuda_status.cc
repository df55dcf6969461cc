#include "vaed/cuda_status.h"

#include <cstring>
#include <string>

#include "vaed/cuda_error_class.h"

namespace vaed {

// cuda_error_class.h names codes by number so that it needs no CUDA
// header; each must be the runtime's (and, see cuda_driver.cc, the
// driver's) number.
static_assert(cudaErrorMemoryAllocation == cuda_code::kMemoryAllocation);
static_assert(cudaErrorECCUncorrectable == cuda_code::kEccUncorrectable);
static_assert(cudaErrorNvlinkUncorrectable == cuda_code::kNvlinkUncorrectable);
static_assert(cudaErrorIllegalAddress == cuda_code::kIllegalAddress);
static_assert(cudaErrorLaunchTimeout == cuda_code::kLaunchTimeout);
static_assert(cudaErrorContextIsDestroyed == cuda_code::kContextIsDestroyed);
static_assert(cudaErrorAssert == cuda_code::kAssert);
static_assert(cudaErrorHardwareStackError == cuda_code::kHardwareStackError);
static_assert(cudaErrorIllegalInstruction == cuda_code::kIllegalInstruction);
static_assert(cudaErrorMisalignedAddress == cuda_code::kMisalignedAddress);
static_assert(cudaErrorInvalidAddressSpace == cuda_code::kInvalidAddressSpace);
static_assert(cudaErrorInvalidPc == cuda_code::kInvalidPc);
static_assert(cudaErrorLaunchFailure == cuda_code::kLaunchFailure);

bool IsStickyCudaError(cudaError_t err) { return IsStickyCudaErrorCode(static_cast<int>(err)); }

Status CudaStatus(cudaError_t err, std::string_view context) {
  std::string m(context);
  m += ": ";
  m += cudaGetErrorString(err);
  m += " (";
  m += cudaGetErrorName(err);
  m += ", cuda error ";
  m += std::to_string(static_cast<int>(err));
  m += ")";
  if (IsStickyCudaError(err)) {
    m += "; sticky error: this process's CUDA context is unusable and the daemon must restart";
    return Internal(std::move(m)).WithReason(ErrorReason::kStickyDevice);
  }
  // A failed runtime call also records the error as the thread's "last
  // error"; consume it so an unrelated later cudaGetLastError() check does
  // not report this one again.
  (void)cudaGetLastError();
  switch (err) {
    case cudaErrorMemoryAllocation:
      return ResourceExhausted(std::move(m)).WithReason(ErrorReason::kOutOfMemory);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidDevice:
    case cudaErrorMapBufferObjectFailed:
      return InvalidArgument(std::move(m));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorPeerAccessUnsupported:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return FailedPrecondition(std::move(m));
    default:
      return Internal(std::move(m));
  }
}

DeviceUuid ToDeviceUuid(const cudaUUID_t& uuid) {
  DeviceUuid out;
  static_assert(sizeof(uuid.bytes) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), uuid.bytes, sizeof(out.bytes));
  return out;
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

Status ScopedCudaDevice::Set(int ordinal) {
  int previous = -1;
  if (cudaError_t err = cudaGetDevice(&previous); err != cudaSuccess) {
    return CudaStatus(err, "cudaGetDevice");
  }
  if (cudaError_t err = cudaSetDevice(ordinal); err != cudaSuccess) {
    return CudaStatus(err, "cudaSetDevice(" + std::to_string(ordinal) + ")");
  }
  previous_ = previous;
  return Status::Ok();
}

}  // namespace vaed
