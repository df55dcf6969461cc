#include "daemon/models/h3/vit3d_decoder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"
#include "vaed/safetensors.h"
#include "vaed/sha256.h"

namespace vaed::models::h3 {
namespace {

// safetensors data is little-endian and is copied into host tensors as is.
static_assert(std::endian::native == std::endian::little, "vaed assumes a little-endian host");

// How a diffusers tensor becomes the original-layout tensor.
//
// Verified against huggingface/diffusers at commit 58eb52c0803e (2026-08-23):
//  * scripts/convert_minimax_h3_to_diffusers.py:327-368 (convert_video_vae_key)
//    splits the original per-head interleaved attn.to_qkv ([head0: q k v,
//    head1: q k v, ...], lines 110-132 reorder_interleaved_qkv, then
//    split_fused_qkv lines 135-151) into contiguous to_q / to_k / to_v, each
//    [heads*dim_head, dim] with row h*dim_head+d; the model consumes them
//    head-major via .unflatten(2, (heads, -1))
//    (src/diffusers/models/autoencoders/autoencoder_kl_minimax_h3.py:309-311).
//    So to_qkv row h*3*dh + j = to_q row h*dh + j (j < dh), to_k row
//    h*dh + j - dh (dh <= j < 2dh), to_v row h*dh + j - 2dh; biases alike.
//  * the same function, lines 364-366, swaps the halves of ff.w1 (weight AND
//    bias: the test is ".ff.w1." in the key): the original stores
//    [gate; value], diffusers' SwiGLU (src/diffusers/models/activations.py:
//    126-146; forward 143-146: `hidden_states, gate = proj(x).chunk(2, -1)`,
//    `hidden_states * silu(gate)`) reads [value; gate]. Used through
//    FeedForward(activation_fn="swiglu") (src/diffusers/models/attention.py:
//    1720-1721; net = [SwiGLU, Dropout, Linear] -> ff.net.0.proj, ff.net.2).
//    So the original w1 = cat(second half, first half) of ff.net.0.proj.
//  * lines 371-383 (_rename_video_vae_key): x_embedder -> proj_in,
//    attn.to_out -> attn.to_out.0, ff.w1 -> ff.net.0.proj, ff.w2 -> ff.net.2;
//    line 324 drops decoder.mask_token; everything else keeps its name.
enum class Convert {
  kNone,           // same tensor, maybe renamed
  kInterleaveQkv,  // three diffusers tensors to_q, to_k, to_v -> per-head fused to_qkv
  kSwapHalves,     // ff.net.0.proj [value; gate] -> ff.w1 [gate; value] (dim 0)
};

// Storage dtype of a tensor under compute_dtype kBFloat16 (kFloat stores all
// in fp32). Follows spec §1.6: autocast GEMMs and the conv take bf16 weights
// and biases; x_embedder/proj_out run with autocast off (fp32); norms,
// LayerScale and registers meet the fp32 residual stream.
enum class Store { kFp32, kCompute };

// CreateRandom() init: value = uniform(-sqrt(3), sqrt(3)) * scale (unit
// variance before scaling), or a constant.
enum class Init {
  kFanIn,  // scale 1/sqrt(fan_in): projections keep O(1) activations
  kBias,   // scale 0.02
  kToken,  // scale 1 (register tokens, like the unit-scale patch tokens)
  kScale,  // constant 0.1 (LayerScale; keeps 36 residual updates small)
  kOnes,   // norm weights
  kZeros,  // norm_out / proj_out biases
};

struct WeightSpec {
  std::string original;                // key in the original checkpoint
  std::vector<std::string> diffusers;  // key(s) in the diffusers checkpoint
  Convert convert;
  std::vector<int64_t> shape;  // original-layout shape (what Forward uses)
  Store store;
  Init init;
  int64_t fan_in;
  torch::Tensor* slot;
};

struct BlockWeights {
  torch::Tensor norm1_w, qkv_w, qkv_b, out_w, out_b, scale1;
  torch::Tensor norm2_w, w1_w, w1_b, w2_w, w2_b, scale2;
};

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool Contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// Keys that exist only in one layout (spec §1.5).
bool IsOriginalOnlyKey(std::string_view k) {
  return StartsWith(k, "decoder.x_embedder.") || Contains(k, ".attn.to_qkv.") ||
         EndsWith(k, ".attn.to_out.weight") || EndsWith(k, ".attn.to_out.bias") ||
         Contains(k, ".ff.w1.") || Contains(k, ".ff.w2.");
}
bool IsDiffusersOnlyKey(std::string_view k) {
  return StartsWith(k, "decoder.proj_in.") || Contains(k, ".attn.to_q.") ||
         Contains(k, ".attn.to_k.") || Contains(k, ".attn.to_v.") ||
         Contains(k, ".attn.to_out.0.") || Contains(k, ".ff.net.");
}
// Encoder-side tensors of a full VAE checkpoint.
bool IsIgnoredKey(std::string_view k) {
  return StartsWith(k, "encoder.") || StartsWith(k, "quant_conv.");
}
constexpr std::string_view kMaskToken = "decoder.mask_token";  // unused training buffer

// ---- Forward building blocks (op order mirrors the official code) --------

// Weightless RMSNorm over the last dim, the torch-2.4 composite the golden
// shim follows (golden README §3): x * rsqrt(mean(x^2) + eps). x is fp32.
torch::Tensor RmsNorm(const torch::Tensor& x, double eps) {
  return x * torch::rsqrt(torch::pow(x, 2).mean(-1, /*keepdim=*/true).add_(eps));
}

// torch::linear on [B, S, K], one GEMM per batch item. A stacked GEMM over
// B*S rows does not give the same bits per row as an S-row GEMM on this
// build (OpenBLAS sgemm and oneDNN bf16 choose their blocking from the row
// count; measured max diff 1e-4 at K = 2048), which would make stacked tiles
// differ from sequential ones. For B = 1 this is exactly the official
// at::linear call (contiguous 3-D input -> addmm).
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (x.size(0) == 1) return torch::linear(x, w, b);
  std::vector<torch::Tensor> items;
  items.reserve(static_cast<size_t>(x.size(0)));
  for (int64_t i = 0; i < x.size(0); ++i) items.push_back(torch::linear(x.narrow(0, i, 1), w, b));
  return torch::cat(items, 0);
}

// Linear() writing into `out` ([B, S, N], contiguous): the same addmm per
// batch item, without allocating the output.
void LinearInto(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& w,
                const torch::Tensor& b) {
  for (int64_t i = 0; i < x.size(0); ++i) {
    torch::Tensor o = out.select(0, i);
    torch::addmm_out(o, b, x.select(0, i), w.t());
  }
}

// Rotate-half RoPE on the first cos.size(-1) dims (spec §1.2 step 7):
// y = x*cos + rot(x)*sin with rot([a, b]) = [-b, a]; the rest passes through.
torch::Tensor ApplyRope(const torch::Tensor& x, const torch::Tensor& cos,
                        const torch::Tensor& sin) {
  const int64_t rd = cos.size(-1);
  const torch::Tensor xr = x.narrow(-1, 0, rd);
  const torch::Tensor x1 = xr.narrow(-1, 0, rd / 2);
  const torch::Tensor x2 = xr.narrow(-1, rd / 2, rd / 2);
  const torch::Tensor rotated = torch::cat({-x2, x1}, -1);
  torch::Tensor y = xr * cos + rotated * sin;
  if (rd == x.size(-1)) return y;
  return torch::cat({y, x.narrow(-1, rd, x.size(-1) - rd)}, -1);
}

}  // namespace

struct Vit3dDecoder::Weights {
  torch::Tensor pqc_w, pqc_b;      // post_quant_conv [C, C, 1, 1, 1], [C]
  torch::Tensor embed_w, embed_b;  // x_embedder [D, C], [D]
  torch::Tensor registers;         // [1, R, D]
  std::vector<BlockWeights> blocks;
  torch::Tensor norm_out_w, norm_out_b;  // LayerNorm [D]
  torch::Tensor proj_w, proj_b;          // proj_out [P, D], [P]

  // THE name-mapping table: every decoder tensor with its original and
  // diffusers names, conversion, shape, storage dtype and random init
  // (spec §1.5 (a) and (b); conventions verified above Convert).
  std::vector<WeightSpec> Table(const VideoDecoderConfig& c) {
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
};

namespace {

// Shape of one diffusers source tensor of `spec`.
std::vector<int64_t> SourceShape(const WeightSpec& spec, WeightLayout layout) {
  std::vector<int64_t> s = spec.shape;
  if (layout == WeightLayout::kDiffusers && spec.convert == Convert::kInterleaveQkv) s[0] /= 3;
  return s;
}

// Builds the original-layout tensor of `spec` from its source tensors
// (already checked for shape). May throw c10::Error.
torch::Tensor Assemble(const WeightSpec& spec, WeightLayout layout,
                       const std::vector<torch::Tensor>& sources, int64_t heads) {
  if (layout == WeightLayout::kOriginal || spec.convert == Convert::kNone) return sources[0];
  if (spec.convert == Convert::kSwapHalves) {
    const int64_t half = sources[0].size(0) / 2;
    return torch::cat({sources[0].narrow(0, half, half), sources[0].narrow(0, 0, half)}, 0);
  }
  // kInterleaveQkv: [H*dh, ...] x3 -> [H, 3*dh, ...] -> [3*H*dh, ...].
  std::vector<torch::Tensor> per_head;
  for (const torch::Tensor& s : sources) {
    std::vector<int64_t> shape = s.sizes().vec();
    shape[0] /= heads;
    shape.insert(shape.begin(), heads);
    per_head.push_back(s.reshape(shape));
  }
  torch::Tensor fused = torch::cat(per_head, 1);
  std::vector<int64_t> out = sources[0].sizes().vec();
  out[0] *= 3;
  return fused.reshape(out);
}

uint64_t ResidentBytes(const std::vector<WeightSpec>& table) {
  uint64_t bytes = 0;
  for (const WeightSpec& s : table) bytes += static_cast<uint64_t>(s.slot->nbytes());
  return bytes;
}

Status CheckCreateArgs(const VideoDecoderConfig& config, torch::ScalarType compute_dtype) {
  Status valid = config.Validate();
  if (!valid.ok()) return valid.WithContext("h3 video decoder config");
  if (compute_dtype != torch::kFloat && compute_dtype != torch::kBFloat16) {
    return InvalidArgument(std::string("h3 video decoder: compute_dtype ") +
                           c10::toString(compute_dtype) + " is not supported (float32, bfloat16)");
  }
  return Status::Ok();
}

// One open weight file and the tensors it holds.
struct Found {
  const SafetensorsFile* file;
  const TensorEntry* entry;
};

// Joins at most `max_items` problems and counts the rest.
std::string JoinProblems(const std::vector<std::string>& problems, size_t max_items) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < max_items; ++i)
    out += (i ? "; " : "") + problems[i];
  if (problems.size() > max_items) {
    out += "; and " + std::to_string(problems.size() - max_items) + " more";
  }
  return out;
}

}  // namespace

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

Vit3dDecoder::Vit3dDecoder(VideoDecoderConfig config, torch::ScalarType compute_dtype,
                           WeightLayout layout, std::unique_ptr<Weights> weights,
                           std::vector<std::pair<std::string, std::string>> weight_sha256)
    : config_(std::move(config)),
      compute_dtype_(compute_dtype),
      layout_(layout),
      weights_(std::move(weights)),
      weight_sha256_(std::move(weight_sha256)) {
  resident_bytes_ = ResidentBytes(weights_->Table(config_));
}

Vit3dDecoder::~Vit3dDecoder() = default;

Result<std::unique_ptr<Vit3dDecoder>> Vit3dDecoder::Load(
    const VideoDecoderConfig& config, const std::vector<std::string>& weight_files,
    torch::ScalarType compute_dtype) {
  VAED_RETURN_IF_ERROR(CheckCreateArgs(config, compute_dtype));
  const std::string what = "h3 video decoder";
  if (weight_files.empty()) return InvalidArgument(what + ": no weight files given");

  // Resolve a sharded checkpoint's index.
  std::vector<std::string> files = weight_files;
  std::vector<std::string> hashed;  // every file read, in order
  std::optional<SafetensorsIndex> index;
  for (const std::string& f : weight_files) {
    if (!EndsWith(f, ".index.json")) continue;
    if (weight_files.size() != 1) {
      return InvalidArgument(what + ": " + f +
                             " is a checkpoint index; pass it alone (its shards are resolved "
                             "next to it) or pass the shard files without it");
    }
    Result<SafetensorsIndex> read = ReadSafetensorsIndex(f);
    if (!read.ok()) return read.status().WithContext(what);
    index = std::move(read).value();
    files = index->shard_paths;
    hashed.push_back(f);
  }
  std::sort(files.begin(), files.end());
  hashed.insert(hashed.end(), files.begin(), files.end());
  std::string files_text;
  for (size_t i = 0; i < files.size(); ++i) files_text += (i ? ", " : "") + files[i];

  std::vector<std::unique_ptr<SafetensorsFile>> opened;
  std::map<std::string, Found> tensors;
  for (const std::string& f : files) {
    Result<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(f);
    if (!file.ok()) return file.status().WithContext(what);
    opened.push_back(std::move(file).value());
    const SafetensorsFile* sf = opened.back().get();
    for (const std::string& name : sf->names()) {
      auto [it, inserted] = tensors.emplace(name, Found{sf, sf->Find(name)});
      if (!inserted) {
        return InvalidArgument(what + ": tensor '" + name + "' is in both " +
                               it->second.file->path() + " and " + f);
      }
    }
  }
  if (index.has_value()) {
    for (const auto& [name, shard] : index->weight_map) {
      auto it = tensors.find(name);
      if (it == tensors.end() || it->second.file->path() != shard) {
        return InvalidArgument(what + ": the index lists tensor '" + name + "' in " + shard +
                               (it == tensors.end() ? ", which does not hold it"
                                                    : ", but it is in " + it->second.file->path()));
      }
    }
  }

  // Detect the layout; a checkpoint must use one.
  std::vector<std::string> original_keys, diffusers_keys;
  size_t ignored = 0;
  for (const auto& [name, found] : tensors) {
    if (IsIgnoredKey(name)) {
      ++ignored;
    } else if (IsOriginalOnlyKey(name)) {
      original_keys.push_back(name);
    } else if (IsDiffusersOnlyKey(name)) {
      diffusers_keys.push_back(name);
    }
  }
  if (!original_keys.empty() && !diffusers_keys.empty()) {
    return InvalidArgument(
        what + ": " + files_text + " mix the original layout (" +
        std::to_string(original_keys.size()) + " keys, e.g. '" + original_keys.front() +
        "') and the diffusers layout (" + std::to_string(diffusers_keys.size()) + " keys, e.g. '" +
        diffusers_keys.front() + "'); a checkpoint must use one naming (spec/h3_vae.md §1.5)");
  }
  const WeightLayout layout =
      diffusers_keys.empty() ? WeightLayout::kOriginal : WeightLayout::kDiffusers;

  auto weights = std::make_unique<Weights>();
  std::vector<WeightSpec> table = weights->Table(config);

  // Check every expected tensor before converting anything.
  std::vector<std::string> missing, wrong;
  std::set<std::string> consumed;
  for (const WeightSpec& spec : table) {
    const std::vector<std::string>& keys = layout == WeightLayout::kOriginal
                                               ? std::vector<std::string>{spec.original}
                                               : spec.diffusers;
    const std::vector<int64_t> expected = SourceShape(spec, layout);
    for (const std::string& key : keys) {
      auto it = tensors.find(key);
      if (it == tensors.end()) {
        missing.push_back("missing tensor '" + key + "' (expected shape " +
                          ShapeToString(expected) + ")");
        continue;
      }
      consumed.insert(key);
      const TensorEntry& e = *it->second.entry;
      const std::string where = " in " + it->second.file->path();
      if (!IsFloatDType(e.dtype)) {
        wrong.push_back("tensor '" + key + "'" + where + " has dtype " +
                        std::string(DTypeName(e.dtype)) + "; expected F32, F16 or BF16");
      } else if (e.shape != expected) {
        wrong.push_back("tensor '" + key + "'" + where + " has shape " + ShapeToString(e.shape) +
                        ", expected " + ShapeToString(expected));
      }
    }
  }
  for (const auto& [name, found] : tensors) {
    if (consumed.count(name) != 0 || IsIgnoredKey(name) || name == kMaskToken) continue;
    wrong.push_back("unexpected tensor '" + name + "' in " + found.file->path());
  }
  if (!missing.empty() || !wrong.empty()) {
    std::vector<std::string> all = wrong;
    all.insert(all.end(), missing.begin(), missing.end());
    const std::string message = what + " (" + WeightLayoutName(layout) + " layout, " +
                                std::to_string(config.depth) + " blocks, dim " +
                                std::to_string(config.dim) + "): " + std::to_string(all.size()) +
                                " problem(s) with " + files_text + ": " + JoinProblems(all, 8);
    return wrong.empty() ? NotFound(message) : InvalidArgument(message);
  }

  try {
    torch::NoGradGuard no_grad;
    for (WeightSpec& spec : table) {
      std::vector<torch::Tensor> sources;
      const std::vector<std::string>& keys = layout == WeightLayout::kOriginal
                                                 ? std::vector<std::string>{spec.original}
                                                 : spec.diffusers;
      for (const std::string& key : keys) {
        sources.push_back(CopyOutOfMapping(*tensors.at(key).entry));
      }
      const torch::ScalarType store = spec.store == Store::kCompute ? compute_dtype : torch::kFloat;
      *spec.slot = Assemble(spec, layout, sources, config.heads).to(store).contiguous();
    }
  } catch (...) {
    return CurrentTorchErrorStatus(what + ": converting the weights of " + files_text);
  }

  std::vector<std::pair<std::string, std::string>> sha;
  for (const std::string& f : hashed) {
    Result<std::string> digest = Sha256File(f);
    if (!digest.ok()) return digest.status().WithContext(what);
    spdlog::info("{}: weight file {} sha256 {}", what, f, *digest);
    sha.emplace_back(f, *digest);
  }
  if (ignored > 0) {
    spdlog::info("{}: ignored {} encoder-side tensors (encoder.*, quant_conv.*)", what, ignored);
  }
  auto decoder = std::unique_ptr<Vit3dDecoder>(
      new Vit3dDecoder(config, compute_dtype, layout, std::move(weights), std::move(sha)));
  spdlog::info("{}: loaded {} layout, {} blocks, dim {}, compute {}, {} tensors, {} bytes resident",
               what, WeightLayoutName(layout), config.depth, config.dim,
               c10::toString(compute_dtype), table.size(), decoder->resident_bytes());
  return decoder;
}

Result<std::unique_ptr<Vit3dDecoder>> Vit3dDecoder::CreateRandom(const VideoDecoderConfig& config,
                                                                 uint64_t seed,
                                                                 torch::ScalarType compute_dtype) {
  VAED_RETURN_IF_ERROR(CheckCreateArgs(config, compute_dtype));
  auto weights = std::make_unique<Weights>();
  std::vector<WeightSpec> table = weights->Table(config);
  try {
    torch::NoGradGuard no_grad;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    // Drawing 2.4e9 values one by one takes about a minute; instead every
    // tensor is a window of one seeded pool of unit-variance values starting
    // at a seeded offset (the pool size is odd, so rows of a matrix start at
    // different phases), scaled by its init. Good enough for smoke tests and
    // benchmarks; generation is bound by memory bandwidth.
    constexpr int64_t kPool = (int64_t{1} << 24) + 1;
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    const torch::Tensor pool32 =
        torch::empty({kPool}, f32).uniform_(-std::sqrt(3.0), std::sqrt(3.0), gen);
    const torch::Tensor pool_compute = pool32.to(compute_dtype);
    for (WeightSpec& spec : table) {
      const torch::ScalarType store = spec.store == Store::kCompute ? compute_dtype : torch::kFloat;
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
          *spec.slot = torch::full(spec.shape, 0.1, opts);
          continue;
        case Init::kOnes:
          *spec.slot = torch::ones(spec.shape, opts);
          continue;
        case Init::kZeros:
          *spec.slot = torch::zeros(spec.shape, opts);
          continue;
      }
      const torch::Tensor& pool = store == torch::kFloat ? pool32 : pool_compute;
      const int64_t n = Numel(spec.shape);
      torch::Tensor flat = torch::empty({n}, opts);
      int64_t pos = torch::randint(kPool, {1}, gen, torch::TensorOptions().dtype(torch::kLong))
                        .item<int64_t>();
      for (int64_t done = 0; done < n; pos = 0) {
        const int64_t len = std::min(n - done, kPool - pos);
        flat.narrow(0, done, len).copy_(pool.narrow(0, pos, len));
        done += len;
      }
      *spec.slot = flat.mul_(scale).view(spec.shape);
    }
  } catch (...) {
    return CurrentTorchErrorStatus("h3 video decoder: generating random weights");
  }
  auto decoder = std::unique_ptr<Vit3dDecoder>(
      new Vit3dDecoder(config, compute_dtype, WeightLayout::kRandom, std::move(weights), {}));
  spdlog::info(
      "h3 video decoder: RANDOM weights (seed {}), {} blocks, dim {}, compute {}, {} bytes "
      "resident; not a trained model",
      seed, config.depth, config.dim, c10::toString(compute_dtype), decoder->resident_bytes());
  return decoder;
}

uint64_t Vit3dDecoder::TilePlan::bytes() const {
  uint64_t n = 0;
  for (const torch::Tensor* x : {&cos, &sin, &qkv_buf, &h1_buf, &act_buf, &scores, &probs,
                                 &heads_out}) {
    if (x->defined()) n += static_cast<uint64_t>(x->numel()) * x->element_size();
  }
  return n;
}

std::shared_ptr<Vit3dDecoder::TilePlan> Vit3dDecoder::BuildTilePlan(int64_t batch, int64_t t,
                                                                    int64_t h,
                                                                    int64_t wd) const {
  const VideoDecoderConfig& c = config_;
  TORCH_CHECK(batch >= 1 && t >= 1 && h >= 1 && wd >= 1, "h3 video decoder: plan shape [",
              batch, ", ", t, ", ", h, ", ", wd, "] has an empty dim");
  torch::NoGradGuard no_grad;
  auto plan = std::make_shared<TilePlan>();
  plan->batch = batch;
  plan->t = t;
  plan->h = h;
  plan->w = wd;
  const int64_t N = t * h * wd;
  const int64_t S = N + c.num_register_tokens + 1;

  // RoPE tables (spec §1.4), fp32: tile-local coordinates
  // arange(0.5, n) / n * 2 - 1 per axis, suffix tokens at 0; angles
  // (2*pi*coord) * inv_freq laid out [t*f, h*f, w*f] and repeated twice.
  {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    auto axis = [&](int64_t n) {
      return torch::arange(0.5, static_cast<double>(n), f32) / n * 2 - 1;
    };
    std::vector<torch::Tensor> grid = torch::meshgrid({axis(t), axis(h), axis(wd)}, "ij");
    torch::Tensor ids = torch::stack(grid, -1).reshape({N, 3});
    ids = torch::cat({ids, torch::zeros({S - N, 3}, f32)}, 0);
    const int64_t nf = c.rope_freqs_per_axis();
    // inv_freq = 1 / theta^(arange(0, 1, 6/rope_dim)) in fp32 (spec §1.4).
    const torch::Tensor exponent = torch::arange(0, nf, f32) / nf;
    const torch::Tensor inv_freq = torch::pow(c.rope_theta, exponent).reciprocal();
    const torch::Tensor angles =
        ((ids * (2.0 * M_PI)).unsqueeze(-1) * inv_freq).reshape({S, 3 * nf}).repeat({1, 2});
    plan->cos = angles.cos().view({1, S, 1, c.rope_dim});
    plan->sin = angles.sin().view({1, S, 1, c.rope_dim});
    if (compute_dtype_ == torch::kBFloat16) {
      plan->cos = plan->cos.to(compute_dtype_);
      plan->sin = plan->sin.to(compute_dtype_);
    }
  }

  // Workspace reused by every block. Buffers above glibc's mmap threshold
  // (32 MB) would otherwise be fresh, page-faulting memory in every block
  // (measured: more time than the GEMMs on this VM). Writing into them
  // (addmm_out, mm_out, softmax_out, silu_out, in-place mul_/add_) runs the
  // same kernels as the functional ops, so the bits do not change.
  const auto copts = torch::TensorOptions().dtype(compute_dtype_);
  const int64_t H = c.heads, dh = c.dim_head, F = c.ffn_inner;
  plan->qkv_buf = torch::empty({batch, S, 3 * H * dh}, copts);
  plan->h1_buf = torch::empty({batch, S, 2 * F}, copts);
  plan->act_buf = torch::empty({batch, S, F}, copts);
  plan->scores = torch::empty({S, S}, copts);
  plan->probs = torch::empty({S, S}, copts);
  plan->heads_out = torch::empty({batch, H, S, dh}, copts);
  return plan;
}

torch::Tensor Vit3dDecoder::Forward(const torch::Tensor& z, TilePlan* plan) const {
  const VideoDecoderConfig& c = config_;
  const Weights& w = *weights_;
  TORCH_CHECK(z.defined(), "h3 video decoder: z is undefined");
  TORCH_CHECK(z.dim() == 5 && z.size(1) == c.latent_channels, "h3 video decoder: z must be [B, ",
              c.latent_channels, ", t, h, w], got ", z.sizes());
  TORCH_CHECK(z.scalar_type() == torch::kFloat && z.device().is_cpu(),
              "h3 video decoder: z must be a float32 CPU tensor, got ", z.scalar_type(), " on ",
              z.device());
  TORCH_CHECK(z.size(0) >= 1 && z.size(2) >= 1 && z.size(3) >= 1 && z.size(4) >= 1,
              "h3 video decoder: z has an empty dim: ", z.sizes());
  torch::NoGradGuard no_grad;
  const bool bf16 = compute_dtype_ == torch::kBFloat16;
  const torch::ScalarType cdt = compute_dtype_;
  const int64_t B = z.size(0), t = z.size(2), h = z.size(3), wd = z.size(4);
  const int64_t N = t * h * wd, D = c.dim, H = c.heads, dh = c.dim_head, F = c.ffn_inner;

  // 1. post_quant_conv (autocast conv: bf16 under kBFloat16). One call per
  // batch item: LibTorch's CPU conv3d gives different bits for an item when
  // the batch size changes, which would break stacked == sequential tiles.
  torch::Tensor x;
  {
    const torch::Tensor zin = bf16 ? z.to(cdt) : z;
    if (B == 1) {
      x = torch::conv3d(zin, w.pqc_w, w.pqc_b);
    } else {
      std::vector<torch::Tensor> items;
      for (int64_t b = 0; b < B; ++b) {
        items.push_back(torch::conv3d(zin.narrow(0, b, 1), w.pqc_w, w.pqc_b));
      }
      x = torch::cat(items, 0);
    }
  }
  // 2.-3. Tokens t-major, then h, then w: [B, N, C]; x_embedder with autocast
  // off (fp32 weights), result cast back to the token dtype.
  x = x.permute({0, 2, 3, 4, 1}).reshape({B, N, c.latent_channels});
  x = Linear(x.to(torch::kFloat), w.embed_w, w.embed_b).to(x.scalar_type());
  // 4. Registers and one zero token; the residual stream is fp32 (the
  // official cat promotes the fp16/bf16 tokens to the fp32 registers' dtype).
  x = torch::cat({x.to(torch::kFloat), w.registers.expand({B, c.num_register_tokens, D}),
                  torch::zeros({B, 1, D}, torch::TensorOptions().dtype(torch::kFloat))},
                 1);
  const int64_t S = x.size(1);

  // 5. RoPE tables and 6.-8. workspace: from the plan, or built for this
  // call (the same code, so both give the same bits).
  std::shared_ptr<TilePlan> own;
  if (plan == nullptr) {
    own = BuildTilePlan(B, t, h, wd);
    plan = own.get();
  }
  TORCH_CHECK(plan->batch == B && plan->t == t && plan->h == h && plan->w == wd,
              "h3 video decoder: plan for [", plan->batch, ", ", plan->t, ", ", plan->h, ", ",
              plan->w, "] used for a call of [", B, ", ", t, ", ", h, ", ", wd, "]");
  const torch::Tensor& cos = plan->cos;
  const torch::Tensor& sin = plan->sin;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  torch::Tensor& qkv_buf = plan->qkv_buf;
  torch::Tensor& h1_buf = plan->h1_buf;
  torch::Tensor& act_buf = plan->act_buf;
  torch::Tensor& scores = plan->scores;
  torch::Tensor& probs = plan->probs;
  torch::Tensor& heads_out = plan->heads_out;

  // 6.-8. Transformer blocks: x = x + scale1 * Attn(norm1(x));
  // x = x + scale2 * FFN(norm2(x)). Norms in fp32 (x is fp32).
  for (const BlockWeights& b : w.blocks) {
    {
      torch::Tensor xn = RmsNorm(x, c.norm_eps) * b.norm1_w;
      if (bf16) xn = xn.to(cdt);
      LinearInto(qkv_buf, xn, b.qkv_w, b.qkv_b);
      const torch::Tensor qkv = qkv_buf.view({B, S, H, 3 * dh});
      // Per-head interleaved q/k/v (spec §1.2 step 7); Q/K RMSNorm in fp32.
      torch::Tensor q = RmsNorm(qkv.narrow(-1, 0, dh).to(torch::kFloat), c.norm_eps).to(cdt);
      torch::Tensor k = RmsNorm(qkv.narrow(-1, dh, dh).to(torch::kFloat), c.norm_eps).to(cdt);
      q = ApplyRope(q, cos, sin);
      k = ApplyRope(k, cos, sin);
      // SDPA without mask as the explicit softmax((q k^T) * scale) v, one
      // (item, head) at a time. The operands are laid out as the official
      // 4-D matmul lays them out before its per-matrix GEMMs: q and v as
      // contiguous [S, dh], k^T as contiguous [dh, S].
      const torch::Tensor qh = q.transpose(1, 2).contiguous();        // [B, H, S, dh]
      const torch::Tensor kt = k.permute({0, 2, 3, 1}).contiguous();  // [B, H, dh, S]
      const torch::Tensor vh = qkv.narrow(-1, 2 * dh, dh).transpose(1, 2).contiguous();
      for (int64_t i = 0; i < B; ++i) {
        for (int64_t j = 0; j < H; ++j) {
          torch::mm_out(scores, qh[i][j], kt[i][j]);
          scores.mul_(scale);
          torch::softmax_out(probs, scores, -1);
          torch::Tensor out_ij = heads_out[i][j];
          torch::mm_out(out_ij, probs, vh[i][j]);
        }
      }
      heads_out.nan_to_num_(0.0);
    }
    const torch::Tensor attn =
        Linear(heads_out.transpose(1, 2).reshape({B, S, D}), b.out_w, b.out_b);
    x.add_(attn * b.scale1);

    torch::Tensor xn = RmsNorm(x, c.norm_eps) * b.norm2_w;
    if (bf16) xn = xn.to(cdt);
    LinearInto(h1_buf, xn, b.w1_w, b.w1_b);
    // Gated SiLU: gate = first half of w1's output, value = second half.
    torch::silu_out(act_buf, h1_buf.narrow(-1, 0, F)).mul_(h1_buf.narrow(-1, F, F));
    x.add_(Linear(act_buf, b.w2_w, b.w2_b) * b.scale2);
  }

  // 9.-12. LayerNorm, proj_out (fp32, autocast off), drop the suffix
  // tokens, de-patchify: feature ((c*pt + i)*ph + j)*pw + k of token
  // (ti, hi, wi) -> pixel (c, pt*ti + i, ph*hi + j, pw*wi + k).
  x = torch::layer_norm(x, {D}, w.norm_out_w, w.norm_out_b, c.norm_eps);
  x = Linear(x, w.proj_w, w.proj_b);
  x = x.narrow(1, 0, N).reshape({B, t, h, wd, c.out_channels, c.patch_t, c.patch_hw, c.patch_hw});
  return x.permute({0, 4, 1, 5, 2, 6, 3, 7})
      .reshape({B, c.out_channels, t * c.patch_t, h * c.patch_hw, wd * c.patch_hw});
}

}  // namespace vaed::models::h3
