// Owners of CUDA runtime objects, one type each, for the sources of GPU
// builds (VAED_WITH_CUDA; it includes the CUDA runtime header): an event
// (CudaEvent), a stream vaed creates (CudaStream), and the calling thread's
// current device (ScopedCudaDevice, in vaed/cuda_status.h beside the
// adapter it reports through). Every daemon source that makes one of
// these uses them, so each object has one release rule.
//
// Release: the destructor destroys the object and ignores the runtime's
// answer (after a sticky error nothing can be done about it), then clears
// the thread's last-error slot, so a release never surfaces in an
// unrelated later check. Destroying an event or stream that queued work
// still uses is allowed: CUDA releases it once that work completes.
//
// Thread-safety: an owner is used by one thread at a time; the objects
// themselves follow CUDA's rules. Move-only; a moved-from owner is empty.
#ifndef VAED_CUDA_OWNERS_H_
#define VAED_CUDA_OWNERS_H_

#include <cuda_runtime_api.h>

#include <utility>

#include "vaed/status.h"

namespace vaed {

class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent() { Reset(); }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // cudaEventCreateWithFlags on the calling thread's current device.
  // Errors: CudaStatus's, naming `what`.
  static Result<CudaEvent> Create(unsigned int flags, const char* what);
  // Opens another process's interprocess event (cudaIpcOpenEventHandle).
  static Result<CudaEvent> OpenIpc(const cudaIpcEventHandle_t& handle, const char* what);

  cudaEvent_t get() const { return event_; }
  void Reset() noexcept;

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_ = nullptr;
};

class CudaStream {
 public:
  CudaStream() = default;
  ~CudaStream() { Reset(); }
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  // cudaStreamCreateWithFlags on the calling thread's current device.
  static Result<CudaStream> Create(unsigned int flags, const char* what);

  cudaStream_t get() const { return stream_; }
  void Reset() noexcept;

 private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

}  // namespace vaed

#endif  // VAED_CUDA_OWNERS_H_
