#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "ops/common/random_latent.h"
#include "ops/vaectl/commands.h"
#include "ops/vaectl/connect.h"
#include "ops/vaectl/decode_report.h"
#include "vaed/safetensors.h"
#include "vaed/tensor_ref.h"
#include "vaed/wire.h"

namespace vaed::vaectl {
namespace {

// A latent to send: a tensor of a safetensors file (borrowed from its
// mapping) or generated random values.
struct LatentInput {
  std::unique_ptr<SafetensorsFile> file;  // null for a random latent
  std::vector<float> generated;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
  std::string source;  // for the report
  std::string stem;    // default output name
};

// Where one latent comes from; `flag` names the random option in messages.
struct LatentSource {
  const std::string& file;
  const std::string& key;
  const std::string& random_shape;
  const char* flag;         // "--random-latent" / "--random-audio-latent"
  const char* key_flag;     // "--key" / "--audio-key"
  const char* random_stem;  // default output name of a random latent
};

Result<LatentInput> LoadLatent(const LatentSource& from, uint64_t seed) {
  LatentInput in;
  if (!from.random_shape.empty()) {
    auto shape = ops::ParseShape(from.random_shape);
    if (!shape.ok()) return shape.status().WithContext(from.flag);
    in.shape = std::move(shape).value();
    VAED_ASSIGN_OR_RETURN(const uint64_t count, NumElements(in.shape, from.flag));
    // Generated before the daemon can plan it: refuse what cannot be a
    // sensible latent instead of dying in the allocator.
    constexpr uint64_t kMaxRandomElements = uint64_t{1} << 28;  // 1 GiB of float32
    if (count > kMaxRandomElements) {
      return InvalidArgument(std::string(from.flag) + " " + from.random_shape + " has " +
                             std::to_string(count) + " elements; at most " +
                             std::to_string(kMaxRandomElements) + " (1 GiB float32) are generated");
    }
    in.generated = ops::RandomNormalLatent(count, seed);
    in.dtype = DType::kFloat32;
    in.data = reinterpret_cast<const uint8_t*>(in.generated.data());
    in.bytes = count * sizeof(float);
    in.source = "random(seed=" + std::to_string(seed) + ")";
    in.stem = from.random_stem;
    return in;
  }
  VAED_ASSIGN_OR_RETURN(in.file, SafetensorsFile::Open(from.file));
  const TensorEntry* entry = in.file->Find(from.key);
  if (entry == nullptr) {
    std::string names;
    for (const auto& n : in.file->names()) names += (names.empty() ? "" : ", ") + n;
    return NotFound(from.file + ": no tensor '" + from.key + "' (tensors: " + names +
                    "); choose one with " + from.key_flag);
  }
  in.dtype = entry->dtype;
  in.shape = entry->shape;
  in.data = entry->data;
  in.bytes = entry->nbytes;
  const std::filesystem::path path(from.file);
  in.source = path.filename().string() + ":" + from.key;
  in.stem = path.stem().string();
  return in;
}

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

std::vector<int64_t> Shape(const google::protobuf::RepeatedField<int64_t>& shape) {
  return {shape.begin(), shape.end()};
}

// The planned audio output: float32 [channels, samples], and its bytes
// consistent with that (a daemon bug must not become a buffer overrun).
Result<uint64_t> CheckAudioPlan(const v1::AudioInfo& audio) {
  const std::vector<int64_t> shape = Shape(audio.output_shape());
  if (shape.size() != 2) {
    return Internal("daemon planned audio output " + ShapeToString(shape) +
                    "; expected [channels, samples]");
  }
  VAED_ASSIGN_OR_RETURN(const uint64_t bytes,
                        ContiguousBytes(DType::kFloat32, shape, "audio_output"));
  if (bytes != audio.output_bytes()) {
    return Internal("daemon planned audio output " + ShapeToString(shape) + " as " +
                    std::to_string(audio.output_bytes()) + " bytes; float32 needs " +
                    std::to_string(bytes));
  }
  return bytes;
}

}  // namespace

int RunDecode(const GlobalOptions& global, const DecodeCommandOptions& options) {
  const bool has_video = !options.latent_file.empty() || !options.random_latent.empty();
  const bool has_audio = !options.audio_latent_file.empty() || !options.random_audio_latent.empty();
  if (!has_video && !has_audio) {
    return ReportFailure(
        "decode", InvalidArgument("no latent given: give a video latent (LATENT_FILE or "
                                  "--random-latent N,C,H,W), an audio latent (--audio-latent "
                                  "FILE or --random-audio-latent C,32,T), or both"));
  }
  auto wav_format = ParseWavFormat(options.wav_format);
  if (!wav_format.ok()) return ReportFailure("decode", wav_format.status());
  // Flags that would otherwise be ignored without a word.
  if (!has_video && (options.format != "png" || !options.out.empty())) {
    if (options.format != "none" || !options.out.empty()) {
      return ReportFailure(
          "decode", InvalidArgument("--format " + options.format +
                                    (options.out.empty() ? "" : " / --out " + options.out) +
                                    " apply to video frames, and this decode has no video "
                                    "latent; an audio-only decode writes a WAV (choose it "
                                    "with --audio-out) or nothing with --format none"));
    }
  }
  if (options.format == "none" && !options.audio_out.empty()) {
    return ReportFailure("decode", InvalidArgument("--audio-out " + options.audio_out +
                                                   " is set but --format none writes no files"));
  }

  std::optional<LatentInput> latent;
  if (has_video) {
    auto loaded = LoadLatent({options.latent_file, options.key, options.random_latent,
                              "--random-latent", "--key", "random_latent"},
                             options.seed);
    if (!loaded.ok()) return ReportFailure("decode", loaded.status());
    latent = std::move(loaded).value();
  }
  std::optional<LatentInput> audio_latent;
  if (has_audio) {
    auto loaded =
        LoadLatent({options.audio_latent_file, options.audio_key, options.random_audio_latent,
                    "--random-audio-latent", "--audio-key", "random_audio_latent"},
                   options.seed);
    if (!loaded.ok()) return ReportFailure("decode", loaded.status());
    audio_latent = std::move(loaded).value();
  }

  int exit_code = kExitOk;
  auto client = ConnectOrExplain(global, &exit_code);
  if (client == nullptr) return exit_code;

  client::DecodeRequest request;
  request.model = options.model;
  request.format = client::OutputFormat::kUInt8NHWC;
  if (options.stack_tiling == "off") request.stack_tiling = client::StackTiling::kOff;
  if (options.stack_tiling == "on") request.stack_tiling = client::StackTiling::kOn;
  if (options.stack_tiling == "auto") request.stack_tiling = client::StackTiling::kAuto;
  request.profile = options.profile;
  if (options.compile == "off") request.compile = client::Compile::kOff;
  if (options.compile == "on") request.compile = client::Compile::kOn;
  if (options.compile == "auto") request.compile = client::Compile::kAuto;
  request.fps = options.fps;
  request.independent_lengths = options.independent_lengths;
  request.group_size = options.group_size;
  if (latent) request.latent = {0, 0, latent->dtype, latent->shape};
  if (audio_latent) request.audio_latent = {0, 0, audio_latent->dtype, audio_latent->shape};

  // Size the outputs before allocating them: the daemon validates the
  // latents against the model's contract (and the A/V length rule) and
  // returns the uint8 NHWC video and float32 audio output shapes.
  auto plan = client->PlanDecode(request);
  if (!plan.ok()) {
    const int code = ReportFailure("decode (plan)", plan.status());
    // The daemon names the field that decides the rule (Error.field); say
    // which flag sets it.
    if (latent && audio_latent && !options.independent_lengths &&
        plan.status().field() == "av_sync.independent_lengths") {
      std::cerr << "vaectl decode: --independent-lengths decodes audio and video lengths that "
                   "differ\n";
    }
    if (options.group_size != 0 && plan.status().field() == "options.group_size") {
      std::cerr << "vaectl decode: --group-size sets options.group_size; vaectl status lists the "
                   "daemon's groups and their sizes\n";
    }
    return code;
  }
  uint64_t audio_output_bytes = 0;
  if (audio_latent) {
    auto bytes = CheckAudioPlan(plan->audio());
    if (!bytes.ok()) return ReportFailure("decode (plan)", bytes.status());
    audio_output_bytes = *bytes;
  }

  OutputPlan outputs;
  if (latent) {
    auto video_plan = PlanOutput(options.format, options.out, latent->stem, plan->frames());
    if (!video_plan.ok()) return ReportFailure("decode", video_plan.status());
    outputs = *video_plan;
  }
  if (audio_latent) {
    auto with_audio = PlanAudioOutput(outputs, options.format, options.audio_out,
                                      audio_latent->stem, *wav_format);
    if (!with_audio.ok()) return ReportFailure("decode", with_audio.status());
    outputs = *with_audio;
  }
  if (Status s = CheckOutputTools(outputs); !s.ok()) return ReportFailure("decode", s);
  // Writing over an input would corrupt the file this process still has
  // mapped (and read for the reference comparison): refuse before decoding.
  {
    std::vector<std::string> inputs;
    if (latent && !options.latent_file.empty()) inputs.push_back(options.latent_file);
    if (audio_latent && !options.audio_latent_file.empty()) {
      inputs.push_back(options.audio_latent_file);
    }
    if (Status s = CheckOutputsAvoidInputs(outputs, inputs); !s.ok()) {
      return ReportFailure("decode", s);
    }
  }

  std::optional<RegionPair> video_regions;
  if (latent) {
    auto regions = CreateRegions(*client, *latent, plan->output_bytes(), "latent", "output");
    if (!regions.ok()) return ReportFailure("decode", regions.status());
    video_regions = std::move(regions).value();
    request.latent.region_id = video_regions->latent.id;
    request.output = {video_regions->output.id, 0, FromProto(plan->output_dtype()),
                      Shape(plan->output_shape())};
  }
  std::optional<RegionPair> audio_regions;
  if (audio_latent) {
    auto regions =
        CreateRegions(*client, *audio_latent, audio_output_bytes, "audio latent", "audio output");
    if (!regions.ok()) return ReportFailure("decode", regions.status());
    audio_regions = std::move(regions).value();
    request.audio_latent.region_id = audio_regions->latent.id;
    request.audio_output = {audio_regions->output.id, 0, DType::kFloat32,
                            Shape(plan->audio().output_shape())};
  }

  auto progress_mode =
      ParseProgressMode(options.progress, isatty(STDERR_FILENO) == 1, global.json);
  if (!progress_mode.ok()) return ReportFailure("decode", progress_mode.status());
  bool bar_open = false;
  if (*progress_mode != ProgressMode::kNone) {
    request.progress = [mode = *progress_mode, &bar_open](const v1::Progress& p) {
      if (mode == ProgressMode::kLines) {
        std::fprintf(stderr, "%s\n", FormatProgressLine(p).c_str());
      } else {
        // Redrawn in place; "\x1b[K" clears what a longer line left.
        std::fprintf(stderr, "\r%s\x1b[K", FormatProgressBar(p, 30).c_str());
        bar_open = p.fraction() < 1.0;
        if (!bar_open) std::fputc('\n', stderr);
      }
      std::fflush(stderr);
    };
  }
  const auto start = std::chrono::steady_clock::now();
  auto reply = client->Decode(request);
  if (bar_open) std::fputc('\n', stderr);  // the decode failed before 100 %
  const double round_trip =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!reply.ok()) return ReportFailure("decode", reply.status());

  DecodeReport report;
  report.reply = *reply;
  report.round_trip_seconds = round_trip;
  report.format = options.format;

  std::optional<ops::RgbFrames> frames;
  if (latent) {
    report.latent_source = latent->source;
    const client::SharedRegion& region = *video_regions->output.region;
    if (reply->output_bytes() > region.size()) {
      return ReportFailure(
          "decode", Internal("daemon reported " + std::to_string(reply->output_bytes()) +
                             " output bytes, the region holds " + std::to_string(region.size())));
    }
    frames = ops::RgbFrames{std::span<const uint8_t>(region.data(), reply->output_bytes()),
                            static_cast<int64_t>(reply->frames()),
                            static_cast<int64_t>(reply->height_px()),
                            static_cast<int64_t>(reply->width_px())};
  }
  std::optional<ops::PlanarAudio> audio;
  if (audio_latent) {
    const v1::AudioInfo& info = reply->audio();
    const client::SharedRegion& region = *audio_regions->output.region;
    const uint64_t values = info.channels() * info.samples();
    if (info.output_bytes() != values * sizeof(float) || info.output_bytes() > region.size()) {
      return ReportFailure(
          "decode",
          Internal("daemon reported " + std::to_string(info.output_bytes()) +
                   " audio output bytes for " + std::to_string(info.channels()) + " x " +
                   std::to_string(info.samples()) + " float32 samples; the region holds " +
                   std::to_string(region.size())));
    }
    // The region is page-aligned, so it may be read as float32.
    audio = ops::PlanarAudio{
        std::span<const float>(reinterpret_cast<const float*>(region.data()), values),
        static_cast<int64_t>(info.channels()), static_cast<int64_t>(info.samples()),
        static_cast<int64_t>(info.sample_rate_hz())};
  }

  auto written = WriteDecodedOutputs(
      outputs, {frames ? &*frames : nullptr, audio ? &*audio : nullptr}, options.fps);
  if (!written.ok()) return ReportFailure("decode", written.status());
  report.outputs = *written;
  if (latent && latent->file != nullptr) {
    report.quality =
        CompareWithFile(*frames, *latent->file, options.reference_key, options.original_key);
  }
  if (audio_latent) {
    AudioReport& a = report.audio.emplace();
    a.latent_source = audio_latent->source;
    a.latent_dtype = audio_latent->dtype;
    a.wav = outputs.wav;
    a.wav_format = outputs.wav_format;
    if (audio_latent->file != nullptr) {
      a.quality = CompareAudioWithFile(*audio, *audio_latent->file, options.audio_reference_key);
    }
  }

  if (global.json) {
    if (reply->demo_weights()) {
      std::cerr << "vaectl: WARNING: model '" << reply->model()
                << "' has DEMO weights (deterministic random, not a trained decoder)\n";
    }
    std::cout << DecodeReportToJson(report).dump(2) << "\n";
  } else {
    std::cout << FormatDecodeReport(report);
  }
  return kExitOk;
}

}  // namespace vaed::vaectl
