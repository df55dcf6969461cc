// ModelConfig: one configured model, as parsed from the daemon config.
// Kept free of LibTorch so that config parsing does not compile against it.
#ifndef VAED_DAEMON_MODELS_MODEL_CONFIG_H_
#define VAED_DAEMON_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

namespace vaed::models {

// One configured model (a [[models.entry]] table of the daemon config).
struct ModelConfig {
  // Registry name clients ask for; unique, non-empty.
  std::string name;
  // "taef2": the TAEF2 decoder with real weights from `weights_path`.
  // "demo":  the TAEF2 architecture with deterministic seeded weights
  //          (Taef2Decoder::CreateDemo); for smoke tests, not images.
  // "h3_video": the MiniMax-H3 video VAE decoder (h3/video_vae.h).
  std::string kind;
  // taef2: path of taef2_decoder.safetensors (required). demo: must be empty.
  // h3_video: a safetensors file or a *.safetensors.index.json; empty means
  // deterministic random weights from `seed` (flagged as demo).
  std::string weights_path;
  // h3_video: decoder config JSON (official config.json with source/, the
  // diffusers vae/config.json, or the golden tiny config); empty means the
  // released model's configuration. Other kinds: must be empty.
  std::string config_path;
  // h3_video: "float32" (exact) or "bfloat16". Other kinds: float32 only.
  std::string compute_dtype = "float32";
  // h3_video: tile scheduling when a request does not choose: "off", "on"
  // or "auto" (same output; speed and memory differ).
  std::string stack_tiling = "off";
  // Latent frames per forward call (taef2 only); see Taef2Options.
  int64_t frame_batch = 4;
  // Weight seed (demo, and h3_video without weights).
  uint64_t seed = 0;
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_MODEL_CONFIG_H_
