#include "daemon/models/h3/h3_vae.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "daemon/models/device_placement.h"
#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"

namespace vaed::models::h3 {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string AudioDimName(size_t i) {
  static const char* const kNames[] = {"channels", "latent channels", "audio latent frames"};
  return "audio_latent.shape[" + std::to_string(i) + "] (" + kNames[i] + ")";
}

Result<std::unique_ptr<AudioDecoder>> BuildAudio(const std::string& what,
                                                 const AudioVaeOptions& options,
                                                 const torch::Device& device) {
  AudioDecoderConfig config = AudioDecoderConfig::Official();
  if (!options.config_path.empty()) {
    Result<AudioDecoderConfig> loaded = AudioDecoderConfig::LoadJsonFile(options.config_path);
    if (!loaded.ok()) return loaded.status().WithContext(what + " audio decoder");
    config = std::move(*loaded);
  }
  Result<std::unique_ptr<AudioDecoder>> decoder =
      options.weights_path.empty() ? AudioDecoder::CreateRandom(config, options.seed, device)
                                   : AudioDecoder::Load(config, options.weights_path, device);
  if (!decoder.ok()) return decoder.status().WithContext(what + " audio decoder");
  if (options.weights_path.empty()) {
    spdlog::warn("{}: audio decoder has DEMO weights (seed {}), outputs are not audio", what,
                 options.seed);
  }
  return decoder;
}

}  // namespace

Result<std::unique_ptr<H3Vae>> H3Vae::Create(const H3VaeOptions& options) {
  if (options.name.empty()) return InvalidArgument("h3 model: name is empty");
  const std::string what = "model '" + options.name + "'";
  if (!options.video && !options.audio) {
    return InvalidArgument(what + ": neither a video nor an audio decoder is configured");
  }
  std::unique_ptr<VideoVae> video;
  if (options.video) {
    VideoVaeOptions v = *options.video;
    v.name = options.name;
    v.device = options.device;
    VAED_ASSIGN_OR_RETURN(video, VideoVae::Create(v));
  }
  std::unique_ptr<AudioDecoder> audio;
  if (options.audio) {
    VAED_ASSIGN_OR_RETURN(audio, BuildAudio(what, *options.audio, options.device));
  }

  ModelInfo info;
  if (video) {
    info = video->info();
  } else {
    info.name = options.name;
    info.caps.video = false;
    info.latent_channels = kAudioLatentChannels;
    info.compute_dtype = "float32";
    info.device = DeviceName(options.device);
  }
  info.kind = video && audio ? "h3" : (video ? "h3_video" : "h3_audio");
  info.native_fps = kDefaultFps;  // H3 generates 24 fps video (spec §3.1)
  if (audio) {
    const AudioDecoderConfig& c = audio->config();
    const bool audio_demo = audio->weights_path().empty();
    info.caps.audio = true;
    info.caps.latent_space = true;
    info.audio_sample_rate_hz = c.sample_rate;
    info.audio_latent_rate_hz =
        static_cast<double>(c.sample_rate) / static_cast<double>(c.hop_samples());
    info.audio_weights_path = audio->weights_path();
    info.audio_weights_sha256 = audio->weights_sha256();
    info.resident_bytes += audio->resident_bytes();
    info.demo_weights = info.demo_weights || audio_demo;
    const std::string audio_text = std::string(audio_demo ? "DEMO audio weights; " : "") +
                                   "MiniMax-H3 audio VAE decoder (BigVGAN, " +
                                   std::to_string(c.upsample_initial_channel) + " channels, " +
                                   std::to_string(c.sample_rate) + " Hz, float32)";
    info.description = video ? info.description + " + " + audio_text : audio_text;
  }
  return std::unique_ptr<H3Vae>(
      new H3Vae(std::move(info), options.device, std::move(video), std::move(audio)));
}

H3Vae::H3Vae(ModelInfo info, torch::Device device, std::unique_ptr<VideoVae> video,
             std::unique_ptr<AudioDecoder> audio)
    : info_(std::move(info)), device_(device), video_(std::move(video)), audio_(std::move(audio)) {}

H3Vae::~H3Vae() = default;

Result<DecodePlan> H3Vae::Plan(DType latent_dtype, const std::vector<int64_t>& latent_shape) const {
  if (!video_) {
    return InvalidArgument("latent (a video latent) is set but model '" + info_.name + "' (kind " +
                           info_.kind +
                           ") has no video decoder: it decodes audio latents, sent as "
                           "audio_latent");
  }
  return video_->Plan(latent_dtype, latent_shape);
}

std::optional<PlanCacheSnapshot> H3Vae::plan_cache() const {
  if (video_ == nullptr) return std::nullopt;
  return video_->plan_cache();
}

Result<torch::Tensor> H3Vae::Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                                    DecodeReport* report) {
  if (!video_) return FailedPrecondition("model '" + info_.name + "' has no video decoder");
  return video_->Decode(latent, settings, report);
}

Result<torch::Tensor> H3Vae::ToUnitRange(const torch::Tensor& raw) const {
  if (!video_) return FailedPrecondition("model '" + info_.name + "' has no video decoder");
  return video_->ToUnitRange(raw);
}

Result<AudioPlan> H3Vae::PlanAudio(DType latent_dtype,
                                   const std::vector<int64_t>& latent_shape) const {
  if (!audio_) return VaeModel::PlanAudio(latent_dtype, latent_shape);
  const std::string model = "model '" + info_.name + "'";
  if (latent_dtype != DType::kFloat32) {
    return InvalidArgument("audio_latent.dtype is " + std::string(DTypeName(latent_dtype)) + "; " +
                           model + " needs float32");
  }
  if (latent_shape.size() != 3) {
    return InvalidArgument("audio_latent.shape " + ShapeToString(latent_shape) + " has rank " +
                           std::to_string(latent_shape.size()) + "; " + model +
                           " expected [channels, 32, audio_latent_frames]");
  }
  const int64_t channels = latent_shape[0];
  if (channels < 1 || channels > kMaxAudioChannels) {
    std::string hint;
    if (channels == kAudioLatentChannels) {
      hint = " (this looks like [32, channels, T]; the layout is [channels, 32, T])";
    }
    return InvalidArgument(AudioDimName(0) + " is " + std::to_string(channels) +
                           "; must be 1 (mono) or 2 (stereo: left, right)" + hint);
  }
  if (latent_shape[1] != kAudioLatentChannels) {
    std::string hint;
    if (latent_shape[2] == kAudioLatentChannels) {
      hint =
          "; this looks like [channels, T, 32] with latent channels and frames swapped: "
          "transpose it to [channels, 32, T]";
    }
    return InvalidArgument(AudioDimName(1) + " is " + std::to_string(latent_shape[1]) + "; " +
                           model + " needs 32 latent channels (layout [channels, 32, T])" + hint);
  }
  const int64_t frames = latent_shape[2];
  if (frames < 1 || frames > kMaxAudioLatentFrames) {
    return InvalidArgument(AudioDimName(2) + " is " + std::to_string(frames) + "; must be in [1, " +
                           std::to_string(kMaxAudioLatentFrames) +
                           "] (40 latent frames per second)");
  }
  AudioPlan plan;
  plan.channels = channels;
  plan.latent_frames = frames;
  plan.samples = audio_->num_samples(frames);
  plan.sample_rate_hz = audio_->config().sample_rate;
  plan.clamp_level = audio_->config().output_clamp;
  plan.shape_bucket =
      info_.name + ":audio:" + std::to_string(channels) + "x" + std::to_string(frames);
  return plan;
}

Result<torch::Tensor> H3Vae::DecodeAudio(const torch::Tensor& latent, LatentSpace space,
                                         DecodeReport* report) {
  if (!audio_) return VaeModel::DecodeAudio(latent, space, report);
  if (!latent.defined()) return InvalidArgument("audio_latent is an undefined tensor");
  VAED_ASSIGN_OR_RETURN(AudioPlan plan,
                        PlanAudio(FromScalarType(latent.scalar_type()), latent.sizes().vec()));
  VAED_RETURN_IF_ERROR(CheckTensorDevice(latent, "audio_latent", device_, info_.name));
  const auto t0 = SteadyClock::now();
  try {
    torch::NoGradGuard no_grad;
    // PlanAudio() checked the dtype and shape a de-normalised latent skips
    // Denormalize()'s checks for.
    torch::Tensor wave =
        audio_->Forward(space == LatentSpace::kDenormalized ? latent : audio_->Denormalize(latent));
    wave = wave.reshape({plan.channels, plan.samples});
    if (report != nullptr) {
      report->timings.Add("audio_vae.decode_latent",
                          std::chrono::duration<double>(SteadyClock::now() - t0).count());
    }
    return wave;
  } catch (...) {
    return CurrentTorchErrorStatus("decoding audio latent " + ShapeToString(latent.sizes().vec()) +
                                   " with model '" + info_.name + "'");
  }
}

}  // namespace vaed::models::h3
