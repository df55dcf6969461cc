// Where `vaectl decode` writes its outputs (video frames as PNG/MP4/raw,
// audio as WAV, possibly muxed into the MP4), the checks made before
// decoding, and the writing itself.
//
// Thread-safety: pure functions and plain values; the writers may run
// concurrently on different paths.
#ifndef VAED_OPS_VAECTL_OUTPUT_PLAN_H_
#define VAED_OPS_VAECTL_OUTPUT_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/common/audio_writer.h"
#include "ops/common/enum_names.h"
#include "ops/common/frame_writer.h"
#include "vaed/status.h"

namespace vaed::vaectl {

// `vaectl decode --format`: what is written of the video (kNone: nothing,
// and no WAV unless --audio-out names one).
enum class VideoFileFormat { kPng, kMp4, kRaw, kNone };
// The names of --format: png, mp4, raw, none (also the report's "format").
const ops::EnumNames<VideoFileFormat>& VideoFileFormatNames();

// `vaectl decode --wav-format`: pcm16, float32 (also the report's
// "wav_format").
const ops::EnumNames<ops::WavSampleFormat>& WavSampleFormatNames();

// The outputs PlanOutput resolves --format to.
enum class OutputKind { kPngSequence, kPngImage, kMp4, kRaw, kNone };

// Where `vaectl decode` writes. `path` is a directory for kPngSequence and
// a file otherwise; `sidecar` is the JSON file next to a raw output.
struct OutputPlan {
  OutputKind kind = OutputKind::kNone;
  std::string path;
  std::string sidecar;
  // Audio (set by PlanAudioOutput): the WAV file, "" when no audio is
  // written; with kMp4, `mux_audio` also puts it into the MP4 (AAC).
  // (`= {}` keeps {kind, path, sidecar} initialisers free of
  // -Wmissing-field-initializers.)
  std::string wav = {};
  ops::WavSampleFormat wav_format = ops::WavSampleFormat::kPcm16;
  bool mux_audio = false;
};

// Resolves --format/--out. `out` may be empty (defaults below); `stem`
// names default outputs (the latent file's stem); `frames` is the number of
// decoded frames.
//   png:  `out` ending in ".png" is a single image (only when frames == 1);
//         anything else is a directory of frame_0000.png, ...
//         (default "<stem>_frames").
//   mp4:  a file (default "<stem>.mp4"); an existing directory or one
//         ending in '/' gets "<stem>.mp4" inside it.
//   raw:  a file (default "<stem>.u8") plus a sidecar with the extension
//         replaced by ".json"; directories as for mp4.
// kNone plans nothing. Errors: kInvalidArgument for a multi-frame decode
// sent to one .png file, or a raw output whose sidecar would be itself.
Result<OutputPlan> PlanOutput(VideoFileFormat format, const std::string& out,
                              const std::string& stem, int64_t frames);

// Adds the audio output to `plan`: the result of PlanOutput for a joint
// decode, or a default OutputPlan (kNone) for an audio-only one. `format`
// is --format (kNone writes no audio either; any other value writes a
// WAV), `audio_out` is --audio-out (may be empty), `stem` names the default
// WAV (the audio latent file's stem).
//   audio_out a file:       that file.
//   audio_out a directory   (existing, or ending in '/'): "<stem>.wav" inside it.
//   empty, video file       (mp4, raw, one png): the video path with
//                           extension ".wav" (clip.mp4 -> clip.wav).
//   empty, PNG directory D: "<stem>.wav" beside D (in D's parent).
//   empty, no video:        "<stem>.wav".
// With kMp4, mux_audio is set: the MP4 gets the WAV's audio as well.
// Errors: kInvalidArgument when the WAV would be the video file or its
// sidecar.
Result<OutputPlan> PlanAudioOutput(OutputPlan plan, VideoFileFormat format,
                                   const std::string& audio_out, const std::string& stem,
                                   ops::WavSampleFormat wav_format);

// OK when the tools `plan` needs are present (ffmpeg for PNG and MP4; the
// WAV writer needs none).
Status CheckOutputTools(const OutputPlan& plan);

// kInvalidArgument when a file `plan` would write (video, sidecar, WAV) is
// one of `inputs` (the same file, by path or through another name).
Status CheckOutputsAvoidInputs(const OutputPlan& plan, const std::vector<std::string>& inputs);

// Writes `frames` as planned (ignoring the audio part of `plan`); returns
// the files written. See ops/common/frame_writer.h for errors.
Result<std::vector<std::string>> WriteOutputs(const OutputPlan& plan, const ops::RgbFrames& frames,
                                              double fps);

// What a decode produced: video frames and/or audio (null when the request
// had none). Non-owning.
struct DecodedOutputs {
  const ops::RgbFrames* video = nullptr;
  const ops::PlanarAudio* audio = nullptr;
};

// Writes the WAV `plan` asks for (plan.wav) from `audio`; returns {plan.wav},
// or {} when plan.wav is empty. Errors: kInvalidArgument when a WAV is
// planned and `audio` is null; those of WriteWav.
Result<std::vector<std::string>> WriteWavOutput(const OutputPlan& plan,
                                                const ops::PlanarAudio* audio);

// Writes everything `plan` asks for: the WAV first (when plan.wav is set
// and there is audio), then the video, muxing the WAV into an MP4 when
// plan.mux_audio. Returns the files written (video files, then the WAV).
// Errors: those of WriteWav, WriteMp4WithAudio and the overload above;
// kInvalidArgument when `plan` has a video or WAV output but `decoded`
// lacks that part.
Result<std::vector<std::string>> WriteDecodedOutputs(const OutputPlan& plan,
                                                     const DecodedOutputs& decoded, double fps);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_OUTPUT_PLAN_H_
