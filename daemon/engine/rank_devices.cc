#include "daemon/engine/rank_devices.h"

#include <algorithm>
#include <set>

#include "daemon/engine/cuda_devices.h"

namespace vaed::engine {

namespace {

bool ByUuid(const CudaDevice& a, const CudaDevice& b) { return a.uuid < b.uuid; }

// "0 GPU-... (NVIDIA H200), 1 GPU-..." or "none", for errors.
std::string ListVisible(const std::vector<CudaDevice>& visible) {
  if (visible.empty()) return "none";
  std::string out;
  for (const CudaDevice& d : visible) {
    if (!out.empty()) out += ", ";
    out += std::to_string(d.ordinal) + " " + FormatDeviceUuid(d.uuid) + " (" + d.name + ")";
  }
  return out;
}

Result<std::vector<CudaDevice>> Configured(const std::vector<CudaDevice>& visible,
                                          const std::vector<std::string>& configured,
                                          uint32_t ranks) {
  VAED_ASSIGN_OR_RETURN(const std::vector<DeviceUuid> uuids,
                        ParseConfiguredDevices(configured, ranks));
  std::vector<CudaDevice> chosen;
  for (size_t i = 0; i < uuids.size(); ++i) {
    const auto it = std::find_if(visible.begin(), visible.end(),
                                 [&](const CudaDevice& d) { return d.uuid == uuids[i]; });
    if (it == visible.end()) {
      const std::string field = "executor.devices[" + std::to_string(i) + "]";
      return FailedPrecondition(field + " " + FormatDeviceUuid(uuids[i]) +
                                " is not a device visible to vaed (visible: " +
                                ListVisible(visible) + "; check CUDA_VISIBLE_DEVICES)")
          .WithField(field);
    }
    chosen.push_back(*it);
  }
  std::sort(chosen.begin(), chosen.end(), ByUuid);
  return chosen;
}

}  // namespace

Result<std::vector<DeviceUuid>> ParseConfiguredDevices(const std::vector<std::string>& configured,
                                                       uint32_t ranks) {
  std::vector<DeviceUuid> uuids;
  std::set<DeviceUuid> seen;
  for (size_t i = 0; i < configured.size(); ++i) {
    const std::string field = "executor.devices[" + std::to_string(i) + "]";
    VAED_ASSIGN_OR_RETURN(const DeviceUuid uuid, ParseDeviceUuid(configured[i], field));
    if (!seen.insert(uuid).second) {
      return InvalidArgument(field + " " + FormatDeviceUuid(uuid) +
                             " is listed twice; each device serves one rank")
          .WithField(field);
    }
    uuids.push_back(uuid);
  }
  if (!configured.empty() && configured.size() != ranks) {
    return InvalidArgument("executor.devices names " + std::to_string(configured.size()) +
                           " devices but group.ranks is " + std::to_string(ranks) +
                           "; a GPU rank owns one device, so the two must be equal")
        .WithField("executor.devices");
  }
  return uuids;
}

std::string RankDevice::Describe() const {
  if (!is_cuda) return "cpu";
  return "cuda:" + std::to_string(cuda.ordinal) + " " + FormatDeviceUuid(cuda.uuid);
}

c10::Device RankDevice::TorchDevice() const {
  if (!is_cuda) return c10::Device(c10::DeviceType::CPU);
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(cuda.ordinal));
}

Result<std::vector<CudaDevice>> AssignRankDevices(std::vector<CudaDevice> visible,
                                                  const std::vector<std::string>& configured,
                                                  uint32_t ranks) {
  std::sort(visible.begin(), visible.end(), ByUuid);
  if (!configured.empty()) return Configured(visible, configured, ranks);
  if (visible.size() < ranks) {
    return FailedPrecondition("group.ranks is " + std::to_string(ranks) + " but only " +
                              std::to_string(visible.size()) +
                              " CUDA devices are visible (visible: " + ListVisible(visible) +
                              "; check CUDA_VISIBLE_DEVICES)")
        .WithField("group.ranks");
  }
  visible.resize(ranks);
  return visible;
}

Result<std::vector<RankDevice>> ResolveRankDevices(DeviceKind device,
                                                   const std::vector<std::string>& configured,
                                                   uint32_t ranks) {
  if (device == DeviceKind::kCpu) return std::vector<RankDevice>(ranks);
  VAED_ASSIGN_OR_RETURN(std::vector<CudaDevice> visible, ListCudaDevices());
  VAED_ASSIGN_OR_RETURN(std::vector<CudaDevice> chosen,
                        AssignRankDevices(std::move(visible), configured, ranks));
  std::vector<RankDevice> out;
  for (CudaDevice& d : chosen) out.push_back({.is_cuda = true, .cuda = std::move(d)});
  return out;
}

int CudaOrdinalOfRank(const std::vector<RankDevice>& rank_devices, size_t local_rank) {
  if (local_rank >= rank_devices.size() || !rank_devices[local_rank].is_cuda) return -1;
  return rank_devices[local_rank].cuda.ordinal;
}

}  // namespace vaed::engine
