#include "ops/vaectl/latent_input.h"

#include <filesystem>

#include "ops/common/random_latent.h"
#include "ops/common/text_format.h"

namespace vaed::vaectl {

Result<LatentInput> LoadLatent(const LatentSource& from, uint64_t seed) {
  LatentInput in;
  if (!from.random_shape.empty()) {
    auto shape = ops::ParseShape(from.random_shape);
    if (!shape.ok()) return shape.status().WithContext(from.flag);
    in.shape = std::move(shape).value();
    VAED_ASSIGN_OR_RETURN(const uint64_t count, NumElements(in.shape, from.flag));
    // Generated before the daemon can plan it: refuse what cannot be a
    // sensible latent instead of dying in the allocator.
    constexpr uint64_t kMaxRandomElements = uint64_t{1} << 28;  // 1 GiB of float32
    if (count > kMaxRandomElements) {
      return InvalidArgument(std::string(from.flag) + " " + from.random_shape + " has " +
                             std::to_string(count) + " elements; at most " +
                             std::to_string(kMaxRandomElements) + " (1 GiB float32) are generated");
    }
    in.generated = ops::RandomNormalLatent(count, seed);
    in.dtype = DType::kFloat32;
    in.data = reinterpret_cast<const uint8_t*>(in.generated.data());
    in.bytes = count * sizeof(float);
    in.source = "random(seed=" + std::to_string(seed) + ")";
    in.stem = from.random_stem;
    return in;
  }
  VAED_ASSIGN_OR_RETURN(in.file, SafetensorsFile::Open(from.file));
  const TensorEntry* entry = in.file->Find(from.key);
  if (entry == nullptr) {
    return NotFound(from.file + ": no tensor '" + from.key + "' (tensors: " +
                    ops::Join(in.file->names(), ", ") + "); choose one with " + from.key_flag);
  }
  in.dtype = entry->dtype;
  in.shape = entry->shape;
  in.data = entry->data;
  in.bytes = entry->nbytes;
  const std::filesystem::path path(from.file);
  in.source = path.filename().string() + ":" + from.key;
  in.stem = path.stem().string();
  return in;
}

}  // namespace vaed::vaectl
