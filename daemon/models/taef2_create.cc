// Construction of the TAEF2 decoder: weights from a safetensors file
// (Create) or generated from a seed (CreateDemo), and the ModelInfo both
// report.
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <bit>
#include <cmath>
#include <set>
#include <utility>

#include "daemon/models/device_placement.h"
#include "daemon/models/safetensors.h"
#include "daemon/models/taef2.h"
#include "daemon/models/taef2_network.h"
#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"
#include "daemon/models/weight_verification.h"

namespace vaed::models {
namespace {

using taef2::Init;
using taef2::Param;

// safetensors data is little-endian and is copied into host tensors as is.
static_assert(std::endian::native == std::endian::little, "vaed assumes a little-endian host");

// Moves every parameter to `device` (device_placement.h). Errors name `what`.
Status PlaceParams(const std::vector<Param>& params, const torch::Device& device,
                   const std::string& what) {
  std::vector<torch::Tensor*> slots;
  slots.reserve(params.size());
  for (const Param& p : params) slots.push_back(p.slot);
  return MoveTensorsTo(slots, device, what);
}

// What both constructors report besides name, kind and provenance.
ModelInfo Taef2Info(std::string name, std::string kind, std::string description,
                    const std::vector<Param>& params, const torch::Device& device) {
  ModelInfo info;
  info.device = DeviceName(device);
  info.name = std::move(name);
  info.kind = std::move(kind);
  info.description = std::move(description);
  info.resident_bytes = taef2::ResidentBytes(params);
  info.latent_channels = Taef2Decoder::kLatentChannels;
  info.latent_dtype = DType::kFloat32;
  // Untiled by default (its GroupNorm makes independent tiles 29 dB off);
  // the hybrid tiled decode (63 dB) is an opt-in diagnostic knob.
  info.caps.tunable_tiling = true;
  info.caps.spatial_sharding = true;  // its hybrid tiling (settings.tiling) only
  info.caps.independent_group = true;
  return info;
}

// Fills every parameter from `file`, cast to float32. Errors name `what`.
Status LoadParams(const SafetensorsFile& file, std::vector<Param>& params,
                  const std::string& what) {
  try {
    for (Param& p : params) {
      // Any float dtype is accepted and cast; anything else is reported as
      // "expected float16", the dtype the official weights use.
      const TensorEntry* found = file.Find(p.key);
      const DType dtype =
          found != nullptr && IsFloatDType(found->dtype) ? found->dtype : DType::kFloat16;
      Result<const TensorEntry*> entry = file.Require(p.key, dtype, p.shape);
      if (!entry.ok()) return entry.status().WithContext(what);
      // Copied out of the mapping (which may be misaligned), then cast.
      *p.slot = CopyOutOfMapping(**entry).to(torch::kFloat).contiguous();
    }
  } catch (...) {
    return CurrentTorchErrorStatus(what + ": loading " + file.path());
  }
  return Status::Ok();
}

// kInvalidArgument when `file` holds tensors that are not parameters (the
// encoder file, say), naming up to 5 of them.
Status CheckNoUnexpectedTensors(const SafetensorsFile& file, const std::vector<Param>& params,
                                const std::string& what) {
  std::set<std::string> expected_keys;
  for (const Param& p : params) expected_keys.insert(p.key);
  std::vector<std::string> unexpected;
  for (const std::string& name : file.names()) {
    if (expected_keys.count(name) == 0) unexpected.push_back(name);
  }
  if (unexpected.empty()) return Status::Ok();
  std::string list;
  for (size_t i = 0; i < unexpected.size() && i < 5; ++i) {
    list += (i ? ", '" : "'") + unexpected[i] + "'";
  }
  if (unexpected.size() > 5) list += ", ...";
  return InvalidArgument(
      what + ": " + file.path() + " holds " + std::to_string(unexpected.size()) +
      " tensors that are not TAEF2 decoder parameters (" + list + "); expected exactly the " +
      std::to_string(Taef2Decoder::kNumWeightTensors) +
      " decoder tensors (is this the encoder file?)");
}

// CreateDemo()'s value of one parameter (its Init rule). May throw c10::Error.
torch::Tensor DemoTensor(const Param& p, at::Generator& gen) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  const int64_t fan_in = p.shape.size() == 4 ? p.shape[1] * p.shape[2] * p.shape[3] : int64_t{1};
  double std = 0.0;
  switch (p.init) {
    case Init::kConvRelu:
      std = std::sqrt(2.0 / fan_in);
      break;
    case Init::kConvLinear:
      std = std::sqrt(1.0 / fan_in);
      break;
    case Init::kConvResidual:
      std = 0.2 * std::sqrt(2.0 / fan_in);
      break;
    case Init::kConvOutput:
      std = 0.75 * std::sqrt(1.0 / fan_in);
      break;
    case Init::kBias:
      std = 0.01;
      break;
    case Init::kOutputBias:
      return torch::full(p.shape, 0.5, f32);
    case Init::kGnGamma:
      return torch::ones(p.shape, f32);
    case Init::kGnBeta:
      return torch::zeros(p.shape, f32);
  }
  return torch::randn(p.shape, gen, f32).mul_(std);
}

}  // namespace

Taef2Decoder::Taef2Decoder(ModelInfo info, std::unique_ptr<Weights> weights, int64_t frame_batch,
                           torch::Device device)
    : info_(std::move(info)),
      weights_(std::move(weights)),
      frame_batch_(frame_batch),
      device_(device) {}

Taef2Decoder::~Taef2Decoder() = default;

Result<std::unique_ptr<Taef2Decoder>> Taef2Decoder::Create(const Taef2Options& options) {
  if (options.name.empty()) return InvalidArgument("taef2: options.name is empty");
  const std::string what = "model '" + options.name + "'";
  if (options.weights_path.empty()) {
    return InvalidArgument(what + ": weights_path is empty; set it to taef2_decoder.safetensors");
  }
  if (options.frame_batch < 1 || options.frame_batch > kMaxFrames) {
    return InvalidArgument(what + ": frame_batch is " + std::to_string(options.frame_batch) +
                           "; must be in [1, " + std::to_string(kMaxFrames) + "]");
  }

  Result<std::unique_ptr<SafetensorsFile>> opened = SafetensorsFile::Open(options.weights_path);
  if (!opened.ok()) return opened.status().WithContext(what);
  const SafetensorsFile& file = **opened;
  auto weights = std::make_unique<Weights>();
  std::vector<Param> params = weights->Params();
  VAED_RETURN_IF_ERROR(LoadParams(file, params, what));
  VAED_RETURN_IF_ERROR(CheckNoUnexpectedTensors(file, params, what));
  Result<std::string> sha = WeightFileSha256(options.weights_path);
  if (!sha.ok()) return sha.status().WithContext(what);
  VAED_RETURN_IF_ERROR(PlaceParams(params, options.device, what));

  ModelInfo info = Taef2Info(
      options.name, "taef2",
      "TAEF2 decoder (tiny autoencoder for the FLUX.2 VAE): 32-channel latent -> RGB at 8x, "
      "fp32 on " +
          DeviceName(options.device),
      params, options.device);
  info.weights_path = options.weights_path;
  info.weights_sha256 = *sha;
  info.demo_weights = false;
  spdlog::info(
      "model '{}': loaded TAEF2 decoder weights {} ({} tensors, {} bytes as fp32, "
      "sha256 {})",
      info.name, info.weights_path, params.size(), info.resident_bytes, info.weights_sha256);
  return std::unique_ptr<Taef2Decoder>(
      new Taef2Decoder(std::move(info), std::move(weights), options.frame_batch, options.device));
}

Result<std::unique_ptr<Taef2Decoder>> Taef2Decoder::CreateDemo(const std::string& name,
                                                               uint64_t seed,
                                                               torch::Device device) {
  if (name.empty()) return InvalidArgument("demo model: name is empty");
  auto weights = std::make_unique<Weights>();
  std::vector<Param> params = weights->Params();
  try {
    torch::NoGradGuard no_grad;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    for (Param& p : params) *p.slot = DemoTensor(p, gen);
  } catch (...) {
    return CurrentTorchErrorStatus("demo model '" + name + "': generating weights");
  }
  VAED_RETURN_IF_ERROR(PlaceParams(params, device, "demo model '" + name + "'"));

  ModelInfo info = Taef2Info(name, "demo",
                             "DEMO: deterministic seeded weights, not a trained model (TAEF2 "
                             "architecture, seed " +
                                 std::to_string(seed) + ")",
                             params, device);
  info.demo_weights = true;
  spdlog::warn(
      "model '{}': DEMO weights (deterministic, seed {}), not a trained model; its "
      "output is not an image",
      name, seed);
  return std::unique_ptr<Taef2Decoder>(
      new Taef2Decoder(std::move(info), std::move(weights), Taef2Options{}.frame_batch, device));
}

}  // namespace vaed::models
