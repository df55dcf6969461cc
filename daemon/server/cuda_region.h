// CUDA IPC regions as the daemon holds them: one client
// allocation, opened once per registration on the device with the UUID the
// client named, unmapped when the registration ends (UnregisterRegion
// acknowledged, client gone; client_registry.h has the lifetime rule).
//
// The registry holds each opened region (engine/cuda_region.h) by
// shared_ptr beside host regions; the last reference closes the mapping
// (cudaIpcCloseMemHandle in CudaIpcMapping's destructor). Tests open fake
// regions through a CudaRegionOpener; the daemon's opener is
// CudaIpcMapping::Open (GPU builds; CPU builds answer
// CudaIpcUnavailable()).
//
// Trust model. A legacy CUDA IPC handle is a capability: whoever holds its
// 64 bytes can open the allocation, and the driver does not say which
// process exported it. What vaed checks:
//   - the client is admitted (peer credentials, access_control.h) and the
//     region is registered by that client only: region ids are per client,
//     so no other client can name it in a request;
//   - the handle is not registered by another process at the same time
//     (RegisteredHandleHolder): two processes cannot both lend vaed one
//     allocation;
//   - the allocation holds the claimed bytes (cuMemGetAddressRange), and is
//     on a device one of the daemon's ranks decodes on;
//   - every tensor a request names lies inside the registered bytes.
// What it cannot check: that the client exported the handle itself. A
// process that obtained another process's handle (handles are plain bytes)
// can make vaed read or write that allocation, exactly as it could open it
// itself with cudaIpcOpenMemHandle: vaed grants no access the handle does
// not already grant, but it does not add the possession check either. The
// stronger design shares CUDA VMM allocations (cuMemExportToShareableHandle
// with a POSIX file descriptor) over the Unix socket, where the kernel
// checks possession (SCM_RIGHTS). It is not built: PyTorch's caching
// allocator hands out cudaMalloc memory (legacy IPC only) unless it is
// configured for expandable segments, so a DiT worker's tensors could not
// be lent in place; and ZeroMQ's IPC transport does not pass file
// descriptors, so it needs a side channel. Deployments that need it run
// vaed and the workers under one uid and rely on the socket's permissions.
//
// Thread-safety: a CudaRegion's accessors are const and safe from any
// thread; the memory behind data() belongs to the client (cuda_ipc.h).
#ifndef VAED_DAEMON_SERVER_CUDA_REGION_H_
#define VAED_DAEMON_SERVER_CUDA_REGION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/engine/cuda_region.h"
#include "daemon/engine/rank_devices.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

using engine::CudaRegion;  // the engine's view of a region (engine/cuda_region.h)

// Opens the allocation of a validated RegisterRegion.cuda on the device
// `rank_device` (the rank device whose UUID it named).
using CudaRegionOpener = std::function<Result<std::shared_ptr<CudaRegion>>(
    const v1::CudaIpcRegion& request, const engine::CudaDevice& rank_device)>;

// The daemon's opener: CudaIpcMapping::Open (cuda_ipc.h), whose errors it
// returns (CPU builds: CudaIpcUnavailable()).
CudaRegionOpener IpcCudaRegionOpener();

// Checks RegisterRegion.cuda against the daemon's rank devices and returns
// the rank device it names (to open it on). Errors, each naming the field
// (register_region.cuda...):
//   kInvalidArgument     malformed handle, size or UUID (cuda_ipc.h
//                        CheckCudaIpcArguments);
//   kFailedPrecondition  the daemon has no CUDA ranks (`ranks` all CPU;
//                        the message says "this daemon has no CUDA ranks");
//   kNotFound            device_uuid is none of the ranks' devices (the
//                        message lists them): a region must be on a
//                        device the daemon decodes on (a latent on another
//                        rank's device than the one decoding it is copied
//                        device to device at decode time).
Result<engine::CudaDevice> CudaRegionDevice(const v1::CudaIpcRegion& request,
                                            const std::vector<engine::RankDevice>& ranks);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CUDA_REGION_H_
