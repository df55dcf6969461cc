// Which device each local rank decodes on (DESIGN.md §1: one rank executor
// per device). CPU ranks (executor.device = "cpu", every CPU build) share
// the host; GPU ranks (executor.device = "cuda", GPU builds) own one CUDA
// device each.
//
// GPU ranks are numbered in the order of their devices' UUIDs, never by
// CUDA ordinal: a DiT worker and the daemon see different
// CUDA_VISIBLE_DEVICES, so an ordinal means different devices in the two
// processes, while the UUID (device_uuid.h) names the same one in both.
//
// Thread-safety: plain values and pure functions.
#ifndef VAED_DAEMON_ENGINE_RANK_DEVICES_H_
#define VAED_DAEMON_ENGINE_RANK_DEVICES_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/models/named_enum.h"
#include "vaed/device_uuid.h"
#include "vaed/status.h"

namespace vaed::engine {

// Where the ranks decode (executor.device).
enum class DeviceKind {
  kCpu,   // every build: worker ranks on the host
  kCuda,  // GPU builds: one rank per CUDA device
};
inline constexpr models::NameTable<DeviceKind, 2> kDeviceKindNames = {{
    {DeviceKind::kCpu, "cpu"},
    {DeviceKind::kCuda, "cuda"},
}};

// A CUDA device as this process sees it.
struct CudaDevice {
  int ordinal = -1;  // CUDA runtime index in this process; never on the wire
  DeviceUuid uuid;
  std::string name;          // e.g. "NVIDIA H200"
  uint64_t total_bytes = 0;  // device memory
};

// The device of one local rank: `cuda` unset for a CPU rank.
struct RankDevice {
  bool is_cuda = false;
  CudaDevice cuda;  // meaningful when is_cuda

  // "cpu" or "cuda:<ordinal> <uuid>" (logs).
  std::string Describe() const;
  // The LibTorch device the rank's models live on: kCPU, or kCUDA with
  // cuda.ordinal (the index this process sees, as LibTorch numbers
  // devices; it never leaves the process). Constructing it needs no
  // device; using a CUDA one needs a CUDA LibTorch.
  c10::Device TorchDevice() const;
};

// The checks of executor.devices that need no device (configuration time):
// each entry parses as a UUID, none is listed twice, and there are exactly
// `ranks` of them (or none). Returns the parsed UUIDs in list order.
// Errors: kInvalidArgument naming "executor.devices[i]" or
// "executor.devices" and the rule.
Result<std::vector<DeviceUuid>> ParseConfiguredDevices(const std::vector<std::string>& configured,
                                                       uint32_t ranks);

// Chooses the devices of `ranks` GPU ranks among `visible` (as
// ListCudaDevices() returns them, any order):
//   - `configured` empty: the `ranks` visible devices with the smallest
//     UUIDs;
//   - otherwise each entry is a UUID (device_uuid.h text form) of a
//     visible device, no device twice, and there must be exactly `ranks`
//     of them.
// The result is in UUID order: rank r decodes on result[r].
// Errors: those of ParseConfiguredDevices; (kFailedPrecondition) a
// configured UUID that is not visible, or fewer
// visible devices than group.ranks; each lists the visible devices.
Result<std::vector<CudaDevice>> AssignRankDevices(std::vector<CudaDevice> visible,
                                                  const std::vector<std::string>& configured,
                                                  uint32_t ranks);

// The devices of the `ranks` local ranks for `device` (executor.device)
// and `configured` (executor.devices): for kCpu, `ranks` CPU ranks; for
// kCuda, ListCudaDevices() (cuda_devices.h) then
// AssignRankDevices. Errors: those two functions'.
Result<std::vector<RankDevice>> ResolveRankDevices(DeviceKind device,
                                                   const std::vector<std::string>& configured,
                                                   uint32_t ranks);

// The CUDA ordinal (as this process numbers devices) of local rank
// `local_rank`'s device in `rank_devices` (ResolveRankDevices' result), or
// -1 when that rank is on the CPU or out of range. Ranks are numbered in
// device-UUID order, so rank r's device is ordinal r only by chance: the
// rank's NCCL communicator and its models must use this ordinal.
int CudaOrdinalOfRank(const std::vector<RankDevice>& rank_devices, size_t local_rank);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_RANK_DEVICES_H_
