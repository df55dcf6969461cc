// Moving tensors in and out of the memory clients lend (DESIGN.md §2 items
// 2, 3 and 12): every read and write of a client region goes through the
// guarded copy (vaed/guarded_copy.h), so a segment the client shrinks or
// unmaps under us fails the request (kClientFault) instead of the daemon.
//
// Lifetime rule: these are the only places the engine touches client
// memory, between a job's start and its result (executor.h); the regions
// stay mapped for as long as the job holds them.
//
// Thread-safety: stateless; the caller owns the tensors.
#ifndef VAED_DAEMON_ENGINE_REGION_IO_H_
#define VAED_DAEMON_ENGINE_REGION_IO_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "vaed/host_region.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::engine {

// Copies between host memory and a rank's device that one request made
// (DecodeReply.host_copies / host_copy_bytes): a latent read from a host
// region copied to a GPU rank, an output copied back from it for a host
// region. CPU ranks make none: they decode in host memory.
struct HostCopies {
  uint32_t count = 0;
  uint64_t bytes = 0;
};

// Copies the latent `ref` out of `region` into a new float32 CPU tensor of
// ref.shape. The copy protects the decode from a client that writes or
// shrinks its segment halfway. `field` names it in errors ("latent",
// "audio_latent"). Errors: kClientFault (the segment faulted),
// kResourceExhausted (allocation).
Result<torch::Tensor> CopyLatentIn(const TensorRef& ref, const HostRegion& region,
                                   const std::string& field);

// kInvalidArgument "<field> contains N non-finite values (NaN or Inf) out
// of M; refusing to decode" when `latent` holds any: non-finite latents are
// reported, never silently decoded.
Status CheckLatentFinite(const torch::Tensor& latent, const std::string& field);

// `host` (a CPU tensor) on `device`, the rank's: `host` itself when the
// device is the CPU (nothing copied, nothing counted); otherwise a copy
// there, counted in `copies` (not null). `field` names it in errors.
// Errors: kResourceExhausted (device memory), kInternal (other LibTorch
// failures).
Result<torch::Tensor> ToRankDevice(const torch::Tensor& host, const torch::Device& device,
                                   const std::string& field, HostCopies* copies);

// `t` in host memory, to be written into a host region: `t` itself when
// it is on the CPU; otherwise a copy to the host (which waits for the
// device's work on it), counted in `copies` (not null). Errors as
// ToRankDevice().
Result<torch::Tensor> ToHost(const torch::Tensor& t, const std::string& field, HostCopies* copies);

// Writes `formatted` (contiguous, in host memory: see ToHost()) into
// `region` at ref.offset. Errors: kInternal when its byte count differs
// from ref.size (the plan and the decode disagree) or it is not on the
// CPU, kClientFault when the segment faulted.
Status CopyOut(const torch::Tensor& formatted, const TensorRef& ref, const HostRegion& region,
               const std::string& field);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_REGION_IO_H_
