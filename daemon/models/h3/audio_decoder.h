// The MiniMax-H3 audio VAE decoder (dec_in_proj + BigVGAN with anti-aliased
// SnakeBeta), in-process with LibTorch on the decoder's device (CPU unless
// created for another).
//
// Graph (spec/h3_vae.md §3.2; official dac_audio_vae.py:211-225,
// dac_bigvgan.py, dac_alias_free_*.py, dac_activations.py of
// MiniMax-AI/MiniMax-H3 at 8d8824e):
//   z [B, latent_channels, T]
//   -> dec_in_proj   Conv1d k1 with bias (not weight-normed)  [B, latent_dim, T]
//   -> conv_pre      WN Conv1d k7 pad 3                       [B, C0, T]
//   -> per stage s:  WN ConvTranspose1d (kernel k_s, stride u_s, padding
//                    (k_s-u_s)/2), then the mean of the AMPBlock1 blocks
//                    (one per resblock kernel) run on the same input
//   -> activation_post (anti-aliased SnakeBeta) -> conv_post WN Conv1d k7
//      pad 3 without bias -> clamp to [-output_clamp, output_clamp]
//   -> [B, 1, hop_samples * T]
// Anti-aliased SnakeBeta: x2 upsampling with the stored 12-tap filter
// (replicate pad 5, depthwise conv_transpose stride 2, x2, crop 15 each
// side), then x + sin^2(x * e^alpha) / (e^beta + 1e-9) with per-channel
// log-scale alpha, beta, then the stored low-pass filter with replicate pad
// (5, 6) and stride 2.
//
// Numerics: every op follows the official module's op order, so on the
// same LibTorch build, kernels and thread count the output is bitwise equal
// to the official fp32 CPU decode (with LibTorch 1.13 on the golden
// machine the vectors of shared/golden/h3 were reproduced bitwise with 1
// intra-op thread; other kernels stay within the golden tolerance). The one
// re-implemented op, the depthwise x2 transposed conv, repeats operation
// for operation the CPU conv_transpose1d path of LibTorch 1.13, with which
// the golden vectors were reproduced (UpsampleTaps in the .cc). Weight norm is folded once at load
// with torch::_weight_norm(v, g, 0), the op the official parametrization
// calls; `v * (g / ||v||)` would differ by up to 2.6e-5 (golden README §8).
// CPU convolutions are not batch-invariant: decoding stereo as one batch-2
// call is not bitwise equal to two batch-1 calls (up to 2.1e-5), and the
// intra-op thread count can change kernels and bits (2 threads: stereo
// golden case off by 2.8e-5, mono cases still bitwise).
//
// Memory: weights as fp32 (official: 260 MB). Activations grow linearly
// with B * T; for the official widths a 10 s mono decode peaked about
// 0.5 GB above the weights (measured RSS). Each call allocates and frees many 10-20 MB
// buffers, so glibc's default malloc (which returns them to the OS) adds
// page-fault time; see the owner's allocator settings.
//
// Thread-safety: all const methods may be called concurrently (the weights
// are never written after construction); each call uses LibTorch's intra-op
// thread pool.
#ifndef VAED_DAEMON_MODELS_H3_AUDIO_DECODER_H_
#define VAED_DAEMON_MODELS_H3_AUDIO_DECODER_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/models/h3/audio_config.h"
#include "vaed/status.h"

namespace vaed::models::h3 {

class AudioDecoder {
 public:
  // Taps of the stored anti-alias filters (kaiser-windowed sinc, cutoff
  // 0.25, half-width 0.3; spec §3.2 item 4).
  static constexpr int64_t kFilterTaps = 12;

  // The anti-alias filter as the official constructor computes it
  // (kaiser_sinc_filter1d(cutoff 0.25, half_width 0.3, 12 taps),
  // dac_alias_free_filter.py): float32 [1, 1, 12], sums to 1. Load() uses
  // the stored buffers instead; CreateRandom() uses this. May throw
  // c10::Error.
  static torch::Tensor KaiserSincFilter();

  // Loads the decoder weights from the safetensors file at `weights_path`
  // (official state_dict names, spec §3.3), folds every weight norm once,
  // computes the file's SHA-256 (logged at info level, weights_sha256()).
  // Weight-normed convs are accepted in either spelling, per conv:
  // `<p>.weight_g` / `<p>.weight_v` (legacy, as in the released checkpoint)
  // or `<p>.parametrizations.weight.original0` / `.original1` (torch >= 2.1
  // state_dict). g has shape [dim0, 1, 1] (dim0 = out channels for Conv1d,
  // in channels for ConvTranspose1d). Tensors may be F32, F16 or BF16; all
  // are cast to float32 before folding. Encoder-side tensors (`encoder.*`,
  // `pre_block.*`, `mean_proj.*`, `logs_proj.*`) are ignored and counted
  // (ignored_encoder_tensors()).
  // Errors:
  //   kInvalidArgument  `config` fails Validate() (message starts "h3 audio
  //                     decoder config: field '...'"); the file is not
  //                     valid safetensors; a tensor has the wrong shape or a
  //                     non-float dtype (the message names the file, the
  //                     tensor, its shape and the expected shape); the file
  //                     holds tensors that are neither decoder nor encoder
  //                     tensors (named, up to 5).
  //   kNotFound         the file does not exist, or a decoder tensor is
  //                     missing (named, with the alternative spelling).
  //   kIoError / kResourceExhausted / kInternal  OS or LibTorch failures,
  //                     including moving the weights to `device`.
  // The weights are read and folded on the host, then moved once to
  // `device` (device_placement.h; the identity on the CPU).
  static Result<std::unique_ptr<AudioDecoder>> Load(const AudioDecoderConfig& config,
                                                    const std::string& weights_path,
                                                    torch::Device device = torch::kCPU);

  // Builds the architecture of `config` with deterministic pseudo-random
  // weights from a CPU generator seeded with `seed` (same seed, build and
  // thread count: bitwise-identical weights and outputs), drawn like the
  // golden tiny model (golden README §4): weight_v ~ N(0,1), weight_g ~
  // U(0.4, 1.2) (conv_post 0.3), log alpha/beta ~ N(0, 0.5^2), biases ~
  // N(0, 0.1^2), dec_in_proj ~ N(0, 1/fan_in); the anti-alias filters are
  // computed as the official constructor does. The output is noise-like
  // audio with rms about 0.3, not a trained model's output.
  // weights_path() and weights_sha256() are empty.
  // The weights are drawn on the host, then moved to `device` as Load()
  // does. Errors: kInvalidArgument for an invalid `config`; LibTorch
  // failures as kResourceExhausted / kInternal.
  static Result<std::unique_ptr<AudioDecoder>> CreateRandom(const AudioDecoderConfig& config,
                                                            uint64_t seed,
                                                            torch::Device device = torch::kCPU);

  ~AudioDecoder();
  AudioDecoder(const AudioDecoder&) = delete;
  AudioDecoder& operator=(const AudioDecoder&) = delete;

  // latent * latents_std + latents_mean per channel, computed as the
  // pipeline does: a multiply then an add with [1, C, 1] float32 tensors
  // (bitwise equal to the golden `latent_denorm`).
  // `latent`: float32 [B, latent_channels, T] on device(), normalised
  // (DiT-space).
  // Returns a new float32 tensor of the same shape.
  // Throws c10::Error for a wrong rank, channel count or dtype.
  torch::Tensor Denormalize(const torch::Tensor& latent) const;

  // Decodes de-normalised latents (apply Denormalize() first).
  // `z`: float32 [B, latent_channels, T] on device() with B >= 1, T >= 1,
  // any strides; stereo is B = 2 (left, right) decoded with shared weights.
  // Returns a new float32 tensor [B, 1, hop_samples() * T] on device(), of
  // samples at
  // config().sample_rate Hz, clamped to [-output_clamp, output_clamp].
  // Runs without autograd. Throws c10::Error for a bad `z` or a LibTorch
  // failure (e.g. allocation); wrap with CurrentTorchErrorStatus().
  torch::Tensor Forward(const torch::Tensor& z) const;

  const AudioDecoderConfig& config() const { return config_; }
  // Where the weights are resident and Forward() runs, as created.
  torch::Device device() const { return device_; }
  // The file given to Load(); "" for CreateRandom().
  const std::string& weights_path() const { return weights_path_; }
  // Lowercase hex SHA-256 of the weights file; "" for CreateRandom().
  const std::string& weights_sha256() const { return weights_sha256_; }
  // Bytes of the resident float32 tensors (folded weights, biases, SnakeBeta
  // terms, filters, latent statistics).
  uint64_t resident_bytes() const { return resident_bytes_; }
  // Encoder-side tensors the weights file held and Load() skipped.
  int64_t ignored_encoder_tensors() const { return ignored_encoder_tensors_; }
  // Output samples for `latent_frames` latent frames (hop_samples() each).
  int64_t num_samples(int64_t latent_frames) const { return latent_frames * config_.hop_samples(); }

 private:
  struct Weights;

  AudioDecoder(AudioDecoderConfig config, std::unique_ptr<Weights> weights, torch::Device device);

  AudioDecoderConfig config_;
  std::unique_ptr<Weights> weights_;
  torch::Device device_;
  std::string weights_path_;
  std::string weights_sha256_;
  uint64_t resident_bytes_ = 0;
  int64_t ignored_encoder_tensors_ = 0;
};

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_AUDIO_DECODER_H_
