// CPU builds: CUDA IPC regions are refused, after the same argument checks
// as a GPU build (cuda_ipc.cc), so that a client learns about a malformed
// handle or UUID first.
#include "vaed/cuda_ipc.h"

namespace vaed {

bool CudaIpcAvailable() { return false; }

Result<std::unique_ptr<CudaIpcMapping>> CudaIpcMapping::Open(const std::string& handle_bytes,
                                                             uint64_t claimed_bytes,
                                                             const std::string& device_uuid) {
  VAED_RETURN_IF_ERROR(CheckCudaIpcArguments(handle_bytes, claimed_bytes, device_uuid).status());
  return CudaIpcUnavailable();
}

// No mapping can exist in a CPU build; these keep the class complete.
CudaIpcMapping::~CudaIpcMapping() = default;
CudaIpcMapping::CudaIpcMapping(CudaIpcMapping&& other) noexcept = default;
CudaIpcMapping& CudaIpcMapping::operator=(CudaIpcMapping&& other) noexcept = default;

}  // namespace vaed
