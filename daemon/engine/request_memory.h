// What one decode request may hold at its peak, fixed at start-up once the
// weights are resident. Admission (server/decode_admission.h)
// refuses a request whose plan estimates more (DecodePlan::
// peak_bytes_estimate), with an error that names this figure and where it
// comes from, instead of a fixed cap on the latent's extents.
//
// The figure: the daemon's tensor memory budget (executor.memory_budget_mib)
// minus the bytes resident after loading (every rank's weights), or without
// a budget the host's MemTotal (/proc/meminfo) minus them. MemTotal, not
// MemAvailable: a request that fits the machine is not refused because
// other programs hold memory at that moment (the budget check at allocation
// time and the failure ladder handle that, tensor_memory.h).
//
// GPU ranks (unrun: no device here): a decode's buffers live on its rank's
// device, so the figure is the smallest rank device's total memory
// (cudaMemGetInfo) minus the weights resident on it (DeviceRequestMemory);
// the host budget still bounds host tensors at allocation time.
//
// Thread-safety: value type; HostMemoryTotalBytes() reads /proc.
#ifndef VAED_DAEMON_ENGINE_REQUEST_MEMORY_H_
#define VAED_DAEMON_ENGINE_REQUEST_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::engine {

struct RequestMemory {
  bool known = false;  // false: no budget and no MemTotal; nothing is refused
  uint64_t bytes = 0;
  // Where `bytes` comes from, for refusals: "executor.memory_budget_mib =
  // 1024 MiB minus 0.3 GiB of resident weights".
  std::string source;
};

// The figure for a daemon with `budget_bytes` (0 = no budget) and
// `resident_bytes` of weights on a host with `host_total_bytes` (0 =
// unknown). A budget or host at or below the resident bytes gives 0 bytes
// (start-up refuses such a budget before this).
RequestMemory RequestMemoryOf(uint64_t budget_bytes, uint64_t resident_bytes,
                              uint64_t host_total_bytes);

// One GPU rank's device for DeviceRequestMemory: its name for messages
// ("cuda:0 GPU-..."), its total memory and the weights resident on it.
struct RankDeviceMemory {
  std::string name;
  uint64_t total_bytes = 0;
  uint64_t resident_bytes = 0;
};

// The figure for GPU ranks: the smallest total - resident over `devices`,
// named with that device. Unknown (known = false) for an empty list or a
// device whose total is 0 (unreadable).
RequestMemory DeviceRequestMemory(const std::vector<RankDeviceMemory>& devices);

// The check admission and the start-up warm-up make before anything is
// allocated: OK when `memory` is unknown or `estimate_bytes` (a plan's
// DecodePlan::peak_bytes_estimate, whose terms are `estimate_terms`) fits
// memory.bytes; otherwise kResourceExhausted naming the latent
// (`latent_shape`), the estimate with its terms, the limit and its source.
// Not a client fault: the same request fits a larger daemon.
Status CheckRequestMemory(uint64_t estimate_bytes, const std::string& estimate_terms,
                          const std::vector<int64_t>& latent_shape, const RequestMemory& memory);

// MemTotal of /proc/meminfo in bytes; 0 when unreadable.
uint64_t HostMemoryTotalBytes();

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_REQUEST_MEMORY_H_
