// One mapping per client allocation. CUDA maps an interprocess allocation
// at most once per process: a second cudaIpcOpenMemHandle of the same
// handle fails ("already mapped"). PyTorch's caching allocator carves many
// tensors out of one cudaMalloc segment, and cudaIpcGetMemHandle names the
// segment, so a worker that registers two tensors of one segment sends the
// same handle twice. CudaMappings opens each handle once and hands every
// registration of it a region of its own that shares the mapping.
//
// Lifetimes: a registration's region (what the registry holds, and a job
// for as long as it may touch the memory) keeps the mapping open; the
// mapping is closed (the opener's region destroyed: cudaIpcCloseMemHandle)
// when the last region on it is closed (CudaRegion::Close, on unregister)
// or destroyed. A region closed while others on its allocation stay
// registered reads as closed (data() null) but leaves the mapping open:
// the allocation is still lent through them.
//
// The handle is the key, whichever client sent it: the registry admits one
// process per handle (cuda_region.h, trust model), and CUDA's limit is per
// opening process, the daemon. Each registration's size_bytes is checked
// against the bytes the allocation holds from the handle's address.
//
// Thread-safety: not thread-safe; the request handler's thread. Regions it
// returns follow engine/cuda_region.h.
#ifndef VAED_DAEMON_SERVER_CUDA_MAPPINGS_H_
#define VAED_DAEMON_SERVER_CUDA_MAPPINGS_H_

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "daemon/server/cuda_region.h"
#include "vaed/status.h"

namespace vaed::server {

class CudaMappings {
 public:
  explicit CudaMappings(CudaRegionOpener open) : open_(std::move(open)) {}

  // A region for RegisterRegion.cuda `request` on `device`: a new view on
  // the allocation's mapping, opened with the opener the first time.
  // Errors: the opener's (first registration); kOutOfRange naming
  // register_region.cuda.size_bytes when a later registration claims more
  // than the allocation holds; kInvalidArgument naming
  // register_region.cuda.device_uuid when it names another device than the
  // open mapping's.
  Result<std::shared_ptr<CudaRegion>> Register(const v1::CudaIpcRegion& request,
                                               const engine::CudaDevice& device);

  // Mappings open now (allocations, not registrations).
  size_t open_mappings() const;

 private:
  CudaRegionOpener open_;
  // By handle; a mapping lives as long as a region holds it.
  std::map<std::string, std::weak_ptr<CudaRegion>> mappings_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CUDA_MAPPINGS_H_
