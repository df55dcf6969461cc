// Loading the H3 ViT3D decoder from a checkpoint (Vit3dDecoder::Load): the
// files (one file, shards, or an index), the naming layout (original or
// diffusers), the checks of every tensor, and the conversion to the
// original layout (spec/h3_vae.md §1.5).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "daemon/models/device_placement.h"
#include "daemon/models/h3/vit3d_decoder.h"
#include "daemon/models/h3/vit3d_weights.h"
#include "daemon/models/safetensors.h"
#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"
#include "daemon/models/weight_verification.h"

namespace vaed::models::h3 {
namespace {

using vit3d::Convert;
using vit3d::WeightSpec;

// safetensors data is little-endian and is copied into host tensors as is.
static_assert(std::endian::native == std::endian::little, "vaed assumes a little-endian host");

constexpr char kWhat[] = "h3 video decoder";

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

// The keys of `spec`'s source tensors in `layout`.
std::vector<std::string> SourceKeys(const WeightSpec& spec, WeightLayout layout) {
  return layout == WeightLayout::kOriginal ? std::vector<std::string>{spec.original}
                                           : spec.diffusers;
}

// Shape of one source tensor of `spec` in `layout`.
std::vector<int64_t> SourceShape(const WeightSpec& spec, WeightLayout layout) {
  std::vector<int64_t> s = spec.shape;
  if (layout == WeightLayout::kDiffusers && spec.convert == Convert::kInterleaveQkv) s[0] /= 3;
  return s;
}

// How a diffusers tensor becomes the original-layout tensor.
//
// Verified against huggingface/diffusers at commit 58eb52c0803e (2026-08-23):
//  * diffusers/scripts/convert_minimax_h3_to_diffusers.py:327-368 (convert_video_vae_key)
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
//
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

// The safetensors files of a checkpoint, as given or through its index.
struct CheckpointFiles {
  std::vector<std::string> files;   // sorted by path
  std::vector<std::string> hashed;  // every file read, in order: the index first
  std::optional<SafetensorsIndex> index;
  std::string text;  // the files, comma-separated, for messages
};

Result<CheckpointFiles> ResolveFiles(const std::vector<std::string>& weight_files) {
  const std::string what = kWhat;
  if (weight_files.empty()) return InvalidArgument(what + ": no weight files given");
  CheckpointFiles c;
  c.files = weight_files;
  for (const std::string& f : weight_files) {
    if (!IsShardedIndex(f)) continue;
    if (weight_files.size() != 1) {
      return InvalidArgument(what + ": " + f +
                             " is a checkpoint index; pass it alone (its shards are resolved "
                             "next to it) or pass the shard files without it");
    }
    Result<SafetensorsIndex> read = ReadSafetensorsIndex(f);
    if (!read.ok()) return read.status().WithContext(what);
    c.index = std::move(read).value();
    c.files = c.index->shard_paths;
    c.hashed.push_back(f);
  }
  std::sort(c.files.begin(), c.files.end());
  c.hashed.insert(c.hashed.end(), c.files.begin(), c.files.end());
  for (size_t i = 0; i < c.files.size(); ++i) c.text += (i ? ", " : "") + c.files[i];
  return c;
}

// One tensor of an open weight file.
struct Found {
  const SafetensorsFile* file;
  const TensorEntry* entry;
};

// The open files of a checkpoint and every tensor they hold, by name.
struct OpenCheckpoint {
  std::vector<std::unique_ptr<SafetensorsFile>> opened;
  std::map<std::string, Found> tensors;
};

// Opens every file; a tensor in two files, or one the index places
// elsewhere, is refused.
Result<OpenCheckpoint> OpenFiles(const CheckpointFiles& c) {
  const std::string what = kWhat;
  OpenCheckpoint open;
  for (const std::string& f : c.files) {
    Result<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(f);
    if (!file.ok()) return file.status().WithContext(what);
    open.opened.push_back(std::move(file).value());
    const SafetensorsFile* sf = open.opened.back().get();
    for (const std::string& name : sf->names()) {
      auto [it, inserted] = open.tensors.emplace(name, Found{sf, sf->Find(name)});
      if (!inserted) {
        return InvalidArgument(what + ": tensor '" + name + "' is in both " +
                               it->second.file->path() + " and " + f);
      }
    }
  }
  if (!c.index.has_value()) return open;
  for (const auto& [name, shard] : c.index->weight_map) {
    auto it = open.tensors.find(name);
    if (it == open.tensors.end() || it->second.file->path() != shard) {
      return InvalidArgument(what + ": the index lists tensor '" + name + "' in " + shard +
                             (it == open.tensors.end()
                                  ? ", which does not hold it"
                                  : ", but it is in " + it->second.file->path()));
    }
  }
  return open;
}

// The layout of the checkpoint's names; a checkpoint must use one.
// `ignored` receives the count of encoder-side tensors.
Result<WeightLayout> DetectLayout(const std::map<std::string, Found>& tensors,
                                  const std::string& files_text, size_t* ignored) {
  std::vector<std::string> original_keys, diffusers_keys;
  *ignored = 0;
  for (const auto& [name, found] : tensors) {
    if (IsIgnoredKey(name)) {
      ++*ignored;
    } else if (IsOriginalOnlyKey(name)) {
      original_keys.push_back(name);
    } else if (IsDiffusersOnlyKey(name)) {
      diffusers_keys.push_back(name);
    }
  }
  if (!original_keys.empty() && !diffusers_keys.empty()) {
    return InvalidArgument(
        std::string(kWhat) + ": " + files_text + " mix the original layout (" +
        std::to_string(original_keys.size()) + " keys, e.g. '" + original_keys.front() +
        "') and the diffusers layout (" + std::to_string(diffusers_keys.size()) + " keys, e.g. '" +
        diffusers_keys.front() + "'); a checkpoint must use one naming (spec/h3_vae.md §1.5)");
  }
  return diffusers_keys.empty() ? WeightLayout::kOriginal : WeightLayout::kDiffusers;
}

// Checks every expected tensor (presence, dtype, shape) and that nothing
// unexpected is present, before anything is converted. Errors list the
// first 8 problems: kNotFound when tensors are only missing,
// kInvalidArgument otherwise.
Status CheckTensors(const std::vector<WeightSpec>& table,
                    const std::map<std::string, Found>& tensors, WeightLayout layout,
                    const VideoDecoderConfig& config, const std::string& files_text) {
  std::vector<std::string> missing, wrong;
  std::set<std::string> consumed;
  for (const WeightSpec& spec : table) {
    const std::vector<int64_t> expected = SourceShape(spec, layout);
    for (const std::string& key : SourceKeys(spec, layout)) {
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
  if (missing.empty() && wrong.empty()) return Status::Ok();
  std::vector<std::string> all = wrong;
  all.insert(all.end(), missing.begin(), missing.end());
  const std::string message = std::string(kWhat) + " (" + WeightLayoutName(layout) +
                              " layout, " + std::to_string(config.depth) + " blocks, dim " +
                              std::to_string(config.dim) + "): " + std::to_string(all.size()) +
                              " problem(s) with " + files_text + ": " + JoinProblems(all, 8);
  return wrong.empty() ? NotFound(message) : InvalidArgument(message);
}

// Copies every tensor out of its file into its slot, converted to the
// original layout and the storage dtype.
Status ConvertTensors(std::vector<WeightSpec>& table, const std::map<std::string, Found>& tensors,
                      WeightLayout layout, const VideoDecoderConfig& config,
                      torch::ScalarType compute_dtype, const std::string& files_text) {
  try {
    torch::NoGradGuard no_grad;
    for (WeightSpec& spec : table) {
      std::vector<torch::Tensor> sources;
      for (const std::string& key : SourceKeys(spec, layout)) {
        sources.push_back(CopyOutOfMapping(*tensors.at(key).entry));
      }
      *spec.slot = Assemble(spec, layout, sources, config.heads)
                       .to(vit3d::StorageDtype(spec, compute_dtype))
                       .contiguous();
    }
  } catch (...) {
    return CurrentTorchErrorStatus(std::string(kWhat) + ": converting the weights of " +
                                   files_text);
  }
  return Status::Ok();
}

// (path, lowercase hex SHA-256) of every file, logged.
using FileHashes = std::vector<std::pair<std::string, std::string>>;
Result<FileHashes> HashFiles(const std::vector<std::string>& files) {
  FileHashes sha;
  for (const std::string& f : files) {
    Result<std::string> digest = WeightFileSha256(f);
    if (!digest.ok()) return digest.status().WithContext(kWhat);
    spdlog::info("{}: weight file {} sha256 {}", kWhat, f, *digest);
    sha.emplace_back(f, *digest);
  }
  return sha;
}

}  // namespace

Result<std::unique_ptr<Vit3dDecoder>> Vit3dDecoder::Load(
    const VideoDecoderConfig& config, const std::vector<std::string>& weight_files,
    torch::ScalarType compute_dtype, torch::Device device) {
  VAED_RETURN_IF_ERROR(vit3d::CheckCreateArgs(config, compute_dtype));
  VAED_ASSIGN_OR_RETURN(CheckpointFiles files, ResolveFiles(weight_files));
  VAED_ASSIGN_OR_RETURN(OpenCheckpoint open, OpenFiles(files));
  size_t ignored = 0;
  VAED_ASSIGN_OR_RETURN(WeightLayout layout, DetectLayout(open.tensors, files.text, &ignored));
  auto weights = std::make_unique<vit3d::Weights>();
  std::vector<WeightSpec> table = weights->Table(config);
  VAED_RETURN_IF_ERROR(CheckTensors(table, open.tensors, layout, config, files.text));
  VAED_RETURN_IF_ERROR(
      ConvertTensors(table, open.tensors, layout, config, compute_dtype, files.text));
  VAED_ASSIGN_OR_RETURN(FileHashes sha, HashFiles(files.hashed));
  if (ignored > 0) {
    spdlog::info("{}: ignored {} encoder-side tensors (encoder.*, quant_conv.*)", kWhat, ignored);
  }
  VAED_RETURN_IF_ERROR(vit3d::PlaceWeights(table, device));
  auto decoder = std::unique_ptr<Vit3dDecoder>(
      new Vit3dDecoder(config, compute_dtype, device, layout, std::move(weights), std::move(sha)));
  spdlog::info(
      "{}: loaded {} layout, {} blocks, dim {}, compute {}, {} tensors, {} bytes resident on {}",
      kWhat, WeightLayoutName(layout), config.depth, config.dim, c10::toString(compute_dtype),
      table.size(), decoder->resident_bytes(), DeviceName(device));
  return decoder;
}

}  // namespace vaed::models::h3
