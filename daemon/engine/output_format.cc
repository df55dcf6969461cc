#include "daemon/engine/output_format.h"

#include "daemon/models/postprocess.h"
#include "daemon/models/torch_status.h"

namespace vaed::engine {

Result<torch::Tensor> FormatVideo(const models::VaeModel& model, const torch::Tensor& raw,
                                  OutputFormat format) {
  if (format == OutputFormat::kFloat32Nchw) {
    return models::RunTorch("formatting output", [&]() -> Result<torch::Tensor> {
      return raw.to(torch::kFloat32).contiguous();
    });
  }
  VAED_ASSIGN_OR_RETURN(torch::Tensor unit, model.ToUnitRange(raw));
  if (format == OutputFormat::kFloat32NchwUnit) {
    return models::RunTorch("formatting output", [&]() -> Result<torch::Tensor> {
      return unit.to(torch::kFloat32).contiguous();
    });
  }
  return models::ToUint8Nhwc(unit);
}

Result<torch::Tensor> FormatAudio(const torch::Tensor& wave) {
  return models::RunTorch("formatting audio", [&]() -> Result<torch::Tensor> {
    return wave.to(torch::kFloat32).contiguous();
  });
}

}  // namespace vaed::engine
