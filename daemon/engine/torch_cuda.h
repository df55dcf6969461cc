// LibTorch's CUDA side for GPU ranks: the rank's own stream (used through
// its RankStream, rank_stream.h), the caching allocator's per-device memory
// figures, and the exact float32 setting. CUDA-free header (streams travel
// as void*, a cudaStream_t).
//
// Built from torch_cuda.cc in GPU builds (VAED_WITH_CUDA, linked with
// libtorch_cuda; daemon/CMakeLists.txt), from torch_cuda_unavailable.cc in
// CPU builds, where every call answers kFailedPrecondition. Unrun: no
// device has executed it yet.
//
// Thread-safety: UseRankStream() acts on the calling thread (LibTorch's
// current stream is per thread and device); the others are process-wide
// and safe from any thread.
#ifndef VAED_DAEMON_ENGINE_TORCH_CUDA_H_
#define VAED_DAEMON_ENGINE_TORCH_CUDA_H_

#include <cstdint>

#include "vaed/status.h"

namespace vaed::engine {

// True when LibTorch was built with CUDA (and this file's real half is
// linked).
bool TorchCudaAvailable();

// Makes device `ordinal` the calling thread's current device, takes a
// stream from LibTorch's pool there and makes it the thread's current
// stream, so every LibTorch op the rank
// thread runs on its device goes to it (never the legacy default stream,
// which synchronises with every other stream of the process). Returns the
// cudaStream_t. Call once per rank thread, before the warm-up. Errors:
// kFailedPrecondition without CUDA LibTorch; LibTorch's CUDA errors
// (torch_status.h conventions).
Result<void*> UseRankStream(int ordinal);

// The caching allocator's figures for device `ordinal`, bytes: in use by
// tensors now, the peak since ResetPeakDeviceBytes(), and reserved from
// the driver (what nvidia-smi counts for the process).
struct DeviceMemoryFigures {
  uint64_t allocated_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
};
Result<DeviceMemoryFigures> TorchDeviceMemory(int ordinal);
// Starts a new peak (per request: DecodeReply peak_device_bytes).
Status ResetPeakDeviceBytes(int ordinal);

// Waits (on the calling thread) until the work enqueued so far on
// `stream` (a cudaStream_t of device `ordinal`; null: the calling thread's
// current LibTorch stream there) has finished. Errors as UseRankStream(); a
// sticky CUDA error keeps kStickyDevice.
Status SynchronizeStream(int ordinal, void* stream);

// float32 math is exact float32 on the device: TF32 off for cuBLAS and
// cuDNN (spec: the fp32 path is the reference; TF32 rounds inputs to 10
// mantissa bits). Process-wide; call once at start-up for CUDA ranks.
Status UseExactFloat32();

// Component timings on CUDA devices come from event pairs recorded on the
// rank's current stream (models/interval_timer.h), read after the request's
// work has finished. Process-wide; call once at start-up for CUDA ranks.
// kFailedPrecondition without CUDA LibTorch.
Status UseCudaEventTimings();

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_TORCH_CUDA_H_
