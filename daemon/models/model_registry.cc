#include "daemon/models/model_registry.h"

#include <set>
#include <utility>

#include "daemon/models/taef2.h"

namespace vaed::models {
namespace {

constexpr std::string_view kKindTaef2 = "taef2";
constexpr std::string_view kKindDemo = "demo";

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) s += ", ";
    s += names[i];
  }
  return s;
}

Status ValidateConfig(const std::vector<ModelConfig>& configs, const std::string& default_model) {
  if (configs.empty()) {
    return InvalidArgument("models: no model is configured; add at least one (kind taef2 or demo)");
  }
  std::set<std::string> seen;
  std::vector<std::string> names;
  for (size_t i = 0; i < configs.size(); ++i) {
    const ModelConfig& c = configs[i];
    const std::string where = "models[" + std::to_string(i) + "]";
    if (c.name.empty()) return InvalidArgument(where + ".name is empty");
    const std::string model = "model '" + c.name + "'";
    if (!seen.insert(c.name).second) {
      return InvalidArgument(where + ".name '" + c.name + "' is a duplicate; names must be unique");
    }
    names.push_back(c.name);
    if (c.kind == kKindTaef2) {
      if (c.weights_path.empty()) {
        return InvalidArgument(where + ".weights_path is empty; " + model +
                               " of kind taef2 needs the path of taef2_decoder.safetensors");
      }
      if (c.frame_batch < 1 || c.frame_batch > Taef2Decoder::kMaxFrames) {
        return InvalidArgument(where + ".frame_batch is " + std::to_string(c.frame_batch) +
                               "; must be in [1, " + std::to_string(Taef2Decoder::kMaxFrames) +
                               "]");
      }
    } else if (c.kind == kKindDemo) {
      if (!c.weights_path.empty()) {
        return InvalidArgument(where + ".weights_path is set for " + model +
                               " of kind demo, which generates its weights; remove it or use "
                               "kind taef2");
      }
    } else {
      return InvalidArgument("unknown model kind '" + c.kind + "' for model '" + c.name +
                             "' (known: taef2, demo)");
    }
  }
  if (seen.count(default_model) == 0) {
    return InvalidArgument("default_model '" + default_model +
                           "' is not a configured model (configured: " + JoinNames(names) + ")");
  }
  return Status::Ok();
}

}  // namespace

ModelRegistry::ModelRegistry(std::vector<std::unique_ptr<VaeModel>> models,
                             std::string default_model)
    : models_(std::move(models)), default_model_(std::move(default_model)) {}

ModelRegistry::~ModelRegistry() = default;

Result<std::unique_ptr<ModelRegistry>> ModelRegistry::Create(
    const std::vector<ModelConfig>& configs, std::string default_model) {
  VAED_RETURN_IF_ERROR(ValidateConfig(configs, default_model));
  std::vector<std::unique_ptr<VaeModel>> models;
  for (const ModelConfig& c : configs) {
    if (c.kind == kKindTaef2) {
      Taef2Options options;
      options.name = c.name;
      options.weights_path = c.weights_path;
      options.frame_batch = c.frame_batch;
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<Taef2Decoder> model, Taef2Decoder::Create(options));
      models.push_back(std::move(model));
    } else {
      VAED_ASSIGN_OR_RETURN(std::unique_ptr<Taef2Decoder> model,
                            Taef2Decoder::CreateDemo(c.name, c.seed));
      models.push_back(std::move(model));
    }
  }
  return std::unique_ptr<ModelRegistry>(
      new ModelRegistry(std::move(models), std::move(default_model)));
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

std::vector<const VaeModel*> ModelRegistry::models() const {
  std::vector<const VaeModel*> out;
  out.reserve(models_.size());
  for (const auto& m : models_) out.push_back(m.get());
  return out;
}

}  // namespace vaed::models
