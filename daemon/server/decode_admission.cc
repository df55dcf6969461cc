#include "daemon/server/decode_admission.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "daemon/engine/cuda_events.h"
#include "daemon/models/av_sync.h"
#include "daemon/models/byte_units.h"
#include "daemon/server/decode_options.h"
#include "daemon/server/decode_reply.h"
#include "daemon/server/printable_name.h"
#include "vaed/wire.h"

namespace vaed::server {

namespace {

// The tensor layout a request's output must have.
struct OutputLayout {
  DType dtype;
  std::vector<int64_t> shape;
};

Result<OutputLayout> ExpectedOutput(const models::DecodePlan& plan, v1::OutputFormat format) {
  switch (format) {
    case v1::OUTPUT_FORMAT_UNSPECIFIED:
    case v1::OUTPUT_FORMAT_UINT8_NHWC:
      return OutputLayout{DType::kUInt8,
                          {plan.frames, plan.height_px, plan.width_px, plan.channels}};
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW:
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT:
      return OutputLayout{DType::kFloat32,
                          {plan.frames, plan.channels, plan.height_px, plan.width_px}};
    default:
      return InvalidArgument("output_format " + std::to_string(format) +
                             " is unknown (expected UINT8_NHWC, FLOAT32_NCHW or "
                             "FLOAT32_NCHW_UNIT)");
  }
}

std::string FormatName(v1::OutputFormat format) {
  switch (format) {
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW:
      return "float32 NCHW (raw)";
    case v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT:
      return "float32 NCHW ([0, 1])";
    default:
      return "uint8 NHWC";
  }
}

// Byte ranges [a, a+n) and [b, b+m) intersect (both already bounds-checked,
// so no sum overflows).
bool Overlaps(uint64_t a, uint64_t n, uint64_t b, uint64_t m) {
  return n > 0 && m > 0 && a < b + m && b < a + n;
}

// Checks that `ref` lies inside `region` and that the client has not shrunk
// the segment since it was registered.
Status CheckRegionRange(const HostRegion& region, const TensorRef& ref, const std::string& what) {
  VAED_RETURN_IF_ERROR(region.CheckRange(ref.offset, ref.size, what));
  VAED_ASSIGN_OR_RETURN(uint64_t now_bytes, region.CurrentSegmentBytes());
  if (now_bytes < ref.offset + ref.size) {
    return OutOfRange(what + ": region '" + region.name() + "' now holds only " +
                      std::to_string(now_bytes) + " bytes (fstat) but was registered with " +
                      std::to_string(region.size()) + "; the segment shrank");
  }
  return Status::Ok();
}

// A request's frame rate: AvSync.fps, or the model's, or kDefaultFps.
Result<double> FpsFor(const models::ModelInfo& model, double requested) {
  if (requested == 0) return model.native_fps > 0 ? model.native_fps : models::kDefaultFps;
  constexpr double kMaxFps = 1000;
  if (!std::isfinite(requested) || requested < 0 || requested > kMaxFps) {
    return InvalidArgument("av_sync.fps is " + std::to_string(requested) +
                           "; must be a frame rate in (0, 1000] frames per second, or 0 for "
                           "the model's rate");
  }
  return requested;
}

// Decode.latent_space for `model`: unspecified is normalized; denormalized
// only for a model that de-normalises (caps.latent_space), else
// kInvalidArgument naming the field; a value outside the enum (a newer
// client) names it too.
Result<models::LatentSpace> LatentSpaceFor(const models::ModelInfo& model, int space) {
  switch (space) {
    case v1::LATENT_SPACE_UNSPECIFIED:
    case v1::LATENT_SPACE_NORMALIZED:
      return models::LatentSpace::kNormalized;
    case v1::LATENT_SPACE_DENORMALIZED:
      if (!model.caps.latent_space) {
        return InvalidArgument("latent_space is denormalized but model '" + model.name +
                               "' (kind " + model.kind +
                               ") has no latent normalisation: it takes its latents as they "
                               "are; send normalized (the default)")
            .WithField("latent_space");
      }
      return models::LatentSpace::kDenormalized;
    default:
      return InvalidArgument("latent_space is " + std::to_string(space) +
                             "; must be normalized (1) or denormalized (2), or unset")
          .WithField("latent_space");
  }
}

// The position of `model` in `registry` (config order): every rank's
// registry holds its own instance at that index (decode_job.h).
size_t ModelIndex(const models::ModelRegistry& registry, const models::VaeModel* model) {
  const std::vector<const models::VaeModel*> all = registry.models();
  return static_cast<size_t>(std::find(all.begin(), all.end(), model) - all.begin());
}

// The video part's plan and expected output (not yet placed in regions).
Result<std::optional<engine::VideoPart>> PlanVideo(models::VaeModel& model, const v1::Decode& d,
                                                   const engine::RequestMemory& memory) {
  if (!d.has_latent()) {
    if (d.has_output()) {
      return InvalidArgument(
          "output is set but latent is not; an audio-only request writes "
          "only audio_output");
    }
    if (d.options().stack_tiling() != v1::STACK_TILING_UNSPECIFIED) {
      return InvalidArgument(
          "options.stack_tiling is set but the request has no video latent "
          "(stack tiling schedules video tiles)");
    }
    return std::optional<engine::VideoPart>();
  }
  engine::VideoPart v;
  v.latent.dtype = FromProto(d.latent().dtype());
  v.latent.shape.assign(d.latent().shape().begin(), d.latent().shape().end());
  VAED_ASSIGN_OR_RETURN(v.plan, model.Plan(v.latent.dtype, v.latent.shape));
  VAED_RETURN_IF_ERROR(engine::CheckRequestMemory(v.plan.peak_bytes_estimate,
                                                  v.plan.peak_bytes_terms, v.latent.shape, memory));
  VAED_ASSIGN_OR_RETURN(OutputLayout expected, ExpectedOutput(v.plan, d.output_format()));
  v.output.dtype = expected.dtype;
  v.output.shape = expected.shape;
  VAED_ASSIGN_OR_RETURN(v.output.size, ContiguousBytes(expected.dtype, expected.shape, "output"));
  v.format = ToEngineFormat(d.output_format());
  return std::optional<engine::VideoPart>(std::move(v));
}

// The audio part's plan and expected output (not yet placed in regions).
Result<std::optional<engine::AudioPart>> PlanAudio(models::VaeModel& model, const v1::Decode& d) {
  if (!d.has_audio_latent()) {
    if (d.has_audio_output()) return InvalidArgument("audio_output is set but audio_latent is not");
    return std::optional<engine::AudioPart>();
  }
  engine::AudioPart a;
  a.latent.dtype = FromProto(d.audio_latent().dtype());
  a.latent.shape.assign(d.audio_latent().shape().begin(), d.audio_latent().shape().end());
  VAED_ASSIGN_OR_RETURN(a.plan, model.PlanAudio(a.latent.dtype, a.latent.shape));
  a.output.dtype = DType::kFloat32;
  a.output.shape = {a.plan.channels, a.plan.samples};
  VAED_ASSIGN_OR_RETURN(a.output.size,
                        ContiguousBytes(a.output.dtype, a.output.shape, "audio_output"));
  return std::optional<engine::AudioPart>(std::move(a));
}

// One tensor of a request placed in a client region, for the overlap check.
struct Placed {
  std::string field;
  const TensorRef* ref;
  const HostRegion* region;  // one of the two
  const engine::CudaRegion* cuda;
  bool written;  // the daemon writes it (an output)

  // The same memory: one segment, or one allocation (the same IPC handle),
  // also through two registrations.
  bool SameMemory(const Placed& o) const {
    if (region != nullptr && o.region != nullptr) return region->SameSegment(*o.region);
    return cuda != nullptr && o.cuda != nullptr && cuda->handle() == o.cuda->handle();
  }
  std::string MemoryName() const {
    return region != nullptr ? "segment '" + region->name() + "'" : std::string("CUDA allocation");
  }
};

// Where a tensor of the request lives: one of the two is set.
struct Located {
  std::shared_ptr<HostRegion> host;
  std::shared_ptr<engine::CudaRegion> cuda;
};

// `ref`'s bytes inside a CUDA region (overflow-safe); kOutOfRange naming
// `what` otherwise.
Status CheckCudaRange(const engine::CudaRegion& region, const TensorRef& ref,
                      const std::string& what) {
  if (ref.offset > region.size() || ref.size > region.size() - ref.offset) {
    return OutOfRange(what + ": bytes [" + std::to_string(ref.offset) + ", offset + " +
                      std::to_string(ref.size) + ") lie outside the CUDA region's " +
                      std::to_string(region.size()) + " registered bytes");
  }
  return Status::Ok();
}

// Decode.inputs_ready_event orders the worker's device work before the
// rank's: the rank's stream waits on it before its first access to the
// request's CUDA regions (engine/rank_stream.h), so it orders both the
// worker's writes of CUDA latents before the rank reads them and the
// worker's earlier use of CUDA output memory before the rank writes it.
// Checked here for its size, and refused rather than ignored when the
// request names no CUDA region: there it would order nothing.
Status CheckInputsReadyEvent(const v1::Decode& d, const std::vector<Placed>& placed) {
  if (d.inputs_ready_event().empty()) return Status::Ok();
  VAED_RETURN_IF_ERROR(engine::CheckIpcEventHandle(d.inputs_ready_event(), "inputs_ready_event"));
  for (const Placed& p : placed) {
    if (p.cuda != nullptr) return Status::Ok();
  }
  return InvalidArgument(
             "inputs_ready_event is set but the request's tensors are all in host "
             "regions: an event orders device work only; finish writing host memory "
             "before sending the request and leave the event empty")
      .WithField("inputs_ready_event");
}

// What the daemon writes must not overlap anything else of the request,
// also through two registrations (region ids) of one segment.
Status CheckNoOverlap(const std::vector<Placed>& placed) {
  for (size_t i = 0; i < placed.size(); ++i) {
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const TensorRef& a = *placed[i].ref;
      const TensorRef& b = *placed[j].ref;
      if (!(placed[i].written || placed[j].written) || !placed[i].SameMemory(placed[j]) ||
          !Overlaps(a.offset, a.size, b.offset, b.size)) {
        continue;
      }
      const std::string& writer = placed[i].written ? placed[i].field : placed[j].field;
      const std::string& other = placed[i].written ? placed[j].field : placed[i].field;
      const TensorRef& w = placed[i].written ? a : b;
      const TensorRef& o = placed[i].written ? b : a;
      return InvalidArgument(
          writer + " bytes [" + std::to_string(w.offset) + ", " +
          std::to_string(w.offset + w.size) + ") overlap " + other + " bytes [" +
          std::to_string(o.offset) + ", " + std::to_string(o.offset + o.size) + ") in " +
          (a.region_id == b.region_id
               ? "region " + std::to_string(a.region_id)
               : placed[i].MemoryName() + " (regions " + std::to_string(a.region_id) + " and " +
                     std::to_string(b.region_id) + " map the same segment)"));
    }
  }
  return Status::Ok();
}

}  // namespace

struct DecodeAdmission::Planned {
  models::VaeModel* model = nullptr;
  ResolvedOptions options;
  engine::RequestFacts av;
  std::optional<engine::VideoPart> video;
  std::optional<engine::AudioPart> audio;
};

namespace {

// The configured VAE groups; a config that failed validation (never served;
// ValidateOptions refuses it) falls back to one rank.
parallel::GroupLayout LayoutOrSingleRank(const engine::GroupOptions& group) {
  Result<parallel::GroupLayout> layout = engine::MakeGroupLayout(group);
  return layout.ok() ? *std::move(layout)
                     : *parallel::GroupLayout::Plan(parallel::GroupLayoutOptions{});
}

}  // namespace

DecodeAdmission::DecodeAdmission(const DaemonOptions& options,
                                 const engine::RequestMemory& request_memory,
                                 const models::ModelRegistry* registry,
                                 const ClientRegistry* clients)
    : options_(options),
      request_memory_(request_memory),
      layout_(LayoutOrSingleRank(options.group)),
      registry_(registry),
      clients_(clients) {}

Result<Admission> DecodeAdmission::Admit(const ClientState& client, const std::string& routing_id,
                                         const v1::Request& req, Clock::time_point now,
                                         std::optional<FaultKind>* kind) const {
  *kind = std::nullopt;
  const v1::Decode& d = req.decode();
  VAED_ASSIGN_OR_RETURN(Planned p, Plan(d));
  if (d.plan_only()) {
    Admission a;
    a.planned.emplace();
    FillDecodeGeometry(*p.model, p.video, p.audio, p.av, &*a.planned);
    a.planned->set_planned_only(true);
    return a;
  }
  // Failures of placement are region faults.
  *kind = FaultKind::kRegion;
  VAED_RETURN_IF_ERROR(Place(client, d, &p));
  // Per-client in-flight limit: a quota fault (a well-behaved client waits
  // for its replies).
  if (client.in_flight >= options_.server.max_in_flight_per_client) {
    *kind = FaultKind::kQuota;
    constexpr uint32_t kRetryMs = 100;
    return Busy(
        "client " + std::to_string(client.id) + " already has " + std::to_string(client.in_flight) +
            " decodes queued or running (server.max_in_flight_per_client = " +
            std::to_string(options_.server.max_in_flight_per_client) + "); wait for a reply first",
        kRetryMs);
  }
  *kind = std::nullopt;
  Admission a;
  a.job = MakeJob(client, routing_id, req, now, std::move(p));
  return a;
}

Result<DecodeAdmission::Planned> DecodeAdmission::Plan(const v1::Decode& d) const {
  VAED_RETURN_IF_ERROR(CheckPrintableName(d.model(), "model"));
  VAED_RETURN_IF_ERROR(CheckPrintableName(d.options().profile(), "options.profile"));
  Planned p;
  VAED_ASSIGN_OR_RETURN(p.model, registry_->Get(d.model()));
  const models::ModelInfo& info = p.model->info();
  VAED_ASSIGN_OR_RETURN(p.options, ResolveDecodeOptions(info, d.options(), options_.profiles,
                                                        options_.executor.allow_fault_injection));
  if (d.options().group_size() != 0) {
    // Qualified? (How many ranks it finally gets depends on its tiles; the
    // executor decides with group.few_tiles.)
    VAED_RETURN_IF_ERROR(parallel::ChooseGroupSize(layout_, int64_t{d.options().group_size()},
                                                   INT64_MAX, parallel::FewTiles::kPad)
                             .status());
  }

  // Plans first: the latents' dtypes and shapes decide everything else.
  if (!d.has_latent() && !d.has_audio_latent()) {
    return InvalidArgument(
        "latent or audio_latent is required (latent: video or image, "
        "audio_latent: audio; both for a joint request)");
  }
  VAED_ASSIGN_OR_RETURN(p.av.fps, FpsFor(info, d.av_sync().fps()));
  p.av.independent_lengths = d.av_sync().independent_lengths();
  VAED_ASSIGN_OR_RETURN(p.av.latent_space, LatentSpaceFor(info, d.latent_space()));
  VAED_ASSIGN_OR_RETURN(p.video, PlanVideo(*p.model, d, request_memory_));
  VAED_ASSIGN_OR_RETURN(p.audio, PlanAudio(*p.model, d));

  // The A/V length rule (AvSync).
  if (p.video && info.caps.audio) {
    p.av.expected_audio_latent_frames = models::AudioLatentFramesForVideo(
        p.video->plan.frames, p.av.fps, info.audio_latent_rate_hz);
  }
  if (p.video && p.audio && !p.av.independent_lengths) {
    VAED_RETURN_IF_ERROR(models::CheckAvLengths(
        {.video_frames = p.video->plan.frames,
         .fps = p.av.fps,
         .audio_latent_frames = p.audio->plan.latent_frames,
         .audio_latent_rate_hz = info.audio_latent_rate_hz,
         .samples_per_latent = p.audio->plan.samples / p.audio->plan.latent_frames,
         .sample_rate_hz = p.audio->plan.sample_rate_hz}));
  }
  p.av.profile = ProfileName(p.options.profile);
  p.av.compile_decision = p.options.compile_decision;
  p.av.stack_decision = p.options.stack_decision;
  p.av.output_changing = p.options.output_changing;
  return p;
}

Status DecodeAdmission::Place(const ClientState& client, const v1::Decode& d, Planned* p) const {
  const std::string& model_name = p->model->info().name;
  std::vector<Placed> placed;
  // The client's region `ref` names, with `ref`'s bytes inside it now.
  auto locate = [&](const TensorRef& ref, const std::string& field) -> Result<Located> {
    VAED_ASSIGN_OR_RETURN(const RegisteredRegion* region,
                          clients_->FindRegion(client, ref.region_id, field + ".region_id"));
    if (region->cuda) {
      VAED_RETURN_IF_ERROR(CheckCudaRange(*region->cuda, ref, field));
      return Located{nullptr, region->cuda};
    }
    VAED_RETURN_IF_ERROR(CheckRegionRange(*region->mapping, ref, field));
    return Located{region->mapping, nullptr};
  };
  // Locates `ref`, stores its region in the part, and lists it for the
  // overlap check (`written`: the daemon writes it).
  auto place = [&](const TensorRef& ref, const std::string& field, bool written,
                   std::shared_ptr<HostRegion>* host,
                   std::shared_ptr<engine::CudaRegion>* cuda) -> Status {
    VAED_ASSIGN_OR_RETURN(Located at, locate(ref, field));
    *host = std::move(at.host);
    *cuda = std::move(at.cuda);
    placed.push_back({field, &ref, host->get(), cuda->get(), written});
    return Status::Ok();
  };
  if (engine::VideoPart* video = p->video ? &*p->video : nullptr) {
    VAED_ASSIGN_OR_RETURN(video->latent, FromProto(d.latent(), "latent"));
    if (!d.has_output()) return InvalidArgument("output is required unless plan_only is set");
    VAED_ASSIGN_OR_RETURN(TensorRef output, FromProto(d.output(), "output"));
    if (output.dtype != video->output.dtype || output.shape != video->output.shape) {
      return InvalidArgument(
          "output is " + std::string(DTypeName(output.dtype)) + " " + ShapeToString(output.shape) +
          "; model '" + model_name + "' writes " + FormatName(d.output_format()) + " " +
          ShapeToString(video->output.shape) + " for latent " + ShapeToString(video->latent.shape));
    }
    video->output = std::move(output);
    VAED_RETURN_IF_ERROR(
        place(video->latent, "latent", false, &video->latent_region, &video->latent_cuda));
    VAED_RETURN_IF_ERROR(
        place(video->output, "output", true, &video->output_region, &video->output_cuda));
  }
  if (engine::AudioPart* audio = p->audio ? &*p->audio : nullptr) {
    VAED_ASSIGN_OR_RETURN(audio->latent, FromProto(d.audio_latent(), "audio_latent"));
    if (!d.has_audio_output()) {
      return InvalidArgument("audio_output is required unless plan_only is set");
    }
    VAED_ASSIGN_OR_RETURN(TensorRef output, FromProto(d.audio_output(), "audio_output"));
    if (output.dtype != audio->output.dtype || output.shape != audio->output.shape) {
      return InvalidArgument("audio_output is " + std::string(DTypeName(output.dtype)) + " " +
                             ShapeToString(output.shape) + "; model '" + model_name +
                             "' writes float32 [channels, samples] " +
                             ShapeToString(audio->output.shape) + " for audio_latent " +
                             ShapeToString(audio->latent.shape));
    }
    audio->output = std::move(output);
    VAED_RETURN_IF_ERROR(
        place(audio->latent, "audio_latent", false, &audio->latent_region, &audio->latent_cuda));
    VAED_RETURN_IF_ERROR(
        place(audio->output, "audio_output", true, &audio->output_region, &audio->output_cuda));
  }
  VAED_RETURN_IF_ERROR(CheckNoOverlap(placed));
  return CheckInputsReadyEvent(d, placed);
}

std::unique_ptr<engine::DecodeJob> DecodeAdmission::MakeJob(const ClientState& client,
                                                            const std::string& routing_id,
                                                            const v1::Request& req,
                                                            Clock::time_point now,
                                                            Planned p) const {
  const v1::DecodeOptions& options = req.decode().options();
  auto job = std::make_unique<engine::DecodeJob>();
  job->routing_id = routing_id;
  job->client_id = client.id;
  job->request_id = req.request_id();
  job->model = p.model;
  job->model_index = ModelIndex(*registry_, p.model);
  job->settings.stack_tiling = p.options.stack_tiling;
  job->settings.compile = p.options.compile;
  job->settings.faults = p.options.faults;
  job->settings.tiling = p.options.tiling;
  job->settings.latent_space = p.av.latent_space;
  job->requested_group_size = options.group_size();
  job->progress = options.progress();
  job->stream_output = options.stream_output();
  job->inputs_ready_event = req.decode().inputs_ready_event();
  job->video = std::move(p.video);
  job->audio = std::move(p.audio);
  job->av = std::move(p.av);
  job->received = now;
  job->cancel = std::make_shared<models::CancelToken>(now, options.deadline_ms());
  return job;
}

}  // namespace vaed::server
