#include "daemon/models/h3/video_config.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "daemon/models/h3/config_source.h"

namespace vaed::models::h3 {
namespace {

using Json = nlohmann::json;

// Upper bound for every size field, so that products of two of them cannot
// overflow int64 and an absurd config is refused before any allocation.
constexpr int64_t kMaxSize = int64_t{1} << 20;

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

Status CheckSize(int64_t v, const std::string& field) {
  if (v < 1 || v > kMaxSize) {
    return InvalidArgument(field + " is " + std::to_string(v) + "; must be in [1, " +
                           std::to_string(kMaxSize) + "]");
  }
  return Status::Ok();
}

Status CheckPositive(double v, const std::string& field) {
  if (!std::isfinite(v) || v <= 0) {
    return InvalidArgument(field + " is " + Num(v) + "; must be a finite number > 0");
  }
  return Status::Ok();
}

// Tiling constants are fixed by the model (spec §1.4: tile-local RoPE grid;
// §2.2: the encoder's causal clip geometry).
Status CheckModelConstant(int64_t v, int64_t official, const std::string& field) {
  if (v == official) return Status::Ok();
  return InvalidArgument(field + " is " + std::to_string(v) + "; the H3 video decoder needs " +
                         std::to_string(official) +
                         ": the tile size, tile overlap, clip length and token drop are model "
                         "semantics, not tuning knobs (tile-local RoPE grid and encoder clip "
                         "geometry, spec/h3_vae.md §1.4, §2.2-§2.3)");
}

Status CheckStats(const std::vector<float>& v, int64_t channels, bool is_std,
                  const std::string& field) {
  if (static_cast<int64_t>(v.size()) != channels) {
    return InvalidArgument(field + " has " + std::to_string(v.size()) + " values; expected " +
                           std::to_string(channels) + " (one per latent channel)");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || (is_std && v[i] <= 0)) {
      return InvalidArgument(field + "[" + std::to_string(i) + "] is " + Num(v[i]) +
                             (is_std ? "; must be a finite number > 0" : "; must be finite"));
    }
  }
  return Status::Ok();
}

// Validate() with the fields named as `n` says (the struct members' names,
// or the file's for LoadJsonFile()).
Status ValidateNamed(const VideoDecoderConfig& c, const FieldNames& n) {
  const std::pair<int64_t, const char*> widths[] = {
      {c.latent_channels, "latent_channels"}, {c.dim, "dim"},
      {c.depth, "depth"},                     {c.heads, "heads"},
      {c.dim_head, "dim_head"},               {c.ffn_inner, "ffn_inner"},
      {c.num_register_tokens, "num_register_tokens"}};
  for (const auto& [value, member] : widths) VAED_RETURN_IF_ERROR(CheckSize(value, n(member)));
  VAED_RETURN_IF_ERROR(CheckPositive(c.norm_eps, n("norm_eps")));
  VAED_RETURN_IF_ERROR(CheckPositive(c.rope_theta, n("rope_theta")));
  const std::pair<int64_t, const char*> patch[] = {{c.rope_dim, "rope_dim"},
                                                   {c.patch_t, "patch_t"},
                                                   {c.patch_hw, "patch_hw"},
                                                   {c.out_channels, "out_channels"}};
  for (const auto& [value, member] : patch) VAED_RETURN_IF_ERROR(CheckSize(value, n(member)));
  if (c.heads * c.dim_head != c.dim) {
    return InvalidArgument(n("heads") + " (" + std::to_string(c.heads) + ") * " + n("dim_head") +
                           " (" + std::to_string(c.dim_head) + ") is " +
                           std::to_string(c.heads * c.dim_head) + "; must equal " + n("dim") +
                           " (" + std::to_string(c.dim) + ")");
  }
  if (c.rope_dim > c.dim_head || c.rope_dim % 6 != 0) {
    return InvalidArgument(n("rope_dim") + " gives " + std::to_string(c.rope_dim) +
                           " rotary dims; must be <= " + n("dim_head") + " (" +
                           std::to_string(c.dim_head) +
                           ") and a multiple of 6 (3 axes x rotate-half pairs)");
  }
  VAED_RETURN_IF_ERROR(CheckStats(c.latents_mean, c.latent_channels, false, n("latents_mean")));
  VAED_RETURN_IF_ERROR(CheckStats(c.latents_std, c.latent_channels, true, n("latents_std")));
  const std::tuple<int64_t, int64_t, const char*> constants[] = {
      {c.tile_px, 256, "tile_px"},
      {c.tile_overlap_min_px, 64, "tile_overlap_min_px"},
      {c.clip_length, 17, "clip_length"},
      {c.token_drop, 3, "token_drop"}};
  for (const auto& [value, official, member] : constants) {
    VAED_RETURN_IF_ERROR(CheckModelConstant(value, official, n(member)));
  }
  return Status::Ok();
}

// Typed access to the fields of one JSON object; errors name the file and the
// field path ("<file>: field 'vit_decoder_kwargs.heads' ...").
class ObjectReader {
 public:
  ObjectReader(const Json& obj, std::string file, std::string prefix)
      : obj_(obj), file_(std::move(file)), prefix_(std::move(prefix)) {}

  bool Has(const char* key) const { return obj_.contains(key); }
  std::string Field(std::string_view key) const { return prefix_ + std::string(key); }
  const std::string& file() const { return file_; }

  Status Error(std::string_view key, const std::string& rule) const {
    return InvalidArgument(file_ + ": field '" + Field(key) + "' " + rule);
  }

  Result<int64_t> Int(const char* key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Get(key));
    if (!v->is_number_integer()) return WrongType(key, *v, "an integer");
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(kMaxSize)) {
      return Error(key, "is " + v->dump() + "; too large");
    }
    return v->get<int64_t>();
  }
  Result<int64_t> Int(const char* key, int64_t fallback) const {
    return Has(key) ? Int(key) : Result<int64_t>(fallback);
  }

  Result<double> Number(const char* key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Get(key));
    if (!v->is_number()) return WrongType(key, *v, "a number");
    return v->get<double>();
  }
  Result<double> Number(const char* key, double fallback) const {
    return Has(key) ? Number(key) : Result<double>(fallback);
  }

  // Accepts true/false and, like the official Python code, 0/1.
  Result<bool> Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    const Json& v = obj_.at(key);
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) {
      return v.get<int64_t>() == 1;
    }
    return WrongType(key, v, "true or false");
  }

  Result<std::string> String(const char* key, const std::string& fallback) const {
    if (!Has(key)) return fallback;
    const Json& v = obj_.at(key);
    if (!v.is_string()) return WrongType(key, v, "a string");
    return v.get<std::string>();
  }

  Result<std::vector<float>> Floats(const char* key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Get(key));
    if (!v->is_array()) return WrongType(key, *v, "an array of numbers");
    std::vector<float> out;
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& e = (*v)[i];
      if (!e.is_number()) {
        return InvalidArgument(file_ + ": field '" + Field(key) + "[" + std::to_string(i) +
                               "]' is " + e.dump() + "; expected a number");
      }
      out.push_back(static_cast<float>(e.get<double>()));
    }
    return out;
  }

  // Product of an optional array of positive integers (e.g. space_down).
  Result<std::optional<int64_t>> Product(const char* key) const {
    if (!Has(key)) return std::optional<int64_t>();
    const Json& v = obj_.at(key);
    if (!v.is_array() || v.empty()) return WrongType(key, v, "a non-empty array of integers");
    int64_t p = 1;
    for (const Json& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 64) {
        return Error(key, "is " + v.dump() + "; expected integers in [1, 64]");
      }
      p *= e.get<int64_t>();
    }
    return std::optional<int64_t>(p);
  }

  Result<const Json*> Object(const char* key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Get(key));
    if (!v->is_object()) return WrongType(key, *v, "an object");
    return v;
  }

 private:
  Result<const Json*> Get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) return InvalidArgument(file_ + ": field '" + Field(key) + "' is missing");
    return &*it;
  }
  Status WrongType(std::string_view key, const Json& v, const char* expected) const {
    std::string shown = v.dump();
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    return Error(key, "is " + shown + " (" + v.type_name() + "); expected " + expected);
  }

  const Json& obj_;
  std::string file_;
  std::string prefix_;
};

// rope_dim = dim_head * ratio; must be a whole number (the official code
// truncates with int(); a fractional product is not a released config).
Result<int64_t> RopeDim(const ObjectReader& r, const char* ratio_key, int64_t dim_head) {
  VAED_ASSIGN_OR_RETURN(double ratio, r.Number(ratio_key));
  const double dims = static_cast<double>(dim_head) * ratio;
  if (!std::isfinite(dims) || dims < 1 || dims > static_cast<double>(kMaxSize) ||
      std::fabs(dims - std::round(dims)) > 1e-9) {
    return r.Error(ratio_key, "is " + Num(ratio) + "; dim_head (" + std::to_string(dim_head) +
                                  ") * ratio must be a whole number of dims >= 1");
  }
  return static_cast<int64_t>(std::llround(dims));
}

// Requires `key`, when present, to hold `want`; otherwise names the
// unsupported structure.
Status RequireBool(const ObjectReader& r, const char* key, bool fallback, bool want,
                   const std::string& why) {
  VAED_ASSIGN_OR_RETURN(bool v, r.Bool(key, fallback));
  if (v != want) {
    return r.Error(key, std::string("is ") + (v ? "true" : "false") +
                            "; not supported by vaed's H3 decoder (" + why + ")");
  }
  return Status::Ok();
}

Status RequireString(const ObjectReader& r, const char* key, const std::string& fallback,
                     const std::string& want, const std::string& why) {
  VAED_ASSIGN_OR_RETURN(std::string v, r.String(key, fallback));
  if (v != want) {
    return r.Error(key, "is \"" + v + "\"; not supported by vaed's H3 decoder (" + why + ")");
  }
  return Status::Ok();
}

// "<file>: field '<path>'", the name of a field in messages.
std::string FieldIn(const ObjectReader& r, std::string_view key) {
  return r.file() + ": field '" + r.Field(key) + "'";
}

// Reads `key` into `*value`, naming `member` after the field it came from.
Status ReadInt(const ObjectReader& r, const char* key, std::string_view member, int64_t* value,
               FieldNames* n) {
  VAED_ASSIGN_OR_RETURN(*value, r.Int(key, *value));
  n->Rename(member, FieldIn(r, key));
  return Status::Ok();
}

// Format (a)/(b), the component config (FL2VA/video_vae/config.json): the
// tiling constants, the latent statistics and vae_decoder_tiling.
Status ParseComponent(const ObjectReader& comp, VideoDecoderConfig* c, FieldNames* n) {
  VAED_RETURN_IF_ERROR(ReadInt(comp, "vae_tile_size", "tile_px", &c->tile_px, n));
  VAED_RETURN_IF_ERROR(
      ReadInt(comp, "vae_tile_overlap_min", "tile_overlap_min_px", &c->tile_overlap_min_px, n));
  VAED_RETURN_IF_ERROR(ReadInt(comp, "vae_clip_length", "clip_length", &c->clip_length, n));
  VAED_RETURN_IF_ERROR(ReadInt(comp, "vae_token_drop", "token_drop", &c->token_drop, n));
  VAED_RETURN_IF_ERROR(RequireBool(comp, "vae_decoder_tiling", true, true,
                                   "untiled decode is out of distribution; the 256-px tiling is "
                                   "model semantics, spec/h3_vae.md §1.4"));
  VAED_ASSIGN_OR_RETURN(c->latents_mean, comp.Floats("latents_mean"));
  VAED_ASSIGN_OR_RETURN(c->latents_std, comp.Floats("latents_std"));
  n->Rename("latents_mean", FieldIn(comp, "latents_mean"));
  n->Rename("latents_std", FieldIn(comp, "latents_std"));
  return Status::Ok();
}

// Format (a)/(b), the top level of the source config (FL2VA/video_vae/
// source/config.json): supported structure, channels and patch sizes.
Status ParseSource(const ObjectReader& src, const ObjectReader& comp, VideoDecoderConfig* c,
                   FieldNames* n) {
  VAED_RETURN_IF_ERROR(RequireBool(src, "causal_decoder", false, false,
                                   "the released decoder is non-causal, spec §1.1"));
  VAED_RETURN_IF_ERROR(
      RequireBool(src, "use_vit_decoder", true, true, "only the ViT3D decoder is implemented"));
  VAED_RETURN_IF_ERROR(RequireString(src, "pixel_norm_type", "imagenet", "imagenet",
                                     "the output is ImageNet-normalised RGB, spec §1.1"));
  const char* channels_key = src.Has("embed_dim") ? "embed_dim" : "z_channels";
  VAED_ASSIGN_OR_RETURN(c->latent_channels, src.Int(channels_key));
  n->Rename("latent_channels", FieldIn(src, channels_key));
  for (const auto& [r, key] : {std::pair<const ObjectReader*, const char*>{&src, "z_channels"},
                               {&comp, "latent_channels"}}) {
    VAED_ASSIGN_OR_RETURN(int64_t other, r->Int(key, c->latent_channels));
    if (other != c->latent_channels) {
      return r->Error(key, "is " + std::to_string(other) + "; must equal " +
                               (*n)("latent_channels") + " (" +
                               std::to_string(c->latent_channels) + ")");
    }
  }
  VAED_RETURN_IF_ERROR(ReadInt(src, "out_ch", "out_channels", &c->out_channels, n));

  // Patch sizes: vae_ratio / vae_ratio_t, else the products of space_down /
  // time_down (klvae.py:1147-1148); both must agree when both are given.
  struct PatchSource {
    const char* ratio_key;
    const char* down_key;
    int64_t* out;
    const char* member;
  };
  for (const PatchSource& p : {PatchSource{"vae_ratio", "space_down", &c->patch_hw, "patch_hw"},
                               PatchSource{"vae_ratio_t", "time_down", &c->patch_t, "patch_t"}}) {
    VAED_ASSIGN_OR_RETURN(std::optional<int64_t> product, src.Product(p.down_key));
    if (src.Has(p.ratio_key)) {
      VAED_ASSIGN_OR_RETURN(*p.out, src.Int(p.ratio_key));
      n->Rename(p.member, FieldIn(src, p.ratio_key));
      if (product.has_value() && *product != *p.out) {
        return src.Error(p.down_key, "multiplies to " + std::to_string(*product) + " but " +
                                         src.Field(p.ratio_key) + " is " + std::to_string(*p.out));
      }
    } else if (product.has_value()) {
      *p.out = *product;
      n->Rename(p.member, FieldIn(src, p.down_key) + " (product)");
    }
  }
  return Status::Ok();
}

// Format (a)/(b), vit_decoder_kwargs of the source config: supported
// structure, widths, depth and RoPE; dim and ffn_inner derived.
Status ParseVitKwargs(const ObjectReader& src, VideoDecoderConfig* c, FieldNames* n) {
  VAED_ASSIGN_OR_RETURN(const Json* kwargs_json, src.Object("vit_decoder_kwargs"));
  const ObjectReader kw(*kwargs_json, src.file(), src.Field("vit_decoder_kwargs") + ".");
  static const std::set<std::string> kKnown = {
      "dim_head",      "heads",          "num_layers",     "norm_type",
      "norm_affine",   "qk_norm_type",   "qk_norm_affine", "ffn_activation_fn",
      "ffn_use_gated", "rope_dim_ratio", "rope_theta"};
  for (const auto& item : kwargs_json->items()) {
    if (kKnown.count(item.key()) == 0) {
      return kw.Error(item.key(),
                      "is not a vit_decoder_kwargs key this loader knows; refusing a config "
                      "that may change the architecture (known: dim_head, heads, num_layers, "
                      "norm_type, norm_affine, qk_norm_type, qk_norm_affine, "
                      "ffn_activation_fn, ffn_use_gated, rope_dim_ratio, rope_theta)");
    }
  }
  VAED_RETURN_IF_ERROR(
      RequireString(kw, "norm_type", "rms_norm", "rms_norm", "block norms are RMSNorm, spec §1.1"));
  VAED_RETURN_IF_ERROR(
      RequireBool(kw, "norm_affine", true, true, "block RMSNorms carry a weight, spec §1.1"));
  VAED_RETURN_IF_ERROR(RequireString(kw, "qk_norm_type", "rms_norm", "rms_norm",
                                     "Q/K norms are RMSNorm, spec §1.1"));
  VAED_RETURN_IF_ERROR(RequireBool(kw, "qk_norm_affine", false, false,
                                   "the Q/K RMSNorms have no weight, spec §1.1"));
  VAED_RETURN_IF_ERROR(
      RequireString(kw, "ffn_activation_fn", "silu", "silu", "the FFN is gated SiLU, spec §1.1"));
  VAED_RETURN_IF_ERROR(
      RequireBool(kw, "ffn_use_gated", true, true, "the FFN is gated SiLU, spec §1.1"));
  VAED_ASSIGN_OR_RETURN(c->dim_head, kw.Int("dim_head"));
  VAED_ASSIGN_OR_RETURN(c->heads, kw.Int("heads"));
  VAED_ASSIGN_OR_RETURN(c->depth, kw.Int("num_layers"));
  VAED_ASSIGN_OR_RETURN(c->rope_theta, kw.Number("rope_theta"));
  n->Rename("dim_head", FieldIn(kw, "dim_head"));
  n->Rename("heads", FieldIn(kw, "heads"));
  n->Rename("depth", FieldIn(kw, "num_layers"));
  n->Rename("rope_theta", FieldIn(kw, "rope_theta"));
  VAED_RETURN_IF_ERROR(CheckSize(c->dim_head, (*n)("dim_head")));
  VAED_RETURN_IF_ERROR(CheckSize(c->heads, (*n)("heads")));
  VAED_ASSIGN_OR_RETURN(c->rope_dim, RopeDim(kw, "rope_dim_ratio", c->dim_head));
  n->Rename("rope_dim", FieldIn(kw, "rope_dim_ratio"));
  // Derived: dim from the heads, FFN inner = 4 * dim (base_module.py:55-105).
  c->dim = c->heads * c->dim_head;
  c->ffn_inner = 4 * c->dim;
  n->Rename("dim", (*n)("heads") + " * " + (*n)("dim_head"));
  n->Rename("ffn_inner", "4 * (" + (*n)("dim") + ")");
  return Status::Ok();
}

// Formats (a) and (b): the FL2VA component config plus source/config.json.
Result<VideoDecoderConfig> ParseOriginal(const ObjectReader& comp, const ObjectReader& src) {
  VideoDecoderConfig c;
  FieldNames n;
  VAED_RETURN_IF_ERROR(ParseComponent(comp, &c, &n));
  VAED_RETURN_IF_ERROR(ParseSource(src, comp, &c, &n));
  VAED_RETURN_IF_ERROR(ParseVitKwargs(src, &c, &n));
  // Not carried by these files: ViT3DDecoder defaults (spec §1.1-§1.2).
  n.Rename("norm_eps", "norm_eps (ViT3DDecoder default)");
  n.Rename("num_register_tokens", "num_register_tokens (ViT3DDecoder default)");
  VAED_RETURN_IF_ERROR(ValidateNamed(c, n));
  return c;
}

// Format (c): the diffusers AutoencoderKLMiniMaxH3 config (spec §2.1).
Result<VideoDecoderConfig> ParseDiffusers(const ObjectReader& r) {
  VideoDecoderConfig c;
  FieldNames n;
  // Required, or optional where the struct's default is the released value.
  struct IntField {
    const char* key;
    const char* member;
    int64_t* value;
    bool required;
  };
  for (const IntField& f :
       {IntField{"latent_channels", "latent_channels", &c.latent_channels, true},
        IntField{"out_channels", "out_channels", &c.out_channels, false},
        IntField{"decoder_num_layers", "depth", &c.depth, true},
        IntField{"decoder_num_attention_heads", "heads", &c.heads, true},
        IntField{"decoder_attention_head_dim", "dim_head", &c.dim_head, true},
        IntField{"decoder_num_register_tokens", "num_register_tokens", &c.num_register_tokens,
                 false}}) {
    VAED_ASSIGN_OR_RETURN(*f.value, f.required ? r.Int(f.key) : r.Int(f.key, *f.value));
    n.Rename(f.member, FieldIn(r, f.key));
  }
  VAED_ASSIGN_OR_RETURN(double ffn_mult, r.Number("decoder_ffn_mult", 4.0));
  VAED_ASSIGN_OR_RETURN(c.rope_theta, r.Number("decoder_rope_theta"));
  VAED_ASSIGN_OR_RETURN(c.norm_eps, r.Number("decoder_norm_eps", c.norm_eps));
  VAED_RETURN_IF_ERROR(ReadInt(r, "clip_length", "clip_length", &c.clip_length, &n));
  VAED_RETURN_IF_ERROR(ReadInt(r, "token_drop", "token_drop", &c.token_drop, &n));
  VAED_ASSIGN_OR_RETURN(c.latents_mean, r.Floats("latents_mean"));
  VAED_ASSIGN_OR_RETURN(c.latents_std, r.Floats("latents_std"));
  n.Rename("rope_theta", FieldIn(r, "decoder_rope_theta"));
  n.Rename("norm_eps", FieldIn(r, "decoder_norm_eps"));
  n.Rename("latents_mean", FieldIn(r, "latents_mean"));
  n.Rename("latents_std", FieldIn(r, "latents_std"));
  n.Rename("tile_px", "tile_px (diffusers default)");
  n.Rename("tile_overlap_min_px", "tile_overlap_min_px (diffusers default)");
  VAED_RETURN_IF_ERROR(CheckSize(c.dim_head, n("dim_head")));
  VAED_RETURN_IF_ERROR(CheckSize(c.heads, n("heads")));
  VAED_ASSIGN_OR_RETURN(c.rope_dim, RopeDim(r, "decoder_rope_dim_ratio", c.dim_head));
  n.Rename("rope_dim", FieldIn(r, "decoder_rope_dim_ratio"));
  VAED_ASSIGN_OR_RETURN(std::optional<int64_t> patch_hw, r.Product("spatial_downsample_factors"));
  VAED_ASSIGN_OR_RETURN(std::optional<int64_t> patch_t, r.Product("temporal_downsample_factors"));
  if (patch_hw) c.patch_hw = *patch_hw;
  if (patch_t) c.patch_t = *patch_t;
  n.Rename("patch_hw", FieldIn(r, "spatial_downsample_factors") + " (product)");
  n.Rename("patch_t", FieldIn(r, "temporal_downsample_factors") + " (product)");
  c.dim = c.heads * c.dim_head;
  n.Rename("dim", n("heads") + " * " + n("dim_head"));
  // diffusers FeedForward: inner_dim = int(dim * mult).
  const double inner = static_cast<double>(c.dim) * ffn_mult;
  if (!std::isfinite(inner) || inner < 1 || inner > static_cast<double>(kMaxSize) ||
      std::fabs(inner - std::round(inner)) > 1e-9) {
    return r.Error("decoder_ffn_mult", "is " + Num(ffn_mult) +
                                           "; dim * mult must be a whole number in [1, " +
                                           std::to_string(kMaxSize) + "]");
  }
  c.ffn_inner = static_cast<int64_t>(std::llround(inner));
  n.Rename("ffn_inner", FieldIn(r, "decoder_ffn_mult") + " * dim");
  VAED_RETURN_IF_ERROR(ValidateNamed(c, n));
  return c;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The key of `root` that starts with `prefix` (format (a)), or nullptr.
const Json* FindByPrefix(const Json& root, std::string_view prefix, std::string* key) {
  for (const auto& item : root.items()) {
    if (StartsWith(item.key(), prefix)) {
      *key = item.key();
      return &item.value();
    }
  }
  return nullptr;
}

}  // namespace

const std::vector<float>& OfficialLatentsMean() {
  static const std::vector<float> kMean = {
      0.858090341091156f,    -0.9606591463088989f, 1.0661640167236328f,   -0.5090325474739075f,
      -0.2727581858634949f,  -1.3675414323806763f, -0.2553254961967468f,  -0.26907554268836975f,
      -0.5376840829849243f,  -0.0464097298681736f, 0.6657370328903198f,   0.19690127670764923f,
      -0.5460608005523682f,  -0.4035342037677765f, -0.23683024942874908f, 0.25928452610969543f,
      -0.30133944749832153f, 0.211341992020607f,   -1.1206848621368408f,  0.3581933379173279f,
      -0.04225143790245056f, 0.2604829967021942f,  0.22864092886447906f,  0.7056031823158264f};
  return kMean;
}

const std::vector<float>& OfficialLatentsStd() {
  static const std::vector<float> kStd = {
      1.2223774194717407f, 1.2767263650894165f,  1.6831774711608887f, 1.7549455165863037f,
      1.5636216402053833f, 2.194143533706665f,   0.9653137922286987f, 1.0569885969161987f,
      0.841948926448822f,  0.7729952931404114f,  1.8955937623977661f, 0.946841835975647f,
      0.7996809482574463f, 0.44988900423049927f, 0.7197399735450745f, 0.6936293244361877f,
      2.961095094680786f,  2.7694199085235596f,  3.0496184825897217f, 2.1088054180145264f,
      3.276226282119751f,  3.1627357006073f,     2.2816812992095947f, 2.6127843856811523f};
  return kStd;
}

VideoDecoderConfig VideoDecoderConfig::Official() { return VideoDecoderConfig{}; }

Status VideoDecoderConfig::Validate() const { return ValidateNamed(*this, FieldNames()); }

Result<VideoDecoderConfig> VideoDecoderConfig::LoadJsonFile(const std::string& path) {
  VAED_ASSIGN_OR_RETURN(Json root, ReadJsonFile(path));
  if (!root.is_object()) {
    return InvalidArgument(path + ": top level is " + std::string(root.type_name()) +
                           "; expected an object");
  }

  // (a) golden combined file.
  std::string comp_key, src_key;
  const Json* comp = FindByPrefix(root, "component_config", &comp_key);
  const Json* src = FindByPrefix(root, "source_config", &src_key);
  if (comp != nullptr || src != nullptr) {
    if (comp == nullptr || src == nullptr || !comp->is_object() || !src->is_object()) {
      return InvalidArgument(path +
                             ": a combined config needs object fields starting "
                             "\"component_config\" and \"source_config\"");
    }
    return ParseOriginal(ObjectReader(*comp, path, comp_key + "."),
                         ObjectReader(*src, path, src_key + "."));
  }

  // (c) diffusers vae/config.json.
  if (root.contains("decoder_num_layers")) return ParseDiffusers(ObjectReader(root, path, ""));

  if (root.contains("vit_decoder_kwargs")) {
    return InvalidArgument(path +
                           ": this is the source config (vit_decoder_kwargs); pass the component "
                           "config.json in the directory above it, which carries the latents "
                           "mean/std and the vae_* tiling fields");
  }

  // (b) official component config + <dir>/<source_path>/config.json.
  bool component = root.contains("source_path") || root.contains("latents_mean");
  for (const auto& item : root.items()) component = component || StartsWith(item.key(), "vae_");
  if (!component) {
    return InvalidArgument(path +
                           ": unknown config format; expected the H3 component config (vae_* "
                           "fields, latents_mean/std), the diffusers vae/config.json "
                           "(decoder_num_layers, ...) or a combined golden config");
  }
  const ObjectReader comp_reader(root, path, "");
  VAED_ASSIGN_OR_RETURN(std::string source_dir, comp_reader.String("source_path", "source"));
  const std::filesystem::path src_path =
      std::filesystem::path(path).parent_path() / source_dir / "config.json";
  Result<Json> src_root = ReadJsonFile(src_path.string());
  if (!src_root.ok()) {
    return src_root.status().WithContext(path + ": reading the source config " + src_path.string() +
                                         " (field 'source_path')");
  }
  if (!src_root->is_object()) {
    return InvalidArgument(src_path.string() + ": top level is not an object");
  }
  return ParseOriginal(comp_reader, ObjectReader(*src_root, src_path.string(), ""));
}

bool IsShardedIndex(std::string_view path) {
  constexpr std::string_view kSuffix = ".index.json";
  return path.size() >= kSuffix.size() && path.substr(path.size() - kSuffix.size()) == kSuffix;
}

Result<SafetensorsIndex> ReadSafetensorsIndex(const std::string& path) {
  VAED_ASSIGN_OR_RETURN(Json root, ReadJsonFile(path));
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object() ||
      root["weight_map"].empty()) {
    return InvalidArgument(path + ": field 'weight_map' is missing or not a non-empty object");
  }
  SafetensorsIndex index;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::set<std::string> shards;
  for (const auto& item : root["weight_map"].items()) {
    const Json& v = item.value();
    const std::string field = path + ": field 'weight_map." + item.key() + "'";
    if (!v.is_string()) return InvalidArgument(field + " is not a string");
    const std::string file = v.get<std::string>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
      return InvalidArgument(field + " is \"" + file + "\"; expected a file name in " +
                             dir.string());
    }
    const std::string shard = (dir / file).string();
    shards.insert(shard);
    index.weight_map.emplace(item.key(), shard);
  }
  index.shard_paths.assign(shards.begin(), shards.end());
  return index;
}

}  // namespace vaed::models::h3
