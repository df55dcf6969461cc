#include "daemon/models/taef2.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>
#include <utility>

#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"
#include "vaed/safetensors.h"
#include "vaed/sha256.h"

namespace vaed::models {
namespace {

// safetensors data is little-endian and is copied into host tensors as is.
static_assert(std::endian::native == std::endian::little, "vaed assumes a little-endian host");

constexpr int64_t kC = 64;        // channels of every activation after module 1
constexpr int64_t kPoolC = 256;   // channels inside the MidBlock GroupNorm branch
constexpr int64_t kGnGroups = 4;  // README §4: 4 groups of 64 consecutive channels
constexpr double kGnEps = 1e-5;

// How CreateDemo() initialises a tensor; ignored when loading a file.
enum class Init {
  kConvRelu,      // followed by ReLU: He normal, std sqrt(2 / fan_in)
  kConvLinear,    // not followed by ReLU: std sqrt(1 / fan_in)
  kConvResidual,  // last conv of a residual branch: 0.2 * He, keeps the stack from growing
  kConvOutput,    // module 19: 0.75 / sqrt(fan_in); outputs spread ~0.15 around the bias
  kBias,          // normal, std 0.01
  kOutputBias,    // module 19 bias: 0.5, mid-grey
  kGnGamma,       // ones
  kGnBeta,        // zeros
};

struct Param {
  std::string key;  // state_dict key, README §4
  std::vector<int64_t> shape;
  torch::Tensor* slot;
  Init init;
};

}  // namespace

// Weights of one Block (README §4 "Block with prefix p."); the pool_*
// tensors are defined only for MidBlocks (modules 3, 4, 5). Not in the
// anonymous namespace because Taef2Decoder::Weights holds it.
struct Taef2BlockWeights {
  bool mid = false;
  torch::Tensor pool0_w, pool1_w, pool1_b, pool3_w;
  torch::Tensor conv0_w, conv0_b, conv2_w, conv2_b, conv4_w, conv4_b;
};

// All decoder weights, float32, contiguous, CPU.
struct Taef2Decoder::Weights {
  torch::Tensor in_w, in_b;                 // module 1
  std::array<Taef2BlockWeights, 3> mid;     // modules 3, 4, 5
  torch::Tensor up1_w;                      // module 7
  std::array<Taef2BlockWeights, 3> stage1;  // modules 8, 9, 10
  torch::Tensor up2_w;                      // module 12
  std::array<Taef2BlockWeights, 3> stage2;  // modules 13, 14, 15
  torch::Tensor up3_w;                      // module 17
  Taef2BlockWeights stage3;                 // module 18
  torch::Tensor out_w, out_b;               // module 19

  Weights() {
    for (Taef2BlockWeights& b : mid) b.mid = true;
  }

  // Every parameter with its key, shape and slot, in state_dict order.
  std::vector<Param> Params() {
    std::vector<Param> p;
    auto conv3 = [](int64_t out, int64_t in) { return std::vector<int64_t>{out, in, 3, 3}; };
    auto block = [&](int module, Taef2BlockWeights& b) {
      const std::string k = std::to_string(module) + ".";
      if (b.mid) {
        p.push_back({k + "pool.0.weight", {kPoolC, kC, 1, 1}, &b.pool0_w, Init::kConvLinear});
        p.push_back({k + "pool.1.weight", {kPoolC}, &b.pool1_w, Init::kGnGamma});
        p.push_back({k + "pool.1.bias", {kPoolC}, &b.pool1_b, Init::kGnBeta});
        p.push_back({k + "pool.3.weight", {kC, kPoolC, 1, 1}, &b.pool3_w, Init::kConvResidual});
      }
      p.push_back({k + "conv.0.weight", conv3(kC, kC), &b.conv0_w, Init::kConvRelu});
      p.push_back({k + "conv.0.bias", {kC}, &b.conv0_b, Init::kBias});
      p.push_back({k + "conv.2.weight", conv3(kC, kC), &b.conv2_w, Init::kConvRelu});
      p.push_back({k + "conv.2.bias", {kC}, &b.conv2_b, Init::kBias});
      p.push_back({k + "conv.4.weight", conv3(kC, kC), &b.conv4_w, Init::kConvResidual});
      p.push_back({k + "conv.4.bias", {kC}, &b.conv4_b, Init::kBias});
    };
    p.push_back({"1.weight", conv3(kC, Taef2Decoder::kLatentChannels), &in_w, Init::kConvRelu});
    p.push_back({"1.bias", {kC}, &in_b, Init::kBias});
    for (int i = 0; i < 3; ++i) block(3 + i, mid[i]);
    p.push_back({"7.weight", conv3(kC, kC), &up1_w, Init::kConvLinear});
    for (int i = 0; i < 3; ++i) block(8 + i, stage1[i]);
    p.push_back({"12.weight", conv3(kC, kC), &up2_w, Init::kConvLinear});
    for (int i = 0; i < 3; ++i) block(13 + i, stage2[i]);
    p.push_back({"17.weight", conv3(kC, kC), &up3_w, Init::kConvLinear});
    block(18, stage3);
    p.push_back({"19.weight", conv3(Taef2Decoder::kOutputChannels, kC), &out_w, Init::kConvOutput});
    p.push_back({"19.bias", {Taef2Decoder::kOutputChannels}, &out_b, Init::kOutputBias});
    return p;
  }
};

namespace {

// Copies one tensor out of the mapping (which may be misaligned) and casts
// it to float32. May throw c10::Error.
torch::Tensor ToFloatTensor(const TensorEntry& e) {
  return CopyOutOfMapping(e).to(torch::kFloat).contiguous();
}

uint64_t ResidentBytes(const std::vector<Param>& params) {
  uint64_t bytes = 0;
  for (const Param& p : params) bytes += static_cast<uint64_t>(p.slot->nbytes());
  return bytes;
}

torch::Tensor Conv3(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return torch::conv2d(x, w, b, /*stride=*/1, /*padding=*/1);
}

torch::Tensor Conv1(const torch::Tensor& x, const torch::Tensor& w) {
  return torch::conv2d(x, w);  // no bias, stride 1, no padding
}

// README §4 "Block(x)".
torch::Tensor RunBlock(torch::Tensor x, const Taef2BlockWeights& b) {
  if (b.mid) {
    torch::Tensor g = Conv1(x, b.pool0_w);
    g = torch::group_norm(g, kGnGroups, b.pool1_w, b.pool1_b, kGnEps).relu_();
    x = x + Conv1(g, b.pool3_w);
  }
  torch::Tensor h = Conv3(x, b.conv0_w, b.conv0_b).relu_();
  h = Conv3(h, b.conv2_w, b.conv2_b).relu_();
  h = Conv3(h, b.conv4_w, b.conv4_b);
  return h.add_(x).relu_();
}

// Nearest x2: out[y][x] = in[y/2][x/2] (README §4, modules 6, 11, 16).
torch::Tensor Upsample2x(const torch::Tensor& x) {
  return torch::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)});
}

std::string DimName(size_t i) {
  static const char* const kNames[] = {"frames", "channels", "height_latent", "width_latent"};
  return std::string("latent.shape[") + std::to_string(i) + "] (" + kNames[i] + ")";
}

}  // namespace

// ---- Tile plan ----

int64_t Taef2AxisTiles::extent_px() const { return extent_latent * Taef2Decoder::kUpscale; }
int64_t Taef2AxisTiles::tile_extent_px() const {
  return tile_extent_latent * Taef2Decoder::kUpscale;
}
int64_t Taef2AxisTiles::start_px(int64_t i) const {
  return start_latent[static_cast<size_t>(i)] * Taef2Decoder::kUpscale;
}
int64_t Taef2AxisTiles::end_px(int64_t i) const { return start_px(i) + tile_extent_px(); }

std::vector<float> Taef2AxisTiles::BlendWeights(int64_t i) const {
  std::vector<float> w(static_cast<size_t>(tile_extent_px()), 1.0f);
  const int64_t origin = start_px(i);
  // A ramp value (k + 0.5) / O: exact in double, and in float32 when O is a
  // power of two (README §5: multiples of 2^-8 for O = 128).
  auto ramp = [](int64_t k, int64_t o) {
    return (static_cast<double>(k) + 0.5) / static_cast<double>(o);
  };
  if (i > 0) {  // rising over the band of seam i-1; nothing of this tile before it
    const size_t s = static_cast<size_t>(i - 1);
    const int64_t begin = blend_begin_px[s], end = blend_end_px[s];
    for (int64_t p = origin; p < end; ++p) {
      w[static_cast<size_t>(p - origin)] =
          p < begin ? 0.0f : static_cast<float>(ramp(p - begin, end - begin));
    }
  }
  if (i + 1 < tiles()) {  // falling over the band of seam i; it ends where the tile does
    const size_t s = static_cast<size_t>(i);
    const int64_t begin = blend_begin_px[s], end = blend_end_px[s];
    for (int64_t p = begin; p < end; ++p) {
      w[static_cast<size_t>(p - origin)] = static_cast<float>(1.0 - ramp(p - begin, end - begin));
    }
  }
  return w;
}

Taef2TileRect Taef2TilePlan::tile(int64_t index) const {
  Taef2TileRect r;
  r.row = index / cols.tiles();
  r.col = index % cols.tiles();
  r.y_latent = rows.start_latent[static_cast<size_t>(r.row)];
  r.x_latent = cols.start_latent[static_cast<size_t>(r.col)];
  r.height_latent = rows.tile_extent_latent;
  r.width_latent = cols.tile_extent_latent;
  r.y_px = r.y_latent * Taef2Decoder::kUpscale;
  r.x_px = r.x_latent * Taef2Decoder::kUpscale;
  r.height_px = r.height_latent * Taef2Decoder::kUpscale;
  r.width_px = r.width_latent * Taef2Decoder::kUpscale;
  return r;
}

namespace {

// README §5 layout on one axis; arguments already validated.
Taef2AxisTiles PlanAxis(int64_t extent_latent, int64_t tile_latent, int64_t overlap_latent) {
  Taef2AxisTiles axis;
  axis.extent_latent = extent_latent;
  axis.tile_extent_latent = std::min(tile_latent, extent_latent);
  if (extent_latent <= tile_latent) {
    axis.start_latent = {0};
    return axis;
  }
  const int64_t step = tile_latent - overlap_latent;
  const int64_t last = extent_latent - tile_latent;
  for (int64_t s = 0; s < last; s += step) axis.start_latent.push_back(s);
  axis.start_latent.push_back(last);
  for (int64_t i = 0; i + 1 < axis.tiles(); ++i) {
    // Clipped at the end of tile i-1 so that no pixel lies in two bands
    // (possible only next to the end-aligned last tile).
    int64_t begin = axis.start_px(i + 1);
    if (i > 0) begin = std::max(begin, axis.end_px(i - 1));
    axis.blend_begin_px.push_back(begin);
    axis.blend_end_px.push_back(axis.end_px(i));
  }
  return axis;
}

// Deadline / cancellation (and the slow_tiles test fault) before a frame
// batch; throws DecodeCancelled, caught with the LibTorch errors.
void BeforeFrameBatch(const DecodeSettings& settings, int64_t begin, int64_t frames) {
  ThrowIfCancelled(settings.cancel, "before frame " + std::to_string(begin) + " of " +
                                        std::to_string(frames));
  if (settings.faults.slow_unit_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(settings.faults.slow_unit_ms));
  }
}

// Progress after a frame batch: `done` of `frames` pixel frames decoded.
void AfterFrameBatch(const DecodeSettings& settings, int64_t done, int64_t frames) {
  if (settings.progress) settings.progress({.done = done, .total = frames, .unit = "frames"});
}

}  // namespace

Result<Taef2TilePlan> PlanTaef2Tiles(int64_t height_latent, int64_t width_latent,
                                     int64_t tile_latent, int64_t overlap_latent) {
  const std::string bound = std::to_string(kTaef2MaxPlannerExtentLatent);
  const std::pair<const char*, int64_t> sizes[] = {{"height_latent", height_latent},
                                                   {"width_latent", width_latent},
                                                   {"tile_latent", tile_latent}};
  for (const auto& [field, value] : sizes) {
    if (value < 1 || value > kTaef2MaxPlannerExtentLatent) {
      return InvalidArgument(std::string("taef2 tiling: ") + field + " is " +
                             std::to_string(value) + "; must be in [1, " + bound +
                             "] latent cells");
    }
  }
  if (overlap_latent < 0 || overlap_latent >= tile_latent) {
    return InvalidArgument("taef2 tiling: overlap_latent is " + std::to_string(overlap_latent) +
                           "; must be >= 0 and < tile_latent (" + std::to_string(tile_latent) +
                           ")");
  }
  Taef2TilePlan plan;
  plan.tile_latent = tile_latent;
  plan.overlap_latent = overlap_latent;
  plan.rows = PlanAxis(height_latent, tile_latent, overlap_latent);
  plan.cols = PlanAxis(width_latent, tile_latent, overlap_latent);
  return plan;
}

// ---- Decoder ----

Taef2Decoder::Taef2Decoder(ModelInfo info, std::unique_ptr<Weights> weights, int64_t frame_batch)
    : info_(std::move(info)), weights_(std::move(weights)), frame_batch_(frame_batch) {}

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
  std::set<std::string> expected_keys;
  try {
    for (Param& p : params) {
      expected_keys.insert(p.key);
      // Any float dtype is accepted and cast; anything else is reported as
      // "expected float16", the dtype the official weights use.
      const TensorEntry* found = file.Find(p.key);
      const DType dtype =
          found != nullptr && IsFloatDType(found->dtype) ? found->dtype : DType::kFloat16;
      Result<const TensorEntry*> entry = file.Require(p.key, dtype, p.shape);
      if (!entry.ok()) return entry.status().WithContext(what);
      *p.slot = ToFloatTensor(**entry);
    }
  } catch (...) {
    return CurrentTorchErrorStatus(what + ": loading " + options.weights_path);
  }

  std::vector<std::string> unexpected;
  for (const std::string& name : file.names()) {
    if (expected_keys.count(name) == 0) unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 5; ++i) {
      list += (i ? ", '" : "'") + unexpected[i] + "'";
    }
    if (unexpected.size() > 5) list += ", ...";
    return InvalidArgument(
        what + ": " + options.weights_path + " holds " + std::to_string(unexpected.size()) +
        " tensors that are not TAEF2 decoder parameters (" + list + "); expected exactly the " +
        std::to_string(kNumWeightTensors) + " decoder tensors (is this the encoder file?)");
  }

  Result<std::string> sha = Sha256File(options.weights_path);
  if (!sha.ok()) return sha.status().WithContext(what);

  ModelInfo info;
  info.name = options.name;
  info.kind = "taef2";
  info.description =
      "TAEF2 decoder (tiny autoencoder for the FLUX.2 VAE): 32-channel latent -> RGB at 8x, "
      "fp32 on CPU";
  info.weights_path = options.weights_path;
  info.weights_sha256 = *sha;
  info.demo_weights = false;
  info.resident_bytes = ResidentBytes(params);
  info.latent_channels = kLatentChannels;
  info.latent_dtype = DType::kFloat32;
  // Untiled by default (its GroupNorm makes independent tiles 29 dB off);
  // the hybrid tiled decode (63 dB) is an opt-in diagnostic knob.
  info.caps.tunable_tiling = true;
  info.caps.spatial_sharding = true;  // its hybrid tiling (settings.tiling) only
  info.caps.independent_group = true;

  spdlog::info(
      "model '{}': loaded TAEF2 decoder weights {} ({} tensors, {} bytes as fp32, "
      "sha256 {})",
      info.name, info.weights_path, params.size(), info.resident_bytes, info.weights_sha256);
  return std::unique_ptr<Taef2Decoder>(
      new Taef2Decoder(std::move(info), std::move(weights), options.frame_batch));
}

Result<std::unique_ptr<Taef2Decoder>> Taef2Decoder::CreateDemo(const std::string& name,
                                                               uint64_t seed) {
  if (name.empty()) return InvalidArgument("demo model: name is empty");
  auto weights = std::make_unique<Weights>();
  std::vector<Param> params = weights->Params();
  try {
    torch::NoGradGuard no_grad;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    for (Param& p : params) {
      const int64_t fan_in =
          p.shape.size() == 4 ? p.shape[1] * p.shape[2] * p.shape[3] : int64_t{1};
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
          *p.slot = torch::full(p.shape, 0.5, f32);
          continue;
        case Init::kGnGamma:
          *p.slot = torch::ones(p.shape, f32);
          continue;
        case Init::kGnBeta:
          *p.slot = torch::zeros(p.shape, f32);
          continue;
      }
      *p.slot = torch::randn(p.shape, gen, f32).mul_(std);
    }
  } catch (...) {
    return CurrentTorchErrorStatus("demo model '" + name + "': generating weights");
  }

  ModelInfo info;
  info.name = name;
  info.kind = "demo";
  info.description =
      "DEMO: deterministic seeded weights, not a trained model (TAEF2 "
      "architecture, seed " +
      std::to_string(seed) + ")";
  info.demo_weights = true;
  info.resident_bytes = ResidentBytes(params);
  info.latent_channels = kLatentChannels;
  info.latent_dtype = DType::kFloat32;
  // Untiled by default (its GroupNorm makes independent tiles 29 dB off);
  // the hybrid tiled decode (63 dB) is an opt-in diagnostic knob.
  info.caps.tunable_tiling = true;
  info.caps.spatial_sharding = true;  // its hybrid tiling (settings.tiling) only
  info.caps.independent_group = true;

  spdlog::warn(
      "model '{}': DEMO weights (deterministic, seed {}), not a trained model; its "
      "output is not an image",
      name, seed);
  return std::unique_ptr<Taef2Decoder>(
      new Taef2Decoder(std::move(info), std::move(weights), Taef2Options{}.frame_batch));
}

int64_t Taef2Decoder::TilesPerUnit(const std::vector<int64_t>& latent_shape,
                                   const DecodeSettings& settings) const {
  if (!settings.tiling || latent_shape.size() != 4) return 0;
  Result<Taef2TilePlan> tiles = PlanTaef2Tiles(latent_shape[2], latent_shape[3],
                                               settings.tiling->tile_latent,
                                               settings.tiling->overlap_latent);
  return tiles.ok() ? tiles->num_tiles() : 1;
}

Result<DecodePlan> Taef2Decoder::Plan(DType latent_dtype,
                                      const std::vector<int64_t>& latent_shape) const {
  const std::string model = "model '" + info_.name + "'";
  VAED_RETURN_IF_ERROR(CheckLatentDtypeAndRank(info_, latent_dtype, latent_shape,
                                               {"frames", "32", "height_latent", "width_latent"}));
  for (size_t i = 0; i < 4; ++i) {
    if (latent_shape[i] < 1) {
      return InvalidArgument(DimName(i) + " is " + std::to_string(latent_shape[i]) +
                             "; must be >= 1");
    }
  }
  if (latent_shape[1] != kLatentChannels) {
    return InvalidArgument(DimName(1) + " is " + std::to_string(latent_shape[1]) + "; " + model +
                           " needs 32 latent channels");
  }
  if (latent_shape[0] > kMaxFrames) {
    return InvalidArgument(DimName(0) + " is " + std::to_string(latent_shape[0]) + "; " + model +
                           " accepts at most " + std::to_string(kMaxFrames) +
                           " frames per request");
  }
  for (size_t i = 2; i < 4; ++i) {
    if (latent_shape[i] > kMaxLatentExtent) {
      return InvalidArgument(DimName(i) + " is " + std::to_string(latent_shape[i]) + "; " + model +
                             " accepts at most " + std::to_string(kMaxLatentExtent) +
                             " latent cells (" + std::to_string(kMaxLatentExtent * kUpscale) +
                             " px)");
    }
  }
  DecodePlan plan;
  plan.frames = latent_shape[0];
  plan.channels = kOutputChannels;
  plan.height_px = latent_shape[2] * kUpscale;
  plan.width_px = latent_shape[3] * kUpscale;
  plan.shape_bucket =
      info_.name + ":" + std::to_string(latent_shape[2]) + "x" + std::to_string(latent_shape[3]);
  return plan;
}

torch::Tensor Taef2Decoder::Forward(const torch::Tensor& latent) const {
  return Tail(Stem(latent));
}

torch::Tensor Taef2Decoder::Stem(const torch::Tensor& latent) const {
  const Weights& w = *weights_;
  torch::Tensor x = torch::tanh(latent / 3.0).mul_(3.0);  // module 0, soft clamp
  x = Conv3(x, w.in_w, w.in_b).relu_();                   // modules 1, 2
  for (const Taef2BlockWeights& b : w.mid) x = RunBlock(std::move(x), b);
  return x;
}

torch::Tensor Taef2Decoder::Tail(const torch::Tensor& features) const {
  const Weights& w = *weights_;
  torch::Tensor x = Conv3(Upsample2x(features), w.up1_w, {});  // modules 6, 7
  for (const Taef2BlockWeights& b : w.stage1) x = RunBlock(std::move(x), b);
  x = Conv3(Upsample2x(x), w.up2_w, {});  // modules 11, 12
  for (const Taef2BlockWeights& b : w.stage2) x = RunBlock(std::move(x), b);
  x = Conv3(Upsample2x(x), w.up3_w, {});  // modules 16, 17
  x = RunBlock(std::move(x), w.stage3);
  return Conv3(x, w.out_w, w.out_b);  // module 19, no activation
}

Result<torch::Tensor> Taef2Decoder::Decode(const torch::Tensor& latent,
                                           const DecodeSettings& settings,
                                           DecodeReport* report) {
  if (settings.tiling) {
    // The diagnostic knob (decode_options.h): the hybrid tiled decode.
    return DecodeTiledHybrid(latent,
                             Taef2TilingOptions{.tile_latent = settings.tiling->tile_latent,
                                                .overlap_latent = settings.tiling->overlap_latent},
                             report, settings);
  }
  VAED_ASSIGN_OR_RETURN(DecodePlan plan, PlanCpuLatent(latent));
  try {
    torch::NoGradGuard no_grad;
    const auto start = std::chrono::steady_clock::now();
    // Peak memory grows with frames x latent cells per forward call, so
    // large frames go through in smaller batches (kMaxCellsPerForward).
    const int64_t cells = latent.size(2) * latent.size(3);
    const int64_t batch =
        std::clamp<int64_t>(kMaxCellsPerForward / std::max<int64_t>(cells, 1), 1, frame_batch_);
    torch::Tensor out;
    if (plan.frames <= batch) {
      BeforeFrameBatch(settings, 0, plan.frames);
      out = Forward(latent);
      AfterFrameBatch(settings, plan.frames, plan.frames);
    } else {
      out = torch::empty({plan.frames, plan.channels, plan.height_px, plan.width_px},
                         torch::TensorOptions().dtype(torch::kFloat));
      for (int64_t begin = 0; begin < plan.frames; begin += batch) {
        const int64_t n = std::min(batch, plan.frames - begin);
        BeforeFrameBatch(settings, begin, plan.frames);
        out.narrow(0, begin, n).copy_(Forward(latent.narrow(0, begin, n)));
        AfterFrameBatch(settings, begin + n, plan.frames);
      }
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (report != nullptr) report->timings.Add("taef2.decode_latent", elapsed.count());
    return out;
  } catch (...) {
    return CurrentTorchErrorStatus("model '" + info_.name + "': decode of latent " +
                                   ShapeToString(latent.sizes().vec()));
  }
}

Result<torch::Tensor> Taef2Decoder::DecodeTiledHybrid(const torch::Tensor& latent,
                                                      const Taef2TilingOptions& options,
                                                      DecodeReport* report,
                                                      const DecodeSettings& settings) {
  VAED_ASSIGN_OR_RETURN(DecodePlan plan, PlanCpuLatent(latent));
  VAED_ASSIGN_OR_RETURN(
      Taef2TilePlan tiles,
      PlanTaef2Tiles(latent.size(2), latent.size(3), options.tile_latent, options.overlap_latent));
  try {
    torch::NoGradGuard no_grad;
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::chrono::duration<double> stem_seconds{0}, tiles_seconds{0};

    // 2-D weights w_y(y) * w_x(x) per tile, formed before they meet the
    // tile so that each output term is one rounding of (exact weight) x
    // tile, as in the reference.
    std::vector<torch::Tensor> row_w, col_w;
    for (int64_t i = 0; i < tiles.rows.tiles(); ++i) {
      row_w.push_back(torch::tensor(tiles.rows.BlendWeights(i), torch::kFloat).view({-1, 1}));
    }
    for (int64_t i = 0; i < tiles.cols.tiles(); ++i) {
      col_w.push_back(torch::tensor(tiles.cols.BlendWeights(i), torch::kFloat).view({1, -1}));
    }

    // After the stem, peak memory follows frames x tile cells (the stem's
    // own activations are 64 channels at latent resolution, 1/64 of that).
    const int64_t tile_cells = tiles.rows.tile_extent_latent * tiles.cols.tile_extent_latent;
    const int64_t batch = std::clamp<int64_t>(
        kMaxCellsPerForward / std::max<int64_t>(tile_cells, 1), 1, frame_batch_);
    // Tile-parallel (tile_group.h): each rank runs the stem on the whole
    // batch (it is global), the tails of its own tiles, and the tiles go to
    // rank 0, which blends them in tile order as the single-rank path does.
    TileGroup* group = settings.group;
    const bool distributed = group != nullptr && group->size() > 1;
    const bool output_rank = !distributed || group->rank() == 0;
    TileCommunicationStats communication;
    torch::Tensor out;
    if (output_rank) {
      out = torch::zeros({plan.frames, plan.channels, plan.height_px, plan.width_px},
                         torch::TensorOptions().dtype(torch::kFloat));
    }
    int64_t calls = 0;
    for (int64_t begin = 0; begin < plan.frames; begin += batch) {
      const int64_t n = std::min(batch, plan.frames - begin);
      BeforeFrameBatch(settings, begin, plan.frames);
      auto t0 = Clock::now();
      const torch::Tensor feat = Stem(latent.narrow(0, begin, n));
      auto t1 = Clock::now();
      stem_seconds += t1 - t0;
      auto tail = [&](int64_t i) {
        const Taef2TileRect r = tiles.tile(i);
        ++calls;
        return Tail(feat.narrow(2, r.y_latent, r.height_latent)
                        .narrow(3, r.x_latent, r.width_latent)
                        .contiguous());
      };
      auto accumulate = [&](int64_t i, const torch::Tensor& tile_out) {
        const Taef2TileRect r = tiles.tile(i);
        // add_ of a separately rounded product, not addcmul_, which may fuse.
        out.narrow(0, begin, n)
            .narrow(2, r.y_px, r.height_px)
            .narrow(3, r.x_px, r.width_px)
            .add_(tile_out.mul(row_w[static_cast<size_t>(r.row)] *
                               col_w[static_cast<size_t>(r.col)]));
      };
      if (!distributed) {
        for (int64_t i = 0; i < tiles.num_tiles(); ++i) accumulate(i, tail(i));
        tiles_seconds += Clock::now() - t1;
        AfterFrameBatch(settings, begin + n, plan.frames);
        continue;
      }
      std::vector<torch::Tensor> mine;
      for (int64_t i = 0; i < tiles.num_tiles(); ++i) {
        if (group->Owns(i)) mine.push_back(tail(i));
      }
      const double communication_before = communication.seconds;
      std::vector<torch::Tensor> all = GatherTiles(
          *group, tiles.num_tiles(),
          [&](int64_t i) {
            const Taef2TileRect r = tiles.tile(i);
            return std::vector<int64_t>{n, plan.channels, r.height_px, r.width_px};
          },
          mine, &communication);
      if (output_rank) {
        for (int64_t i = 0; i < tiles.num_tiles(); ++i) accumulate(i, all[static_cast<size_t>(i)]);
      }
      tiles_seconds += Clock::now() - t1 -
                       std::chrono::duration<double>(communication.seconds - communication_before);
      AfterFrameBatch(settings, begin + n, plan.frames);
    }
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    if (report != nullptr) {
      report->timings.Add("taef2.stem", stem_seconds.count());
      report->timings.Add("taef2.tiles", tiles_seconds.count());
      if (communication.collectives > 0) {
        report->timings.Add("taef2.tile_communication", communication.seconds);
      }
      report->timings.Add("taef2.decode_latent", elapsed.count());
      report->tiling.tiled = true;
      report->tiling.tile_rows = tiles.rows.tiles();
      report->tiling.tile_cols = tiles.cols.tiles();
      report->tiling.decoder_calls = calls;
      report->tiling.tiles_decoded_here = calls;
      report->tiling.max_tiles_per_call = 1;
    }
    return out;
  } catch (...) {
    return CurrentTorchErrorStatus("model '" + info_.name + "': hybrid tiled decode of latent " +
                                   ShapeToString(latent.sizes().vec()) + " (tile_latent " +
                                   std::to_string(options.tile_latent) + ", overlap_latent " +
                                   std::to_string(options.overlap_latent) + ")");
  }
}

}  // namespace vaed::models
