#include "ops/common/random_latent.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

namespace vaed::ops {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so log() below is finite.
double UniformOpenClosed(uint64_t& state) {
  return (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

Result<std::vector<int64_t>> ParseShape(std::string_view text) {
  std::vector<int64_t> shape;
  int64_t elements = 1;
  size_t begin = 0;
  while (true) {
    size_t end = text.find_first_of(",x", begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(begin, end - begin);
    int64_t dim = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), dim);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || dim <= 0) {
      return InvalidArgument("shape '" + std::string(text) + "': '" + std::string(part) +
                             "' is not a positive integer");
    }
    if (elements > std::numeric_limits<int64_t>::max() / dim) {
      return InvalidArgument("shape '" + std::string(text) + "' has too many elements");
    }
    elements *= dim;
    shape.push_back(dim);
    if (shape.size() > 8) {
      return InvalidArgument("shape '" + std::string(text) + "' has more than 8 dims");
    }
    if (end == text.size()) break;
    begin = end + 1;
  }
  return shape;
}

std::vector<float> RandomNormalLatent(uint64_t count, uint64_t seed) {
  std::vector<float> out(count);
  uint64_t state = seed;
  for (uint64_t i = 0; i < count; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(UniformOpenClosed(state)));
    const double theta = 2.0 * std::numbers::pi * UniformOpenClosed(state);
    out[i] = static_cast<float>(r * std::cos(theta));
    if (i + 1 < count) out[i + 1] = static_cast<float>(r * std::sin(theta));
  }
  return out;
}

}  // namespace vaed::ops
