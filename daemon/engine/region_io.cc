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

Status CopyOut(const torch::Tensor& formatted, const TensorRef& ref, const HostRegion& region,
               const std::string& field) {
  const uint64_t bytes = static_cast<uint64_t>(formatted.numel()) * formatted.element_size();
  if (bytes != ref.size) {
    return Internal("decoded " + field + " has " + std::to_string(bytes) +
                    " bytes but the plan said " + std::to_string(ref.size));
  }
  return GuardedCopy(region.data() + ref.offset, formatted.data_ptr(), bytes,
                     "writing " + field + " to region '" + region.name() + "'");
}

}  // namespace vaed::engine
