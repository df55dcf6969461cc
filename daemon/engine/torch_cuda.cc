// LibTorch with CUDA: the real half of torch_cuda.h. Unrun (no device).
#include "daemon/engine/torch_cuda.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <string>

namespace vaed::engine {
namespace {

// LibTorch throws c10::Error; this adapter turns it into a Status.
template <typename Fn>
Status Guarded(const char* what, Fn&& fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Internal(std::string(what) + ": " + e.what());
  }
}

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

Status SynchronizeCurrentStream(int ordinal) {
  return Guarded("waiting for the rank's CUDA stream", [&] {
    c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(ordinal)).synchronize();
  });
}

Result<DeviceMemoryFigures> TorchDeviceMemory(int ordinal) {
  DeviceMemoryFigures f;
  VAED_RETURN_IF_ERROR(Guarded("reading the caching allocator's figures", [&] {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(ordinal);
    // Index 0 is StatType::AGGREGATE (all pools) in LibTorch 1.13 and 2.x.
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

Status UseExactFloat32() {
  return Guarded("turning TF32 off", [] {
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
  });
}

}  // namespace vaed::engine
