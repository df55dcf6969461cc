// The build-independent check of cuda_events.h.
#include "daemon/engine/cuda_events.h"

namespace vaed::engine {

Status CheckIpcEventHandle(const std::string& handle, const std::string& field) {
  if (handle.size() != kCudaIpcEventHandleBytes) {
    return InvalidArgument(field + " has " + std::to_string(handle.size()) +
                           " bytes; a CUDA IPC event handle (cudaIpcEventHandle_t) has " +
                           std::to_string(kCudaIpcEventHandleBytes))
        .WithField(field);
  }
  return Status::Ok();
}

}  // namespace vaed::engine
