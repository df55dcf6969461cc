#include "daemon/server/cuda_region.h"

#include <algorithm>
#include <utility>

#include "vaed/cuda_ipc.h"
#include "vaed/device_uuid.h"

namespace vaed::server {
namespace {

// A CudaIpcMapping as a CudaRegion; the mapping closes with it.
class IpcCudaRegion final : public CudaRegion {
 public:
  IpcCudaRegion(std::unique_ptr<CudaIpcMapping> mapping, std::string handle)
      : mapping_(std::move(mapping)), handle_(std::move(handle)) {}
  void* data() const override { return mapping_ ? mapping_->data() : nullptr; }
  uint64_t size() const override { return size_; }
  uint64_t allocation_bytes() const override {
    return mapping_ ? mapping_->allocation_bytes() : 0;
  }
  int device() const override { return device_; }
  const std::string& handle() const override { return handle_; }
  void Close() override { mapping_.reset(); }  // cudaIpcCloseMemHandle

 private:
  std::unique_ptr<CudaIpcMapping> mapping_;
  std::string handle_;
  uint64_t size_ = mapping_->size();
  int device_ = mapping_->device();
};

std::string ListRankDevices(const std::vector<engine::RankDevice>& ranks) {
  std::string out;
  for (const engine::RankDevice& d : ranks) {
    if (!d.is_cuda) continue;
    out += (out.empty() ? "" : ", ") + FormatDeviceUuid(d.cuda.uuid);
  }
  return out;
}

}  // namespace

CudaRegionOpener IpcCudaRegionOpener() {
  return [](const v1::CudaIpcRegion& request,
            const engine::CudaDevice&) -> Result<std::shared_ptr<CudaRegion>> {
    VAED_ASSIGN_OR_RETURN(
        std::unique_ptr<CudaIpcMapping> mapping,
        CudaIpcMapping::Open(request.ipc_handle(), request.size_bytes(), request.device_uuid()));
    return std::shared_ptr<CudaRegion>(
        std::make_shared<IpcCudaRegion>(std::move(mapping), request.ipc_handle()));
  };
}

Result<engine::CudaDevice> CudaRegionDevice(const v1::CudaIpcRegion& request,
                                            const std::vector<engine::RankDevice>& ranks) {
  // Malformed arguments are named first, whatever the daemon decodes on.
  const Result<DeviceUuid> uuid =
      CheckCudaIpcArguments(request.ipc_handle(), request.size_bytes(), request.device_uuid());
  if (!uuid.ok()) return uuid.status().WithContext("register_region.cuda");
  const std::string devices = ListRankDevices(ranks);
  if (devices.empty()) {
    return FailedPrecondition("register_region.cuda: this daemon has no CUDA ranks (" +
                              std::string(CudaIpcAvailable() ? "executor.device = \"cpu\""
                                                             : "a CPU build of vaed") +
                              "); it decodes on the CPU from host shm regions: register a "
                              "host region")
        .WithField("register_region.cuda");
  }
  const auto rank = std::find_if(ranks.begin(), ranks.end(), [&](const engine::RankDevice& d) {
    return d.is_cuda && d.cuda.uuid == *uuid;
  });
  if (rank == ranks.end()) {
    return NotFound("register_region.cuda.device_uuid " + request.device_uuid() +
                    " is not a device this daemon decodes on (its ranks' devices: " + devices +
                    "); allocate the tensors on one of them")
        .WithField("register_region.cuda.device_uuid");
  }
  return rank->cuda;
}

}  // namespace vaed::server
