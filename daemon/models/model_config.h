// ModelConfig: one configured model, as parsed from the daemon config.
// Kept free of LibTorch so that config parsing does not compile against it.
#ifndef VAED_DAEMON_MODELS_MODEL_CONFIG_H_
#define VAED_DAEMON_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/models/named_enum.h"
#include "daemon/models/stack_tiling.h"

namespace vaed::models {

// What a configured model is (`kind` of a [[models.entry]]).
enum class ModelKind {
  kTaef2,    // the TAEF2 decoder with real weights from `weights_path`
  kDemo,     // the TAEF2 architecture with deterministic seeded weights
             // (Taef2Decoder::CreateDemo); for smoke tests, not images
  kH3Video,  // the MiniMax-H3 video VAE decoder (h3/video_vae.h)
  kH3Audio,  // the MiniMax-H3 audio VAE decoder (h3/h3_vae.h)
  kH3,       // both H3 decoders under one name, for joint audio + video
             // requests (h3/h3_vae.h)
};
inline constexpr NameTable<ModelKind, 5> kModelKindNames = {{
    {ModelKind::kTaef2, "taef2"},
    {ModelKind::kDemo, "demo"},
    {ModelKind::kH3Video, "h3_video"},
    {ModelKind::kH3Audio, "h3_audio"},
    {ModelKind::kH3, "h3"},
}};

// The dtype the H3 video decoder computes in (`compute_dtype`).
enum class ComputeDtype {
  kFloat32,   // exact
  kFloat16,   // the official recipe (spec §1.6); GPU ranks only
  kBFloat16,
};
inline constexpr NameTable<ComputeDtype, 3> kComputeDtypeNames = {{
    {ComputeDtype::kFloat32, "float32"},
    {ComputeDtype::kFloat16, "float16"},
    {ComputeDtype::kBFloat16, "bfloat16"},
}};

// One configured model (a [[models.entry]] table of the daemon config; the
// comments name the TOML keys).
struct ModelConfig {
  // `name`: registry name clients ask for; unique, non-empty.
  std::string name;
  // `kind` (required in TOML; ModelKind).
  ModelKind kind = ModelKind::kDemo;
  // `weights`: taef2: path of taef2_decoder.safetensors (required). demo,
  // h3_audio: must be empty. h3_video, h3: the video decoder's safetensors
  // file or *.safetensors.index.json; empty means deterministic random
  // weights from `seed` (flagged as demo).
  std::string weights_path;
  // `config`: h3_video, h3: video decoder config JSON (official config.json
  // with source/, the diffusers vae/config.json, or the golden tiny config);
  // empty means the released model's configuration. Other kinds: empty.
  std::string config_path;
  // `audio_weights`, `audio_config`: h3_audio, h3: the audio decoder's
  // safetensors file and config JSON (official component config, diffusers
  // audio_vae/config.json, or the golden tiny config); empty weights mean
  // random weights from `seed`, an empty config the released model's.
  // Other kinds: empty.
  std::string audio_weights_path;
  std::string audio_config_path;
  // `weights_sha256`, `audio_weights_sha256`: the SHA-256 (64 hex digits)
  // the `weights` / `audio_weights` file must have; a mismatch refuses the
  // model (weight_verification.h, which also reads a SHA256SUMS beside the
  // weights). Only with that file set; not for a sharded index (list the
  // shards in SHA256SUMS). Empty: no expectation from the config.
  std::string weights_sha256;
  std::string audio_weights_sha256;
  // `compute_dtype`: h3_video, h3 (video decoder). Other kinds (and H3
  // audio): float32 only.
  ComputeDtype compute_dtype = ComputeDtype::kFloat32;
  // `stack_tiling`: h3_video, h3: tile scheduling when a request does not
  // choose: off, on or auto (same output; speed and memory differ). Other
  // kinds: off only.
  StackTiling stack_tiling = StackTiling::kOff;
  // `frame_batch`: latent frames per forward call (taef2 and demo; see
  // Taef2Options); unset means 4. Other kinds reject it.
  std::optional<int64_t> frame_batch;
  // `seed`: weight seed of generated weights (demo; H3 decoders without
  // weights). Kinds and decoders with real weights reject it.
  std::optional<uint64_t> seed;
  // `plan_cache_capacity`, `plan_after_sightings`, `warm_shapes`: h3_video,
  // h3 compiled plans (h3/video_vae.h VideoVaeOptions): at most
  // plan_cache_capacity buckets (unset: 8), an unconfigured bucket built
  // from its plan_after_sightings-th call (unset: 2), and latent canvases
  // "HxW" (latent cells, e.g. "32x48" for 512x768 px) that every rank
  // decodes once before READY (engine/warm_up.h). Other kinds reject them.
  std::optional<int64_t> plan_cache_capacity;
  std::optional<int64_t> plan_after_sightings;
  std::vector<std::string> warm_shapes;
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_MODEL_CONFIG_H_
