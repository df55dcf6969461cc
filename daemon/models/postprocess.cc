#include "daemon/models/postprocess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "daemon/models/torch_status.h"

namespace vaed::models {

Result<torch::Tensor> ToUint8Nhwc(const torch::Tensor& nchw_float) {
  if (!nchw_float.defined()) return InvalidArgument("output is an undefined tensor");
  if (nchw_float.scalar_type() != torch::kFloat) {
    return InvalidArgument("output.dtype is " +
                           std::string(c10::toString(nchw_float.scalar_type())) +
                           "; expected float32");
  }
  if (nchw_float.dim() != 4) {
    return InvalidArgument("output.shape has rank " + std::to_string(nchw_float.dim()) +
                           "; expected [frames, channels, height_px, width_px]");
  }
  try {
    torch::NoGradGuard no_grad;
    // nan_to_num first: clamp keeps NaN, and casting NaN to uint8 is undefined.
    torch::Tensor x = torch::nan_to_num(nchw_float, 0.0).clamp_(0.0, 1.0).mul_(255.0).round_();
    return x.to(torch::kByte).permute({0, 2, 3, 1}).contiguous();
  } catch (...) {
    return CurrentTorchErrorStatus("ToUint8Nhwc");
  }
}

Result<OutputStats> SummarizeValues(const torch::Tensor& x, double clip_level) {
  if (!x.defined()) return InvalidArgument("tensor is undefined");
  if (x.scalar_type() != torch::kFloat) {
    return InvalidArgument("SummarizeValues needs a float32 tensor, got " +
                           std::string(c10::toString(x.scalar_type())) + " on " + x.device().str());
  }
  constexpr int64_t kSlice = int64_t{1} << 22;
  OutputStats st;
  st.values = x.numel();
  // The running figures, float64 on the tensor's device: [finite values,
  // sum of squares, min, max, clipped]; read back once at the end.
  torch::Tensor acc;
  auto visit = [&](const torch::Tensor& flat) {
    const int64_t n = flat.numel();
    for (int64_t begin = 0; begin < n; begin += kSlice) {
      const torch::Tensor c = flat.slice(0, begin, std::min(n, begin + kSlice));
      if (c.numel() == 0) continue;
      // One temporary of the slice's size at a time (float64 for the sum of
      // squares, as before; min and max are exact in float32).
      const torch::Tensor is_finite = torch::isfinite(c);
      constexpr float kInf = std::numeric_limits<float>::infinity();
      const torch::Tensor count = is_finite.sum().to(torch::kDouble);
      const torch::Tensor sum_sq =
          torch::where(is_finite, c, 0.0f).to(torch::kDouble).square_().sum();
      const torch::Tensor lo = torch::where(is_finite, c, kInf).min().to(torch::kDouble);
      const torch::Tensor hi = torch::where(is_finite, c, -kInf).max().to(torch::kDouble);
      const torch::Tensor clipped =
          clip_level > 0 ? (is_finite & (c.abs() >= clip_level)).sum().to(torch::kDouble)
                         : torch::zeros({}, c.options().dtype(torch::kDouble));
      const torch::Tensor part = torch::stack({count, sum_sq, lo, hi, clipped});
      acc = !acc.defined() ? part
                           : torch::stack({acc[0] + part[0], acc[1] + part[1],
                                           torch::minimum(acc[2], part[2]),
                                           torch::maximum(acc[3], part[3]), acc[4] + part[4]});
    }
  };
  double sum_sq = 0;
  int64_t finite = 0;
  int64_t clipped = 0;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  try {
    torch::NoGradGuard no_grad;
    if (x.dim() == 0 || x.is_contiguous()) {
      visit(x.reshape({-1}));
    } else {
      // Non-contiguous (e.g. a view of the assembled video): one slice of
      // dim 0 at a time, so at most one slice is copied.
      for (int64_t i = 0; i < x.size(0); ++i) visit(x[i].reshape({-1}));
    }
    if (acc.defined()) {
      // The one host read (on a GPU it waits for the device's work so far):
      // the figures go into the reply.
      const torch::Tensor host = acc.cpu();
      const double* f = host.data_ptr<double>();
      finite = static_cast<int64_t>(f[0]);
      sum_sq = f[1];
      lo = f[2];
      hi = f[3];
      clipped = static_cast<int64_t>(f[4]);
    }
  } catch (...) {
    return CurrentTorchErrorStatus("summarizing output values");
  }
  st.nonfinite = st.values - finite;
  if (finite > 0) {
    st.rms = std::sqrt(sum_sq / static_cast<double>(finite));
    st.peak_abs = std::max(std::fabs(lo), std::fabs(hi));
  } else if (st.values > 0) {
    st.rms = std::numeric_limits<double>::quiet_NaN();
    st.peak_abs = std::numeric_limits<double>::quiet_NaN();
  }
  if (st.values > 0) {
    st.clipped_fraction = static_cast<double>(clipped) / static_cast<double>(st.values);
  }
  st.constant = st.values > 0 && st.nonfinite == 0 && lo == hi;
  return st;
}

}  // namespace vaed::models
