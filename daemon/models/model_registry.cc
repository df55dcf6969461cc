#include "daemon/models/model_registry.h"

#include <set>
#include <string>
#include <utility>

#include "daemon/models/h3/h3_vae.h"
#include "daemon/models/h3/video_config.h"
#include "daemon/models/h3/video_vae.h"
#include "daemon/models/taef2.h"
#include "daemon/models/weight_verification.h"

namespace vaed::models {
namespace {

constexpr int64_t kDefaultFrameBatch = 4;

std::string KindName(ModelKind kind) { return std::string(NameOf(kModelKindNames, kind)); }

// Which [[models.entry]] keys a kind takes.
struct KindKeys {
  bool video_weights;      // `weights` / `config` (video or image decoder)
  bool weights_required;   // `weights` must be set
  bool audio;              // `audio_weights` / `audio_config`
  bool tiled_video;        // `compute_dtype` bfloat16, `stack_tiling`
  bool frame_batch;        // `frame_batch`
};

KindKeys KeysOf(ModelKind kind) {
  switch (kind) {
    case ModelKind::kTaef2: return {true, true, false, false, true};
    case ModelKind::kDemo: return {false, false, false, false, true};
    case ModelKind::kH3Video: return {true, false, false, true, false};
    case ModelKind::kH3Audio: return {false, false, true, false, false};
    case ModelKind::kH3: return {true, false, true, true, false};
  }
  return {};
}

torch::ScalarType TorchDtypeOf(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::kFloat32: return torch::kFloat;
    case ComputeDtype::kFloat16: return torch::kHalf;
    case ComputeDtype::kBFloat16: return torch::kBFloat16;
  }
  return torch::kFloat;
}

// "HxW" latent canvases (latent cells per axis, 1..160).
Result<std::vector<std::pair<int64_t, int64_t>>> ParseWarmShapes(
    const std::string& where, const std::vector<std::string>& shapes) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string& text = shapes[i];
    const std::string field = where + ".warm_shapes[" + std::to_string(i) + "]";
    // Digits 'x' digits, nothing else (no sign, spaces or leading zeros
    // games: the same shape is always spelled the same way).
    const size_t x = text.find('x');
    auto digits = [](const std::string& d) {
      return !d.empty() && d.size() <= 5 &&
             d.find_first_not_of("0123456789") == std::string::npos;
    };
    long long h = 0, w = 0;
    if (x != std::string::npos && digits(text.substr(0, x)) && digits(text.substr(x + 1))) {
      h = std::stoll(text.substr(0, x));
      w = std::stoll(text.substr(x + 1));
    }
    if (h < 1 || w < 1 || h > h3::VideoVae::kMaxLatentExtent ||
        w > h3::VideoVae::kMaxLatentExtent) {
      return InvalidArgument(field + " is '" + text +
                             "'; must be \"HxW\" in latent cells, each in [1, " +
                             std::to_string(h3::VideoVae::kMaxLatentExtent) +
                             "] (e.g. \"32x48\" for 512x768 px)");
    }
    for (const auto& seen : out) {
      if (seen == std::pair<int64_t, int64_t>{h, w}) {
        return InvalidArgument(field + " repeats '" + text + "'");
      }
    }
    out.emplace_back(h, w);
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) s += ", ";
    s += names[i];
  }
  return s;
}

// `weights_sha256` / `audio_weights_sha256`: a digest, for a file the entry
// names (a single file: a sharded index's shards are listed in SHA256SUMS).
Status ValidateDigestKeys(const ModelConfig& c, const KindKeys& kind, const std::string& where) {
  const struct {
    const char* key;
    const std::string& digest;
    const char* file_key;
    const std::string& file;
    bool taken;  // the kind has this file key
  } keys[] = {{"weights_sha256", c.weights_sha256, "weights", c.weights_path, kind.video_weights},
              {"audio_weights_sha256", c.audio_weights_sha256, "audio_weights",
               c.audio_weights_path, kind.audio}};
  for (const auto& k : keys) {
    if (k.digest.empty()) continue;
    const std::string field = where + "." + k.key;
    if (!k.taken) {
      return InvalidArgument(field + " is set for model '" + c.name + "' of kind " +
                             KindName(c.kind) + ", which takes no " + k.file_key + " file");
    }
    if (!IsSha256Hex(k.digest)) {
      return InvalidArgument(field + " is '" + k.digest +
                             "'; must be a SHA-256: 64 hex digits, as sha256sum prints");
    }
    if (k.file.empty()) {
      return InvalidArgument(field + " is set but " + where + "." + k.file_key +
                             " is empty; a digest needs the file it checks");
    }
    if (h3::IsShardedIndex(k.file)) {
      return InvalidArgument(field + " is set for a sharded checkpoint index (" + k.file +
                             "); list the index and its shards in a SHA256SUMS file beside "
                             "them instead");
    }
  }
  return Status::Ok();
}

// Keys of one entry against its kind. `where` is "models.entry[i]".
Status ValidateEntry(const ModelConfig& c, const std::string& where) {
  const KindKeys keys = KeysOf(c.kind);
  const std::string model = "model '" + c.name + "' of kind " + KindName(c.kind);
  auto not_taken = [&](const char* key, const std::string& why) {
    return InvalidArgument(where + "." + key + " is set for " + model + ", which " + why);
  };
  if (!keys.video_weights && !c.weights_path.empty()) {
    return not_taken("weights", c.kind == ModelKind::kDemo
                                    ? "generates its weights; remove it or use kind taef2"
                                    : "takes its weights as audio_weights");
  }
  if (!keys.video_weights || c.kind == ModelKind::kTaef2) {
    if (!c.config_path.empty()) {
      return not_taken("config", c.kind == ModelKind::kH3Audio
                                     ? "takes its config as audio_config"
                                     : "takes no config file (only h3_video and h3 do)");
    }
  }
  if (keys.weights_required && c.weights_path.empty()) {
    return InvalidArgument(where + ".weights is empty; " + model +
                           " needs the path of taef2_decoder.safetensors");
  }
  if (!keys.audio) {
    if (!c.audio_weights_path.empty()) {
      return not_taken("audio_weights", "has no audio decoder (only h3_audio and h3 do)");
    }
    if (!c.audio_config_path.empty()) {
      return not_taken("audio_config", "has no audio decoder (only h3_audio and h3 do)");
    }
  }
  VAED_RETURN_IF_ERROR(ValidateDigestKeys(c, keys, where));
  if (keys.tiled_video) {
    VAED_RETURN_IF_ERROR(ParseWarmShapes(where, c.warm_shapes).status());
    if (c.plan_cache_capacity && (*c.plan_cache_capacity < 1 || *c.plan_cache_capacity > 1024)) {
      return InvalidArgument(where + ".plan_cache_capacity is " +
                             std::to_string(*c.plan_cache_capacity) + "; must be in [1, 1024]");
    }
    if (c.plan_after_sightings &&
        (*c.plan_after_sightings < 1 || *c.plan_after_sightings > 1000)) {
      return InvalidArgument(where + ".plan_after_sightings is " +
                             std::to_string(*c.plan_after_sightings) + "; must be in [1, 1000]");
    }
  } else {
    if (c.plan_cache_capacity) {
      return not_taken("plan_cache_capacity", "has no compiled plans (only h3_video and h3 do)");
    }
    if (c.plan_after_sightings) {
      return not_taken("plan_after_sightings", "has no compiled plans (only h3_video and h3 do)");
    }
    if (!c.warm_shapes.empty()) {
      return not_taken("warm_shapes", "has no compiled plans (only h3_video and h3 do)");
    }
    if (c.compute_dtype != ComputeDtype::kFloat32) {
      return InvalidArgument(where + ".compute_dtype is '" +
                             std::string(NameOf(kComputeDtypeNames, c.compute_dtype)) + "' for " +
                             model + ", which computes in float32 only");
    }
    if (c.stack_tiling != StackTiling::kOff) {
      return InvalidArgument(where + ".stack_tiling is '" +
                             std::string(NameOf(kConfiguredStackTilingNames, c.stack_tiling)) +
                             "' for " + model +
                             ", which does not decode in tiles (only h3_video and h3 stack "
                             "tiles)");
    }
  }
  if (c.frame_batch) {
    if (!keys.frame_batch) {
      return not_taken("frame_batch", "has no frame batches (only taef2 and demo do)");
    }
    if (*c.frame_batch < 1 || *c.frame_batch > Taef2Decoder::kMaxFrames) {
      return InvalidArgument(where + ".frame_batch is " + std::to_string(*c.frame_batch) +
                             "; must be in [1, " + std::to_string(Taef2Decoder::kMaxFrames) + "]");
    }
  }
  if (c.seed) {
    const bool generates =
        c.kind == ModelKind::kDemo ||
        ((c.kind == ModelKind::kH3Video || c.kind == ModelKind::kH3) && c.weights_path.empty()) ||
        ((c.kind == ModelKind::kH3Audio || c.kind == ModelKind::kH3) &&
         c.audio_weights_path.empty());
    if (!generates) {
      return not_taken("seed", "loads all its weights from files (seed only applies to "
                               "generated demo weights)");
    }
  }
  return Status::Ok();
}

Status ValidateConfig(const std::vector<ModelConfig>& configs, const std::string& default_model) {
  if (configs.empty()) {
    return InvalidArgument("models: no model is configured; add at least one (kinds: " +
                           JoinedNames(kModelKindNames) + ")");
  }
  std::set<std::string> seen;
  std::vector<std::string> names;
  for (size_t i = 0; i < configs.size(); ++i) {
    const ModelConfig& c = configs[i];
    const std::string where = "models.entry[" + std::to_string(i) + "]";
    if (c.name.empty()) return InvalidArgument(where + ".name is empty");
    if (!seen.insert(c.name).second) {
      return InvalidArgument(where + ".name '" + c.name + "' is a duplicate; names must be unique");
    }
    names.push_back(c.name);
    VAED_RETURN_IF_ERROR(ValidateEntry(c, where));
  }
  if (seen.count(default_model) == 0) {
    return InvalidArgument("default_model '" + default_model +
                           "' is not a configured model (configured: " + JoinNames(names) + ")");
  }
  return Status::Ok();
}

h3::VideoVaeOptions VideoOptionsOf(const ModelConfig& c, const torch::Device& device) {
  h3::VideoVaeOptions options;
  options.name = c.name;
  options.device = device;
  options.config_path = c.config_path;
  if (!c.weights_path.empty()) options.weights.push_back(c.weights_path);
  options.seed = c.seed.value_or(0);
  options.compute_dtype = TorchDtypeOf(c.compute_dtype);
  options.default_stack_tiling = c.stack_tiling;
  options.plan_cache_capacity = static_cast<size_t>(c.plan_cache_capacity.value_or(8));
  options.plan_after_sightings = static_cast<int>(c.plan_after_sightings.value_or(2));
  return options;
}

// The warm-up latents of entry `index` (h3 kinds; none for the others,
// which Validate() keeps from having warm_shapes).
Result<std::vector<WarmShape>> WarmShapesOf(const ModelConfig& c, size_t index) {
  const std::string where = "models.entry[" + std::to_string(index) + "]";
  VAED_ASSIGN_OR_RETURN(const auto canvases, ParseWarmShapes(where, c.warm_shapes));
  std::vector<WarmShape> out;
  if (canvases.empty()) return out;
  for (size_t i = 0; i < canvases.size(); ++i) {
    const auto [h, w] = canvases[i];
    out.push_back({.model = c.name,
                   .field = where + ".warm_shapes[" + std::to_string(i) + "]",
                   .canvas = c.warm_shapes[i],
                   .latent_shape = h3::VideoVae::WarmUpLatentShape(h, w),
                   .default_stack_tiling = c.stack_tiling});
  }
  return out;
}

// The model of entry `c` on `device`, built by its kind's factory.
Result<std::unique_ptr<VaeModel>> BuildModel(const ModelConfig& c, const torch::Device& device) {
  switch (c.kind) {
    case ModelKind::kTaef2: {
      Taef2Options options;
      options.name = c.name;
      options.weights_path = c.weights_path;
      options.frame_batch = c.frame_batch.value_or(kDefaultFrameBatch);
      options.device = device;
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<Taef2Decoder> model, Taef2Decoder::Create(options));
      return std::unique_ptr<VaeModel>(std::move(model));
    }
    case ModelKind::kDemo: {
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<Taef2Decoder> model,
                            Taef2Decoder::CreateDemo(c.name, c.seed.value_or(0), device));
      return std::unique_ptr<VaeModel>(std::move(model));
    }
    case ModelKind::kH3Video: {
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<h3::VideoVae> model,
                            h3::VideoVae::Create(VideoOptionsOf(c, device)));
      return std::unique_ptr<VaeModel>(std::move(model));
    }
    case ModelKind::kH3:
    case ModelKind::kH3Audio: {
      h3::H3VaeOptions options;
      options.name = c.name;
      options.device = device;
      if (c.kind == ModelKind::kH3) options.video = VideoOptionsOf(c, device);
      options.audio = h3::AudioVaeOptions{c.audio_config_path, c.audio_weights_path,
                                          c.seed.value_or(0)};
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<h3::H3Vae> model, h3::H3Vae::Create(options));
      return std::unique_ptr<VaeModel>(std::move(model));
    }
  }
  return InvalidArgument("model '" + c.name + "' has no kind");
}

}  // namespace

ModelRegistry::ModelRegistry(std::vector<std::unique_ptr<VaeModel>> models,
                             std::string default_model, std::vector<WarmShape> warm_shapes,
                             std::vector<WeightsVerification> verifications,
                             torch::Device device)
    : models_(std::move(models)),
      device_(device),
      default_model_(std::move(default_model)),
      warm_shapes_(std::move(warm_shapes)),
      verifications_(std::move(verifications)) {}

ModelRegistry::~ModelRegistry() = default;

Status ModelRegistry::Validate(const std::vector<ModelConfig>& configs,
                               const std::string& default_model) {
  return ValidateConfig(configs, default_model);
}

Result<std::vector<WeightsVerification>> ModelRegistry::VerifyAll(
    const std::vector<ModelConfig>& configs) {
  std::vector<WeightsVerification> verifications;
  for (size_t i = 0; i < configs.size(); ++i) {
    VAED_ASSIGN_OR_RETURN(WeightsVerification v, VerifyWeights(configs[i], i));
    verifications.push_back(std::move(v));
  }
  return verifications;
}

Result<std::unique_ptr<ModelRegistry>> ModelRegistry::Create(
    const std::vector<ModelConfig>& configs, std::string default_model, torch::Device device,
    const std::vector<WeightsVerification>* verified) {
  VAED_RETURN_IF_ERROR(ValidateConfig(configs, default_model));
  std::vector<std::unique_ptr<VaeModel>> models;
  std::vector<WarmShape> warm_shapes;
  for (size_t i = 0; i < configs.size(); ++i) {
    VAED_ASSIGN_OR_RETURN(std::vector<WarmShape> mine, WarmShapesOf(configs[i], i));
    warm_shapes.insert(warm_shapes.end(), mine.begin(), mine.end());
  }
  // Every model's weights before any is built: a mismatch refuses the start
  // before minutes of loading (digests are cached: the loaders' logged
  // digests do not hash again).
  std::vector<WeightsVerification> verifications;
  if (verified != nullptr && verified->size() == configs.size()) {
    verifications = *verified;
  } else {
    VAED_ASSIGN_OR_RETURN(verifications, VerifyAll(configs));
  }
  for (const ModelConfig& c : configs) {
    VAED_ASSIGN_OR_RETURN(std::unique_ptr<VaeModel> model, BuildModel(c, device));
    models.push_back(std::move(model));
  }
  return std::unique_ptr<ModelRegistry>(
      new ModelRegistry(std::move(models), std::move(default_model), std::move(warm_shapes),
                        std::move(verifications), device));
}

VaeModel* ModelRegistry::Find(std::string_view name) const {
  if (name.empty()) name = default_model_;
  for (const auto& m : models_) {
    if (m->info().name == name) return m.get();
  }
  return nullptr;
}

Result<VaeModel*> ModelRegistry::Get(std::string_view name) const {
  VaeModel* m = Find(name);
  if (m != nullptr) return m;
  std::vector<std::string> names;
  for (const auto& model : models_) names.push_back(model->info().name);
  return NotFound("unknown model '" + std::string(name) + "' (available: " + JoinNames(names) +
                  ")");
}

const WeightsVerification* ModelRegistry::weights_verification(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i]->info().name == name) return &verifications_[i];
  }
  return nullptr;
}

std::vector<const VaeModel*> ModelRegistry::models() const {
  std::vector<const VaeModel*> out;
  out.reserve(models_.size());
  for (const auto& m : models_) out.push_back(m.get());
  return out;
}

}  // namespace vaed::models
