#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "ops/vaectl/commands.h"
#include "ops/vaectl/connect.h"
#include "ops/vaectl/decode_report.h"
#include "ops/vaectl/latent_input.h"
#include "ops/vaectl/output_plan.h"
#include "ops/vaectl/progress_format.h"
#include "ops/vaectl/streamed_mp4.h"
#include "vaed/replies.h"
#include "vaed/tensor_ref.h"

namespace vaed::vaectl {
namespace {

// A region of `bytes` bytes registered with the daemon.
struct RegisteredRegion {
  std::unique_ptr<client::SharedRegion> region;
  uint64_t id = 0;
};

Result<RegisteredRegion> CreateAndRegister(client::Client& client, uint64_t bytes,
                                           const char* what) {
  RegisteredRegion r;
  auto region = client::SharedRegion::Create(bytes);
  if (!region.ok()) {
    return region.status().WithContext(std::string("creating the ") + what + " region");
  }
  r.region = std::move(region).value();
  auto id = client.RegisterRegion(*r.region);
  if (!id.ok()) return id.status().WithContext(std::string("registering the ") + what + " region");
  r.id = *id;
  return r;
}

// A latent copied into a new registered region, and the region for its
// output.
struct RegionPair {
  RegisteredRegion latent;
  RegisteredRegion output;
};

Result<RegionPair> CreateRegions(client::Client& client, const LatentInput& latent,
                                 uint64_t output_bytes, const char* latent_what,
                                 const char* output_what) {
  RegionPair p;
  VAED_ASSIGN_OR_RETURN(p.latent, CreateAndRegister(client, latent.bytes, latent_what));
  VAED_ASSIGN_OR_RETURN(p.output, CreateAndRegister(client, output_bytes, output_what));
  std::memcpy(p.latent.region->data(), latent.data, latent.bytes);
  return p;
}

// The planned audio output: float32 [channels, samples], and its bytes
// consistent with that (a daemon bug must not become a buffer overrun).
Result<uint64_t> CheckAudioPlan(const client::AudioInfo& audio) {
  const std::vector<int64_t>& shape = audio.output_shape;
  if (shape.size() != 2) {
    return Internal("daemon planned audio output " + ShapeToString(shape) +
                    "; expected [channels, samples]");
  }
  VAED_ASSIGN_OR_RETURN(const uint64_t bytes,
                        ContiguousBytes(DType::kFloat32, shape, "audio_output"));
  if (bytes != audio.output_bytes) {
    return Internal("daemon planned audio output " + ShapeToString(shape) + " as " +
                    std::to_string(audio.output_bytes) + " bytes; float32 needs " +
                    std::to_string(bytes));
  }
  return bytes;
}

// The latents of one decode: video, audio or both (never neither).
struct DecodeInputs {
  std::optional<LatentInput> video;
  std::optional<LatentInput> audio;
};

// The registered regions of one decode, per latent given.
struct DecodeRegions {
  std::optional<RegionPair> video;
  std::optional<RegionPair> audio;
};

// What the decode wrote into the output regions, checked against the
// reply's sizes (views into DecodeRegions).
struct DecodedViews {
  std::optional<ops::RgbFrames> frames;
  std::optional<ops::PlanarAudio> audio;
};

bool HasVideoLatent(const DecodeCommandOptions& options) {
  return !options.latent_file.empty() || !options.random_latent.empty();
}

bool HasAudioLatent(const DecodeCommandOptions& options) {
  return !options.audio_latent_file.empty() || !options.random_audio_latent.empty();
}

// The checks made before anything is read: a latent is given, and no flag
// would be ignored without a word.
Status CheckDecodeFlags(const DecodeCommandOptions& options) {
  const bool has_video = HasVideoLatent(options);
  if (!has_video && !HasAudioLatent(options)) {
    return InvalidArgument(
        "no latent given: give a video latent (LATENT_FILE or --random-latent N,C,H,W), an audio "
        "latent (--audio-latent FILE or --random-audio-latent C,32,T), or both");
  }
  if (!options.audio_out.empty() && !HasAudioLatent(options)) {
    return InvalidArgument("--audio-out " + options.audio_out +
                           " names the WAV of the decoded audio, and this decode has no audio "
                           "latent: give --audio-latent FILE or --random-audio-latent C,32,T");
  }
  const std::string format = ops::NameOf(VideoFileFormatNames(), options.format);
  if (options.no_stream && options.format != VideoFileFormat::kMp4) {
    return InvalidArgument(
        "--no-stream applies to --format mp4 (whose frames are otherwise "
        "encoded while the daemon decodes); --format " +
        format + " is always written after the decode");
  }
  if (!has_video && (options.format != VideoFileFormat::kPng || !options.out.empty())) {
    if (options.format != VideoFileFormat::kNone || !options.out.empty()) {
      return InvalidArgument("--format " + format +
                             (options.out.empty() ? "" : " / --out " + options.out) +
                             " apply to video frames, and this decode has no video latent; an "
                             "audio-only decode writes a WAV (choose it with --audio-out) or "
                             "nothing with --format none");
    }
  }
  return Status::Ok();
}

Result<DecodeInputs> LoadInputs(const DecodeCommandOptions& options) {
  DecodeInputs in;
  if (HasVideoLatent(options)) {
    VAED_ASSIGN_OR_RETURN(in.video,
                          LoadLatent({options.latent_file, options.key, options.random_latent,
                                      "--random-latent", "--key", "random_latent"},
                                     options.seed));
  }
  if (HasAudioLatent(options)) {
    VAED_ASSIGN_OR_RETURN(
        in.audio,
        LoadLatent({options.audio_latent_file, options.audio_key, options.random_audio_latent,
                    "--random-audio-latent", "--audio-key", "random_audio_latent"},
                   options.seed));
  }
  return in;
}

// The request without regions (AttachRegions fills them in).
client::DecodeRequest BuildRequest(const DecodeCommandOptions& options, const DecodeInputs& in) {
  client::DecodeRequest request;
  request.model = options.model;
  request.format = client::OutputFormat::kUInt8NHWC;
  request.stack_tiling = options.stack_tiling;
  request.profile = options.profile;
  request.compile = options.compile;
  request.fps = options.fps;
  request.independent_lengths = options.independent_lengths;
  request.latent_space = options.latent_space;
  request.group_size = options.group_size;
  request.deadline_ms = options.deadline_ms;
  if (in.video) request.latent = {0, 0, in.video->dtype, in.video->shape};
  if (in.audio) request.audio_latent = {0, 0, in.audio->dtype, in.audio->shape};
  return request;
}

// After a refused plan: the daemon names the wire field; say which flag
// sets it. Matched on the message text until errors carry a typed field.
// The daemon names the field that decides the rule (Error.field); say which
// flag sets it.
void PrintFlagHint(const DecodeCommandOptions& options, const DecodeInputs& in,
                   const Status& plan_error) {
  if (in.video && in.audio && !options.independent_lengths &&
      plan_error.field() == "av_sync.independent_lengths") {
    std::cerr << "vaectl decode: --independent-lengths decodes audio and video lengths that "
                 "differ\n";
  }
  if (options.group_size != 0 && plan_error.field() == "options.group_size") {
    std::cerr << "vaectl decode: --group-size sets options.group_size; vaectl status lists the "
                 "daemon's groups and their sizes\n";
  }
}

// Where the outputs go, checked before decoding: the tools they need are
// present and no output overwrites an input.
Result<OutputPlan> PlanFiles(const DecodeCommandOptions& options, const DecodeInputs& in,
                             const client::DecodeReply& plan) {
  OutputPlan outputs;
  if (in.video) {
    VAED_ASSIGN_OR_RETURN(outputs,
                          PlanOutput(options.format, options.out, in.video->stem, plan.frames));
  }
  if (in.audio) {
    VAED_ASSIGN_OR_RETURN(outputs, PlanAudioOutput(outputs, options.format, options.audio_out,
                                                   in.audio->stem, options.wav_format));
  }
  VAED_RETURN_IF_ERROR(CheckOutputTools(outputs));
  // Writing over an input would corrupt the file this process still has
  // mapped (and read for the reference comparison): refuse before decoding.
  std::vector<std::string> inputs;
  if (in.video && !options.latent_file.empty()) inputs.push_back(options.latent_file);
  if (in.audio && !options.audio_latent_file.empty()) {
    inputs.push_back(options.audio_latent_file);
  }
  VAED_RETURN_IF_ERROR(CheckOutputsAvoidInputs(outputs, inputs));
  return outputs;
}

// Creates and registers the regions of each latent and its output, copies
// the latents in and points `request` at them.
Result<DecodeRegions> AttachRegions(client::Client& client, const DecodeInputs& in,
                                    const client::DecodeReply& plan, uint64_t audio_output_bytes,
                                    client::DecodeRequest* request) {
  DecodeRegions regions;
  if (in.video) {
    VAED_ASSIGN_OR_RETURN(regions.video,
                          CreateRegions(client, *in.video, plan.output_bytes, "latent", "output"));
    request->latent.region_id = regions.video->latent.id;
    request->output = {regions.video->output.id, 0, plan.output_dtype, plan.output_shape};
  }
  if (in.audio) {
    VAED_ASSIGN_OR_RETURN(regions.audio, CreateRegions(client, *in.audio, audio_output_bytes,
                                                       "audio latent", "audio output"));
    request->audio_latent.region_id = regions.audio->latent.id;
    request->audio_output = {regions.audio->output.id, 0, DType::kFloat32,
                             plan.audio.value_or(client::AudioInfo{}).output_shape};
  }
  return regions;
}

// Shows the daemon's Progress messages on stderr as `mode` says. The
// callback sets *bar_open while a bar is drawn without its final newline;
// `bar_open` must outlive the request's Decode().
void ShowProgress(ProgressMode mode, bool* bar_open, client::DecodeRequest* request) {
  if (mode == ProgressMode::kNone) return;
  request->progress = [mode, bar_open](const client::Progress& p) {
    if (mode == ProgressMode::kLines) {
      std::fprintf(stderr, "%s\n", FormatProgressLine(p).c_str());
    } else {
      // Redrawn in place; "\x1b[K" clears what a longer line left.
      std::fprintf(stderr, "\r%s\x1b[K", FormatProgressBar(p, 30).c_str());
      *bar_open = p.fraction < 1.0;
      if (!*bar_open) std::fputc('\n', stderr);
    }
    std::fflush(stderr);
  };
}

Result<DecodedViews> ViewOutputs(const client::DecodeReply& reply, const DecodeRegions& regions) {
  DecodedViews views;
  if (regions.video) {
    const client::SharedRegion& region = *regions.video->output.region;
    if (reply.output_bytes > region.size()) {
      return Internal("daemon reported " + std::to_string(reply.output_bytes) +
                      " output bytes, the region holds " + std::to_string(region.size()));
    }
    views.frames =
        ops::RgbFrames{std::span<const uint8_t>(region.data(), reply.output_bytes),
                       static_cast<int64_t>(reply.frames), static_cast<int64_t>(reply.height_px),
                       static_cast<int64_t>(reply.width_px)};
  }
  if (regions.audio) {
    // A reply without its audio part reads as an empty AudioInfo (zeros).
    const client::AudioInfo info = reply.audio.value_or(client::AudioInfo{});
    const client::SharedRegion& region = *regions.audio->output.region;
    const uint64_t values = info.channels * info.samples;
    if (info.output_bytes != values * sizeof(float) || info.output_bytes > region.size()) {
      return Internal("daemon reported " + std::to_string(info.output_bytes) +
                      " audio output bytes for " + std::to_string(info.channels) + " x " +
                      std::to_string(info.samples) + " float32 samples; the region holds " +
                      std::to_string(region.size()));
    }
    // The region is page-aligned, so it may be read as float32.
    views.audio = ops::PlanarAudio{
        std::span<const float>(reinterpret_cast<const float*>(region.data()), values),
        static_cast<int64_t>(info.channels), static_cast<int64_t>(info.samples),
        static_cast<int64_t>(info.sample_rate_hz)};
  }
  return views;
}

// Compares the decode with the references in the latent files.
void CompareWithInputs(const DecodeCommandOptions& options, const DecodeInputs& in,
                       const DecodedViews& views, const OutputPlan& outputs, DecodeReport* report) {
  if (in.video && in.video->file != nullptr) {
    report->quality = CompareWithFile(*views.frames, *in.video->file, options.reference_key,
                                      options.original_key);
  }
  if (in.audio) {
    AudioReport& a = report->audio.emplace();
    a.latent_source = in.audio->source;
    a.latent_dtype = in.audio->dtype;
    a.wav = outputs.wav;
    a.wav_format = outputs.wav_format;
    if (in.audio->file != nullptr) {
      a.quality = CompareAudioWithFile(*views.audio, *in.audio->file, options.audio_reference_key);
    }
  }
}

// The uint8 NHWC video output region as the plan sizes it, before the
// decode (the streamed MP4 reads announced frames from it).
Result<ops::RgbFrames> PlannedFrames(const client::DecodeReply& plan,
                                     const DecodeRegions& regions) {
  const client::SharedRegion& region = *regions.video->output.region;
  if (plan.output_bytes > region.size()) {
    return Internal("daemon planned " + std::to_string(plan.output_bytes) +
                    " output bytes, the region holds " + std::to_string(region.size()));
  }
  const ops::RgbFrames frames{
      std::span<const uint8_t>(region.data(), plan.output_bytes), static_cast<int64_t>(plan.frames),
      static_cast<int64_t>(plan.height_px), static_cast<int64_t>(plan.width_px)};
  Status s = ops::CheckRgbFrames(frames);
  if (!s.ok()) return Internal("daemon planned an inconsistent video output: " + s.message());
  return frames;
}

// One decode and the writing of its outputs: --format mp4 streams the MP4
// (StreamedMp4Output) unless options.no_stream; everything else is written
// after the decode (WriteDecodedOutputs). Fills the report's reply, round
// trip, outputs and mp4. `request` has its regions and progress callback.
// Errors: the decode's (a streamed MP4 is then removed: nothing partial is
// left) and the writers'.
Result<DecodedViews> DecodeAndWrite(client::Client& client, const DecodeCommandOptions& options,
                                    const client::DecodeReply& plan, const OutputPlan& outputs,
                                    const DecodeRegions& regions, client::DecodeRequest* request,
                                    bool* bar_open, DecodeReport* report) {
  std::unique_ptr<StreamedMp4Output> streamed;
  if (outputs.kind == OutputKind::kMp4 && !options.no_stream) {
    VAED_ASSIGN_OR_RETURN(const ops::RgbFrames planned, PlannedFrames(plan, regions));
    VAED_ASSIGN_OR_RETURN(streamed, StreamedMp4Output::Start(outputs, planned, options.fps));
    request->final_range = [s = streamed.get()](const client::FinalRange& r) {
      s->OnFinalRange(r);
    };
  }
  const auto start = std::chrono::steady_clock::now();
  auto reply = client.Decode(*request);
  const auto replied = std::chrono::steady_clock::now();
  request->final_range = nullptr;           // it points at `streamed`
  if (*bar_open) std::fputc('\n', stderr);  // the decode failed before 100 %
  *bar_open = false;
  report->round_trip_seconds = std::chrono::duration<double>(replied - start).count();
  if (!reply.ok()) {
    if (streamed) {
      streamed->Abort();
      if (reply.status().final_frames() != 0) {
        std::cerr << "vaectl decode: frames [0, " << reply.status().final_frames()
                  << ") were final when the decode failed; the partial MP4 was removed and "
                  << outputs.path << " was not written\n";
      }
    }
    return reply.status();
  }
  report->reply = *reply;

  VAED_ASSIGN_OR_RETURN(DecodedViews views, ViewOutputs(*reply, regions));
  const ops::PlanarAudio* audio = views.audio ? &*views.audio : nullptr;
  if (streamed) {
    // The WAV first: the MP4's audio is muxed from it.
    VAED_ASSIGN_OR_RETURN(report->outputs, WriteWavOutput(outputs, audio));
    VAED_RETURN_IF_ERROR(streamed->Finish());
    report->outputs.insert(report->outputs.begin(), outputs.path);
  } else {
    VAED_ASSIGN_OR_RETURN(
        report->outputs,
        WriteDecodedOutputs(outputs, {views.frames ? &*views.frames : nullptr, audio},
                            options.fps));
  }
  if (outputs.kind == OutputKind::kMp4) {
    report->mp4 = Mp4Report{
        .streamed = streamed != nullptr,
        .tail_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - replied).count()};
  }
  return views;
}

void PrintReport(const GlobalOptions& global, const DecodeReport& report) {
  if (global.json) {
    if (report.reply.demo_weights) {
      std::cerr << "vaectl: WARNING: model '" << report.reply.model
                << "' has DEMO weights (deterministic random, not a trained decoder)\n";
    }
    std::cout << DecodeReportToJson(report).dump(2) << "\n";
  } else {
    std::cout << FormatDecodeReport(report);
  }
}

}  // namespace

int RunDecode(const GlobalOptions& global, const DecodeCommandOptions& options) {
  const Status flags = CheckDecodeFlags(options);
  if (!flags.ok()) return ReportFailure("decode", flags);
  auto in = LoadInputs(options);
  if (!in.ok()) return ReportFailure("decode", in.status());

  int exit_code = kExitOk;
  auto client = ConnectOrExplain(global, &exit_code);
  if (client == nullptr) return exit_code;

  // Size the outputs before allocating them: the daemon validates the
  // latents against the model's contract (and the A/V length rule) and
  // returns the uint8 NHWC video and float32 audio output shapes.
  client::DecodeRequest request = BuildRequest(options, *in);
  auto plan = client->PlanDecode(request);
  if (!plan.ok()) {
    const int code = ReportFailure("decode (plan)", plan.status());
    PrintFlagHint(options, *in, plan.status());
    return code;
  }
  uint64_t audio_output_bytes = 0;
  if (in->audio) {
    auto bytes = CheckAudioPlan(plan->audio.value_or(client::AudioInfo{}));
    if (!bytes.ok()) return ReportFailure("decode (plan)", bytes.status());
    audio_output_bytes = *bytes;
  }
  auto outputs = PlanFiles(options, *in, *plan);
  if (!outputs.ok()) return ReportFailure("decode", outputs.status());
  auto regions = AttachRegions(*client, *in, *plan, audio_output_bytes, &request);
  if (!regions.ok()) return ReportFailure("decode", regions.status());

  bool bar_open = false;
  ShowProgress(ResolveProgressMode(options.progress, isatty(STDERR_FILENO) == 1, global.json),
               &bar_open, &request);
  DecodeReport report;
  auto views =
      DecodeAndWrite(*client, options, *plan, *outputs, *regions, &request, &bar_open, &report);
  if (!views.ok()) return ReportFailure("decode", views.status());

  report.format = options.format;
  if (in->video) report.latent_source = in->video->source;
  CompareWithInputs(options, *in, *views, *outputs, &report);
  PrintReport(global, report);
  return kExitOk;
}

}  // namespace vaed::vaectl
