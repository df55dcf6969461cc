// Moving tensors in and out of CUDA regions: the device
// counterpart of region_io.h. Unrun on a device: here only the CPU view
// (RegionTensor with a CPU device) runs, in tests.
//
// Ordering: every copy is enqueued on the calling thread's current stream
// (the rank's own, torch_cuda.h), after the wait on the request's
// inputs_ready_event (cuda_events.h), and none synchronises the host. The
// latent is copied out of the client's allocation first (as from host
// regions), so a client that writes its tensor again after the event only
// races with that one copy, not with the whole decode. A latent on another
// device than the rank's is copied device to device by LibTorch (peer
// access where the devices have it, through the host otherwise).
//
// Lifetime rule (client_registry.h): the engine touches a CUDA region only
// between a job's start and its result. Copies are asynchronous, so the
// request's RequestFence (rank_stream.h) waits for the rank's stream on
// every way out of the decode, success or error, before the result is
// handed over: the reply, and any UnregisterRegion acknowledgement
// deferred behind it, go out only when the device work on the client's
// memory has finished, and closing the IPC mapping afterwards is safe. The
// wait is on the rank's thread, never the worker's.
//
// Thread-safety: stateless; the caller owns the tensors.
#ifndef VAED_DAEMON_ENGINE_CUDA_REGION_IO_H_
#define VAED_DAEMON_ENGINE_CUDA_REGION_IO_H_

#include <torch/torch.h>

#include <string>

#include "daemon/engine/cuda_region.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::engine {

// A tensor viewing `ref` (dtype, shape, C-contiguous) at byte ref.offset of
// memory that starts at `base` on `device`; no copy, no ownership: valid
// while the region is. Precondition: admission checked ref against the
// region's size.
torch::Tensor RegionTensor(void* base, const TensorRef& ref, torch::Device device);

// The latent `ref` of a CUDA region copied to a new tensor on `rank_device`.
// Errors: LibTorch's (kResourceExhausted when the device allocation fails,
// torch_status.h), naming `field`.
Result<torch::Tensor> CopyLatentFromCuda(const TensorRef& ref, const CudaRegion& region,
                                         torch::Device rank_device, const std::string& field);

// Writes `formatted` (contiguous, any device) into the CUDA region at
// ref.offset (asynchronous on the current stream). Errors: kInternal when
// its byte count differs from ref.size; LibTorch's.
Status CopyOutToCuda(const torch::Tensor& formatted, const TensorRef& ref,
                     const CudaRegion& region, const std::string& field);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_CUDA_REGION_IO_H_
