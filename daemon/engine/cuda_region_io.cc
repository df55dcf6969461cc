#include "daemon/engine/cuda_region_io.h"

#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"

namespace vaed::engine {
namespace {

torch::Device DeviceOf(const CudaRegion& region) {
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(region.device())};
}

}  // namespace

torch::Tensor RegionTensor(void* base, const TensorRef& ref, torch::Device device) {
  void* start = static_cast<char*>(base) + ref.offset;
  return torch::from_blob(
      start, ref.shape,
      torch::TensorOptions().dtype(models::ToScalarType(ref.dtype)).device(device));
}

Result<torch::Tensor> CopyLatentFromCuda(const TensorRef& ref, const CudaRegion& region,
                                         torch::Device rank_device, const std::string& field) {
  return models::RunTorch("reading " + field + " from its CUDA region",
                          [&]() -> Result<torch::Tensor> {
                            torch::Tensor view = RegionTensor(region.data(), ref, DeviceOf(region));
                            return view.to(rank_device, /*non_blocking=*/true, /*copy=*/true);
                          });
}

Status CopyOutToCuda(const torch::Tensor& formatted, const TensorRef& ref,
                     const CudaRegion& region, const std::string& field) {
  const uint64_t bytes = static_cast<uint64_t>(formatted.numel()) * formatted.element_size();
  if (bytes != ref.size) {
    return Internal("decoded " + field + " has " + std::to_string(bytes) +
                    " bytes but the plan said " + std::to_string(ref.size));
  }
  return models::RunTorch("writing " + field + " to its CUDA region", [&]() -> Status {
    RegionTensor(region.data(), ref, DeviceOf(region)).copy_(formatted, /*non_blocking=*/true);
    return Status::Ok();
  });
}

}  // namespace vaed::engine
