// The checks of a CUDA IPC registration that need no CUDA (every build).
#include "vaed/cuda_ipc.h"

#include "vaed/tensor_ref.h"

namespace vaed {

Result<DeviceUuid> CheckCudaIpcArguments(const std::string& handle_bytes, uint64_t claimed_bytes,
                                         const std::string& device_uuid) {
  if (handle_bytes.size() != kCudaIpcHandleBytes) {
    return InvalidArgument("register_region.cuda.ipc_handle has " + std::to_string(handle_bytes.size()) +
                           " bytes; a cudaIpcMemHandle_t has " +
                           std::to_string(kCudaIpcHandleBytes))
        .WithField("register_region.cuda.ipc_handle");
  }
  if (claimed_bytes == 0) {
    return InvalidArgument("register_region.cuda.size_bytes is 0; a region must hold at least one byte")
        .WithField("register_region.cuda.size_bytes");
  }
  return ParseDeviceUuid(device_uuid, "register_region.cuda.device_uuid");
}

Status CudaIpcMapping::CheckRange(uint64_t offset, uint64_t size, std::string_view what) const {
  return CheckByteRange(offset, size, size_, what);
}

}  // namespace vaed
