// One classification of CUDA error codes for every adapter that meets one:
// the CUDA runtime (cudaError_t, vaed/cuda_status.h; the NCCL communicator
// through it), LibTorch (c10::AcceleratorError's code,
// daemon/models/torch_status.h) and the client's driver loader (CUresult,
// client/src/cuda_driver.cc). Codes travel as numbers so that this header
// includes nothing of CUDA: every code named here has the same number in
// the runtime API (driver_types.h) and the driver API (cuda.h) of CUDA
// 13.0, which GPU builds check with static_assert (cuda_status.cc).
//
// Thread-safety: pure functions.
#ifndef VAED_CUDA_ERROR_CLASS_H_
#define VAED_CUDA_ERROR_CLASS_H_

#include "vaed/status.h"

namespace vaed {

// The CUDA error codes this classification names, runtime (driver) names.
namespace cuda_code {
inline constexpr int kMemoryAllocation = 2;          // cudaErrorMemoryAllocation (CUDA_ERROR_OUT_OF_MEMORY)
inline constexpr int kEccUncorrectable = 214;        // cudaErrorECCUncorrectable (CUDA_ERROR_ECC_UNCORRECTABLE)
inline constexpr int kNvlinkUncorrectable = 220;     // cudaErrorNvlinkUncorrectable (CUDA_ERROR_NVLINK_UNCORRECTABLE)
inline constexpr int kIllegalAddress = 700;          // cudaErrorIllegalAddress (CUDA_ERROR_ILLEGAL_ADDRESS)
inline constexpr int kLaunchTimeout = 702;           // cudaErrorLaunchTimeout (CUDA_ERROR_LAUNCH_TIMEOUT)
inline constexpr int kContextIsDestroyed = 709;      // cudaErrorContextIsDestroyed (CUDA_ERROR_CONTEXT_IS_DESTROYED)
inline constexpr int kAssert = 710;                  // cudaErrorAssert (CUDA_ERROR_ASSERT)
inline constexpr int kHardwareStackError = 714;      // cudaErrorHardwareStackError (CUDA_ERROR_HARDWARE_STACK_ERROR)
inline constexpr int kIllegalInstruction = 715;      // cudaErrorIllegalInstruction (CUDA_ERROR_ILLEGAL_INSTRUCTION)
inline constexpr int kMisalignedAddress = 716;       // cudaErrorMisalignedAddress (CUDA_ERROR_MISALIGNED_ADDRESS)
inline constexpr int kInvalidAddressSpace = 717;     // cudaErrorInvalidAddressSpace (CUDA_ERROR_INVALID_ADDRESS_SPACE)
inline constexpr int kInvalidPc = 718;               // cudaErrorInvalidPc (CUDA_ERROR_INVALID_PC)
inline constexpr int kLaunchFailure = 719;           // cudaErrorLaunchFailure (CUDA_ERROR_LAUNCH_FAILED)
}  // namespace cuda_code

// True for the errors after which the process's CUDA context is unusable
// (every later call fails or cannot be trusted): uncorrectable ECC or
// NVLink error, illegal address, launch timeout, destroyed context,
// device-side assert, hardware stack error, illegal instruction, misaligned
// address, invalid address space, invalid PC, launch failure. The daemon
// must not carry on after one: it reports unhealthy and exits so that
// systemd restarts it.
bool IsStickyCudaErrorCode(int code);

// What a CUDA error code means for the failure handling: kOutOfMemory for
// an allocation failure (2), kStickyDevice where IsStickyCudaErrorCode,
// kNone otherwise.
ErrorReason CudaErrorCodeReason(int code);

}  // namespace vaed

#endif  // VAED_CUDA_ERROR_CLASS_H_
