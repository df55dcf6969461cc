// The latents vaed_bench_matrix decodes: random normal values of a given
// shape, or one tensor of a safetensors file.
//
// Thread-safety: plain values and pure functions.
#ifndef VAED_OPS_BENCH_MATRIX_LATENT_H_
#define VAED_OPS_BENCH_MATRIX_LATENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vaed/status.h"

namespace vaed::bench {

// A float32 latent in the model's layout (H3: [1, 24, T, h, w]; TAEF2:
// [frames, 32, h, w]; latent cells, not pixels). Owns its values.
struct Latent {
  std::vector<int64_t> shape;
  std::vector<float> values;  // C-contiguous; emptied once a cell is done
  std::string source;         // "random normal, seed N" or "FILE:KEY"
};

// Standard normal values (ops::RandomNormalLatent) of the shape in
// `shape_text` ("1x24x7x20x20"). kInvalidArgument for a malformed shape.
Result<Latent> RandomLatent(const std::string& shape_text, uint64_t seed);

// Tensor `key` of the safetensors file `path`, copied out. Errors: those of
// opening the file; kNotFound (listing the tensors) when there is no such
// tensor; kInvalidArgument when it is not float32.
Result<Latent> FileLatent(const std::string& path, const std::string& key);

// "1x24x7x20x20".
std::string ShapeText(const std::vector<int64_t>& shape);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_LATENT_H_
