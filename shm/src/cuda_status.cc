#include "vaed/cuda_status.h"

#include <cstring>
#include <string>

namespace vaed {

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
      return true;
    default:
      return false;
  }
}

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
