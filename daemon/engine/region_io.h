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

#include <string>

#include "vaed/host_region.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::engine {

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

// Writes `formatted` (contiguous) into `region` at ref.offset. Errors:
// kInternal when its byte count differs from ref.size (the plan and the
// decode disagree), kClientFault when the segment faulted.
Status CopyOut(const torch::Tensor& formatted, const TensorRef& ref, const HostRegion& region,
               const std::string& field);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_REGION_IO_H_
