#include "ops/vaectl/output_plan.h"

#include <filesystem>
#include <string_view>

namespace vaed::vaectl {
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsDirectoryTarget(const std::string& out) {
  std::error_code ec;
  return EndsWith(out, "/") || fs::is_directory(out, ec);
}

std::string InDirectory(const std::string& dir, const std::string& file) {
  return (fs::path(dir) / file).string();
}

}  // namespace

const ops::EnumNames<VideoFileFormat>& VideoFileFormatNames() {
  static const ops::EnumNames<VideoFileFormat> kNames = {{"png", VideoFileFormat::kPng},
                                                    {"mp4", VideoFileFormat::kMp4},
                                                    {"raw", VideoFileFormat::kRaw},
                                                    {"none", VideoFileFormat::kNone}};
  return kNames;
}

const ops::EnumNames<ops::WavSampleFormat>& WavSampleFormatNames() {
  static const ops::EnumNames<ops::WavSampleFormat> kNames = {
      {"pcm16", ops::WavSampleFormat::kPcm16}, {"float32", ops::WavSampleFormat::kFloat32}};
  return kNames;
}

Result<OutputPlan> PlanOutput(VideoFileFormat format, const std::string& out,
                              const std::string& stem, int64_t frames) {
  OutputPlan plan;
  if (format == VideoFileFormat::kNone) return plan;
  if (format == VideoFileFormat::kPng) {
    if (EndsWith(out, ".png")) {
      if (frames != 1) {
        return InvalidArgument("--out " + out + " is one PNG file but the decode has " +
                               std::to_string(frames) + " frames; give a directory instead");
      }
      plan.kind = OutputKind::kPngImage;
      plan.path = out;
    } else {
      plan.kind = OutputKind::kPngSequence;
      plan.path = out.empty() ? stem + "_frames" : out;
    }
    return plan;
  }
  // kMp4 or kRaw.
  const std::string ext = format == VideoFileFormat::kMp4 ? ".mp4" : ".u8";
  if (out.empty()) {
    plan.path = stem + ext;
  } else if (IsDirectoryTarget(out)) {
    plan.path = InDirectory(out, stem + ext);
  } else {
    plan.path = out;
  }
  if (format == VideoFileFormat::kMp4) {
    plan.kind = OutputKind::kMp4;
  } else {
    plan.kind = OutputKind::kRaw;
    plan.sidecar = fs::path(plan.path).replace_extension(".json").string();
    if (plan.sidecar == plan.path) {
      return InvalidArgument("--out " + out +
                             ": the raw output and its .json sidecar would be the same file");
    }
  }
  return plan;
}

Result<OutputPlan> PlanAudioOutput(OutputPlan plan, VideoFileFormat format,
                                   const std::string& audio_out, const std::string& stem,
                                   ops::WavSampleFormat wav_format) {
  plan.wav_format = wav_format;
  // --format none is about video frames: the WAV is written only where
  // --audio-out names it.
  if (format == VideoFileFormat::kNone && audio_out.empty()) return plan;
  const std::string file = stem + ".wav";
  if (!audio_out.empty()) {
    plan.wav = IsDirectoryTarget(audio_out) ? InDirectory(audio_out, file) : audio_out;
  } else if (plan.kind == OutputKind::kNone) {
    plan.wav = file;
  } else if (plan.kind == OutputKind::kPngSequence) {
    fs::path dir = fs::path(plan.path).lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();  // "frames/" names "frames"
    plan.wav = (dir.parent_path() / file).string();
  } else {
    plan.wav = fs::path(plan.path).replace_extension(".wav").string();
  }
  if (plan.wav == plan.path || plan.wav == plan.sidecar) {
    return InvalidArgument("the audio output " + plan.wav +
                           " would overwrite the video output; choose another path with "
                           "--audio-out");
  }
  plan.mux_audio = plan.kind == OutputKind::kMp4;
  return plan;
}

Status CheckOutputsAvoidInputs(const OutputPlan& plan, const std::vector<std::string>& inputs) {
  for (const std::string& out : {plan.path, plan.sidecar, plan.wav}) {
    if (out.empty()) continue;
    for (const std::string& in : inputs) {
      std::error_code ec;
      const bool same = out == in || (fs::exists(out, ec) && fs::equivalent(out, in, ec));
      if (same) {
        return InvalidArgument("output " + out + " is the input file " + in +
                               "; writing it would destroy the latent (choose another --out or "
                               "--audio-out)");
      }
    }
  }
  return Status::Ok();
}

Status CheckOutputTools(const OutputPlan& plan) {
  switch (plan.kind) {
    case OutputKind::kPngSequence:
    case OutputKind::kPngImage:
    case OutputKind::kMp4:
      return ops::CheckFfmpegAvailable();
    case OutputKind::kRaw:
    case OutputKind::kNone:
      return Status::Ok();
  }
  return Status::Ok();
}

Result<std::vector<std::string>> WriteOutputs(const OutputPlan& plan, const ops::RgbFrames& frames,
                                              double fps) {
  switch (plan.kind) {
    case OutputKind::kNone:
      return std::vector<std::string>{};
    case OutputKind::kPngSequence:
      return ops::WritePngSequence(frames, plan.path);
    case OutputKind::kPngImage:
      VAED_RETURN_IF_ERROR(ops::WritePngImage(frames, plan.path));
      return std::vector<std::string>{plan.path};
    case OutputKind::kMp4:
      VAED_RETURN_IF_ERROR(ops::WriteMp4(frames, plan.path, fps));
      return std::vector<std::string>{plan.path};
    case OutputKind::kRaw:
      VAED_RETURN_IF_ERROR(ops::WriteRawWithSidecar(frames, plan.path, plan.sidecar));
      return std::vector<std::string>{plan.path, plan.sidecar};
  }
  return Internal("WriteOutputs: unknown output kind");
}

Result<std::vector<std::string>> WriteWavOutput(const OutputPlan& plan,
                                                const ops::PlanarAudio* audio) {
  if (plan.wav.empty()) return std::vector<std::string>{};
  if (audio == nullptr) {
    return InvalidArgument("WriteWavOutput: a WAV output is planned but there is no audio");
  }
  auto stats = ops::WriteWav(*audio, plan.wav, plan.wav_format);
  if (!stats.ok()) return stats.status();
  return std::vector<std::string>{plan.wav};
}

Result<std::vector<std::string>> WriteDecodedOutputs(const OutputPlan& plan,
                                                     const DecodedOutputs& decoded, double fps) {
  if (plan.kind != OutputKind::kNone && decoded.video == nullptr) {
    return InvalidArgument(
        "WriteDecodedOutputs: a video output is planned but there are no frames");
  }
  if (!plan.wav.empty() && decoded.audio == nullptr) {
    return InvalidArgument("WriteDecodedOutputs: a WAV output is planned but there is no audio");
  }
  if (plan.mux_audio && (plan.kind != OutputKind::kMp4 || plan.wav.empty())) {
    return InvalidArgument("WriteDecodedOutputs: muxing audio needs an MP4 and a WAV output");
  }
  // The WAV comes first: the MP4 muxer reads it.
  VAED_ASSIGN_OR_RETURN(const std::vector<std::string> wav, WriteWavOutput(plan, decoded.audio));
  std::vector<std::string> files;
  if (plan.mux_audio) {
    VAED_RETURN_IF_ERROR(ops::WriteMp4WithAudio(*decoded.video, plan.path, fps, plan.wav));
    files.push_back(plan.path);
  } else if (plan.kind != OutputKind::kNone) {
    VAED_ASSIGN_OR_RETURN(files, WriteOutputs(plan, *decoded.video, fps));
  }
  files.insert(files.end(), wav.begin(), wav.end());
  return files;
}

}  // namespace vaed::vaectl
