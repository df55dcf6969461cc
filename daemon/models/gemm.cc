#include "daemon/models/gemm.h"

namespace vaed::models {

namespace {

// bf16 on the CPU takes the widened path (gemm.h).
bool Widen(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 && t.device().is_cpu();
}

torch::Tensor Float(const torch::Tensor& t) { return t.to(torch::kFloat); }

}  // namespace

torch::Tensor LinearGemm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (!Widen(x)) return torch::linear(x, w, b);
  return torch::linear(Float(x), Float(w), Float(b)).to(x.scalar_type());
}

void AddmmGemmInto(torch::Tensor& out, const torch::Tensor& bias, const torch::Tensor& a,
                   const torch::Tensor& b) {
  if (!Widen(out)) {
    torch::addmm_out(out, bias, a, b);
    return;
  }
  out.copy_(torch::addmm(Float(bias), Float(a), Float(b)));
}

void MmGemmInto(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) {
  if (!Widen(out)) {
    torch::mm_out(out, a, b);
    return;
  }
  out.copy_(torch::mm(Float(a), Float(b)));
}

}  // namespace vaed::models
