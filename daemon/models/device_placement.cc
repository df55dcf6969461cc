#include "daemon/models/device_placement.h"

#include "daemon/models/torch_status.h"

namespace vaed::models {

Status MoveTensorsTo(const std::vector<torch::Tensor*>& slots, const torch::Device& device,
                     const std::string& what) {
  return RunTorch(what + ": moving its tensors to " + DeviceName(device), [&]() -> Status {
    torch::NoGradGuard no_grad;
    for (torch::Tensor* slot : slots) {
      if (slot == nullptr || !slot->defined() || slot->device() == device) continue;
      *slot = slot->to(device);
    }
    return Status::Ok();
  });
}

}  // namespace vaed::models
