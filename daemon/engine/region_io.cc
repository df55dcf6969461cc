#include "daemon/engine/region_io.h"

#include "daemon/models/postprocess.h"
#include "daemon/models/torch_status.h"
#include "vaed/guarded_copy.h"

namespace vaed::engine {

Result<torch::Tensor> CopyLatentIn(const TensorRef& ref, const HostRegion& region,
                                   const std::string& field) {
  VAED_ASSIGN_OR_RETURN(
      torch::Tensor t, models::RunTorch("allocating " + field, [&]() -> Result<torch::Tensor> {
        return torch::empty(ref.shape, torch::TensorOptions().dtype(torch::kFloat32));
      }));
  VAED_RETURN_IF_ERROR(GuardedCopy(t.data_ptr(), region.data() + ref.offset, ref.size,
                                   "reading " + field + " from region '" + region.name() + "'"));
  return t;
}

Status CheckLatentFinite(const torch::Tensor& latent, const std::string& field) {
  VAED_ASSIGN_OR_RETURN(models::OutputStats stats, models::SummarizeValues(latent, 0));
  if (stats.nonfinite > 0) {
    return InvalidArgument(field + " contains " + std::to_string(stats.nonfinite) +
                           " non-finite values (NaN or Inf) out of " +
                           std::to_string(stats.values) + "; refusing to decode");
  }
  return Status::Ok();
}

namespace {

// `t` on `device`, counted when it crosses between host and device.
Result<torch::Tensor> Transfer(const torch::Tensor& t, const torch::Device& device,
                               const std::string& doing, HostCopies* copies) {
  if (t.device() == device) return t;
  VAED_ASSIGN_OR_RETURN(
      torch::Tensor moved,
      models::RunTorch(doing, [&]() -> Result<torch::Tensor> { return t.to(device); }));
  copies->count += 1;
  copies->bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
  return moved;
}

}  // namespace

Result<torch::Tensor> ToRankDevice(const torch::Tensor& host, const torch::Device& device,
                                   const std::string& field, HostCopies* copies) {
  return Transfer(host, device, "copying " + field + " to " + device.str(), copies);
}

Result<torch::Tensor> ToHost(const torch::Tensor& t, const std::string& field, HostCopies* copies) {
  return Transfer(t, torch::kCPU, "copying " + field + " from " + t.device().str() + " to the host",
                  copies);
}

Status CopyOut(const torch::Tensor& formatted, const TensorRef& ref, const HostRegion& region,
               const std::string& field) {
  if (!formatted.device().is_cpu()) {
    return Internal("decoded " + field + " is on " + formatted.device().str() +
                    "; only host memory is written into a host region");
  }
  const uint64_t bytes = static_cast<uint64_t>(formatted.numel()) * formatted.element_size();
  if (bytes != ref.size) {
    return Internal("decoded " + field + " has " + std::to_string(bytes) +
                    " bytes but the plan said " + std::to_string(ref.size));
  }
  return GuardedCopy(region.data() + ref.offset, formatted.data_ptr(), bytes,
                     "writing " + field + " to region '" + region.name() + "'");
}

}  // namespace vaed::engine
