// Configuration of the MiniMax-H3 video VAE decoder (post_quant_conv + ViT3D
// decoder) and its tiling constants, parsed from the checkpoint's JSON
// config. Torch-free.
//
// Sources (shared/spec/h3_vae.md): architecture §1.1-§1.2, RoPE §1.4, config
// files and field names §2.1, tiling constants §2.2-§2.3.
//
// Units: dim/heads/... are channel counts; patch_t is pixel frames per latent
// frame, patch_hw pixels per latent cell (each spatial axis); tile_px and
// tile_overlap_min_px are pixels; clip_length is pixel frames; token_drop is
// latent frames.
//
// Thread-safety: plain value type and pure functions; safe from any thread.
#ifndef VAED_DAEMON_MODELS_H3_VIDEO_CONFIG_H_
#define VAED_DAEMON_MODELS_H3_VIDEO_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "vaed/status.h"

namespace vaed::models::h3 {

// The 24 official per-channel latent statistics (fp32), from
// FL2VA/video_vae/config.json; also "latents_mean_f32"/"latents_std_f32" of
// shared/golden/h3/video_tiny_config.json.
const std::vector<float>& OfficialLatentsMean();
const std::vector<float>& OfficialLatentsStd();

// Every field defaults to the released 2.4B model (spec §1.1), so
// VideoDecoderConfig{} == Official().
struct VideoDecoderConfig {
  // Latent channels in, = post_quant_conv width and x_embedder fan-in.
  int64_t latent_channels = 24;
  // Transformer width; must equal heads * dim_head.
  int64_t dim = 2048;
  // Number of transformer blocks.
  int64_t depth = 36;
  int64_t heads = 32;
  int64_t dim_head = 64;
  // Gated-SiLU FFN inner width: w1 is [2 * ffn_inner, dim] (gate rows first),
  // w2 is [dim, ffn_inner]. Official: 4 * dim (no 2/3 factor).
  int64_t ffn_inner = 8192;
  // Learned register tokens appended after the patch tokens (followed by one
  // all-zero token); all dropped before proj_out.
  int64_t num_register_tokens = 4;
  // eps of every RMSNorm (block norms, weightless Q/K norms) and of the final
  // LayerNorm.
  double norm_eps = 1e-5;
  // RoPE: inv_freq[j] = rope_theta^(-j / (rope_dim/6)), j < rope_dim/6, per
  // axis (t, h, w); applied rotate-half style to the first rope_dim dims of
  // each head (= dim_head * rope_dim_ratio). Must be even, <= dim_head and a
  // multiple of 6.
  double rope_theta = 100.0;
  int64_t rope_dim = 48;
  // De-patchify: each latent voxel token becomes out_channels x patch_t x
  // patch_hw x patch_hw output values (pixel frames x pixels x pixels).
  int64_t patch_t = 4;
  int64_t patch_hw = 16;
  int64_t out_channels = 3;
  // De-normalisation applied by the caller before the decoder:
  // z = latent * latents_std[c] + latents_mean[c]. latent_channels each;
  // every std > 0.
  std::vector<float> latents_mean = OfficialLatentsMean();
  std::vector<float> latents_std = OfficialLatentsStd();
  // Tiling constants. These are model semantics, not tuning knobs: the RoPE
  // grid is tile-local (spec §1.4), so another tile size changes the output,
  // and clip_length/token_drop are tied to the encoder's causal clip
  // geometry (spec §2.2). Validate() requires the official values.
  int64_t tile_px = 256;             // spatial tile edge, pixels
  int64_t tile_overlap_min_px = 64;  // minimum tile overlap, pixels
  int64_t clip_length = 17;          // pixel frames per encoder clip
  int64_t token_drop = 3;            // latent frames dropped per encode

  // The released model (spec §1.1, §2.1). Always valid.
  static VideoDecoderConfig Official();

  // Parses a config file in one of three formats (detected from its keys):
  //  (a) the golden combined file (shared/golden/h3/video_tiny_config.json):
  //      an object with a key starting "component_config" (the FL2VA
  //      component config) and one starting "source_config" (the
  //      source/config.json with vit_decoder_kwargs);
  //  (b) the official component config (FL2VA/video_vae/config.json: vae_*
  //      fields, latent_channels, latents_mean/std) together with
  //      <dir>/<source_path or "source">/config.json next to it;
  //  (c) the diffusers vae/config.json (decoder_num_layers,
  //      decoder_num_attention_heads, ..., spec §2.1).
  // dim = heads * dim_head; ffn_inner = dim * 4 for (a)/(b) (the official
  // FFN), dim * decoder_ffn_mult for (c); rope_dim = dim_head *
  // rope_dim_ratio (must be a whole number). Values a format does not carry
  // keep the official defaults (norm_eps and num_register_tokens for (a)/(b),
  // the tile size and overlap for (c)). The result is Validate()d.
  // Errors (messages name the file and the JSON field):
  //   kNotFound         the file, or for (b) the source config, is missing;
  //   kIoError          the file cannot be read;
  //   kInvalidArgument  not JSON, unknown format, a field of the wrong type,
  //                     an unknown key in vit_decoder_kwargs, a Validate()
  //                     rule broken, or an unsupported structure
  //                     (causal_decoder true, use_vit_decoder false,
  //                     qk_norm_affine true, norm_type/qk_norm_type not
  //                     rms_norm, norm_affine false, FFN not gated silu).
  static Result<VideoDecoderConfig> LoadJsonFile(const std::string& path);

  // Checks the whole config: every size and eps/theta > 0, heads * dim_head
  // == dim, rope_dim even, <= dim_head and a multiple of 6,
  // latents_mean/std have latent_channels finite values with std > 0, and
  // tile_px/tile_overlap_min_px/clip_length/token_drop equal the official
  // 256/64/17/3. Errors: kInvalidArgument naming the field.
  Status Validate() const;

  // Output values per token: out_channels * patch_t * patch_hw * patch_hw
  // (3072 for the official model).
  int64_t patch_dim() const { return out_channels * patch_t * patch_hw * patch_hw; }
  // RoPE frequencies per axis: rope_dim / 6 (8 for the official model).
  int64_t rope_freqs_per_axis() const { return rope_dim / 6; }
};

// A diffusers sharded-checkpoint index ("*.safetensors.index.json":
// {"metadata": {...}, "weight_map": {tensor name: shard file name}}).
struct SafetensorsIndex {
  // Distinct shard paths (directory of the index + file name), sorted.
  std::vector<std::string> shard_paths;
  // Tensor name -> shard path, as listed.
  std::map<std::string, std::string> weight_map;
};

// Reads and checks an index file: weight_map must be a non-empty object of
// strings, each a plain file name (no '/', not "." or ".."). Shards are not
// opened. Errors: kNotFound/kIoError for the file, kInvalidArgument naming
// the field for a malformed index.
Result<SafetensorsIndex> ReadSafetensorsIndex(const std::string& path);

// Whether `path` names a sharded checkpoint's index (it ends in
// ".index.json", the Hugging Face convention): ReadSafetensorsIndex()
// reads it, its shards lie beside it.
bool IsShardedIndex(std::string_view path);

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_VIDEO_CONFIG_H_
