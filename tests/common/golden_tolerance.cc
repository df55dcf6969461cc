#include "tests/common/golden_tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace vaed::testing {
namespace {

std::string Str(std::string_view s) { return std::string(s); }

}  // namespace

::testing::AssertionResult GoldenU8Within(std::string_view what, std::span<const uint8_t> ours,
                                          std::span<const uint8_t> golden) {
  if (ours.size() != golden.size()) {
    return ::testing::AssertionFailure() << what << ": " << ours.size() << " uint8 values, the golden has "
                                         << golden.size();
  }
  U8Counts counts;
  counts.values = ours.size();
  for (size_t i = 0; i < ours.size(); ++i) {
    const int d = std::abs(int{ours[i]} - int{golden[i]});
    if (d == 0) continue;
    ++counts.differing;
    counts.max_abs_diff = std::max(counts.max_abs_diff, d);
  }
  return GoldenU8CountsWithin(what, counts);
}

::testing::AssertionResult GoldenU8CountsWithin(std::string_view what, const U8Counts& counts) {
  const double fraction =
      counts.values > 0 ? static_cast<double>(counts.differing) / static_cast<double>(counts.values)
                        : 0.0;
  std::printf("[ golden ] %s: %llu of %llu uint8 values differ from the golden (%.5f %%), "
              "max |diff| %d%s\n",
              Str(what).c_str(), static_cast<unsigned long long>(counts.differing),
              static_cast<unsigned long long>(counts.values), 100 * fraction, counts.max_abs_diff,
              counts.differing == 0 ? " (bitwise equal)" : "");
  std::fflush(stdout);
  if (counts.max_abs_diff > 1 || fraction > kGoldenU8MaxOffByOneFraction) {
    return ::testing::AssertionFailure()
           << what << ": " << counts.differing << " of " << counts.values
           << " uint8 values differ from the golden (" << 100 * fraction << " %), max |diff| "
           << counts.max_abs_diff << "; the golden tolerance (README §8) is |diff| <= 1 in at most "
           << 100 * kGoldenU8MaxOffByOneFraction << " % of values";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult GoldenF32Within(std::string_view what, std::span<const float> ours,
                                           std::span<const float> golden, double max_abs) {
  if (ours.size() != golden.size()) {
    return ::testing::AssertionFailure() << what << ": " << ours.size()
                                         << " float32 values, the golden has " << golden.size();
  }
  double worst = 0;
  uint64_t differing = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    // Compared as bits, so a NaN never counts as equal.
    if (std::memcmp(&ours[i], &golden[i], sizeof(float)) == 0) continue;
    ++differing;
    const double d = std::fabs(double{ours[i]} - double{golden[i]});
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  std::printf("[ golden ] %s: %llu of %llu float32 values differ from the golden, max abs %.3g%s\n",
              Str(what).c_str(), static_cast<unsigned long long>(differing),
              static_cast<unsigned long long>(ours.size()), worst,
              differing == 0 ? " (bitwise equal)" : "");
  std::fflush(stdout);
  if (!(worst <= max_abs)) {
    return ::testing::AssertionFailure() << what << ": " << differing << " of " << ours.size()
                                         << " float32 values differ from the golden, max abs "
                                         << worst << " > the golden tolerance " << max_abs;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult GoldenMaxAbsWithin(std::string_view what, double measured_max_abs,
                                              double max_abs) {
  std::printf("[ golden ] %s: max abs %.3g vs the golden%s\n", Str(what).c_str(), measured_max_abs,
              measured_max_abs == 0 ? " (no difference)" : "");
  std::fflush(stdout);
  if (!(measured_max_abs <= max_abs)) {
    return ::testing::AssertionFailure() << what << ": max abs " << measured_max_abs
                                         << " vs the golden > the golden tolerance " << max_abs;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace vaed::testing
