#include "daemon/server/cuda_mappings.h"

#include <utility>

namespace vaed::server {
namespace {

// One registration's view of a shared mapping: its own registered size and
// its own Close(); the mapping closes with the last view.
class SharedMappingRegion final : public CudaRegion {
 public:
  SharedMappingRegion(std::shared_ptr<CudaRegion> mapping, uint64_t size)
      : mapping_(std::move(mapping)),
        size_(size),
        device_(mapping_->device()),
        handle_(mapping_->handle()) {}
  void* data() const override { return mapping_ ? mapping_->data() : nullptr; }
  uint64_t size() const override { return size_; }
  uint64_t allocation_bytes() const override { return mapping_ ? mapping_->allocation_bytes() : 0; }
  int device() const override { return device_; }
  const std::string& handle() const override { return handle_; }
  void Close() override { mapping_.reset(); }

 private:
  std::shared_ptr<CudaRegion> mapping_;
  uint64_t size_;
  int device_;
  std::string handle_;
};

}  // namespace

Result<std::shared_ptr<CudaRegion>> CudaMappings::Register(const v1::CudaIpcRegion& request,
                                                           const engine::CudaDevice& device) {
  std::erase_if(mappings_, [](const auto& entry) { return entry.second.expired(); });
  std::shared_ptr<CudaRegion> mapping;
  if (auto it = mappings_.find(request.ipc_handle()); it != mappings_.end()) {
    mapping = it->second.lock();
  }
  if (mapping == nullptr) {
    VAED_ASSIGN_OR_RETURN(mapping, open_(request, device));
    mappings_[request.ipc_handle()] = mapping;
  } else if (mapping->device() != device.ordinal) {
    return InvalidArgument("register_region.cuda.device_uuid " + request.device_uuid() +
                           " is not the device this allocation is mapped on (cuda:" +
                           std::to_string(mapping->device()) + ")")
        .WithField("register_region.cuda.device_uuid");
  } else if (request.size_bytes() > mapping->allocation_bytes()) {
    return OutOfRange("register_region.cuda.size_bytes: client claims " +
                      std::to_string(request.size_bytes()) + " bytes but the allocation holds " +
                      std::to_string(mapping->allocation_bytes()) +
                      " bytes from the handle's address")
        .WithField("register_region.cuda.size_bytes");
  }
  return std::shared_ptr<CudaRegion>(
      std::make_shared<SharedMappingRegion>(std::move(mapping), request.size_bytes()));
}

size_t CudaMappings::open_mappings() const {
  size_t n = 0;
  for (const auto& entry : mappings_) n += entry.second.expired() ? 0 : 1;
  return n;
}

}  // namespace vaed::server
