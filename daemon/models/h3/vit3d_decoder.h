// The MiniMax-H3 video VAE decoder core: post_quant_conv + ViT3D decoder,
// one decoder call on one spatial tile of one temporal window (spec
// shared/spec/h3_vae.md §1.2 steps 1-12). Tile planning, blending and
// temporal assembly live with the caller.
//
// Contract of Forward() (units: latent frames/cells in, pixel frames/pixels
// out):
//   input   float32 [B, latent_channels, t, h, w], contiguous, on device()
//           (the decoder's; CPU unless created for another), ALREADY
//           de-normalised (latent * latents_std + latents_mean per channel;
//           the caller does it). B > 1 stacks independent tiles of the same
//           shape ("stacked tiles"); each batch item is decoded on its own.
//   output  float32 [B, out_channels, patch_t*t, patch_hw*h, patch_hw*w]
//           (official: [B, 3, 4t, 16h, 16w]), raw decoder space =
//           ImageNet-normalised RGB, not clamped (post-processing: x*std+mean
//           with the ImageNet constants, clamp [0,1]; spec §1.1).
// RoPE coordinates are tile-local (spec §1.4): the decoder only sees the
// geometry of the tile it is given, so t, h and w must be the official tile
// extents (7 x 16 x 16 latent cells, or the whole canvas when it is smaller)
// for the output to mean anything; Forward() does not enforce that.
//
// Numerics:
//   kFloat     the exact path: the same LibTorch ops in the same order as the
//              official code run in fp32 (and as the golden vectors were made,
//              shared/golden/h3/README.md §3, §8): RMSNorm as
//              x * rsqrt(mean(x^2) + eps) then * weight, SDPA as explicit
//              softmax((q @ k^T) * (1/sqrt(d))) @ v, nan_to_num(0) on the
//              attention output. Reproduces the golden tile_raw bitwise on
//              this build (tests/models/h3_vit3d_test.cc).
//   kHalf      the official recipe of spec §1.6 (fp32 weights under fp16
//              autocast), with the autocast GEMM and conv weights kept
//              resident once in fp16 (the one-time cast gives the bits
//              autocast's per-call cast gives): as kBFloat16 below with fp16
//              in place of bf16, and attention through LibTorch's fused
//              SDPA on CUDA (as the official F.scaled_dot_product_attention).
//              GPU ranks only (VideoVae::Create
//              refuses it on the CPU). Unrun: no GPU has executed it.
//   kBFloat16  the official fp16-autocast recipe of spec §1.6 with bf16 in
//              place of fp16 (fused SDPA on CUDA, as
//              kHalf): post_quant_conv in bf16, x_embedder in fp32
//              (output rounded to bf16), fp32 residual stream, block norms
//              and Q/K norms computed in fp32, to_qkv/to_out/w1/w2 GEMMs in
//              bf16 (weights stored in bf16), RoPE in bf16 with bf16 cos/sin
//              built from fp32 coordinates (as diffusers does; the official
//              code rounds coordinates to fp16, spec §1.4), attention in
//              bf16 (bf16 scores, softmax, PV; on CUDA with LibTorch 2.x the
//              fused SDPA instead), norm_out and proj_out in fp32,
//              output fp32. Measured on the golden one_tile case (tiny
//              weights): max abs 0.0147, mean abs 0.0020 vs the fp32 tile_raw
//              (output std 1.16).
// Batch invariance: every op treats batch items independently, and in both
// dtypes a batch-B call gives byte-identical items to B batch-1 calls on
// this CPU build (tested). To get there, post_quant_conv, every Linear and
// the attention run per batch item: LibTorch's CPU conv3d and BLAS GEMMs
// may return different bits for a row when the number of rows changes (up
// to 1e-4 at K = 2048 with OpenBLAS), so one GEMM over B*S rows need not
// equal B GEMMs over S rows. On CPU a stacked call therefore costs
// about as much as B single calls; it only amortises per-call overhead.
//
// Thread-safety: after Load()/CreateRandom() returns, all const methods
// (Forward included) may be called from any number of threads concurrently;
// Forward() allocates its activations per call and uses LibTorch's intra-op
// thread pool (at::get_num_threads()).
#ifndef VAED_DAEMON_MODELS_H3_VIT3D_DECODER_H_
#define VAED_DAEMON_MODELS_H3_VIT3D_DECODER_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/models/h3/video_config.h"
#include "vaed/status.h"

namespace vaed::models::h3 {

namespace vit3d {
struct Weights;  // vit3d_weights.h
}  // namespace vit3d

// Which state_dict naming a checkpoint uses (spec §1.5).
enum class WeightLayout {
  // Seeded weights from CreateRandom(); no file.
  kRandom,
  // The original MiniMax checkpoint (FL2VA/video_vae/source/model.safetensors):
  // decoder.x_embedder, per-head interleaved attn.to_qkv, attn.to_out,
  // ff.w1 ([gate; value] rows), ff.w2.
  kOriginal,
  // The diffusers AutoencoderKLMiniMaxH3 checkpoint (vae/*.safetensors):
  // decoder.proj_in, attn.to_q/to_k/to_v, attn.to_out.0,
  // ff.net.0.proj ([value; gate] rows), ff.net.2.
  kDiffusers,
};

// "random", "original", "diffusers".
const char* WeightLayoutName(WeightLayout layout);

class Vit3dDecoder {
 public:
  // A compiled plan for one call shape (BuildTilePlan()).
  struct TilePlan {
    int64_t batch = 0, t = 0, h = 0, w = 0;
    torch::Tensor cos, sin;
    torch::Tensor qkv_buf, h1_buf, act_buf, scores, probs, heads_out;
    uint64_t bytes() const;  // held by the tensors above
  };

  // Loads the decoder weights from safetensors files: one file, the shards of
  // a sharded checkpoint (any order), or exactly one "*.safetensors.index.json"
  // whose shards are resolved next to it. Tensors may be F32, F16 or BF16;
  // they are converted to the storage dtype (compute_dtype kFloat: all
  // fp32; kHalf / kBFloat16: post_quant_conv and the to_qkv/to_out/w1/w2
  // weights and biases in that dtype, everything else fp32). The layout (original or diffusers)
  // is detected from the names; diffusers tensors are converted to the
  // original layout (to_q/k/v re-interleaved per head, ff.net.0.proj halves
  // swapped). decoder.mask_token is accepted and ignored; keys starting with
  // "encoder." or "quant_conv." are ignored (counted in a log line). Computes
  // and logs (spdlog info) the SHA-256 of every file read (the index and each
  // shard).
  // Errors:
  //   kInvalidArgument  invalid `config` (VideoDecoderConfig::Validate());
  //                     compute_dtype not kFloat/kHalf/kBFloat16; no weight
  //                     file,
  //                     or an index mixed with other files; a file that is not
  //                     valid safetensors; one tensor in two files; both
  //                     layouts in one checkpoint (names one key of each);
  //                     unexpected tensors, tensors with a wrong shape or a
  //                     non-float dtype (each named with the file and, for
  //                     shapes, the expected shape; the first 8 problems and a
  //                     count of the rest);
  //   kNotFound         a file is missing, or a decoder tensor is missing
  //                     from every file (named with its expected shape), when
  //                     no other problem was found;
  //   kIoError / kResourceExhausted / kInternal  OS or LibTorch failures,
  //                     including moving the weights to `device`.
  // The weights are read and converted on the host, then moved once to
  // `device` (device_placement.h; the host copies are freed); on the CPU
  // that move is the identity.
  static Result<std::unique_ptr<Vit3dDecoder>> Load(const VideoDecoderConfig& config,
                                                    const std::vector<std::string>& weight_files,
                                                    torch::ScalarType compute_dtype,
                                                    torch::Device device = torch::kCPU);

  // Builds the architecture with deterministic weights drawn from a CPU
  // generator seeded with `seed` (same seed, build and thread count ->
  // bitwise-identical weights). Scales keep activations O(1) (LayerScale
  // 0.1, fan-in-scaled projections; output std 1.00 measured at the official
  // 36 blocks); the output is not an image. Every tensor is a scaled window of
  // one seeded pool of uniform values, copied in its storage dtype, so the
  // cost is writing the weights once (full 2.4B model in bf16: 38 s on the
  // 2-core dev VM, almost all first-touch page faults of the 4.9 GB).
  // The weights are drawn on the host (so a seed gives the same values on
  // every device), then moved once to `device` as Load() does.
  // For smoke tests and benchmarks. Errors: kInvalidArgument for
  // an invalid config or compute_dtype; LibTorch failures as
  // kResourceExhausted / kInternal.
  static Result<std::unique_ptr<Vit3dDecoder>> CreateRandom(const VideoDecoderConfig& config,
                                                            uint64_t seed,
                                                            torch::ScalarType compute_dtype,
                                                            torch::Device device = torch::kCPU);

  ~Vit3dDecoder();
  Vit3dDecoder(const Vit3dDecoder&) = delete;
  Vit3dDecoder& operator=(const Vit3dDecoder&) = delete;

  // Decodes one stacked batch of tiles (contract at the top of this file).
  // Preconditions, checked with TORCH_CHECK: z is a defined float32
  // tensor on device(), of rank 5, with size(1) == latent_channels and B,
  // t, h, w >= 1.
  // Runs without autograd. Throws c10::Error on a broken precondition or a
  // LibTorch failure (e.g. out of memory); the caller translates it with
  // CurrentTorchErrorStatus() (daemon/models/torch_status.h).
  // Memory per call (S = t*h*w + num_register_tokens + 1 tokens; E = bytes
  // per compute-dtype value): a workspace of B*S*(3*dim + 3*ffn_inner)*E
  // plus 2*S^2*E for the attention of one (item, head) at a time, plus
  // temporaries of about 10 * B*S*dim*4 bytes. One official tile in fp32:
  // about 0.4 GB.
  // With `plan` (from BuildTilePlan() for exactly z's [B, t, h, w]; a
  // mismatch throws) the RoPE tables and workspace buffers are the plan's
  // instead of being built for the call: same ops on the same values, so
  // the output bytes are identical; the plan's buffers are overwritten, so
  // one plan serves one call at a time.
  torch::Tensor Forward(const torch::Tensor& z, TilePlan* plan = nullptr) const;

  // Builds the compiled plan of decoder calls on [batch, latent_channels,
  // t, h, w] (units: tiles per call, latent frames, latent cells), its
  // tensors on device(): the RoPE
  // cos/sin of the tile-local grid ([1, S, 1, rope_dim], compute dtype) and
  // the workspace buffers (qkv [B, S, 3*dim], FFN [B, S, 3*ffn_inner],
  // attention scores/probs [S, S], heads [B, heads, S, dim_head]), S = t*h*w
  // + num_register_tokens + 1 tokens. Memory: TilePlan::bytes(), e.g.
  // about 0.3 GB for one official fp32 tile. Throws c10::Error
  // (c10::OutOfMemoryError when it cannot be allocated).
  std::shared_ptr<TilePlan> BuildTilePlan(int64_t batch, int64_t t, int64_t h, int64_t w) const;

  const VideoDecoderConfig& config() const { return config_; }
  // kFloat, kHalf or kBFloat16, as passed at creation.
  torch::ScalarType compute_dtype() const { return compute_dtype_; }
  // Where the weights are resident and Forward() runs, as passed at
  // creation.
  torch::Device device() const { return device_; }
  WeightLayout layout() const { return layout_; }
  // (path, lowercase hex SHA-256) of every file read at Load(): the index
  // first when one was given, then the safetensors files sorted by path;
  // empty for CreateRandom().
  const std::vector<std::pair<std::string, std::string>>& weight_sha256() const {
    return weight_sha256_;
  }
  // Bytes of weights held in memory (all tensors, storage dtypes).
  uint64_t resident_bytes() const { return resident_bytes_; }

 private:
  Vit3dDecoder(VideoDecoderConfig config, torch::ScalarType compute_dtype, torch::Device device,
               WeightLayout layout, std::unique_ptr<vit3d::Weights> weights,
               std::vector<std::pair<std::string, std::string>> weight_sha256);

  VideoDecoderConfig config_;
  torch::ScalarType compute_dtype_;
  torch::Device device_;
  WeightLayout layout_;
  std::unique_ptr<vit3d::Weights> weights_;
  std::vector<std::pair<std::string, std::string>> weight_sha256_;
  uint64_t resident_bytes_ = 0;
};

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_VIT3D_DECODER_H_
