// The decoders' bf16 products accumulate in float32 (daemon/models/gemm.h):
// on every CPU the result is the float32 product of the bf16 operands,
// rounded to bf16 once (what tensor cores and oneDNN on AVX-512 BF16 give).
// Regression: on AVX2 CPUs LibTorch 1.13's bf16 GEMM rounded
// partial sums; the tiny H3 decoder's bf16 tile was off by 0.7 from float32
// (H3Vit3dGoldenTest.Bf16ErrorVersusFp32IsBounded failed there).
#include "daemon/models/gemm.h"

#include <gtest/gtest.h>

namespace vaed::models {
namespace {

// |got - want| in units of want's bf16 spacing (ulps), at most.
double MaxUlps(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor w = want.to(torch::kFloat);
  // bf16 has 8 significant bits: spacing = 2^(floor(log2|w|) - 7).
  const torch::Tensor spacing =
      torch::pow(2.0, torch::floor(torch::log2(w.abs().clamp_min(1e-30))) - 7);
  return ((got.to(torch::kFloat) - w).abs() / spacing).max().item<double>();
}

TEST(GemmTest, Bf16ProductsAreTheFloat32ProductRoundedOnce) {
  torch::manual_seed(0);
  // Attention's p @ v at an official tile: K = 1796 positive weights.
  const torch::Tensor p = torch::softmax(torch::randn({1796, 1796}), -1).to(torch::kBFloat16);
  const torch::Tensor v = torch::randn({1796, 64}).to(torch::kBFloat16);
  const torch::Tensor want = torch::mm(p.to(torch::kFloat), v.to(torch::kFloat));
  torch::Tensor out = torch::empty({1796, 64}, torch::kBFloat16);
  MmGemmInto(out, p, v);
  // Rounding the float32 result once is at most half a spacing off; sums in
  // another order add a little.
  EXPECT_LE(MaxUlps(out, want), 1.0);
}

TEST(GemmTest, Bf16LinearAndAddmmAccumulateInFloat32) {
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({300, 2048}).to(torch::kBFloat16);
  const torch::Tensor w = torch::randn({96, 2048}).to(torch::kBFloat16);
  const torch::Tensor b = torch::randn({96}).to(torch::kBFloat16);
  const torch::Tensor want = torch::linear(x.to(torch::kFloat), w.to(torch::kFloat),
                                           b.to(torch::kFloat));
  const torch::Tensor got = LinearGemm(x, w, b);
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  EXPECT_LE(MaxUlps(got, want), 1.0);
  torch::Tensor out = torch::empty({300, 96}, torch::kBFloat16);
  AddmmGemmInto(out, b, x, w.t());
  EXPECT_LE(MaxUlps(out, want), 1.0);
}

TEST(GemmTest, Float32TakesLibTorchsKernelsBitForBit) {
  torch::manual_seed(2);
  const torch::Tensor a = torch::randn({64, 512}), bm = torch::randn({512, 32});
  torch::Tensor out = torch::empty({64, 32});
  MmGemmInto(out, a, bm);
  EXPECT_TRUE(torch::equal(out, torch::mm(a, bm)));
  const torch::Tensor w = torch::randn({32, 512}), bias = torch::randn({32});
  EXPECT_TRUE(torch::equal(LinearGemm(a, w, bias), torch::linear(a, w, bias)));
}

}  // namespace
}  // namespace vaed::models
