// LibTorch with CUDA: the real half of torch_cuda.h. Unrun (no device).
#include "daemon/engine/torch_cuda.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/models/interval_timer.h"
#include "daemon/models/torch_status.h"
#include "vaed/cuda_owners.h"
#include "vaed/cuda_status.h"

namespace vaed::engine {
namespace {

// LibTorch's errors through its adapter (models/torch_status.h), so that a
// sticky CUDA error (c10::AcceleratorError's code) keeps kStickyDevice and
// an allocation failure kOutOfMemory.
template <typename Fn>
Status Guarded(const char* what, Fn&& fn) {
  return models::RunTorch(what, [&]() -> Status {
    fn();
    return Status::Ok();
  });
}

// models::DeviceIntervals on a CUDA device: one timing event pair per
// interval (CUDA runtime events on `device`, made current for each call),
// recorded on the thread's current LibTorch stream of that device (the
// rank's). A Start() without its Stop() leaves a pair without an end, which
// Seconds() skips; so does any event an error left unrecorded. A failed
// call clears the runtime's last error (cudaGetLastError), so a timing
// failure never surfaces in LibTorch's next error check: timings must not
// fail a decode.
class CudaEventIntervals : public models::DeviceIntervals {
 public:
  explicit CudaEventIntervals(c10::DeviceIndex device) : device_(device) {}
  ~CudaEventIntervals() override {
    ScopedCudaDevice on_device;
    (void)on_device.Set(device_);
    pairs_.clear();
  }
  CudaEventIntervals(const CudaEventIntervals&) = delete;
  CudaEventIntervals& operator=(const CudaEventIntervals&) = delete;

  void Start() noexcept override {
    try {
      pairs_.push_back({Recorded(), CudaEvent()});
    } catch (...) {  // out of host memory: this interval is not timed
    }
  }

  void Stop() noexcept override {
    if (pairs_.empty() || pairs_.back().end.get() != nullptr) return;
    pairs_.back().end = Recorded();
  }

  double Seconds() noexcept override {
    ScopedCudaDevice on_device;
    if (!on_device.Set(device_).ok()) return 0;
    double seconds = 0;
    for (const Pair& p : pairs_) {
      float ms = 0;
      if (p.start.get() == nullptr || p.end.get() == nullptr ||
          cudaEventSynchronize(p.end.get()) != cudaSuccess ||
          cudaEventElapsedTime(&ms, p.start.get(), p.end.get()) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;  // an unreadable pair counts 0
      }
      seconds += static_cast<double>(ms) / 1000.0;
    }
    return seconds;
  }

 private:
  struct Pair {
    CudaEvent start;
    CudaEvent end;
  };

  // A timing event recorded on the current stream of `device_`; empty on
  // any error (the runtime's last error cleared).
  CudaEvent Recorded() noexcept {
    ScopedCudaDevice on_device;
    if (!on_device.Set(device_).ok()) return CudaEvent();
    cudaStream_t stream = nullptr;
    try {
      stream = c10::cuda::getCurrentCUDAStream(device_).stream();
    } catch (...) {
      return CudaEvent();
    }
    Result<CudaEvent> e = CudaEvent::Create(cudaEventDefault, "a timing event");
    if (!e.ok()) return CudaEvent();  // CudaStatus cleared the last error
    if (cudaEventRecord(e->get(), stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaEvent();
    }
    return std::move(e).value();
  }

  const c10::DeviceIndex device_;
  std::vector<Pair> pairs_;
};

}  // namespace

bool TorchCudaAvailable() { return true; }

Result<void*> UseRankStream(int ordinal) {
  void* stream = nullptr;
  VAED_RETURN_IF_ERROR(Guarded("making the rank's CUDA stream current", [&] {
    const auto device = static_cast<c10::DeviceIndex>(ordinal);
    c10::cuda::set_device(device);
    c10::cuda::CUDAStream s = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
    c10::cuda::setCurrentCUDAStream(s);
    stream = s.stream();
  }));
  return stream;
}

Status SynchronizeStream(int ordinal, void* stream) {
  return Guarded("waiting for the rank's CUDA stream", [&] {
    const auto device = static_cast<c10::DeviceIndex>(ordinal);
    (stream == nullptr
         ? c10::cuda::getCurrentCUDAStream(device)
         : c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), device))
        .synchronize();
  });
}

Result<DeviceMemoryFigures> TorchDeviceMemory(int ordinal) {
  DeviceMemoryFigures f;
  VAED_RETURN_IF_ERROR(Guarded("reading the caching allocator's figures", [&] {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(ordinal);
    // Index 0 is StatType::AGGREGATE (all pools) (LibTorch 2.11).
    f.allocated_bytes = static_cast<uint64_t>(stats.allocated_bytes[0].current);
    f.peak_allocated_bytes = static_cast<uint64_t>(stats.allocated_bytes[0].peak);
    f.reserved_bytes = static_cast<uint64_t>(stats.reserved_bytes[0].current);
  }));
  return f;
}

Status ResetPeakDeviceBytes(int ordinal) {
  return Guarded("resetting the caching allocator's peak", [&] {
    c10::cuda::CUDACachingAllocator::resetPeakStats(ordinal);
  });
}

Status UseCudaEventTimings() {
  models::SetDeviceIntervalsFactory(
      [](const torch::Device& device) -> std::unique_ptr<models::DeviceIntervals> {
        if (!device.is_cuda()) return nullptr;
        return std::make_unique<CudaEventIntervals>(device.index());
      });
  return Status::Ok();
}

Status UseExactFloat32() {
  return Guarded("turning TF32 off", [] {
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  });
}

}  // namespace vaed::engine
