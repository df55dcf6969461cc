// The set of models a daemon serves, built once from config.
//
// The registry owns every model for the daemon's life; Find()/Get() hand
// out non-owning pointers that stay valid until the registry is destroyed.
//
// The daemon builds one registry per rank, so each rank decodes with its
// own model instances (vae_model.h).
//
// Thread-safety: immutable after Create(); all const methods may be called
// from any thread. Each returned VaeModel keeps its own rules (Decode() by
// one thread at a time).
#ifndef VAED_DAEMON_MODELS_MODEL_REGISTRY_H_
#define VAED_DAEMON_MODELS_MODEL_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/models/model_config.h"
#include "daemon/models/vae_model.h"
#include "daemon/models/weight_verification.h"
#include "vaed/status.h"

namespace vaed::models {

// A latent the daemon decodes on every rank before it reports READY: one
// entry of a model's `warm_shapes` (engine/warm_up.h runs it). Plain values.
struct WarmShape {
  std::string model;   // registry name
  std::string field;   // where it was configured: "models.entry[0].warm_shapes[1]"
  std::string canvas;  // as configured: "32x48" (latent cells, height x width)
  // The float32 latent the warm-up decodes (h3: VideoVae::WarmUpLatentShape).
  std::vector<int64_t> latent_shape;
  // The entry's `stack_tiling`: what StackTiling::kDefault means for this
  // model (the warm-up measures tile peaks first when that is kAuto).
  StackTiling default_stack_tiling = StackTiling::kOff;
};

class ModelRegistry {
 public:
  // Validates the whole config first (Validate()), then builds every model
  // (loading weights), in config order, on `device`: the rank's (CPU, or
  // CUDA with the ordinal this process sees; engine/rank_devices.h). Each
  // model loads on the host and moves its tensors there once
  // (device_placement.h); info().device names it.
  // Every entry's weights are verified first (VerifyAll()), before any
  // model is built, unless `verified` holds VerifyAll()'s result for these
  // configs (a daemon with several ranks verifies once, then builds each
  // rank's registry with it).
  // Load errors: the first model that fails to build, with its Status
  // (see Taef2Decoder::Create, VideoVae::Create, H3Vae::Create), including
  // a device this build or machine cannot place tensors on.
  static Result<std::unique_ptr<ModelRegistry>> Create(
      const std::vector<ModelConfig>& configs, std::string default_model,
      torch::Device device = torch::kCPU,
      const std::vector<WeightsVerification>* verified = nullptr);

  // The weights of every entry verified (weight_verification.h
  // VerifyWeights: kFailedPrecondition naming the file, the expected and
  // the actual digest), in config order. Reads the files; logs each result.
  static Result<std::vector<WeightsVerification>> VerifyAll(
      const std::vector<ModelConfig>& configs);

  // Checks every entry against the keys its kind takes (ModelConfig), without
  // loading anything. Errors (kInvalidArgument) name the TOML entry and key:
  //   empty list; "models.entry[i].name is empty"; duplicate names; a key
  //   the kind does not take ("models.entry[0].audio_weights is set for
  //   model 'a' of kind taef2, which has no audio decoder ..."), a
  //   compute_dtype other than float32 or a stack_tiling other than off
  //   included; taef2 without weights; frame_batch outside [1, 4096]; a
  //   weights_sha256 / audio_weights_sha256 that is not 64 hex digits, has
  //   no file, or names a sharded index; a seed for a
  //   model without generated weights; `default_model` not one of the names.
  static Status Validate(const std::vector<ModelConfig>& configs,
                         const std::string& default_model);

  ~ModelRegistry();
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // The model called `name` ("" means the default model), or nullptr.
  VaeModel* Find(std::string_view name) const;

  // As Find(), but an unknown name is kNotFound:
  // "unknown model 'x' (available: taef2, demo)".
  Result<VaeModel*> Get(std::string_view name) const;

  // The device every model of this registry lives on (Create()'s).
  torch::Device device() const { return device_; }

  // Name of the model used when a request names none.
  const std::string& default_model() const { return default_model_; }

  // All models, in config order.
  std::vector<const VaeModel*> models() const;

  // Every model's `warm_shapes`, in config order (entries of one model in
  // the order listed); empty when none is configured.
  const std::vector<WarmShape>& warm_shapes() const { return warm_shapes_; }

  // How the weights of model `name` were verified before it was built
  // (weight_verification.h: "verified", "unverified", "generated", and each
  // file), or nullptr for an unknown name. Valid for the registry's life.
  const WeightsVerification* weights_verification(std::string_view name) const;

 private:
  ModelRegistry(std::vector<std::unique_ptr<VaeModel>> models, std::string default_model,
                std::vector<WarmShape> warm_shapes,
                std::vector<WeightsVerification> verifications, torch::Device device);

  std::vector<std::unique_ptr<VaeModel>> models_;
  torch::Device device_;
  std::string default_model_;
  std::vector<WarmShape> warm_shapes_;
  std::vector<WeightsVerification> verifications_;  // models_'s order
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_MODEL_REGISTRY_H_
