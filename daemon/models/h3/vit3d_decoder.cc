// The H3 ViT3D decoder's forward pass (spec/h3_vae.md §1.2) and its
// compiled plans (RoPE tables and workspace per call shape). Weights:
// vit3d_weights.h; loading: vit3d_load.cc.
#include "daemon/models/h3/vit3d_decoder.h"

#include <cmath>
#include <utility>

#include "daemon/models/gemm.h"
#include "daemon/models/h3/vit3d_weights.h"

namespace vaed::models::h3 {
namespace {

// Forward building blocks (op order mirrors the official code).

// Weightless RMSNorm over the last dim, the torch-2.4 composite the golden
// shim follows (golden README §3): x * rsqrt(mean(x^2) + eps). x is fp32.
torch::Tensor RmsNorm(const torch::Tensor& x, double eps) {
  return x * torch::rsqrt(torch::pow(x, 2).mean(-1, /*keepdim=*/true).add_(eps));
}

// torch::linear on [B, S, K], one GEMM per batch item. A stacked GEMM over
// B*S rows need not give the same bits per row as an S-row GEMM (BLAS
// kernels may choose their blocking from the row count: OpenBLAS sgemm
// differed by up to 1e-4 at K = 2048; MKL's single-row products differ from
// multi-row ones), which would make stacked tiles differ from sequential
// ones. For B = 1 this is exactly the official
// at::linear call (contiguous 3-D input -> addmm). bf16 products on the
// CPU accumulate in float32 (gemm.h).
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (x.size(0) == 1) return LinearGemm(x, w, b);
  std::vector<torch::Tensor> items;
  items.reserve(static_cast<size_t>(x.size(0)));
  for (int64_t i = 0; i < x.size(0); ++i) items.push_back(LinearGemm(x.narrow(0, i, 1), w, b));
  return torch::cat(items, 0);
}

// Linear() writing into `out` ([B, S, N], contiguous): the same addmm per
// batch item, without allocating the output.
void LinearInto(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& w,
                const torch::Tensor& b) {
  for (int64_t i = 0; i < x.size(0); ++i) {
    torch::Tensor o = out.select(0, i);
    AddmmGemmInto(o, b, x.select(0, i), w.t());
  }
}

// Rotate-half RoPE on the first cos.size(-1) dims (spec §1.2 step 7):
// y = x*cos + rot(x)*sin with rot([a, b]) = [-b, a]; the rest passes through.
torch::Tensor ApplyRope(const torch::Tensor& x, const torch::Tensor& cos,
                        const torch::Tensor& sin) {
  const int64_t rd = cos.size(-1);
  const torch::Tensor xr = x.narrow(-1, 0, rd);
  const torch::Tensor x1 = xr.narrow(-1, 0, rd / 2);
  const torch::Tensor x2 = xr.narrow(-1, rd / 2, rd / 2);
  const torch::Tensor rotated = torch::cat({-x2, x1}, -1);
  torch::Tensor y = xr * cos + rotated * sin;
  if (rd == x.size(-1)) return y;
  return torch::cat({y, x.narrow(-1, rd, x.size(-1) - rd)}, -1);
}

// 1.-4. post_quant_conv, tokens, x_embedder, registers and the zero
// token: z [B, C, t, h, w] -> the fp32 residual stream [B, S, D].
torch::Tensor EmbedTokens(const torch::Tensor& z, const vit3d::Weights& w,
                          const VideoDecoderConfig& c, torch::ScalarType cdt) {
  const bool reduced = cdt != torch::kFloat;  // fp16 or bf16 recipe
  const int64_t B = z.size(0), N = z.size(2) * z.size(3) * z.size(4), D = c.dim;
  // 1. post_quant_conv (autocast conv: in the compute dtype when reduced). One call per
  // batch item: LibTorch's CPU conv3d gives different bits for an item when
  // the batch size changes, which would break stacked == sequential tiles.
  torch::Tensor x;
  {
    const torch::Tensor zin = reduced ? z.to(cdt) : z;
    if (B == 1) {
      x = torch::conv3d(zin, w.pqc_w, w.pqc_b);
    } else {
      std::vector<torch::Tensor> items;
      for (int64_t b = 0; b < B; ++b) {
        items.push_back(torch::conv3d(zin.narrow(0, b, 1), w.pqc_w, w.pqc_b));
      }
      x = torch::cat(items, 0);
    }
  }
  // 2.-3. Tokens t-major, then h, then w: [B, N, C]; x_embedder with autocast
  // off (fp32 weights), result cast back to the token dtype.
  x = x.permute({0, 2, 3, 4, 1}).reshape({B, N, c.latent_channels});
  x = Linear(x.to(torch::kFloat), w.embed_w, w.embed_b).to(x.scalar_type());
  // 4. Registers and one zero token; the residual stream is fp32 (the
  // official cat promotes the fp16/bf16 tokens to the fp32 registers' dtype).
  const torch::Tensor stream = x.to(torch::kFloat);
  return torch::cat({stream, w.registers.expand({B, c.num_register_tokens, D}),
                     torch::zeros({B, 1, D}, stream.options())},
                    1);
}

// SDPA of q, k, v [B, H, S, dh] into `out` [B, H, S, dh]: LibTorch's fused
// kernel (flash / memory-efficient / cuDNN attention, as the official
// code's F.scaled_dot_product_attention runs under fp16 autocast on a GPU:
// no rounding of the scores to the compute dtype). Used for the reduced
// recipes on CUDA only; true when it ran, false for the caller's explicit
// form (CPU ranks, float32). Unrun: needs a GPU.
bool FusedAttentionInto(torch::Tensor& out, const torch::Tensor& q, const torch::Tensor& k,
                        const torch::Tensor& v) {
  if (!q.is_cuda() || q.scalar_type() == torch::kFloat) return false;
  out.copy_(at::scaled_dot_product_attention(q, k, v));
  return true;
}

// SDPA without mask as the explicit softmax((q k^T) * scale) v of q, k, v
// [B, S, H, dh] into plan.heads_out [B, H, S, dh], one (item, head) at a
// time. The operands are laid out as the official 4-D matmul lays them out
// before its per-matrix GEMMs: q and v as contiguous [S, dh], k^T as
// contiguous [dh, S].
void ExplicitAttentionInto(Vit3dDecoder::TilePlan& plan, const torch::Tensor& q,
                           const torch::Tensor& k, const torch::Tensor& v, double scale) {
  const torch::Tensor qh = q.transpose(1, 2).contiguous();        // [B, H, S, dh]
  const torch::Tensor kt = k.permute({0, 2, 3, 1}).contiguous();  // [B, H, dh, S]
  const torch::Tensor vh = v.transpose(1, 2).contiguous();
  for (int64_t i = 0; i < q.size(0); ++i) {
    for (int64_t j = 0; j < q.size(2); ++j) {
      MmGemmInto(plan.scores, qh[i][j], kt[i][j]);
      plan.scores.mul_(scale);
      torch::softmax_out(plan.probs, plan.scores, -1);
      torch::Tensor out_ij = plan.heads_out[i][j];
      MmGemmInto(out_ij, plan.probs, vh[i][j]);
    }
  }
}

// 7. Attention of one block on the fp32 stream `x` [B, S, D]: norm1, to_qkv,
// Q/K RMSNorm, RoPE, SDPA, to_out. Returns [B, S, D] (before scale1).
torch::Tensor Attention(const torch::Tensor& x, const vit3d::BlockWeights& b,
                        const VideoDecoderConfig& c, torch::ScalarType cdt,
                        Vit3dDecoder::TilePlan& plan) {
  const int64_t B = x.size(0), S = x.size(1), D = c.dim, H = c.heads, dh = c.dim_head;
  torch::Tensor xn = RmsNorm(x, c.norm_eps) * b.norm1_w;
  if (cdt != torch::kFloat) xn = xn.to(cdt);
  LinearInto(plan.qkv_buf, xn, b.qkv_w, b.qkv_b);
  const torch::Tensor qkv = plan.qkv_buf.view({B, S, H, 3 * dh});
  // Per-head interleaved q/k/v (spec §1.2 step 7); Q/K RMSNorm in fp32.
  torch::Tensor q = RmsNorm(qkv.narrow(-1, 0, dh).to(torch::kFloat), c.norm_eps).to(cdt);
  torch::Tensor k = RmsNorm(qkv.narrow(-1, dh, dh).to(torch::kFloat), c.norm_eps).to(cdt);
  q = ApplyRope(q, plan.cos, plan.sin);
  k = ApplyRope(k, plan.cos, plan.sin);
  const torch::Tensor v = qkv.narrow(-1, 2 * dh, dh);
  if (!FusedAttentionInto(plan.heads_out, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))) {
    ExplicitAttentionInto(plan, q, k, v, 1.0 / std::sqrt(static_cast<double>(dh)));
  }
  plan.heads_out.nan_to_num_(0.0);
  return Linear(plan.heads_out.transpose(1, 2).reshape({B, S, D}), b.out_w, b.out_b);
}

// 8. Gated-SiLU FFN of one block on the fp32 stream `x` [B, S, D]: norm2,
// w1, SiLU(gate) * value, w2. Returns [B, S, D] (before scale2).
torch::Tensor FeedForward(const torch::Tensor& x, const vit3d::BlockWeights& b,
                          const VideoDecoderConfig& c, torch::ScalarType cdt,
                          Vit3dDecoder::TilePlan& plan) {
  const int64_t F = c.ffn_inner;
  torch::Tensor xn = RmsNorm(x, c.norm_eps) * b.norm2_w;
  if (cdt != torch::kFloat) xn = xn.to(cdt);
  LinearInto(plan.h1_buf, xn, b.w1_w, b.w1_b);
  // Gate = first half of w1's output, value = second half.
  torch::silu_out(plan.act_buf, plan.h1_buf.narrow(-1, 0, F)).mul_(plan.h1_buf.narrow(-1, F, F));
  return Linear(plan.act_buf, b.w2_w, b.w2_b);
}

// 9.-12. LayerNorm, proj_out (fp32, autocast off), drop the suffix tokens,
// de-patchify: feature ((c*pt + i)*ph + j)*pw + k of token (ti, hi, wi) ->
// pixel (c, pt*ti + i, ph*hi + j, pw*wi + k). x [B, S, D] ->
// [B, out_channels, patch_t*t, patch_hw*h, patch_hw*w].
torch::Tensor ProjectToPixels(torch::Tensor x, const vit3d::Weights& w, const VideoDecoderConfig& c,
                              int64_t t, int64_t h, int64_t wd) {
  const int64_t B = x.size(0), N = t * h * wd;
  x = torch::layer_norm(x, {c.dim}, w.norm_out_w, w.norm_out_b, c.norm_eps);
  x = Linear(x, w.proj_w, w.proj_b);
  x = x.narrow(1, 0, N).reshape({B, t, h, wd, c.out_channels, c.patch_t, c.patch_hw, c.patch_hw});
  return x.permute({0, 4, 1, 5, 2, 6, 3, 7})
      .reshape({B, c.out_channels, t * c.patch_t, h * c.patch_hw, wd * c.patch_hw});
}

}  // namespace

Vit3dDecoder::Vit3dDecoder(VideoDecoderConfig config, torch::ScalarType compute_dtype,
                           torch::Device device, WeightLayout layout,
                           std::unique_ptr<vit3d::Weights> weights,
                           std::vector<std::pair<std::string, std::string>> weight_sha256)
    : config_(std::move(config)),
      compute_dtype_(compute_dtype),
      device_(device),
      layout_(layout),
      weights_(std::move(weights)),
      weight_sha256_(std::move(weight_sha256)) {
  resident_bytes_ = vit3d::ResidentBytes(weights_->Table(config_));
}

Vit3dDecoder::~Vit3dDecoder() = default;

uint64_t Vit3dDecoder::TilePlan::bytes() const {
  uint64_t n = 0;
  for (const torch::Tensor* x : {&cos, &sin, &qkv_buf, &h1_buf, &act_buf, &scores, &probs,
                                 &heads_out}) {
    if (x->defined()) n += static_cast<uint64_t>(x->numel()) * x->element_size();
  }
  return n;
}

std::shared_ptr<Vit3dDecoder::TilePlan> Vit3dDecoder::BuildTilePlan(int64_t batch, int64_t t,
                                                                    int64_t h,
                                                                    int64_t wd) const {
  const VideoDecoderConfig& c = config_;
  TORCH_CHECK(batch >= 1 && t >= 1 && h >= 1 && wd >= 1, "h3 video decoder: plan shape [",
              batch, ", ", t, ", ", h, ", ", wd, "] has an empty dim");
  torch::NoGradGuard no_grad;
  auto plan = std::make_shared<TilePlan>();
  plan->batch = batch;
  plan->t = t;
  plan->h = h;
  plan->w = wd;
  const int64_t N = t * h * wd;
  const int64_t S = N + c.num_register_tokens + 1;

  // RoPE tables (spec §1.4), fp32: tile-local coordinates
  // arange(0.5, n) / n * 2 - 1 per axis, suffix tokens at 0; angles
  // (2*pi*coord) * inv_freq laid out [t*f, h*f, w*f] and repeated twice.
  {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device_);
    auto axis = [&](int64_t n) {
      return torch::arange(0.5, static_cast<double>(n), f32) / n * 2 - 1;
    };
    std::vector<torch::Tensor> grid = torch::meshgrid({axis(t), axis(h), axis(wd)}, "ij");
    torch::Tensor ids = torch::stack(grid, -1).reshape({N, 3});
    ids = torch::cat({ids, torch::zeros({S - N, 3}, f32)}, 0);
    const int64_t nf = c.rope_freqs_per_axis();
    // inv_freq = 1 / theta^(arange(0, 1, 6/rope_dim)) in fp32 (spec §1.4).
    const torch::Tensor exponent = torch::arange(0, nf, f32) / nf;
    const torch::Tensor inv_freq = torch::pow(c.rope_theta, exponent).reciprocal();
    const torch::Tensor angles =
        ((ids * (2.0 * M_PI)).unsqueeze(-1) * inv_freq).reshape({S, 3 * nf}).repeat({1, 2});
    plan->cos = angles.cos().view({1, S, 1, c.rope_dim});
    plan->sin = angles.sin().view({1, S, 1, c.rope_dim});
    if (compute_dtype_ != torch::kFloat) {  // fp16 / bf16 cos and sin (spec §1.4)
      plan->cos = plan->cos.to(compute_dtype_);
      plan->sin = plan->sin.to(compute_dtype_);
    }
  }

  // Workspace reused by every block. Buffers above glibc's mmap threshold
  // (32 MB) would otherwise be fresh, page-faulting memory in every block
  // (measured: more time than the GEMMs on this VM). Writing into them
  // (addmm_out, mm_out, softmax_out, silu_out, in-place mul_/add_) runs the
  // same kernels as the functional ops, so the bits do not change.
  const auto copts = torch::TensorOptions().dtype(compute_dtype_).device(device_);
  const int64_t H = c.heads, dh = c.dim_head, F = c.ffn_inner;
  plan->qkv_buf = torch::empty({batch, S, 3 * H * dh}, copts);
  plan->h1_buf = torch::empty({batch, S, 2 * F}, copts);
  plan->act_buf = torch::empty({batch, S, F}, copts);
  plan->scores = torch::empty({S, S}, copts);
  plan->probs = torch::empty({S, S}, copts);
  plan->heads_out = torch::empty({batch, H, S, dh}, copts);
  return plan;
}

torch::Tensor Vit3dDecoder::Forward(const torch::Tensor& z, TilePlan* plan) const {
  const VideoDecoderConfig& c = config_;
  TORCH_CHECK(z.defined(), "h3 video decoder: z is undefined");
  TORCH_CHECK(z.dim() == 5 && z.size(1) == c.latent_channels, "h3 video decoder: z must be [B, ",
              c.latent_channels, ", t, h, w], got ", z.sizes());
  TORCH_CHECK(z.scalar_type() == torch::kFloat && z.device() == device_,
              "h3 video decoder: z must be a float32 tensor on ", device_, ", got ",
              z.scalar_type(), " on ", z.device());
  TORCH_CHECK(z.size(0) >= 1 && z.size(2) >= 1 && z.size(3) >= 1 && z.size(4) >= 1,
              "h3 video decoder: z has an empty dim: ", z.sizes());
  torch::NoGradGuard no_grad;
  const int64_t B = z.size(0), t = z.size(2), h = z.size(3), wd = z.size(4);
  torch::Tensor x = EmbedTokens(z, *weights_, c, compute_dtype_);

  // 5. RoPE tables and 6.-8. workspace: from the plan, or built for this
  // call (the same code, so both give the same bits).
  std::shared_ptr<TilePlan> own;
  if (plan == nullptr) {
    own = BuildTilePlan(B, t, h, wd);
    plan = own.get();
  }
  TORCH_CHECK(plan->batch == B && plan->t == t && plan->h == h && plan->w == wd,
              "h3 video decoder: plan for [", plan->batch, ", ", plan->t, ", ", plan->h, ", ",
              plan->w, "] used for a call of [", B, ", ", t, ", ", h, ", ", wd, "]");

  // 6.-8. Transformer blocks: x = x + scale1 * Attn(norm1(x));
  // x = x + scale2 * FFN(norm2(x)). Norms in fp32 (x is fp32).
  for (const vit3d::BlockWeights& b : weights_->blocks) {
    x.add_(Attention(x, b, c, compute_dtype_, *plan) * b.scale1);
    x.add_(FeedForward(x, b, c, compute_dtype_, *plan) * b.scale2);
  }
  return ProjectToPixels(std::move(x), *weights_, c, t, h, wd);
}

}  // namespace vaed::models::h3
