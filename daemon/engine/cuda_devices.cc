// GPU builds only (VAED_WITH_CUDA; see daemon/CMakeLists.txt). CPU builds
// link cuda_devices_unavailable.cc instead.
#include "daemon/engine/cuda_devices.h"

#include <cuda_runtime_api.h>

#include <string>

#include "vaed/cuda_status.h"

namespace vaed::engine {

bool CudaDevicesAvailable() { return true; }

Result<std::vector<CudaDevice>> ListCudaDevices() {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    // The runtime says "driver version is insufficient" (35) also when no
    // driver is loaded at all, and "no CUDA-capable device" (100) when it
    // sees none: name the likely cause for the operator.
    const bool no_driver = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice;
    return CudaStatus(err, no_driver ? "listing CUDA devices (cudaGetDeviceCount; is an NVIDIA "
                                       "driver for CUDA 13 loaded and a GPU visible? "
                                       "executor.device = \"cuda\" needs both)"
                                     : "listing CUDA devices (cudaGetDeviceCount)");
  }
  std::vector<CudaDevice> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaError_t err = cudaGetDeviceProperties(&prop, i); err != cudaSuccess) {
      return CudaStatus(err, "cudaGetDeviceProperties(" + std::to_string(i) + ")");
    }
    devices.push_back({.ordinal = i,
                       .uuid = ToDeviceUuid(prop.uuid),
                       .name = prop.name,
                       .total_bytes = static_cast<uint64_t>(prop.totalGlobalMem)});
  }
  return devices;
}

Result<DeviceMemory> CudaDeviceMemory(int ordinal) {
  ScopedCudaDevice scope;
  VAED_RETURN_IF_ERROR(scope.Set(ordinal));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes); err != cudaSuccess) {
    return CudaStatus(err, "cudaMemGetInfo on device " + std::to_string(ordinal));
  }
  return DeviceMemory{.used_bytes = total_bytes - free_bytes, .total_bytes = total_bytes};
}

}  // namespace vaed::engine
