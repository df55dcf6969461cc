// The decoders' matrix products, with one rule for reduced precision on
// the CPU: bf16 operands, float32 products and sums, the result rounded to
// bf16 once. That is what a GPU's tensor cores do under the official fp16
// autocast recipe (spec/h3_vae.md §1.6), and what oneDNN does on CPUs with
// AVX-512 BF16. LibTorch 1.13's own bf16 GEMM on CPUs without it (AVX2: no
// oneDNN bf16 kernels) rounds partial sums to bf16 and is slow: measured on
// an AVX2 EPYC, a [1796 x 1796] x [1796 x 64] bf16 product is off by 4 % of
// its mean magnitude (10x its output rounding), the tiny H3 decoder's bf16
// tile is off by 0.71 against float32 (the test's bound, 0.03, held on the
// CPU the suite was written on), and two full-width decoder blocks of one
// tile took 361-373 s. So bf16 products run here as float32 GEMMs
// (LibTorch's: MKL in the PyPI wheel) on the bf16 values widened, whatever
// the CPU and LibTorch version: one rule, the same rounding everywhere;
// float32 operands take LibTorch's own kernels unchanged.
//
// Shapes and layouts are those of the LibTorch call each replaces; `out`
// arguments are written in place (their dtype is the operands').
//
// Thread-safety: stateless. Errors: LibTorch's (thrown, c10::Error): call
// inside a LibTorch adapter (models/torch_status.h).
#ifndef VAED_DAEMON_MODELS_GEMM_H_
#define VAED_DAEMON_MODELS_GEMM_H_

#include <torch/torch.h>

namespace vaed::models {

// torch::linear(x, w, b): x [..., K], w [N, K], b [N] -> [..., N].
torch::Tensor LinearGemm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// torch::addmm_out(out, bias, a, b): out [M, N] = bias + a [M, K] @ b [K, N].
void AddmmGemmInto(torch::Tensor& out, const torch::Tensor& bias, const torch::Tensor& a,
                   const torch::Tensor& b);

// torch::mm_out(out, a, b): out [M, N] = a [M, K] @ b [K, N].
void MmGemmInto(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_GEMM_H_
