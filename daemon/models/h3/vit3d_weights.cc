// The H3 ViT3D decoder's weight table (vit3d_weights.h) and its
// deterministic random weights (Vit3dDecoder::CreateRandom).
#include "daemon/models/h3/vit3d_weights.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "daemon/models/device_placement.h"
#include "daemon/models/h3/vit3d_decoder.h"
#include "daemon/models/torch_status.h"

namespace vaed::models::h3 {
namespace vit3d {

// THE name-mapping table (spec §1.5 (a) and (b); the diffusers conventions
// are verified in vit3d_load.cc above Assemble()).
std::vector<WeightSpec> Weights::Table(const VideoDecoderConfig& c) {
  const int64_t C = c.latent_channels, D = c.dim, F = c.ffn_inner, P = c.patch_dim();
  const int64_t QKV = 3 * c.heads * c.dim_head;
  blocks.resize(static_cast<size_t>(c.depth));
  std::vector<WeightSpec> t;
  auto same = [&](const std::string& key, std::vector<int64_t> shape, Store store, Init init,
                  int64_t fan_in, torch::Tensor* slot) {
    t.push_back({key, {key}, Convert::kNone, std::move(shape), store, init, fan_in, slot});
  };
  auto renamed = [&](const std::string& key, const std::string& diffusers,
                     std::vector<int64_t> shape, Store store, Init init, int64_t fan_in,
                     torch::Tensor* slot) {
    t.push_back({key, {diffusers}, Convert::kNone, std::move(shape), store, init, fan_in, slot});
  };
  same("post_quant_conv.weight", {C, C, 1, 1, 1}, Store::kCompute, Init::kFanIn, C, &pqc_w);
  same("post_quant_conv.bias", {C}, Store::kCompute, Init::kBias, 1, &pqc_b);
  renamed("decoder.x_embedder.weight", "decoder.proj_in.weight", {D, C}, Store::kFp32,
          Init::kFanIn, C, &embed_w);
  renamed("decoder.x_embedder.bias", "decoder.proj_in.bias", {D}, Store::kFp32, Init::kBias, 1,
          &embed_b);
  same("decoder.register_tokens", {1, c.num_register_tokens, D}, Store::kFp32, Init::kToken, 1,
       &registers);
  for (int64_t i = 0; i < c.depth; ++i) {
    BlockWeights& b = blocks[static_cast<size_t>(i)];
    const std::string p = "decoder.transformer_blocks." + std::to_string(i) + ".";
    same(p + "norm1.weight", {D}, Store::kFp32, Init::kOnes, 1, &b.norm1_w);
    for (const auto& [suffix, shape, init, slot] :
         {std::tuple{std::string("weight"), std::vector<int64_t>{QKV, D}, Init::kFanIn, &b.qkv_w},
          std::tuple{std::string("bias"), std::vector<int64_t>{QKV}, Init::kBias, &b.qkv_b}}) {
      t.push_back(
          {p + "attn.to_qkv." + suffix,
           {p + "attn.to_q." + suffix, p + "attn.to_k." + suffix, p + "attn.to_v." + suffix},
           Convert::kInterleaveQkv,
           shape,
           Store::kCompute,
           init,
           D,
           slot});
    }
    renamed(p + "attn.to_out.weight", p + "attn.to_out.0.weight", {D, D}, Store::kCompute,
            Init::kFanIn, D, &b.out_w);
    renamed(p + "attn.to_out.bias", p + "attn.to_out.0.bias", {D}, Store::kCompute, Init::kBias,
            1, &b.out_b);
    same(p + "scale1", {D}, Store::kFp32, Init::kScale, 1, &b.scale1);
    same(p + "scale2", {D}, Store::kFp32, Init::kScale, 1, &b.scale2);
    same(p + "norm2.weight", {D}, Store::kFp32, Init::kOnes, 1, &b.norm2_w);
    t.push_back({p + "ff.w1.weight",
                 {p + "ff.net.0.proj.weight"},
                 Convert::kSwapHalves,
                 {2 * F, D},
                 Store::kCompute,
                 Init::kFanIn,
                 D,
                 &b.w1_w});
    t.push_back({p + "ff.w1.bias",
                 {p + "ff.net.0.proj.bias"},
                 Convert::kSwapHalves,
                 {2 * F},
                 Store::kCompute,
                 Init::kBias,
                 1,
                 &b.w1_b});
    renamed(p + "ff.w2.weight", p + "ff.net.2.weight", {D, F}, Store::kCompute, Init::kFanIn, F,
            &b.w2_w);
    renamed(p + "ff.w2.bias", p + "ff.net.2.bias", {D}, Store::kCompute, Init::kBias, 1, &b.w2_b);
  }
  same("decoder.norm_out.weight", {D}, Store::kFp32, Init::kOnes, 1, &norm_out_w);
  same("decoder.norm_out.bias", {D}, Store::kFp32, Init::kZeros, 1, &norm_out_b);
  same("decoder.proj_out.weight", {P, D}, Store::kFp32, Init::kFanIn, D, &proj_w);
  same("decoder.proj_out.bias", {P}, Store::kFp32, Init::kZeros, 1, &proj_b);
  return t;
}

uint64_t ResidentBytes(const std::vector<WeightSpec>& table) {
  uint64_t bytes = 0;
  for (const WeightSpec& s : table) bytes += static_cast<uint64_t>(s.slot->nbytes());
  return bytes;
}

Status PlaceWeights(const std::vector<WeightSpec>& table, const torch::Device& device) {
  std::vector<torch::Tensor*> slots;
  slots.reserve(table.size());
  for (const WeightSpec& spec : table) slots.push_back(spec.slot);
  return MoveTensorsTo(slots, device, "h3 video decoder");
}

Status CheckCreateArgs(const VideoDecoderConfig& config, torch::ScalarType compute_dtype) {
  Status valid = config.Validate();
  if (!valid.ok()) return valid.WithContext("h3 video decoder config");
  if (compute_dtype != torch::kFloat && compute_dtype != torch::kHalf &&
      compute_dtype != torch::kBFloat16) {
    return InvalidArgument(std::string("h3 video decoder: compute_dtype ") +
                           c10::toString(compute_dtype) +
                           " is not supported (float32, float16, bfloat16)");
  }
  return Status::Ok();
}

}  // namespace vit3d

const char* WeightLayoutName(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kRandom:
      return "random";
    case WeightLayout::kOriginal:
      return "original";
    case WeightLayout::kDiffusers:
      return "diffusers";
  }
  return "unknown";
}

namespace {

// Drawing 2.4e9 values one by one takes about a minute; instead every
// tensor is a window of one seeded pool of unit-variance values starting at
// a seeded offset (the pool size is odd, so rows of a matrix start at
// different phases), scaled by its init. Good enough for smoke tests and
// benchmarks; generation is bound by memory bandwidth.
class RandomPool {
 public:
  // May throw c10::Error.
  RandomPool(uint64_t seed, torch::ScalarType compute_dtype)
      : gen_(at::detail::createCPUGenerator(seed)) {
    pool32_ = torch::empty({kPool}, torch::TensorOptions().dtype(torch::kFloat))
                  .uniform_(-std::sqrt(3.0), std::sqrt(3.0), gen_);
    pool_compute_ = pool32_.to(compute_dtype);
  }

  // The value of `spec` (its Init rule), stored as `store` (fp32 or the
  // compute dtype). May throw c10::Error.
  torch::Tensor Draw(const vit3d::WeightSpec& spec, torch::ScalarType store) {
    using vit3d::Init;
    const auto opts = torch::TensorOptions().dtype(store);
    double scale = 1.0;
    switch (spec.init) {
      case Init::kFanIn:
        scale = 1.0 / std::sqrt(static_cast<double>(spec.fan_in));
        break;
      case Init::kBias:
        scale = 0.02;
        break;
      case Init::kToken:
        scale = 1.0;
        break;
      case Init::kScale:
        return torch::full(spec.shape, 0.1, opts);
      case Init::kOnes:
        return torch::ones(spec.shape, opts);
      case Init::kZeros:
        return torch::zeros(spec.shape, opts);
    }
    const torch::Tensor& pool = store == torch::kFloat ? pool32_ : pool_compute_;
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    torch::Tensor flat = torch::empty({n}, opts);
    int64_t pos = torch::randint(kPool, {1}, gen_, torch::TensorOptions().dtype(torch::kLong))
                      .item<int64_t>();
    for (int64_t done = 0; done < n; pos = 0) {
      const int64_t len = std::min(n - done, kPool - pos);
      flat.narrow(0, done, len).copy_(pool.narrow(0, pos, len));
      done += len;
    }
    return flat.mul_(scale).view(spec.shape);
  }

 private:
  static constexpr int64_t kPool = (int64_t{1} << 24) + 1;
  at::Generator gen_;
  torch::Tensor pool32_, pool_compute_;
};

}  // namespace

Result<std::unique_ptr<Vit3dDecoder>> Vit3dDecoder::CreateRandom(const VideoDecoderConfig& config,
                                                                 uint64_t seed,
                                                                 torch::ScalarType compute_dtype,
                                                                 torch::Device device) {
  VAED_RETURN_IF_ERROR(vit3d::CheckCreateArgs(config, compute_dtype));
  auto weights = std::make_unique<vit3d::Weights>();
  std::vector<vit3d::WeightSpec> table = weights->Table(config);
  try {
    torch::NoGradGuard no_grad;
    RandomPool pool(seed, compute_dtype);
    for (vit3d::WeightSpec& spec : table) {
      *spec.slot = pool.Draw(spec, vit3d::StorageDtype(spec, compute_dtype));
    }
  } catch (...) {
    return CurrentTorchErrorStatus("h3 video decoder: generating random weights");
  }
  VAED_RETURN_IF_ERROR(vit3d::PlaceWeights(table, device));
  auto decoder = std::unique_ptr<Vit3dDecoder>(new Vit3dDecoder(
      config, compute_dtype, device, WeightLayout::kRandom, std::move(weights), {}));
  spdlog::info(
      "h3 video decoder: RANDOM weights (seed {}), {} blocks, dim {}, compute {}, {} bytes "
      "resident on {}; not a trained model",
      seed, config.depth, config.dim, c10::toString(compute_dtype), decoder->resident_bytes(),
      DeviceName(device));
  return decoder;
}

}  // namespace vaed::models::h3
