// The latents `vaectl decode` sends: a tensor of a safetensors file, or
// seeded random values of a shape given on the command line.
//
// Thread-safety: a LatentInput is a plain owner; LoadLatent may run
// concurrently.
#ifndef VAED_OPS_VAECTL_LATENT_INPUT_H_
#define VAED_OPS_VAECTL_LATENT_INPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/models/safetensors.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::vaectl {

// A latent to send: a tensor of a safetensors file (borrowed from its
// mapping, which `file` keeps open) or generated random float32 values
// (owned in `generated`). `data` stays valid while this object lives, also
// after a move.
struct LatentInput {
  std::unique_ptr<SafetensorsFile> file;  // null for a random latent
  std::vector<float> generated;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
  std::string source;  // for the report: "FILE_NAME:KEY" or "random(seed=N)"
  std::string stem;    // default output name: the file's stem or `random_stem`
};

// Where one latent comes from: `random_shape` ("N,C,H,W") when not empty,
// else tensor `key` of `file`. The flags name the options in messages.
struct LatentSource {
  const std::string& file;
  const std::string& key;
  const std::string& random_shape;
  const char* flag;         // "--random-latent" / "--random-audio-latent"
  const char* key_flag;     // "--key" / "--audio-key"
  const char* random_stem;  // default output name of a random latent
};

// Loads or generates the latent (ops::RandomNormalLatent with `seed`).
// Errors: kInvalidArgument naming `flag` for a malformed shape or one of
// more than 2^28 elements (1 GiB of float32); those of opening the file;
// kNotFound listing the file's tensors and naming `key_flag` when `key` is
// absent.
Result<LatentInput> LoadLatent(const LatentSource& from, uint64_t seed);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_LATENT_INPUT_H_
