// Synthetic latents for smoke tests and demos (e.g. `vaectl decode
// --random-latent 1,32,64,64` against the demo model), and the parsing of
// shapes given on the command line.
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_COMMON_RANDOM_LATENT_H_
#define VAED_OPS_COMMON_RANDOM_LATENT_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "vaed/status.h"

namespace vaed::ops {

// Parses "16,32,34,80" (or "16x32x34x80") into a shape. Each dim must be a
// positive decimal integer; at most 8 dims; the element count must not
// overflow int64. kInvalidArgument naming the offending text otherwise.
Result<std::vector<int64_t>> ParseShape(std::string_view text);

// `count` float32 samples of a standard normal distribution, the same for a
// given `seed` whatever the C++ standard library (SplitMix64 bits and a
// Box-Muller transform rather than <random>'s unspecified distributions). Real TAEF2 latents have
// std ~0.8; the decoder's soft clamp 3*tanh(x/3) bounds any input.
std::vector<float> RandomNormalLatent(uint64_t count, uint64_t seed);

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_RANDOM_LATENT_H_
