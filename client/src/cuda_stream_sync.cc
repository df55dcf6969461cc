#include "cuda_stream_sync.h"

#include <cstring>

namespace vaed::client::internal {

CudaStreamSync::~CudaStreamSync() {
  for (auto& entry : inputs_ready_) (void)driver_.api().cuEventDestroy(entry.second);
  for (auto& entry : opened_) (void)driver_.api().cuEventDestroy(entry.second);
}

Result<CUcontext> CudaStreamSync::ContextOf(void* stream) const {
  CUcontext ctx = nullptr;
  VAED_RETURN_IF_ERROR(driver_.Check(
      driver_.api().cuStreamGetCtx(static_cast<CUstream>(stream), &ctx),
      "finding the context of the CUDA stream the decode is ordered on (for the legacy default "
      "stream: the calling thread's current context; is one current?)"));
  return ctx;
}

Result<std::string> CudaStreamSync::RecordInputsReady(void* stream) {
  VAED_ASSIGN_OR_RETURN(CUcontext ctx, ContextOf(stream));
  ScopedCudaContext scope(driver_);
  VAED_RETURN_IF_ERROR(scope.Push(ctx));
  CUevent& event = inputs_ready_[ctx];
  if (event == nullptr) {
    Status s = driver_.Check(
        driver_.api().cuEventCreate(&event, kCuEventDisableTiming | kCuEventInterprocess),
        "creating the client's inputs-ready IPC event");
    if (!s.ok()) {
      inputs_ready_.erase(ctx);
      return s;
    }
  }
  VAED_RETURN_IF_ERROR(
      driver_.Check(driver_.api().cuEventRecord(event, static_cast<CUstream>(stream)),
                    "recording the inputs-ready event on the caller's stream"));
  CUipcEventHandle handle{};
  VAED_RETURN_IF_ERROR(driver_.Check(driver_.api().cuIpcGetEventHandle(&handle, event),
                                     "exporting the inputs-ready event's IPC handle"));
  return std::string(handle.reserved, sizeof(handle.reserved));
}

Status CudaStreamSync::WaitOutputsReady(void* stream, const std::string& handle) {
  if (handle.size() != kCuIpcHandleSize) {
    return ProtocolError("decode reply: outputs_ready_event has " + std::to_string(handle.size()) +
                         " bytes; a CUDA IPC event handle has " + std::to_string(kCuIpcHandleSize));
  }
  auto it = opened_.find(handle);
  if (it == opened_.end()) {
    VAED_ASSIGN_OR_RETURN(CUcontext ctx, ContextOf(stream));
    ScopedCudaContext scope(driver_);
    VAED_RETURN_IF_ERROR(scope.Push(ctx));
    CUipcEventHandle raw{};
    std::memcpy(raw.reserved, handle.data(), sizeof(raw.reserved));
    CUevent event = nullptr;
    VAED_RETURN_IF_ERROR(driver_.Check(driver_.api().cuIpcOpenEventHandle(&event, raw),
                                       "opening the daemon's outputs-ready IPC event"));
    it = opened_.emplace(handle, event).first;
  }
  // The event may belong to another context than the stream (the CUDA
  // driver allows cross-context waits), so no context is pushed here.
  return driver_.Check(
      driver_.api().cuStreamWaitEvent(static_cast<CUstream>(stream), it->second, 0),
      "making the caller's stream wait for the daemon's outputs-ready event");
}

}  // namespace vaed::client::internal
