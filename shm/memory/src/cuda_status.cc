#include "vaed/cuda_status.h"

#include <cuda.h>

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
static_assert(cudaErrorInvalidValue == cuda_code::kInvalidValue);
static_assert(cudaErrorInvalidDevicePointer == cuda_code::kInvalidDevicePointer);
static_assert(cudaErrorInvalidDevice == cuda_code::kInvalidDevice);
static_assert(cudaErrorDeviceUninitialized == cuda_code::kInvalidContext);
static_assert(cudaErrorMapBufferObjectFailed == cuda_code::kMapFailed);
static_assert(cudaErrorInvalidResourceHandle == cuda_code::kInvalidHandle);
static_assert(cudaErrorInitializationError == cuda_code::kNotInitialized);
static_assert(cudaErrorCudartUnloading == cuda_code::kDeinitialized);
static_assert(cudaErrorStubLibrary == cuda_code::kStubLibrary);
static_assert(cudaErrorInsufficientDriver == cuda_code::kInsufficientDriver);
static_assert(cudaErrorDevicesUnavailable == cuda_code::kDevicesUnavailable);
static_assert(cudaErrorNoDevice == cuda_code::kNoDevice);
static_assert(cudaErrorPeerAccessUnsupported == cuda_code::kPeerAccessUnsupported);
static_assert(cudaErrorNotPermitted == cuda_code::kNotPermitted);
static_assert(cudaErrorNotSupported == cuda_code::kNotSupported);
static_assert(cudaErrorSystemDriverMismatch == cuda_code::kSystemDriverMismatch);
static_assert(cudaErrorCompatNotSupportedOnDevice == cuda_code::kCompatNotSupported);
// And the driver's (the client library's CUresult), where it has the code.
static_assert(CUDA_ERROR_OUT_OF_MEMORY == cuda_code::kMemoryAllocation);
static_assert(CUDA_ERROR_ILLEGAL_ADDRESS == cuda_code::kIllegalAddress);
static_assert(CUDA_ERROR_LAUNCH_FAILED == cuda_code::kLaunchFailure);
static_assert(CUDA_ERROR_INVALID_VALUE == cuda_code::kInvalidValue);
static_assert(CUDA_ERROR_INVALID_DEVICE == cuda_code::kInvalidDevice);
static_assert(CUDA_ERROR_INVALID_CONTEXT == cuda_code::kInvalidContext);
static_assert(CUDA_ERROR_MAP_FAILED == cuda_code::kMapFailed);
static_assert(CUDA_ERROR_INVALID_HANDLE == cuda_code::kInvalidHandle);
static_assert(CUDA_ERROR_NOT_INITIALIZED == cuda_code::kNotInitialized);
static_assert(CUDA_ERROR_DEINITIALIZED == cuda_code::kDeinitialized);
static_assert(CUDA_ERROR_STUB_LIBRARY == cuda_code::kStubLibrary);
static_assert(CUDA_ERROR_DEVICE_UNAVAILABLE == cuda_code::kDevicesUnavailable);
static_assert(CUDA_ERROR_NO_DEVICE == cuda_code::kNoDevice);
static_assert(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED == cuda_code::kPeerAccessUnsupported);
static_assert(CUDA_ERROR_NOT_PERMITTED == cuda_code::kNotPermitted);
static_assert(CUDA_ERROR_NOT_SUPPORTED == cuda_code::kNotSupported);
static_assert(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH == cuda_code::kSystemDriverMismatch);
static_assert(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE == cuda_code::kCompatNotSupported);

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
  const int code = static_cast<int>(err);
  return Status(CudaErrorCodeStatus(code), std::move(m)).WithReason(CudaErrorCodeReason(code));
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
