// MiniMax-H3 audio + video VAE decoding as one served model: the video VAE
// (video_vae.h) and the audio VAE (audio_decoder.h) under one registry
// name, so a DiT worker sends the video latent and the audio latent of one
// generation in one Decode request (kind "h3"), or audio alone (kind
// "h3_audio").
//
// Audio contract (spec/h3_vae.md §3; units: latent frames at 40 Hz in,
// samples at 32000 Hz out for the released model):
//   input   float32 [channels, 32, T], the DiT's normalised audio latent,
//           channels 1 (mono) or 2 (stereo: left, right, decoded as two
//           batch items with shared weights, as the official pipeline
//           does), 1 <= T <= kMaxAudioLatentFrames. DecodeAudio()
//           de-normalises it per channel (latent * std + mean, config
//           values). A DiT's [2T, 32] audio rows (left block, then right
//           block) must be reshaped to [2, T, 32] and transposed to
//           [2, 32, T] by the client; a [channels, T, 32] latent is rejected
//           (shape[1] must be 32) unless T happens to be 32.
//   output  float32 [channels, 800 * T], clamped to [-1, 1].
// Video contract: VideoVae's (video_vae.h), unchanged.
//
// Thread-safety: as VaeModel (const methods from any thread; Decode() and
// DecodeAudio() by the rank that owns this instance).
#ifndef VAED_DAEMON_MODELS_H3_H3_VAE_H_
#define VAED_DAEMON_MODELS_H3_H3_VAE_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/models/device_placement.h"
#include "daemon/models/h3/audio_decoder.h"
#include "daemon/models/h3/video_vae.h"
#include "daemon/models/vae_model.h"
#include "vaed/status.h"

namespace vaed::models::h3 {

struct AudioVaeOptions {
  // Audio decoder config file (AudioDecoderConfig::LoadJsonFile formats:
  // official component config, diffusers audio_vae/config.json, golden
  // tiny config). Empty: the released model (AudioDecoderConfig::Official()).
  std::string config_path;
  // Safetensors file with the decoder weights (official names, either
  // weight-norm spelling). Empty: deterministic random weights from `seed`
  // (demo; flagged in info() and every reply).
  std::string weights_path;
  uint64_t seed = 0;
};

struct H3VaeOptions {
  std::string name = "h3";
  // Video decoder; unset for an audio-only model (kind "h3_audio").
  // video->name is replaced by `name`.
  std::optional<VideoVaeOptions> video;
  // Audio decoder; unset for a video-only model.
  std::optional<AudioVaeOptions> audio;
  // Where both decoders run (ModelDevice, device_placement.h);
  // video->device is replaced by it.
  ModelDevice device = torch::kCPU;
};

class H3Vae final : public VaeModel {
 public:
  static constexpr int64_t kAudioLatentChannels = 32;
  // Audio latent frames per request: 4096 = 102.4 s at 40 Hz (a video of
  // up to 2457 pixel frames at 24 fps, 615 latent frames, has its whole
  // audio in one request; longer videos decode their audio in parts, or
  // without). Activations grow linearly with
  // channels * T (about 0.05 GB per second of mono audio for the released
  // widths, audio_decoder.h).
  static constexpr int64_t kMaxAudioLatentFrames = 4096;
  static constexpr int64_t kMaxAudioChannels = 2;

  // Builds the configured decoders. kind is "h3" with both, "h3_audio" with
  // audio only, "h3_video" with video only. Errors: kInvalidArgument for an
  // empty name or neither decoder; the decoders' load errors, prefixed with
  // the model name.
  static Result<std::unique_ptr<H3Vae>> Create(const H3VaeOptions& options);

  ~H3Vae() override;

  const ModelInfo& info() const override { return info_; }
  torch::Device device() const override { return device_; }

  // Video: VideoVae's, or kInvalidArgument naming `latent` when the model
  // has no video decoder.
  Result<DecodePlan> Plan(DType latent_dtype,
                          const std::vector<int64_t>& latent_shape) const override;
  using VaeModel::Decode;
  int64_t TilesPerUnit(const std::vector<int64_t>& latent_shape,
                       const DecodeSettings& settings) const override {
    return video_ ? video_->TilesPerUnit(latent_shape, settings) : 0;
  }
  Result<torch::Tensor> Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                               DecodeReport* report) override;
  Result<torch::Tensor> ToUnitRange(const torch::Tensor& raw) const override;

  // Audio contract above. Errors (kInvalidArgument) name
  // "audio_latent.dtype", "audio_latent.shape" or "audio_latent.shape[i]
  // (what)" and the rule. Shape bucket "<name>:audio:<channels>x<T>".
  // DecodeAudio() also refuses a latent on another device than device()
  // ("audio_latent.device is ...").
  Result<AudioPlan> PlanAudio(DType latent_dtype,
                              const std::vector<int64_t>& latent_shape) const override;
  // Timing "audio_vae.decode_latent" (de-normalisation, unless `space` is
  // kDenormalized, + decoder).
  Result<torch::Tensor> DecodeAudio(const torch::Tensor& latent, LatentSpace space,
                                    DecodeReport* report) override;

  // The video decoder's compiled-plan cache (nullopt without a video decoder).
  std::optional<PlanCacheSnapshot> plan_cache() const override;

  // The decoders (null when not configured).
  VideoVae* video() { return video_.get(); }
  const AudioDecoder* audio() const { return audio_.get(); }

 private:
  H3Vae(ModelInfo info, torch::Device device, std::unique_ptr<VideoVae> video,
        std::unique_ptr<AudioDecoder> audio);

  ModelInfo info_;
  torch::Device device_;
  std::unique_ptr<VideoVae> video_;
  std::unique_ptr<AudioDecoder> audio_;
};

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_H3_VAE_H_
