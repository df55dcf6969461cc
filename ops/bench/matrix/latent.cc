#include "ops/bench/matrix/latent.h"

#include <cstring>

#include "daemon/models/safetensors.h"
#include "ops/common/random_latent.h"
#include "ops/common/text_format.h"
#include "vaed/tensor_ref.h"

namespace vaed::bench {

Result<Latent> RandomLatent(const std::string& shape_text, uint64_t seed) {
  VAED_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ops::ParseShape(shape_text));
  VAED_ASSIGN_OR_RETURN(const uint64_t count, NumElements(shape, "--shapes"));
  return Latent{shape, ops::RandomNormalLatent(count, seed),
                "random normal, seed " + std::to_string(seed)};
}

Result<Latent> FileLatent(const std::string& path, const std::string& key) {
  VAED_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
  const TensorEntry* e = file->Find(key);
  if (e == nullptr) {
    return NotFound(path + ": no tensor '" + key + "' (tensors: " + ops::Join(file->names(), ", ") +
                    ")");
  }
  if (e->dtype != DType::kFloat32) {
    return InvalidArgument(path + ": tensor '" + key + "' is " + std::string(DTypeName(e->dtype)) +
                           "; the benchmark sends float32 latents");
  }
  Latent latent;
  latent.shape = e->shape;
  latent.values.resize(e->nbytes / sizeof(float));
  // The file's data pointer is only 1-byte aligned: copy, do not cast.
  std::memcpy(latent.values.data(), e->data, e->nbytes);
  latent.source = path + ":" + key;
  return latent;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

}  // namespace vaed::bench
