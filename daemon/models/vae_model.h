// The decoder interface every model in the registry implements.
//
// A VaeModel owns its weights (resident for the daemon's life) and turns a
// latent tensor into raw decoder output. Validation of the latent contract
// (dtype, rank, channels, extents) happens in Plan(), before any client
// memory is read, so a bad request is answered at once with an error that
// names the field and the rule.
//
// Thread-safety: several requests decode at once, each on its own rank (a
// thread of the engine), and every rank has its own instance of every model
// (one ModelRegistry per rank), so Decode() and DecodeAudio() of one
// instance are called by one thread at a time: the rank that owns it. The
// const methods (info(), Plan(), PlanAudio(), ToUnitRange(), TilesPerUnit(),
// plan_cache()) may be called from any thread at any time:
// the control loop plans requests on rank 0's instances while rank 0
// decodes. What instances share is process-wide: LibTorch's allocator and
// the tensor memory counters (tensor_memory.h).
#ifndef VAED_DAEMON_MODELS_VAE_MODEL_H_
#define VAED_DAEMON_MODELS_VAE_MODEL_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/models/cancel.h"
#include "daemon/models/device_placement.h"
#include "daemon/models/plan_cache.h"
#include "daemon/models/stack_tiling.h"
#include "daemon/models/tile_group.h"
#include "daemon/models/torch_dtype.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::models {

// Per-component wall-clock timings of one request, in seconds, in the order
// they were recorded. Component names are stable API ("decode",
// "taef2.decode_latent", ...).
class ComponentTimings {
 public:
  void Add(std::string component, double seconds) {
    for (auto& [name, s] : entries_) {
      if (name == component) {
        s += seconds;
        return;
      }
    }
    entries_.emplace_back(std::move(component), seconds);
  }
  const std::vector<std::pair<std::string, double>>& entries() const { return entries_; }
  // Seconds of `component`; 0 when absent.
  double Get(std::string_view component) const {
    for (const auto& [name, s] : entries_) {
      if (name == component) return s;
    }
    return 0;
  }

 private:
  std::vector<std::pair<std::string, double>> entries_;
};

// What a decode of a given latent produces. Units: pixel frames and pixels.
struct DecodePlan {
  // Raw decoder output, float32 NCHW: [frames, channels, height_px, width_px].
  int64_t frames = 0;
  int64_t channels = 0;
  int64_t height_px = 0;
  int64_t width_px = 0;
  // Shape bucket key: requests with the same key reuse warm state
  // (e.g. "taef2:34x80"). Used for cold/warm reporting.
  std::string shape_bucket;
  // Estimated peak bytes of tensor memory the decode holds, weights
  // excluded, computed from the shape before anything is allocated (H3:
  // h3/video_memory.h); 0 when the model does not estimate. The daemon's
  // admission refuses a request whose estimate exceeds what a request may
  // use (executor.memory_budget_mib, or the host's memory, minus the
  // resident weights).
  uint64_t peak_bytes_estimate = 0;
  // The estimate's terms, for that refusal ("output 5.1 GiB, one temporal
  // window 2.6 GiB, ...").
  std::string peak_bytes_terms;
  // The tiles a tiled model (Capabilities::tiled) decodes this latent in,
  // known before decoding: tile_rows x tile_cols tiles per temporal window,
  // `windows` temporal windows (H3: h3/video_tiling.h PlanTileGrid and
  // PlanTemporal). 0 for untiled models. Plan-only replies show it
  // (DecodeReply.tiling), so a caller sees the grid without decoding.
  int64_t tile_rows = 0;
  int64_t tile_cols = 0;
  int64_t windows = 0;
};

// What a model declares it supports (DESIGN.md §2.5): request options and
// config keys are validated against these, never against model names. A
// capability is declared only where it is implemented and tested.
struct Capabilities {
  bool video = true;               // Plan()/Decode() take video or image latents
  bool audio = false;              // PlanAudio()/DecodeAudio() work
  bool tiled = false;              // decodes in tiles (tiling is model semantics)
  bool stack_tiling = false;       // several same-shape tiles in one decoder call
  bool compiled_plans = false;     // a compiled-plan backend exists for it
  bool spatial_sharding = false;   // tiles of one window spread over ranks
  bool independent_group = false;  // runs on the daemon's own VAE process group
  bool student = false;            // a student decoder artifact is configured
  // Tiled decode with a tile size and overlap chosen per request (profile
  // diagnostic; changes the output): TAEF2's hybrid tiling. `tiled` is
  // for models whose tiling is fixed model semantics (H3).
  bool tunable_tiling = false;
  // Takes de-normalised latents too (LatentSpace::kDenormalized): the
  // model de-normalises normalised latents itself (H3: latent * std +
  // mean with the config's latents statistics) and can skip that step.
  bool latent_space = false;

  // The names of the true capabilities, in the order above ("video",
  // "audio", "tiled", "stack_tiling", "compiled_plans", "spatial_sharding",
  // "independent_group", "student", "tunable_tiling", "latent_space"):
  // Status.models[].capabilities.
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    const std::pair<bool, const char*> all[] = {{video, "video"},
                                                {audio, "audio"},
                                                {tiled, "tiled"},
                                                {stack_tiling, "stack_tiling"},
                                                {compiled_plans, "compiled_plans"},
                                                {spatial_sharding, "spatial_sharding"},
                                                {independent_group, "independent_group"},
                                                {student, "student"},
                                                {tunable_tiling, "tunable_tiling"},
                                                {latent_space, "latent_space"}};
    for (const auto& [on, name] : all) {
      if (on) out.emplace_back(name);
    }
    return out;
  }
};

struct ModelInfo {
  std::string name;             // registry name, e.g. "taef2"
  std::string kind;             // "taef2", "demo"
  std::string description;      // one line for status output
  std::string weights_path;     // "" when weights are generated (demo)
  std::string weights_sha256;   // hex SHA-256 of the weights file, "" for demo
  bool demo_weights = false;    // true: deterministic seeded weights, not a real model
  uint64_t resident_bytes = 0;  // bytes of weights held in memory
  int64_t latent_channels = 0;
  DType latent_dtype = DType::kFloat32;   // the dtype Decode() takes
  std::string compute_dtype = "float32";  // dtype of the decoder's arithmetic
  // Where the weights are resident and the decode math runs ("cpu",
  // "cuda:0"; device_placement.h DeviceName): the rank's device.
  std::string device = "cpu";
  Capabilities caps;
  // Video frame rate the decoded frames are meant for (H3: 24 fps); 0 when
  // the model has none (durations then assume kDefaultFps).
  double native_fps = 0;
  // Audio decoder facts (caps.audio): output sample rate, latent frame
  // rate (H3: 32000 Hz, 40 latent frames per second), weights.
  int64_t audio_sample_rate_hz = 0;
  double audio_latent_rate_hz = 0;
  std::string audio_weights_path;
  std::string audio_weights_sha256;
};

// Frames per second assumed for durations when neither the request nor the
// model names a rate (the H3 rate).
inline constexpr double kDefaultFps = 24.0;

// What an audio decode of a given latent produces. Units: latent frames in,
// samples per channel out.
struct AudioPlan {
  int64_t channels = 0;  // batch items: 1 mono, 2 stereo (left, right)
  int64_t latent_frames = 0;
  int64_t samples = 0;  // per channel
  int64_t sample_rate_hz = 0;
  // |x| at which the decoder clamps (for the clipping statistic).
  double clamp_level = 1.0;
  std::string shape_bucket;  // e.g. "h3:audio:2x40"
};

// Which space a request's latents are in (Decode.latent_space), video and
// audio alike. Only models with caps.latent_space accept kDenormalized.
enum class LatentSpace {
  kNormalized,    // the DiT's normalised latent: the model de-normalises it
  kDenormalized,  // already latent * std + mean: decoded as it is
};

// Whether a request uses compiled plans (DecodeOptions.compile, resolved
// against the profile; plan_cache.h has the policy).
enum class CompileMode {
  kOff,   // eager
  kAuto,  // cached plans; uncached buckets build from their 2nd sighting
  kOn,    // build a missing plan now
};

// Faults a test asked to inject into one request (DecodeOptions.
// inject_faults; refused unless the daemon allows fault injection). Each
// count is how many times that fault still fires.
struct FaultInjection {
  int oom_stacked = 0;     // a decoder call with >= 2 tiles: out of memory
  int oom_sequential = 0;  // a decoder call with 1 tile: out of memory
  int plan_build = 0;      // a compiled-plan build fails
  int tile_exception = 0;  // a tile decode throws a non-memory error
  // Every unit of work after the first (H3 tile call past the first
  // temporal window, TAEF2 frame batch past the first) throws a non-memory
  // error: the decode fails after the first unit's frames were handed over
  // (streamed output).
  int later_unit_exception = 0;
  // The decode fails with a sticky device error (as CUDA's "illegal memory
  // access"): the daemon reports unhealthy and exits for systemd to restart.
  int device_fatal = 0;
  // Every unit of work (H3 tile call, TAEF2 frame batch) sleeps this long
  // first, so deadlines and cancellation can be tested on small models.
  int slow_unit_ms = 0;
  // Tile-parallel decodes: the output rank's first tile gather fails (its
  // 4th collective, after the job's header, model name and latent; the
  // engine arms its communicator; the request falls back, the group is
  // rebuilt).
  int collective_failure = 0;
  // Exceptions outside any LibTorch adapter, where the engine catches them
  // at a thread's edge (executor.h): on the output rank's path
  // (rank_exception: the request is answered kInternal), on a member rank
  // of the same daemon (member_exception: it aborts its communicator, the
  // output rank falls back), in the leading daemon's store watcher while it
  // checks the group's generation (watcher_exception: the check is answered
  // without the store).
  int rank_exception = 0;
  int member_exception = 0;
  int watcher_exception = 0;
  // A member rank of the same daemon fails its first tile gather with a
  // sticky device error (what the NCCL adapter reports for a collective
  // whose CUDA context is lost): the daemon reports unhealthy and exits.
  int member_device_fatal = 0;
  bool any() const {
    return oom_stacked + oom_sequential + plan_build + tile_exception + later_unit_exception +
               device_fatal + slow_unit_ms + collective_failure + rank_exception +
               member_exception + watcher_exception + member_device_fatal >
           0;
  }
};

// A request's tile size and overlap (DecodeOptions.tiling; profile
// diagnostic, models with caps.tunable_tiling). Latent cells.
struct TilingOverride {
  int64_t tile_latent = 0;
  int64_t overlap_latent = 0;
};

// How far a Decode() has come (DecodeSettings::progress): `done` of `total`
// units finished, in order. Units: "window" (temporal windows of a tiled
// decode, H3) or "frames" (pixel frames of an untiled or hybrid-tiled
// decode, TAEF2, reported after each frame batch). tiles_done / tiles_total:
// tiles of a tiled decode (0 otherwise).
struct DecodeProgress {
  int64_t done = 0;
  int64_t total = 0;
  const char* unit = "";
  int64_t tiles_done = 0;
  int64_t tiles_total = 0;
};
using DecodeProgressFn = std::function<void(const DecodeProgress&)>;

// Streamed output (DecodeSettings::final_frames): pixel frames [begin, end)
// of the decode are final. `frames` holds them: float32 [end - begin,
// channels, height_px, width_px] on device(), the raw decoder output
// exactly as Decode() returns it for those frames (a view, valid during the
// call only; the callee copies what it keeps). A non-OK status ends the
// decode with that status.
using FinalFramesFn =
    std::function<Status(const torch::Tensor& frames, int64_t begin, int64_t end)>;

// Per-request settings, already validated against the model's capabilities.
struct DecodeSettings {
  StackTiling stack_tiling = StackTiling::kDefault;
  CompileMode compile = CompileMode::kOff;
  FaultInjection faults = {};
  std::optional<TilingOverride> tiling = {};
  // The latent's space (validated against caps.latent_space).
  LatentSpace latent_space = LatentSpace::kNormalized;
  // Deadline / cancellation of the request (cancel.h); null = never. Models
  // check it between units of work.
  const CancelToken* cancel = nullptr;
  // Tile-parallel decode across a VAE group (tile_group.h); null or size 1
  // = this rank alone. Models with info().caps.spatial_sharding honour it: on
  // rank 0 Decode() returns the output as usual, on other ranks an
  // undefined tensor (their tiles went to rank 0). A failed collective
  // returns kUnavailable with reason ErrorReason::kCollective.
  TileGroup* group = nullptr;
  // Called on the decoding thread after each unit of work (null = none).
  // Must not throw. A retry after a failure (e.g. out of memory) reports
  // from 0 again; the caller keeps what it forwards monotonic.
  DecodeProgressFn progress = nullptr;
  // Called on the decoding thread each time output frames become final
  // (H3: after each temporal window, h3/final_frames.h; TAEF2: after each
  // frame batch), in frame order, before the matching `progress`; the last
  // call ends at the last frame. A retry after a failure calls it again
  // from frame 0 (the caller skips what it already has). On a tile-parallel
  // group only the output rank calls it. Null = none.
  FinalFramesFn final_frames = nullptr;
};

// What kind of step a fallback was, set where the step is taken (never
// read back from its text).
enum class FallbackKind {
  kOutOfMemory,  // the failure ladder stepped down, or plans were released, after out of memory
  kCompile,      // a compiled plan failed to build or run; its bucket went eager
  kCollective,   // the VAE group failed or was unavailable; the output rank decoded alone
};

// One step a decode took away from its plan to succeed (same bytes).
struct Fallback {
  FallbackKind kind = FallbackKind::kOutOfMemory;
  std::string detail;  // what happened, e.g. "4 -> 2 tiles per call: out of memory ..."
};

// What a tiled decode did (zero/false for untiled models).
struct TilingReport {
  bool tiled = false;
  int64_t tile_rows = 0, tile_cols = 0;  // tiles per window = rows * cols
  int64_t windows = 0;                   // temporal windows
  int64_t decoder_calls = 0;
  int64_t max_tiles_per_call = 0;
  bool stacked = false;
  std::string stack_decision;  // why stacked or not, e.g. "auto: 4 same-shape tiles per window"
  // Failure ladder: tiles per call planned / in effect at the end; the
  // fallback steps taken, in order.
  int64_t planned_tiles_per_call = 0;
  int64_t final_tiles_per_call = 0;
  std::vector<Fallback> fallbacks;
  // Tiles this rank decoded (all of them unless tile-parallel).
  int64_t tiles_decoded_here = 0;
  // Compiled plans: summary line and call counts.
  std::string plan_decision;
  int64_t planned_calls = 0;
  int64_t eager_calls = 0;
  uint64_t estimated_peak_bytes = 0;  // what the stack decision assumed
};

// Everything a decode reports besides its output.
struct DecodeReport {
  ComponentTimings timings;
  TilingReport tiling;
};

// The checks every model's Plan() starts with: a float32 latent of
// `layout.size()` dims. Errors (kInvalidArgument):
//   "latent.dtype is float16; model 'x' needs float32"
//   "latent.shape [32, 8, 8] has rank 3; model 'x' expected [frames, 32, ...]"
// where the expected layout is `layout` joined ("frames", "32", ...).
inline Status CheckLatentDtypeAndRank(const ModelInfo& info, DType latent_dtype,
                                      const std::vector<int64_t>& latent_shape,
                                      const std::vector<std::string>& layout) {
  const std::string model = "model '" + info.name + "'";
  if (latent_dtype != DType::kFloat32) {
    return InvalidArgument("latent.dtype is " + std::string(DTypeName(latent_dtype)) + "; " +
                           model + " needs float32");
  }
  if (latent_shape.size() != layout.size()) {
    std::string expected;
    for (const std::string& d : layout) expected += (expected.empty() ? "" : ", ") + d;
    return InvalidArgument("latent.shape " + ShapeToString(latent_shape) + " has rank " +
                           std::to_string(latent_shape.size()) + "; " + model + " expected [" +
                           expected + "]");
  }
  return Status::Ok();
}

class VaeModel {
 public:
  virtual ~VaeModel() = default;

  virtual const ModelInfo& info() const = 0;

  // Validates `latent_shape`/`latent_dtype` against the model's contract and
  // returns the output geometry. Errors (kInvalidArgument) name the field
  // ("latent.shape[1]", "latent.dtype") and the rule, e.g.
  // "latent.shape[1] is 16; model 'taef2' needs 32 latent channels".
  virtual Result<DecodePlan> Plan(DType latent_dtype,
                                  const std::vector<int64_t>& latent_shape) const = 0;

  // Decodes `latent` (on device(), contiguous, shape/dtype already
  // accepted by Plan()) into the raw output float32 [frames, 3, height_px,
  // width_px] on device(), in the decoder's own output space, not clamped
  // (may be a non-contiguous view). Adds its component timings and tiling
  // facts to `report` (may be null). Errors from LibTorch are returned as
  // kInternal / kResourceExhausted, never thrown; a latent on another
  // device is kInvalidArgument naming `latent.device` (the caller copies it
  // to device() first).
  virtual Result<torch::Tensor> Decode(const torch::Tensor& latent, const DecodeSettings& settings,
                                       DecodeReport* report) = 0;

  // Convenience: default settings, timings only (`timings` may be null).
  Result<torch::Tensor> Decode(const torch::Tensor& latent, ComponentTimings* timings) {
    DecodeReport report;
    Result<torch::Tensor> out = Decode(latent, DecodeSettings{}, &report);
    if (timings != nullptr) {
      for (const auto& [name, s] : report.timings.entries()) timings->Add(name, s);
    }
    return out;
  }

  // The device the model's weights live on and its decode math runs on:
  // the rank's (ModelRegistry::Create), fixed at creation. Decode() and
  // DecodeAudio() take tensors on it and return tensors on it. Any thread.
  virtual torch::Device device() const = 0;

  // The checks every Decode() starts with: `latent` is defined, passes
  // Plan() for its dtype and shape (whose error it returns), and lies on
  // device() (kInvalidArgument "latent.device is cpu; model 'x' runs on
  // cuda:0"). Returns the plan.
  Result<DecodePlan> PlanLatentOnDevice(const torch::Tensor& latent) const {
    if (!latent.defined()) return InvalidArgument("latent is an undefined tensor");
    VAED_ASSIGN_OR_RETURN(DecodePlan plan,
                          Plan(FromScalarType(latent.scalar_type()), latent.sizes().vec()));
    VAED_RETURN_IF_ERROR(CheckTensorDevice(latent, "latent", device(), info().name));
    return plan;
  }

  // Maps raw Decode() output to display RGB in [0, 1] (float32, same shape,
  // on the raw tensor's device, which must be device())
  // with the model's official post-processing (H3: the inverse ImageNet
  // normalisation and a clamp). The default is the identity (decoders whose
  // raw output is already nominally [0, 1]). uint8 output is
  // round_half_even(clamp(ToUnitRange(raw), 0, 1) * 255).
  virtual Result<torch::Tensor> ToUnitRange(const torch::Tensor& raw) const { return raw; }

  // Audio (models with info().caps.audio). Validates an audio latent
  // the way Plan() validates a video latent (errors name
  // "audio_latent.shape[i]" and the rule). The default rejects every audio
  // latent: the model has no audio decoder.
  virtual Result<AudioPlan> PlanAudio(DType latent_dtype,
                                      const std::vector<int64_t>& latent_shape) const {
    (void)latent_dtype;
    (void)latent_shape;
    return InvalidArgument("audio_latent is set but model '" + info().name + "' (kind " +
                           info().kind + ") has no audio decoder");
  }

  // Decodes an audio latent accepted by PlanAudio() and lying on device()
  // into float32 [channels, samples] (planar) on device(), clamped to
  // +-clamp_level; a latent on another device is kInvalidArgument naming
  // `audio_latent.device`. `space`: as DecodeSettings::latent_space. Adds
  // its timings ("audio_vae.decode_latent") to `report` (may be null).
  // Errors as Decode(); never throws.
  virtual Result<torch::Tensor> DecodeAudio(const torch::Tensor& latent, LatentSpace space,
                                            DecodeReport* report) {
    (void)latent;
    (void)space;
    (void)report;
    return FailedPrecondition("model '" + info().name + "' has no audio decoder");
  }

  // Tiles per unit of work of a decode of `latent_shape` (accepted by
  // Plan()) under `settings`: H3, tiles per temporal window; TAEF2 with
  // hybrid tiling, tiles per frame batch; 0 for an untiled decode (it
  // cannot be spread: it runs on one rank). Sizes a request's VAE group
  // (tile_group.h; group.few_tiles). Any thread.
  virtual int64_t TilesPerUnit(const std::vector<int64_t>& latent_shape,
                               const DecodeSettings& settings) const {
    (void)latent_shape;
    (void)settings;
    return 0;
  }

  // The compiled-plan cache (models with info().caps.compiled_plans), for
  // status; nullopt for models without one. Any thread.
  virtual std::optional<PlanCacheSnapshot> plan_cache() const { return std::nullopt; }
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_VAE_MODEL_H_
