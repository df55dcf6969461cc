// The CUDA devices this process sees, through the CUDA runtime. Implemented
// in GPU builds (cuda_devices.cc); CPU builds link
// cuda_devices_unavailable.cc, which answers kFailedPrecondition. No CUDA
// types here, so callers compile the same in both builds.
//
// Thread-safety: safe from any thread (the runtime is). Each call restores
// the calling thread's current device.
#ifndef VAED_DAEMON_ENGINE_CUDA_DEVICES_H_
#define VAED_DAEMON_ENGINE_CUDA_DEVICES_H_

#include <cstdint>
#include <vector>

#include "daemon/engine/rank_devices.h"
#include "vaed/status.h"

namespace vaed::engine {

// True in GPU builds.
bool CudaDevicesAvailable();

// Every visible device, in CUDA ordinal order (AssignRankDevices orders
// them by UUID). Errors: kFailedPrecondition in a CPU build ("executor.device
// \"cuda\" needs a GPU build") or when no driver/device is usable (the
// runtime's error text); others from the runtime adapter (cuda_status.h).
Result<std::vector<CudaDevice>> ListCudaDevices();

struct DeviceMemory {
  uint64_t used_bytes = 0;   // total - free: every process on the device
  uint64_t total_bytes = 0;
};

// cudaMemGetInfo of the device with runtime index `ordinal`.
Result<DeviceMemory> CudaDeviceMemory(int ordinal);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_CUDA_DEVICES_H_
