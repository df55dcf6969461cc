// Internal to the H3 ViT3D decoder (vit3d_*.cc): its weights and THE
// name-mapping table from the original and diffusers checkpoints to them
// (spec/h3_vae.md §1.5 (a) and (b)).
//
// One table serves the three users: Load() (vit3d_load.cc) reads the
// tensors it names and converts them, CreateRandom() (vit3d_weights.cc)
// draws them, and Forward() (vit3d_decoder.cc) reads the result. Nothing
// outside the decoder includes this header.
//
// Layout of the stored tensors (what Forward() uses): the original
// checkpoint's, e.g. attn.to_qkv per-head interleaved [q k v] rows and ff.w1
// [gate; value] rows. Storage dtype: all fp32 under compute dtype kFloat;
// under kHalf / kBFloat16 the tensors marked Store::kCompute are in that
// dtype.
//
// Thread-safety: written only while the decoder is built; read-only after.
#ifndef VAED_DAEMON_MODELS_H3_VIT3D_WEIGHTS_H_
#define VAED_DAEMON_MODELS_H3_VIT3D_WEIGHTS_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/models/h3/video_config.h"
#include "vaed/status.h"

namespace vaed::models::h3::vit3d {

// How a diffusers tensor becomes the original-layout tensor (conventions
// verified in vit3d_load.cc, above Assemble()).
enum class Convert {
  kNone,           // same tensor, maybe renamed
  kInterleaveQkv,  // three diffusers tensors to_q, to_k, to_v -> per-head fused to_qkv
  kSwapHalves,     // ff.net.0.proj [value; gate] -> ff.w1 [gate; value] (dim 0)
};

// Storage dtype of a tensor under a reduced compute_dtype (kHalf, kBFloat16;
// kFloat stores all in fp32). Follows spec §1.6: autocast GEMMs and the conv
// take weights
// and biases; x_embedder/proj_out run with autocast off (fp32); norms,
// LayerScale and registers meet the fp32 residual stream.
enum class Store { kFp32, kCompute };

// CreateRandom() init: value = uniform(-sqrt(3), sqrt(3)) * scale (unit
// variance before scaling), or a constant.
enum class Init {
  kFanIn,  // scale 1/sqrt(fan_in): projections keep O(1) activations
  kBias,   // scale 0.02
  kToken,  // scale 1 (register tokens, like the unit-scale patch tokens)
  kScale,  // constant 0.1 (LayerScale; keeps 36 residual updates small)
  kOnes,   // norm weights
  kZeros,  // norm_out / proj_out biases
};

// One row of the table: a decoder tensor under both namings.
struct WeightSpec {
  std::string original;                // key in the original checkpoint
  std::vector<std::string> diffusers;  // key(s) in the diffusers checkpoint
  Convert convert;
  std::vector<int64_t> shape;  // original-layout shape (what Forward uses)
  Store store;
  Init init;
  int64_t fan_in;
  torch::Tensor* slot;  // where the tensor is stored (in Weights)
};

// One transformer block (spec §1.2 steps 6-8).
struct BlockWeights {
  torch::Tensor norm1_w, qkv_w, qkv_b, out_w, out_b, scale1;
  torch::Tensor norm2_w, w1_w, w1_b, w2_w, w2_b, scale2;
};

// Every decoder tensor, in the original layout (C latent channels, D dim,
// R registers, P patch_dim).
struct Weights {
  torch::Tensor pqc_w, pqc_b;      // post_quant_conv [C, C, 1, 1, 1], [C]
  torch::Tensor embed_w, embed_b;  // x_embedder [D, C], [D]
  torch::Tensor registers;         // [1, R, D]
  std::vector<BlockWeights> blocks;
  torch::Tensor norm_out_w, norm_out_b;  // LayerNorm [D]
  torch::Tensor proj_w, proj_b;          // proj_out [P, D], [P]

  // The table for `c` (sizes `blocks` to c.depth): every tensor with its
  // original and diffusers names, conversion, shape, storage dtype and
  // random init, in state_dict order; slots point into this object.
  std::vector<WeightSpec> Table(const VideoDecoderConfig& c);
};

// Bytes held by the tensors the table's slots point to.
uint64_t ResidentBytes(const std::vector<WeightSpec>& table);

// The storage dtype of `spec` under `compute_dtype`.
inline torch::ScalarType StorageDtype(const WeightSpec& spec, torch::ScalarType compute_dtype) {
  return spec.store == Store::kCompute ? compute_dtype : torch::kFloat;
}

// Moves every tensor the table's slots point to onto `device`
// (device_placement.h MoveTensorsTo; the identity on the CPU). Errors:
// LibTorch's, as a Status naming the h3 video decoder.
Status PlaceWeights(const std::vector<WeightSpec>& table, const torch::Device& device);

// The argument checks of Load() and CreateRandom(): a valid config and
// compute_dtype kFloat, kHalf or kBFloat16 (kInvalidArgument otherwise).
Status CheckCreateArgs(const VideoDecoderConfig& config, torch::ScalarType compute_dtype);

}  // namespace vaed::models::h3::vit3d

#endif  // VAED_DAEMON_MODELS_H3_VIT3D_WEIGHTS_H_
