// Placing a model's resident tensors on its rank's device (DESIGN.md §2
// item 11): every model builds or loads its weights on the host
// as before, then moves them to its device once, at the end of its
// Create(), constants included (latent statistics, pixel de-normalisation,
// filters, register tokens). Decode math then runs where the weights are.
//
// The move keeps each tensor's dtype (weights are already stored in the
// dtype they are computed in) and replaces the tensor in its slot, so the
// host copy is freed as soon as nothing else refers to it. On the CPU the
// move is the identity: LibTorch's to(kCPU) returns the same tensor, no
// copy, same bytes, so every CPU result is unchanged.
//
// Thread-safety: call only while the model is being built (one thread);
// the slots must not be read concurrently.
#ifndef VAED_DAEMON_MODELS_DEVICE_PLACEMENT_H_
#define VAED_DAEMON_MODELS_DEVICE_PLACEMENT_H_

#include <torch/torch.h>

#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::models {

// The type of the `device` option every model's options carry
// (Taef2Options, h3::VideoVaeOptions, h3::H3VaeOptions): the rank's device.
// Create() builds or loads the model's tensors on the host and moves them
// there once, at its end (MoveTensorsTo, the rule above); Decode() runs
// there and refuses tensors on another device (CheckTensorDevice). The
// options default it to the CPU.
using ModelDevice = torch::Device;

// Replaces every defined tensor `slots` points to by its copy on `device`
// (same dtype; already there: unchanged). Undefined tensors and null slots
// are skipped. `what` names the model in errors. Errors (never throws):
// LibTorch's, through CurrentTorchErrorStatus: kResourceExhausted when the
// device is out of memory, kInternal for a device this build or machine
// does not have (e.g. CUDA on a CPU-only LibTorch). On error some slots may
// already have moved; the caller discards the half-built model.
Status MoveTensorsTo(const std::vector<torch::Tensor*>& slots, const torch::Device& device,
                     const std::string& what);

// The text form a model reports its device in (ModelInfo::device, status,
// errors): "cpu", "cuda:0", "meta".
inline std::string DeviceName(const torch::Device& device) { return device.str(); }

// The check every Decode() makes of a tensor it is given: `t` lies on
// `device`. Errors: kInvalidArgument "<field>.device is cuda:1; model 'x'
// runs on cpu" (the caller copies the tensor there first; models never move
// request tensors between devices themselves).
inline Status CheckTensorDevice(const torch::Tensor& t, const std::string& field,
                                const torch::Device& device, const std::string& model) {
  if (t.device() == device) return Status::Ok();
  return InvalidArgument(field + ".device is " + t.device().str() + "; model '" + model +
                         "' runs on " + DeviceName(device));
}

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_DEVICE_PLACEMENT_H_
