// The CUDA driver API as the client library uses it: loaded at run time
// with dlopen("libcuda.so.1"), so the library links nothing of CUDA and a
// CPU-only user needs nothing new. Internal to the client
// library.
//
// The typedefs below restate the few ABI facts the library needs instead of
// including cuda.h, which the client's build does not require. Their
// source is cuda.h of CUDA 13.0 (/usr/local/cuda/include/cuda.h,
// CUDA_VERSION 13000); each is stable since the CUDA version named:
//   CUresult             an int-sized enum; CUDA_SUCCESS = 0
//   CUdevice             int                                   (cuda.h: CUdevice_v1)
//   CUdeviceptr          unsigned long long on 64-bit hosts    (CUdeviceptr_v2, CUDA 3.2)
//   CUcontext / CUstream / CUevent   opaque struct pointers
//   CUuuid               struct { char bytes[16]; }
//   CUipcMemHandle / CUipcEventHandle  struct { char reserved[64]; } (CU_IPC_HANDLE_SIZE)
//   CU_POINTER_ATTRIBUTE_CONTEXT = 1 (CUcontext), _MEMORY_TYPE = 2 (unsigned
//   int; CU_MEMORYTYPE_DEVICE = 2), _DEVICE_ORDINAL = 9 (int, CUDA 9.2),
//   _IS_LEGACY_CUDA_IPC_CAPABLE = 10 (a boolean read as int, CUDA 11.2)
//   CU_EVENT_DISABLE_TIMING = 0x2, CU_EVENT_INTERPROCESS = 0x4
//   CU_STREAM_LEGACY = (CUstream)0x1, CU_STREAM_PER_THREAD = (CUstream)0x2
// Exported symbol names: cuda.h maps cuMemGetAddressRange to
// cuMemGetAddressRange_v2, cuDeviceGetUuid to cuDeviceGetUuid_v2 (11.4;
// the loader falls back to the unversioned one), cuCtxPushCurrent /
// cuCtxPopCurrent to their _v2, cuEventDestroy to cuEventDestroy_v2,
// cuDevicePrimaryCtxRelease, cuMemAlloc, cuMemFree and cuMemsetD8 to
// their _v2. The
// stream calls use the plain (legacy default stream) symbols, as code
// compiled without --default-stream per-thread does.
//
// Unrun: no machine this was written on had an NVIDIA driver; only the
// path where libcuda.so.1 is missing is tested (tests/client/cuda_region_test.cc).
#ifndef VAED_CLIENT_SRC_CUDA_DRIVER_H_
#define VAED_CLIENT_SRC_CUDA_DRIVER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "vaed/status.h"

namespace vaed::client::internal {

// --- ABI of the CUDA driver (see the header comment for the source) -------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
struct CUuuid {
  char bytes[16];
};
inline constexpr size_t kCuIpcHandleSize = 64;
struct CUipcMemHandle {
  char reserved[kCuIpcHandleSize];
};
struct CUipcEventHandle {
  char reserved[kCuIpcHandleSize];
};
inline constexpr CUresult kCudaSuccess = 0;
inline constexpr int kCuPointerAttributeContext = 1;
inline constexpr int kCuPointerAttributeMemoryType = 2;
inline constexpr int kCuPointerAttributeDeviceOrdinal = 9;
inline constexpr int kCuPointerAttributeIsLegacyCudaIpcCapable = 10;
inline constexpr unsigned int kCuMemoryTypeDevice = 2;
inline constexpr unsigned int kCuEventDisableTiming = 0x2;
inline constexpr unsigned int kCuEventInterprocess = 0x4;

// The driver functions the library calls, resolved from libcuda.so.1.
// Every pointer is non-null in a loaded table.
struct CudaDriverApi {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr);
  CUresult (*cuMemGetAddressRange)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle* handle, CUdeviceptr ptr);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetUuid)(CUuuid* uuid, CUdevice device);
  CUresult (*cuCtxPushCurrent)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent)(CUcontext* ctx);
  CUresult (*cuStreamGetCtx)(CUstream stream, CUcontext* ctx);
  CUresult (*cuEventCreate)(CUevent* event, unsigned int flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuIpcGetEventHandle)(CUipcEventHandle* handle, CUevent event);
  CUresult (*cuIpcOpenEventHandle)(CUevent* event, CUipcEventHandle handle);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
  // Managed buffers (vaed/cuda_buffer.h).
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemsetD8)(CUdeviceptr ptr, unsigned char value, size_t count);
  CUresult (*cuCtxSynchronize)();
};

// The loaded driver: its function table and the translation of its errors.
//
// Lifetime: the one returned by Get() lives until the process exits
// (libcuda.so.1 is never dlclose'd: CUDA contexts and their threads outlive
// any one user). Thread-safety: immutable once loaded; the driver's
// functions are thread-safe.
class CudaDriver {
 public:
  // The process's driver: loaded and cuInit(0)-ed on the first call, from
  // any thread (a function-local static, so exactly once); later calls
  // return the same result, failure included. Errors:
  // kFailedPrecondition "libcuda.so.1 could not be loaded (<dlerror>):
  // this machine has no NVIDIA driver", kFailedPrecondition naming a
  // missing symbol (a driver older than the library needs), and cuInit's
  // error (Check()).
  static Result<const CudaDriver*> Get();

  // Test hook: whether Get() was ever called in this process, so a test can
  // check that a refusal before any CUDA call leaves libcuda.so.1 unloaded.
  // Production code does not call it. Thread-safe.
  static bool LoadAttemptedForTesting();

  // Loads `soname` (e.g. "libcuda.so.1") and resolves the table, without
  // cuInit and without the process-wide caching of Get(); for tests of the
  // loader. The returned driver is never unloaded. Errors as Get(), with
  // `soname` in place of libcuda.so.1.
  static Result<const CudaDriver*> Load(const char* soname);

  const CudaDriverApi& api() const { return api_; }

  // OK for CUDA_SUCCESS; otherwise the one translation of a driver error,
  // code and reason from the daemon's classification of CUDA error numbers
  // (vaed/cuda_error_class.h; the driver's numbers are the runtime's):
  // kResourceExhausted for CUDA_ERROR_OUT_OF_MEMORY (2), kFailedPrecondition
  // for errors of setup (no device 100, not initialised 3, not permitted /
  // not supported 800/801, invalid context 201), kInvalidArgument for
  // invalid value / handle (1, 400), kInternal otherwise; the message is
  // "<what>: <cuGetErrorName> (<code>): <cuGetErrorString>", e.g.
  // "exporting an IPC handle: CUDA_ERROR_INVALID_VALUE (1): invalid argument".
  Status Check(CUresult result, std::string_view what) const;

  // "GPU-..." (vaed/device_uuid.h) of `device`. Errors: Check()'s, with
  // "<what>: reading the device's UUID".
  Result<std::string> DeviceUuid(CUdevice device, std::string_view what) const;

 private:
  explicit CudaDriver(const CudaDriverApi& api) : api_(api) {}
  CudaDriverApi api_;
};

// Makes a context current on the calling thread for a scope (cuCtxPushCurrent
// / cuCtxPopCurrent), so the library's calls run in the context of the
// memory or stream they are about, whatever context the caller has current.
// Not movable; Push() may be called once.
class ScopedCudaContext {
 public:
  explicit ScopedCudaContext(const CudaDriver& driver) : driver_(driver) {}
  ~ScopedCudaContext();
  ScopedCudaContext(const ScopedCudaContext&) = delete;
  ScopedCudaContext& operator=(const ScopedCudaContext&) = delete;

  // Errors: the driver's (Check()).
  Status Push(CUcontext ctx);

 private:
  const CudaDriver& driver_;
  bool pushed_ = false;
};

}  // namespace vaed::client::internal

#endif  // VAED_CLIENT_SRC_CUDA_DRIVER_H_
