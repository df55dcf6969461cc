// How a `vaectl decode` compares with the reference tensors stored next to
// the latents: video frames against a reference decode and the original
// pixels (PSNR, uint8 differences), audio against a reference waveform.
//
// Thread-safety: pure functions and plain values.
#ifndef VAED_OPS_VAECTL_DECODE_QUALITY_H_
#define VAED_OPS_VAECTL_DECODE_QUALITY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/models/safetensors.h"
#include "ops/common/audio_writer.h"
#include "ops/common/frame_writer.h"
#include "ops/common/psnr.h"

namespace vaed::vaectl {

// How a decode compares with the tensors stored in the latent file
// (README §6 definitions: mean of per-frame PSNRs, peak 255, float64 MSE).
struct Quality {
  std::string original_key;   // tensor used as the original; "" if none
  std::string reference_key;  // tensor used as the reference decode; "" if none
  std::optional<ops::FramePsnr> psnr_vs_original;            // decode vs original
  std::optional<ops::FramePsnr> reference_psnr_vs_original;  // reference vs original
  std::optional<ops::U8Diff> vs_reference;                   // decode vs reference
  std::vector<std::string> notes;                            // why a comparison was skipped
};

// Compares `decoded` (uint8 NHWC [frames, height_px, width_px, 3]) with
// tensors of `file`: the reference decode `reference_key` and the original
// `original_key` (when empty: "frames_u8", then "image_u8", skipping a key
// equal to `reference_key`; "none": no original). A tensor is
// used when it is uint8 and holds exactly the decoded number of values
// ([N,H,W,3], or [H,W,3] for one frame); otherwise, or when it is absent,
// that comparison is skipped with a note (an absent default key gets no
// note: most latent files carry no references). Never fails.
Quality CompareWithFile(const ops::RgbFrames& decoded, const SafetensorsFile& file,
                        const std::string& reference_key, const std::string& original_key);

// How decoded audio compares with a reference waveform stored in the
// audio latent file. Values are float32 samples before any WAV
// quantization; differences are taken in double.
struct AudioQuality {
  std::string reference_key;           // tensor compared with; "" if none
  std::optional<double> max_abs_diff;  // over the pairs whose difference is finite
  uint64_t values_compared = 0;        // channels * samples when compared
  uint64_t nonfinite_differences = 0;  // pairs with a NaN/Inf difference (also in notes)
  std::vector<std::string> notes;      // why the comparison was skipped, or caveats
};

// Compares `decoded` (float32 [channels, samples] planar) with the tensor
// `reference_key` of `file` (H3 golden files: "waveform", float32
// [channels, 1, samples]). The tensor is used when it is float32 and holds
// exactly channels * samples values, in the same channel-major order;
// otherwise the comparison is skipped with a note. An absent tensor gets a
// note unless `reference_key` is the default "waveform" (most latent files
// carry no reference); an empty key skips silently. Never fails.
AudioQuality CompareAudioWithFile(const ops::PlanarAudio& decoded, const SafetensorsFile& file,
                                  const std::string& reference_key);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_DECODE_QUALITY_H_
