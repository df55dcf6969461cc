#include "ops/vaectl/decode_quality.h"

#include <cmath>
#include <cstring>
#include <span>

#include "vaed/tensor_ref.h"

namespace vaed::vaectl {
namespace {

// A comparison tensor from `file`, or nullptr with a note when it is absent
// (only if `note_if_absent`) or does not match the decode.
const TensorEntry* ComparableTensor(const SafetensorsFile& file, const std::string& key,
                                    uint64_t decoded_values, bool note_if_absent,
                                    std::vector<std::string>* notes) {
  const TensorEntry* entry = file.Find(key);
  if (entry == nullptr) {
    if (note_if_absent) notes->push_back("tensor '" + key + "' is not in the latent file");
    return nullptr;
  }
  if (entry->dtype != DType::kUInt8) {
    notes->push_back("tensor '" + key + "' is " + std::string(DTypeName(entry->dtype)) +
                     ", not uint8; not compared");
    return nullptr;
  }
  if (entry->nbytes != decoded_values) {
    notes->push_back("tensor '" + key + "' " + ShapeToString(entry->shape) + " holds " +
                     std::to_string(entry->nbytes) + " values, the decode " +
                     std::to_string(decoded_values) + "; not compared");
    return nullptr;
  }
  return entry;
}

}  // namespace

Quality CompareWithFile(const ops::RgbFrames& decoded, const SafetensorsFile& file,
                        const std::string& reference_key, const std::string& original_key) {
  Quality q;
  const uint64_t values = decoded.data.size();
  const auto values_per_frame = static_cast<size_t>(decoded.height_px * decoded.width_px * 3);
  if (values == 0 || values_per_frame == 0 || values % values_per_frame != 0) {
    q.notes.push_back("decoded output is empty or inconsistent; not compared");
    return q;
  }

  const TensorEntry* original = nullptr;
  if (original_key == "none") {
    // The caller says the file holds no original pixels.
  } else if (!original_key.empty()) {
    original = ComparableTensor(file, original_key, values, true, &q.notes);
  } else {
    for (const char* key : {"frames_u8", "image_u8"}) {
      // A tensor named as the reference decode is not the original (the H3
      // golden files keep the official decode in frames_u8).
      if (key == reference_key) continue;
      if (file.Find(key) != nullptr) {
        original = ComparableTensor(file, key, values, true, &q.notes);
        break;
      }
    }
  }
  const TensorEntry* reference =
      reference_key.empty()
          ? nullptr
          : ComparableTensor(file, reference_key, values, reference_key != "decoded_u8", &q.notes);

  if (original != nullptr) {
    q.original_key = original->name;
    const std::span<const uint8_t> orig(original->data, original->nbytes);
    q.psnr_vs_original = ops::MeanFramePsnr(decoded.data, orig, values_per_frame);
    if (reference != nullptr) {
      q.reference_psnr_vs_original = ops::MeanFramePsnr(
          std::span<const uint8_t>(reference->data, reference->nbytes), orig, values_per_frame);
    }
  }
  if (reference != nullptr) {
    q.reference_key = reference->name;
    q.vs_reference =
        ops::CompareU8(decoded.data, std::span<const uint8_t>(reference->data, reference->nbytes));
  }
  return q;
}

AudioQuality CompareAudioWithFile(const ops::PlanarAudio& decoded, const SafetensorsFile& file,
                                  const std::string& reference_key) {
  AudioQuality q;
  if (reference_key.empty()) return q;
  const TensorEntry* entry = file.Find(reference_key);
  if (entry == nullptr) {
    if (reference_key != "waveform") {
      q.notes.push_back("audio reference '" + reference_key + "' is not in the audio latent file");
    }
    return q;
  }
  const uint64_t values = decoded.data.size();
  if (entry->dtype != DType::kFloat32) {
    q.notes.push_back("audio reference '" + reference_key + "' is " +
                      std::string(DTypeName(entry->dtype)) + ", not float32; not compared");
    return q;
  }
  if (values == 0 || entry->nbytes != values * sizeof(float)) {
    q.notes.push_back("audio reference '" + reference_key + "' " + ShapeToString(entry->shape) +
                      " holds " + std::to_string(entry->nbytes / sizeof(float)) +
                      " values, the decode " + std::to_string(values) + " (" +
                      std::to_string(decoded.channels) +
                      (decoded.channels == 1 ? " channel x " : " channels x ") +
                      std::to_string(decoded.samples) + " samples); not compared");
    return q;
  }
  q.reference_key = reference_key;
  q.values_compared = values;
  double max_diff = 0;
  for (uint64_t i = 0; i < values; ++i) {
    // Safetensors data is only byte-aligned; copy each value out.
    float ref;
    std::memcpy(&ref, entry->data + i * sizeof(float), sizeof(float));
    const double a = decoded.data[i];
    const double b = ref;
    if (a == b) continue;  // also equal infinities
    const double diff = std::abs(a - b);
    if (!std::isfinite(diff)) {
      ++q.nonfinite_differences;
    } else if (diff > max_diff) {
      max_diff = diff;
    }
  }
  q.max_abs_diff = max_diff;
  if (q.nonfinite_differences != 0) {
    q.notes.push_back(std::to_string(q.nonfinite_differences) + " of " + std::to_string(values) +
                      " audio values differ from '" + reference_key +
                      "' by NaN or infinity; max |diff| is over the others");
  }
  return q;
}

}  // namespace vaed::vaectl
