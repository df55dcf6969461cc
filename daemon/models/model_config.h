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
  std::string kind;
  // taef2: path of taef2_decoder.safetensors (required). demo: must be empty.
  std::string weights_path;
  // Latent frames per forward call (taef2 only); see Taef2Options.
  int64_t frame_batch = 4;
  // Weight seed (demo only).
  uint64_t seed = 0;
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_MODEL_CONFIG_H_
