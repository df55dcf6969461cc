// Internal to the TAEF2 decoder (taef2*.cc): its weights, their state_dict
// layout, and the network ops (shared/data/taef2/README.md §4).
//
// Taef2Decoder::Weights is defined here so that construction
// (taef2_create.cc) and the forward pass (taef2_network.cc) share one
// parameter table; nothing outside the decoder includes this header.
//
// Thread-safety: the weights are written only while the decoder is built;
// the forward functions only read them.
#ifndef VAED_DAEMON_MODELS_TAEF2_NETWORK_H_
#define VAED_DAEMON_MODELS_TAEF2_NETWORK_H_

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/models/taef2.h"

namespace vaed::models {
namespace taef2 {

inline constexpr int64_t kC = 64;        // channels of every activation after module 1
inline constexpr int64_t kPoolC = 256;   // channels inside the MidBlock GroupNorm branch
inline constexpr int64_t kGnGroups = 4;  // README §4: 4 groups of 64 consecutive channels
inline constexpr double kGnEps = 1e-5;

// How CreateDemo() initialises a tensor; ignored when loading a file.
enum class Init {
  kConvRelu,      // followed by ReLU: He normal, std sqrt(2 / fan_in)
  kConvLinear,    // not followed by ReLU: std sqrt(1 / fan_in)
  kConvResidual,  // last conv of a residual branch: 0.2 * He, keeps the stack from growing
  kConvOutput,    // module 19: 0.75 / sqrt(fan_in); outputs spread ~0.15 around the bias
  kBias,          // normal, std 0.01
  kOutputBias,    // module 19 bias: 0.5, mid-grey
  kGnGamma,       // ones
  kGnBeta,        // zeros
};

// One parameter: its state_dict key (README §4), shape, where it is stored
// and how CreateDemo() draws it.
struct Param {
  std::string key;
  std::vector<int64_t> shape;
  torch::Tensor* slot;
  Init init;
};

// Weights of one Block (README §4 "Block with prefix p."); the pool_*
// tensors are defined only for MidBlocks (modules 3, 4, 5).
struct BlockWeights {
  bool mid = false;
  torch::Tensor pool0_w, pool1_w, pool1_b, pool3_w;
  torch::Tensor conv0_w, conv0_b, conv2_w, conv2_b, conv4_w, conv4_b;
};

// Bytes held by the tensors the parameters point to.
uint64_t ResidentBytes(const std::vector<Param>& params);

}  // namespace taef2

// All decoder weights, float32, contiguous, on the decoder's device.
struct Taef2Decoder::Weights {
  torch::Tensor in_w, in_b;                   // module 1
  std::array<taef2::BlockWeights, 3> mid;     // modules 3, 4, 5
  torch::Tensor up1_w;                        // module 7
  std::array<taef2::BlockWeights, 3> stage1;  // modules 8, 9, 10
  torch::Tensor up2_w;                        // module 12
  std::array<taef2::BlockWeights, 3> stage2;  // modules 13, 14, 15
  torch::Tensor up3_w;                        // module 17
  taef2::BlockWeights stage3;                 // module 18
  torch::Tensor out_w, out_b;                 // module 19

  Weights() {
    for (taef2::BlockWeights& b : mid) b.mid = true;
  }

  // Every parameter (kNumWeightTensors) with its key, shape and slot in
  // this object, in state_dict order.
  std::vector<taef2::Param> Params();
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TAEF2_NETWORK_H_
