// CPU builds: no CUDA devices (cuda_devices.h).
#include "daemon/engine/cuda_devices.h"

namespace vaed::engine {

namespace {

Status NeedsGpuBuild() {
  return FailedPrecondition(
             "executor.device \"cuda\" needs a GPU build of vaed (VAED_WITH_CUDA=ON, cmake "
             "--preset cuda); this build decodes on the CPU")
      .WithField("executor.device");
}

}  // namespace

bool CudaDevicesAvailable() { return false; }

Result<std::vector<CudaDevice>> ListCudaDevices() { return NeedsGpuBuild(); }

Result<DeviceMemory> CudaDeviceMemory(int /*ordinal*/) { return NeedsGpuBuild(); }

}  // namespace vaed::engine
