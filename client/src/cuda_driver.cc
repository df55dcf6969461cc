// Loading the CUDA driver at run time (cuda_driver.h), and the one place
// where a CUresult becomes a vaed::Status for the client library.
#include "cuda_driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "vaed/cuda_error_class.h"
#include "vaed/device_uuid.h"

namespace vaed::client::internal {

namespace {

std::atomic<bool> g_load_attempted{false};

// Resolves `name` into `*fn`; false (and `*missing` = name) when absent.
template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  void* symbol = ::dlsym(lib, name);
  if (symbol == nullptr) {
    *missing = name;
    return false;
  }
  *fn = reinterpret_cast<Fn>(symbol);
  return true;
}

// Resolves the whole table; the name of the first missing symbol otherwise.
bool ResolveAll(void* lib, CudaDriverApi* api, std::string* missing) {
  // cuDeviceGetUuid_v2 (CUDA 11.4) also reports MIG instances' own UUIDs;
  // older drivers have only the unversioned call.
  const bool uuid = Resolve(lib, "cuDeviceGetUuid_v2", &api->cuDeviceGetUuid, missing) ||
                    Resolve(lib, "cuDeviceGetUuid", &api->cuDeviceGetUuid, missing);
  return uuid && Resolve(lib, "cuInit", &api->cuInit, missing) &&
         Resolve(lib, "cuGetErrorName", &api->cuGetErrorName, missing) &&
         Resolve(lib, "cuGetErrorString", &api->cuGetErrorString, missing) &&
         Resolve(lib, "cuPointerGetAttribute", &api->cuPointerGetAttribute, missing) &&
         Resolve(lib, "cuMemGetAddressRange_v2", &api->cuMemGetAddressRange, missing) &&
         Resolve(lib, "cuIpcGetMemHandle", &api->cuIpcGetMemHandle, missing) &&
         Resolve(lib, "cuDeviceGet", &api->cuDeviceGet, missing) &&
         Resolve(lib, "cuCtxPushCurrent_v2", &api->cuCtxPushCurrent, missing) &&
         Resolve(lib, "cuCtxPopCurrent_v2", &api->cuCtxPopCurrent, missing) &&
         Resolve(lib, "cuStreamGetCtx", &api->cuStreamGetCtx, missing) &&
         Resolve(lib, "cuEventCreate", &api->cuEventCreate, missing) &&
         Resolve(lib, "cuEventRecord", &api->cuEventRecord, missing) &&
         Resolve(lib, "cuEventDestroy_v2", &api->cuEventDestroy, missing) &&
         Resolve(lib, "cuIpcGetEventHandle", &api->cuIpcGetEventHandle, missing) &&
         Resolve(lib, "cuIpcOpenEventHandle", &api->cuIpcOpenEventHandle, missing) &&
         Resolve(lib, "cuStreamWaitEvent", &api->cuStreamWaitEvent, missing) &&
         Resolve(lib, "cuDevicePrimaryCtxRetain", &api->cuDevicePrimaryCtxRetain, missing) &&
         Resolve(lib, "cuDevicePrimaryCtxRelease_v2", &api->cuDevicePrimaryCtxRelease, missing) &&
         Resolve(lib, "cuMemAlloc_v2", &api->cuMemAlloc, missing) &&
         Resolve(lib, "cuMemFree_v2", &api->cuMemFree, missing) &&
         Resolve(lib, "cuMemsetD8_v2", &api->cuMemsetD8, missing) &&
         Resolve(lib, "cuCtxSynchronize", &api->cuCtxSynchronize, missing);
}

Result<const CudaDriver*> LoadAndInit() {
  VAED_ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::Load("libcuda.so.1"));
  VAED_RETURN_IF_ERROR(driver->Check(driver->api().cuInit(0), "initialising the CUDA driver"));
  return driver;
}

}  // namespace

Result<const CudaDriver*> CudaDriver::Load(const char* soname) {
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, so
  // they cannot interpose on a CUDA runtime the application loads itself.
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    return FailedPrecondition(std::string(soname) + " could not be loaded (" +
                              (why != nullptr ? why : "no reason given") +
                              "): this machine has no NVIDIA driver");
  }
  CudaDriverApi api{};
  std::string missing;
  if (!ResolveAll(lib, &api, &missing)) {
    ::dlclose(lib);
    return FailedPrecondition(std::string(soname) + " has no symbol " + missing +
                              ": the NVIDIA driver is older than vaed's client library needs");
  }
  // Never deleted: see "Lifetime" in cuda_driver.h.
  return new CudaDriver(api);
}

Result<const CudaDriver*> CudaDriver::Get() {
  g_load_attempted.store(true);
  // A function-local static: initialised once, thread-safe (C++11), the
  // result (failure included) kept for the process's life.
  static const Result<const CudaDriver*> driver = LoadAndInit();
  return driver;
}

bool CudaDriver::LoadAttemptedForTesting() { return g_load_attempted.load(); }

Result<std::string> CudaDriver::DeviceUuid(CUdevice device, std::string_view what) const {
  CUuuid raw{};
  VAED_RETURN_IF_ERROR(Check(api_.cuDeviceGetUuid(&raw, device),
                             std::string(what) + ": reading the device's UUID"));
  vaed::DeviceUuid uuid;
  std::memcpy(uuid.bytes.data(), raw.bytes, uuid.bytes.size());
  return FormatDeviceUuid(uuid);
}

Status CudaDriver::Check(CUresult result, std::string_view what) const {
  if (result == kCudaSuccess) return Status::Ok();
  // Either call may fail for a code the driver does not know (or in the
  // toolkit's stub library, which fails every call): say so, with the code.
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName(result, &name) != kCudaSuccess || name == nullptr) {
    name = "unknown CUDA error";
  }
  if (api_.cuGetErrorString(result, &text) != kCudaSuccess || text == nullptr) {
    text = "no description from the driver";
  }
  // The reason is the daemon's classification of CUDA codes (the driver's
  // numbers are the runtime's for every code it names): the caller learns
  // that this process's CUDA context is lost, or that memory ran out.
  return Status(CudaErrorCodeStatus(static_cast<int>(result)),
                std::string(what) + ": " + name + " (" + std::to_string(result) + "): " + text)
      .WithReason(CudaErrorCodeReason(static_cast<int>(result)));
}

ScopedCudaContext::~ScopedCudaContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  // Cannot fail for a context this object pushed on this thread.
  (void)driver_.api().cuCtxPopCurrent(&popped);
}

Status ScopedCudaContext::Push(CUcontext ctx) {
  VAED_RETURN_IF_ERROR(driver_.Check(driver_.api().cuCtxPushCurrent(ctx),
                                     "making the memory's CUDA context current"));
  pushed_ = true;
  return Status::Ok();
}

}  // namespace vaed::client::internal
