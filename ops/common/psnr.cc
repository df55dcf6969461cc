#include "ops/common/psnr.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace vaed::ops {

double MeanSquaredError(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  assert(a.size() == b.size());
  if (a.empty()) return 0.0;
  // Integer accumulation is exact: 255^2 * 2^46 values still fits in uint64.
  uint64_t sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int d = static_cast<int>(a[i]) - static_cast<int>(b[i]);
    sum += static_cast<uint64_t>(d * d);
  }
  return static_cast<double>(sum) / static_cast<double>(a.size());
}

double PsnrDb(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  const double mse = MeanSquaredError(a, b);
  if (mse == 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(255.0 * 255.0 / mse);
}

FramePsnr MeanFramePsnr(std::span<const uint8_t> a, std::span<const uint8_t> b,
                        size_t values_per_frame) {
  assert(a.size() == b.size() && values_per_frame > 0 && a.size() % values_per_frame == 0);
  FramePsnr out;
  out.frames = a.size() / values_per_frame;
  out.min_db = std::numeric_limits<double>::infinity();
  out.max_db = -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (size_t f = 0; f < out.frames; ++f) {
    const double db = PsnrDb(a.subspan(f * values_per_frame, values_per_frame),
                             b.subspan(f * values_per_frame, values_per_frame));
    sum += db;
    out.min_db = std::min(out.min_db, db);
    out.max_db = std::max(out.max_db, db);
  }
  out.mean_db = out.frames > 0 ? sum / static_cast<double>(out.frames) : 0.0;
  return out;
}

U8Diff CompareU8(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  assert(a.size() == b.size());
  U8Diff out;
  out.values = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const int d = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    if (d != 0) {
      ++out.values_differing;
      out.max_abs_diff = std::max(out.max_abs_diff, d);
    }
  }
  return out;
}

}  // namespace vaed::ops
