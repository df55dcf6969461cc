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
// Caused by a bad argument: a value, device, pointer, mapping or handle.
inline constexpr int kInvalidValue = 1;              // cudaErrorInvalidValue (CUDA_ERROR_INVALID_VALUE)
inline constexpr int kInvalidDevicePointer = 17;     // cudaErrorInvalidDevicePointer (runtime only)
inline constexpr int kInvalidDevice = 101;           // cudaErrorInvalidDevice (CUDA_ERROR_INVALID_DEVICE)
inline constexpr int kMapFailed = 205;               // cudaErrorMapBufferObjectFailed (CUDA_ERROR_MAP_FAILED)
inline constexpr int kInvalidHandle = 400;           // cudaErrorInvalidResourceHandle (CUDA_ERROR_INVALID_HANDLE)
// No usable driver, device or context, or an operation this system does
// not allow: the environment's state, never counted against a client.
inline constexpr int kInvalidContext = 201;          // cudaErrorDeviceUninitialized (CUDA_ERROR_INVALID_CONTEXT)
inline constexpr int kNotInitialized = 3;            // cudaErrorInitializationError (CUDA_ERROR_NOT_INITIALIZED)
inline constexpr int kDeinitialized = 4;             // cudaErrorCudartUnloading (CUDA_ERROR_DEINITIALIZED)
inline constexpr int kStubLibrary = 34;              // cudaErrorStubLibrary (CUDA_ERROR_STUB_LIBRARY)
inline constexpr int kInsufficientDriver = 35;       // cudaErrorInsufficientDriver (runtime only)
inline constexpr int kDevicesUnavailable = 46;       // cudaErrorDevicesUnavailable (CUDA_ERROR_DEVICE_UNAVAILABLE)
inline constexpr int kNoDevice = 100;                // cudaErrorNoDevice (CUDA_ERROR_NO_DEVICE)
inline constexpr int kPeerAccessUnsupported = 217;   // cudaErrorPeerAccessUnsupported (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
inline constexpr int kNotPermitted = 800;            // cudaErrorNotPermitted (CUDA_ERROR_NOT_PERMITTED)
inline constexpr int kNotSupported = 801;            // cudaErrorNotSupported (CUDA_ERROR_NOT_SUPPORTED)
inline constexpr int kSystemDriverMismatch = 803;    // cudaErrorSystemDriverMismatch (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
inline constexpr int kCompatNotSupported = 804;      // cudaErrorCompatNotSupportedOnDevice (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
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

// The status code of a failure with CUDA error `code`: kResourceExhausted
// for an allocation failure; kInvalidArgument for a bad value, device,
// device pointer, mapping or handle; kFailedPrecondition when no usable
// driver, device or context is present, peer access is unsupported or the
// system does not permit the operation; kInternal otherwise (sticky errors
// included: their reason says the rest). The daemon counts a decode that
// fails with kInvalidArgument as the client's fault (quarantine), so only
// codes a client's handle or pointer can cause are kInvalidArgument.
StatusCode CudaErrorCodeStatus(int code);

}  // namespace vaed

#endif  // VAED_CUDA_ERROR_CLASS_H_
