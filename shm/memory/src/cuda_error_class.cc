#include "vaed/cuda_error_class.h"

namespace vaed {

bool IsStickyCudaErrorCode(int code) {
  switch (code) {
    case cuda_code::kEccUncorrectable:
    case cuda_code::kNvlinkUncorrectable:
    case cuda_code::kIllegalAddress:
    case cuda_code::kLaunchTimeout:
    case cuda_code::kContextIsDestroyed:
    case cuda_code::kAssert:
    case cuda_code::kHardwareStackError:
    case cuda_code::kIllegalInstruction:
    case cuda_code::kMisalignedAddress:
    case cuda_code::kInvalidAddressSpace:
    case cuda_code::kInvalidPc:
    case cuda_code::kLaunchFailure:
      return true;
    default:
      return false;
  }
}

ErrorReason CudaErrorCodeReason(int code) {
  if (code == cuda_code::kMemoryAllocation) return ErrorReason::kOutOfMemory;
  return IsStickyCudaErrorCode(code) ? ErrorReason::kStickyDevice : ErrorReason::kNone;
}

StatusCode CudaErrorCodeStatus(int code) {
  switch (code) {
    case cuda_code::kMemoryAllocation:
      return StatusCode::kResourceExhausted;
    case cuda_code::kInvalidValue:
    case cuda_code::kInvalidDevicePointer:
    case cuda_code::kInvalidDevice:
    case cuda_code::kMapFailed:
    case cuda_code::kInvalidHandle:
      return StatusCode::kInvalidArgument;
    case cuda_code::kInvalidContext:
    case cuda_code::kNotInitialized:
    case cuda_code::kDeinitialized:
    case cuda_code::kStubLibrary:
    case cuda_code::kInsufficientDriver:
    case cuda_code::kDevicesUnavailable:
    case cuda_code::kNoDevice:
    case cuda_code::kPeerAccessUnsupported:
    case cuda_code::kNotPermitted:
    case cuda_code::kNotSupported:
    case cuda_code::kSystemDriverMismatch:
    case cuda_code::kCompatNotSupported:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace vaed
