// Configuration of the MiniMax-H3 audio VAE decoder ("H3-AudioVAE": a
// 1x1 input projection plus a BigVGAN vocoder with anti-aliased SnakeBeta
// activations; spec/h3_vae.md §3, official FL2VA/audio_vae/dac_audio_vae.py
// and dac_bigvgan.py of MiniMax-AI/MiniMax-H3 at 8d8824e).
//
// A plain value type holding the architecture and the latent normalisation.
// Torch-free, so configs can be read and validated without LibTorch.
//
// Units: the latent is latent frames at 40 Hz (32 channels); the output is
// samples at `sample_rate` Hz. One latent frame decodes to hop_samples()
// samples (800 for the official model).
//
// Thread-safety: value type; distinct objects may be used from different
// threads, one object needs external locking for writes.
#ifndef VAED_DAEMON_MODELS_H3_AUDIO_CONFIG_H_
#define VAED_DAEMON_MODELS_H3_AUDIO_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vaed/status.h"

namespace vaed::models::h3 {

struct AudioDecoderConfig {
  // Output sample rate in Hz (official 32000). Only informative for the
  // decoder; it does not change the graph.
  int64_t sample_rate = 32000;
  // Latent channels: the input width of dec_in_proj (official 32).
  int64_t latent_channels = 32;
  // Output width of dec_in_proj = BigVGAN `num_mels` (official 2048; the
  // golden tiny model uses 128).
  int64_t latent_dim = 2048;
  // BigVGAN `upsample_initial_channel` = conv_pre output channels (official
  // 1024). Stage s works at upsample_initial_channel / 2^(s+1) channels, so
  // it must be divisible by 2^stages().
  int64_t upsample_initial_channel = 1024;
  // Per stage: ConvTranspose1d stride (upsampling factor) and kernel size.
  // Padding is (kernel - rate) / 2, so kernel - rate must be even and >= 0.
  std::vector<int64_t> upsample_rates{5, 5, 2, 2, 2, 2, 2};
  std::vector<int64_t> upsample_kernel_sizes{9, 9, 4, 4, 4, 4, 4};
  // One AMPBlock1 per entry in every stage; the blocks' outputs are
  // averaged. Kernel sizes must be odd; each block has one dilated conv pair
  // per dilation.
  std::vector<int64_t> resblock_kernel_sizes{3, 7, 11};
  std::vector<std::vector<int64_t>> resblock_dilations{{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
  // SnakeBeta parameters are stored as log(alpha), log(beta) (official
  // true); false means they are stored linearly.
  bool snake_logscale = true;
  // Per-channel latent statistics (latent_channels each, fp32 as the
  // pipeline uses them): decoder input z = latent * std + mean.
  std::vector<float> latents_mean;
  std::vector<float> latents_std;
  // The output is clamped to [-output_clamp, output_clamp] (official 1.0;
  // `use_tanh_at_final` false).
  float output_clamp = 1.0f;

  // The released model (FL2VA/audio_vae: decoder_dim 1024, latent_dim 2048,
  // 32 kHz tables, the 32 official latents_mean / latents_std rounded to
  // fp32). Validate() succeeds on it.
  static AudioDecoderConfig Official();

  // Reads and validates a JSON config. Accepted formats (spec §3, golden
  // README §4):
  //  * the golden test config (shared/golden/h3/audio_tiny_config.json):
  //    the architecture from its "bigvgan_h ..." object, latents mean/std
  //    from its "component_config ..." object;
  //  * the diffusers config (top-level audio_vae/config.json, _class_name
  //    "AutoencoderKLMiniMaxH3Audio"): latent_dim, latent_channels,
  //    decoder_dim, decoder_rates, decoder_kernel_sizes,
  //    resblock_kernel_sizes, resblock_dilation_sizes, sampling_rate,
  //    latents_mean, latents_std;
  //  * the official component config (FL2VA/audio_vae/config.json,
  //    _class_name "MiniMaxH3AudioVAE"): mean/std and sample_rate from it,
  //    widths from the metadata.json named by its "source_metadata_path"
  //    (resolved next to `path`; kwargs decoder_dim, latent_dim or
  //    encoder_dim * 2^len(encoder_rates), vae_latent_channels), and the
  //    BigVGAN tables DacAudioVAE hard-codes for the sample rate (32000 or
  //    16000). Note: the official loader reads decoder_dim from config.yaml;
  //    metadata.json carries the same value in the released bundle.
  // Errors: kNotFound / kIoError when a file cannot be read; kInvalidArgument
  // when the file is not JSON, the format is not recognised, or a field is
  // missing, mistyped or out of range. Messages start with the file path
  // and name the field, e.g. "<path>: field 'bigvgan_h.upsample_rates[2]'
  // is 0; must be >= 1".
  static Result<AudioDecoderConfig> LoadJsonFile(const std::string& path);

  // Checks every rule stated on the fields above, plus: latent_channels,
  // latent_dim, sample_rate >= 1; the two upsample lists non-empty (at most
  // 24 stages) and of equal length, rates in [1, 2^24] and their product
  // (hop_samples) <= 2^24; resblock lists non-empty and of equal length,
  // kernels odd and <= 1023, dilations in [1, 1024]; latents_mean/std of
  // size latent_channels, finite, std > 0; output_clamp finite and > 0. kInvalidArgument whose message starts
  // with `source` (a file name or "config") and names the field.
  Status Validate(std::string_view source) const;

  // Number of upsampling stages (official 7).
  int64_t stages() const { return static_cast<int64_t>(upsample_rates.size()); }
  // Channels after stage s (0-based): upsample_initial_channel / 2^(s+1).
  int64_t stage_channels(int64_t s) const { return upsample_initial_channel >> (s + 1); }
  // Samples per latent frame: the product of upsample_rates (official 800).
  int64_t hop_samples() const;
};

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_AUDIO_CONFIG_H_
