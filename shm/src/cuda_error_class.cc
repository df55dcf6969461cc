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

}  // namespace vaed
