// GPU builds only (VAED_WITH_CUDA; see shm/memory/CMakeLists.txt).
#include "vaed/cuda_owners.h"

#include "vaed/cuda_status.h"

namespace vaed {

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    Reset();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Result<CudaEvent> CudaEvent::Create(unsigned int flags, const char* what) {
  cudaEvent_t event = nullptr;
  if (cudaError_t err = cudaEventCreateWithFlags(&event, flags); err != cudaSuccess) {
    return CudaStatus(err, std::string(what) + " (cudaEventCreateWithFlags)");
  }
  return CudaEvent(event);
}

Result<CudaEvent> CudaEvent::OpenIpc(const cudaIpcEventHandle_t& handle, const char* what) {
  cudaEvent_t event = nullptr;
  if (cudaError_t err = cudaIpcOpenEventHandle(&event, handle); err != cudaSuccess) {
    return CudaStatus(err, std::string(what) + " (cudaIpcOpenEventHandle)");
  }
  return CudaEvent(event);
}

void CudaEvent::Reset() noexcept {
  if (event_ == nullptr) return;
  (void)cudaEventDestroy(std::exchange(event_, nullptr));
  (void)cudaGetLastError();
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Result<CudaStream> CudaStream::Create(unsigned int flags, const char* what) {
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, flags); err != cudaSuccess) {
    return CudaStatus(err, std::string(what) + " (cudaStreamCreateWithFlags)");
  }
  return CudaStream(stream);
}

void CudaStream::Reset() noexcept {
  if (stream_ == nullptr) return;
  (void)cudaStreamDestroy(std::exchange(stream_, nullptr));
  (void)cudaGetLastError();
}

}  // namespace vaed
