// What the daemon answers, as the C++ client library hands it back: plain
// values, one struct per reply of the protocol (vaed.v1, the installed
// share/vaed/proto/vaed/v1/vaed.proto), field for field and under the same
// names, so the protocol's comments document them too. The library copies
// each reply out of its protocol message; nothing here refers to protobuf,
// and a program using these types links no protobuf.
//
// Units are in the names or beside them: *_px pixels, *_bytes bytes,
// *_seconds seconds, *_ms milliseconds, *_hz per second; shapes in
// elements. A field the daemon left unset reads as its zero value (0, "",
// empty); a nested part the daemon may leave out is a std::optional.
//
// Thread-safety: plain values; a reply is the caller's to keep and share.
#ifndef VAED_REPLIES_H_
#define VAED_REPLIES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vaed/tensor_ref.h"

namespace vaed::client {

// Which space latents are in (= vaed.v1.LatentSpace), video and audio
// alike. kDenormalized: already latent * std + mean (what diffusers'
// AutoencoderKLMiniMaxH3*.decode(z) takes); the daemon skips its
// de-normalisation and gives the same bytes as kNormalized for the latent
// it came from. A model without latent normalisation (no "latent_space"
// capability) refuses kDenormalized.
enum class LatentSpace {
  // Replies only: the daemon named no space (one older than the field,
  // which decodes every latent as kNormalized). A request treats it as
  // kNormalized.
  kUnspecified = 0,
  kNormalized = 1,  // the DiT's normalised latent (the default)
  kDenormalized = 2,
};

// The daemon's answer to Hello (= vaed.v1.HelloReply): this client's id and
// the liveness settings the library follows.
struct HelloReply {
  uint64_t client_id = 0;
  uint32_t protocol_version = 0;
  std::string daemon_version;
  uint32_t heartbeat_interval_ms = 0;  // a Heartbeat at least this often
  uint32_t client_timeout_ms = 0;      // silence after which the daemon drops a client
  uint32_t heartbeat_liveness = 0;     // unanswered heartbeats before a reconnect
  uint32_t max_in_flight = 0;          // decodes this client may have queued or running
  // UUIDs ("GPU-...") of the devices of the daemon's ranks, in rank order;
  // empty when it has no CUDA ranks.
  std::vector<std::string> cuda_devices;
};

// One timed component of a decode (= vaed.v1.Timing): "decode",
// "video_vae.decode_latent", "audio_vae.decode_latent",
// "video_vae.tile_decode", "video_vae.tile_merge", ...
struct Timing {
  std::string component;
  double seconds = 0;
};

// Reported checks of a decoded output, never fatal (= vaed.v1.OutputSanity).
struct OutputSanity {
  uint64_t nonfinite = 0;       // NaN or Inf values
  bool constant = false;        // every value equal
  double rms = 0;               // of the finite values
  double peak_abs = 0;          // largest finite |value|
  double clipped_fraction = 0;  // at or beyond the clamp level (audio: |x| >= 1); 0 for video
};

// The audio part of a decode (= vaed.v1.AudioInfo). Units: latent frames
// in, samples per channel out.
struct AudioInfo {
  std::vector<int64_t> latent_shape;  // [channels, 32, T] for H3
  std::vector<int64_t> output_shape;  // [channels, samples], float32 planar
  uint64_t output_bytes = 0;
  uint32_t channels = 0;  // 1 mono, 2 stereo (left, right)
  uint64_t latent_frames = 0;
  uint64_t samples = 0;  // per channel
  uint32_t sample_rate_hz = 0;
  double seconds = 0;                  // samples / sample_rate_hz
  std::optional<OutputSanity> sanity;  // absent for plans
};

// What a tiled decode did (= vaed.v1.TilingInfo). Units: tiles, temporal
// windows, decoder calls.
struct TilingInfo {
  uint32_t tile_rows = 0;  // tiles per window = tile_rows * tile_cols
  uint32_t tile_cols = 0;
  uint32_t windows = 0;  // temporal windows (7 latent frames each for H3)
  uint32_t decoder_calls = 0;
  uint32_t max_tiles_per_call = 0;  // > 1 when tiles were stacked
  bool stacked = false;
  std::string stack_decision;  // e.g. "auto: 4 same-shape tiles per window"
  // The failure ladder: tiles per call planned and at the end, one line
  // per step down.
  uint32_t planned_tiles_per_call = 0;
  uint32_t final_tiles_per_call = 0;
  std::vector<std::string> fallbacks;
  std::string plan_decision;  // what the decoder calls ran on (compiled plan or eager)
  uint32_t planned_calls = 0;
  uint32_t eager_calls = 0;
  uint64_t estimated_peak_bytes = 0;  // the stack decision's estimate; 0 when none was needed
};

// One rank's part of a grouped decode (= vaed.v1.RankReport).
struct RankReport {
  uint32_t rank = 0;  // global rank
  uint32_t tiles = 0;
  double decode_seconds = 0;  // tiles, merge and communication
  double started_unix = 0;    // wall clock, seconds since the epoch
  double finished_unix = 0;
};

// The VAE group that decoded a request's video (= vaed.v1.GroupReport).
struct GroupReport {
  std::string name;  // e.g. "s2.b0": size 2, block 0
  uint32_t size = 0;
  uint64_t generation = 0;        // communicator generation used
  std::vector<RankReport> ranks;  // in group order; ranks[0] is the output rank
  double imbalance = 0;           // max / mean of the ranks' decode seconds
  std::string fallback;           // why it did not run as planned; "" when it did
};

// The answer to Decode and PlanDecode (= vaed.v1.DecodeReply). Video
// fields are for the `output` tensor (pixel frames, pixels); `audio` is set
// when the request carried an audio latent.
struct DecodeReply {
  std::string model;
  std::vector<int64_t> latent_shape;
  DType latent_dtype = DType::kUnknown;
  std::vector<int64_t> output_shape;
  DType output_dtype = DType::kUnknown;
  uint64_t output_bytes = 0;
  uint32_t frames = 0;  // pixel frames written
  uint32_t height_px = 0;
  uint32_t width_px = 0;
  bool warm = false;  // every rank had decoded this shape bucket before
  std::vector<Timing> timings;
  std::string compute_dtype;  // e.g. "float32"
  bool demo_weights = false;  // the built-in seeded demo model: not a trained decoder
  bool planned_only = false;
  uint64_t nonfinite_outputs = 0;
  // Tiled models (H3 video) only. A plan fills the tile grid (tile_rows,
  // tile_cols, windows); a decode every field.
  std::optional<TilingInfo> tiling;
  uint64_t peak_rss_bytes = 0;  // daemon VmHWM during the request
  // Set when the request carried an audio latent, plans included (its
  // `sanity` only after a decode).
  std::optional<AudioInfo> audio;
  // Of the raw video output: after a video decode, not in a plan.
  std::optional<OutputSanity> video_sanity;
  double fps = 0;                             // used for durations and the A/V length rule
  double video_seconds = 0;                   // frames / fps
  uint64_t expected_audio_latent_frames = 0;  // the A/V length rule for `frames`
  bool independent_lengths = false;
  std::string profile;
  std::string compile_decision;
  uint64_t peak_tensor_bytes = 0;    // LibTorch host tensors; 0 when not tracked
  uint64_t memory_budget_bytes = 0;  // the daemon's tensor budget; 0 = none
  std::string stack_decision;
  std::vector<std::string> output_changing;  // knobs that change the output (diagnostic)
  // The VAE group that decoded the video: set by a video decode, not by a
  // plan or an audio-only decode.
  std::optional<GroupReport> group;
  // A CUDA IPC event handle (64 bytes) recorded after the last write to
  // CUDA outputs; empty otherwise. Decode() has made the request's stream
  // wait on it before returning.
  std::string outputs_ready_event;
  uint32_t host_copies = 0;  // copies between host and device memory, and their bytes
  uint64_t host_copy_bytes = 0;
  uint64_t peak_device_bytes = 0;  // GPU ranks; 0 on CPU ranks
  // The space the latents were decoded in; a value past kDenormalized is
  // one a newer daemon knows and this library does not.
  LatentSpace latent_space = LatentSpace::kUnspecified;
};

// A model's compiled-plan cache (= vaed.v1.PlanCacheInfo).
struct PlanCacheInfo {
  struct EagerOnly {
    std::string bucket;
    std::string reason;
  };
  uint32_t capacity = 0;
  std::vector<std::string> buckets;   // cached, most recently used first
  std::vector<EagerOnly> eager_only;  // sticky: build or first run failed
  uint64_t hits = 0;
  uint64_t builds = 0;
  uint64_t build_failures = 0;
  uint64_t evictions = 0;
  uint64_t eager_calls = 0;
  uint64_t plan_bytes = 0;
};

// A model the daemon serves (= vaed.v1.ModelInfo).
struct ModelInfo {
  std::string name;
  std::string kind;  // "taef2", "demo", "h3", "h3_video", "h3_audio"
  std::string weights_path;
  std::string weights_sha256;
  bool demo_weights = false;
  uint64_t resident_bytes = 0;
  std::string description;
  std::string compute_dtype;
  std::vector<std::string> capabilities;  // "video", "audio", "tiled", ...
  std::string audio_weights_path;
  std::string audio_weights_sha256;
  uint32_t audio_sample_rate_hz = 0;
  double audio_latent_rate_hz = 0;  // audio latent frames per second
  double native_fps = 0;            // 0 = none
  std::optional<PlanCacheInfo> plan_cache;
  std::string weights_verification;  // "verified", "unverified" or "generated"
};

// One VAE group (= vaed.v1.GroupStatus).
struct GroupStatus {
  std::string name;
  uint32_t size = 0;
  std::vector<uint32_t> ranks;
  uint64_t generation = 0;
  std::string state;  // "idle", "busy", "rebuilding"
  uint64_t runs = 0;
  uint64_t failures = 0;
  std::string last_failure;
  double last_imbalance = 0;
};

// A process in quarantine (= vaed.v1.QuarantineEntry).
struct QuarantineEntry {
  uint32_t uid = 0;
  int32_t pid = 0;
  std::string client_name;
  uint32_t offences = 0;
  uint64_t remaining_ms = 0;
  uint64_t duration_ms = 0;
  std::string last_fault;
  uint32_t faults_in_window = 0;
};

// A connected client (= vaed.v1.ClientEntry).
struct ClientEntry {
  uint64_t client_id = 0;
  std::string name;
  uint32_t uid = 0;
  int32_t pid = 0;
  uint32_t regions = 0;
  uint64_t region_bytes = 0;
  uint32_t in_flight = 0;
  uint32_t faults_in_window = 0;
  double idle_seconds = 0;
};

// Latency of one component over the daemon's lifetime (=
// vaed.v1.ComponentStats), seconds.
struct ComponentStats {
  std::string component;
  uint64_t count = 0;
  double sum_seconds = 0;
  double p50_seconds = 0;
  double p95_seconds = 0;
};

// Decode requests by outcome (= vaed.v1.OutcomeCount): "ok", "busy", ...
struct OutcomeCount {
  std::string outcome;
  uint64_t count = 0;
};

// One local rank (= vaed.v1.RankStatus).
struct RankStatus {
  uint32_t rank = 0;  // global rank
  double busy_seconds = 0;
  uint64_t tiles = 0;
  double last_imbalance = 0;
  std::string device;       // "cpu" or "cuda"
  std::string device_name;  // "" for cpu
  std::string device_uuid;  // "GPU-..."; "" for cpu
  uint64_t device_memory_used_bytes = 0;
  uint64_t device_memory_total_bytes = 0;
};

// The answer to GetStatus (= vaed.v1.StatusReply).
struct StatusReply {
  std::string daemon_version;
  double uptime_seconds = 0;
  bool healthy = false;
  std::vector<ModelInfo> models;
  std::string default_model;
  uint32_t clients = 0;
  uint32_t regions = 0;
  uint64_t requests_served = 0;
  uint64_t requests_failed = 0;
  uint64_t protocol_errors = 0;
  uint32_t queue_depth = 0;
  uint32_t intra_op_threads = 0;
  std::string socket;
  int32_t pid = 0;
  std::string default_profile;
  std::vector<std::string> allowed_profiles;
  uint64_t client_faults = 0;
  uint64_t quarantine_rejections = 0;
  uint64_t busy_rejections = 0;
  uint64_t deadline_exceeded = 0;
  uint64_t rejected_connections = 0;
  uint64_t quarantines = 0;
  std::vector<QuarantineEntry> quarantined;
  std::vector<ClientEntry> client_list;
  std::string health;  // "ok", or why the daemon is unhealthy
  uint32_t ranks = 0;
  std::vector<GroupStatus> groups;
  std::vector<ComponentStats> components;
  std::vector<OutcomeCount> outcomes;
  uint32_t in_flight = 0;
  uint64_t resident_weight_bytes = 0;
  uint32_t plan_cache_entries = 0;
  uint64_t peak_rss_bytes = 0;
  std::vector<RankStatus> rank_status;
  std::string metrics_url;  // "" when disabled
};

// The answer to ReleaseQuarantine (= vaed.v1.ReleaseQuarantineReply).
struct ReleaseQuarantineReply {
  std::vector<QuarantineEntry> released;
};

// How far a Decode has come (= vaed.v1.Progress; DecodeRequest::progress).
struct Progress {
  std::string stage;  // "video" or "audio"
  uint32_t done = 0;  // units of the stage finished
  uint32_t total = 0;
  std::string unit;            // "window", "frames", "audio"
  double fraction = 0;         // of the whole request, in [0, 1]; 1 = all done
  double elapsed_seconds = 0;  // since the decode started (queue wait excluded)
  double eta_seconds = 0;      // elapsed * (1 - fraction) / fraction; 0 once done
  uint32_t tiles_done = 0;     // tiled video
  uint32_t tiles_total = 0;
};

// A part of a streamed output that is final (= vaed.v1.FinalRange;
// DecodeRequest::final_range). Half-open [begin, end) in `unit`: "frames"
// (pixel frames of the video output) or "samples" (per channel of the
// audio output).
struct FinalRange {
  std::string stage;  // "video" or "audio"
  std::string unit;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t total = 0;  // frames or samples of the stage's whole output
  // CUDA outputs: the IPC event handle (64 bytes) recorded after the range
  // was written; empty for host outputs. The library has made the
  // request's stream wait on it before the callback.
  std::string ready_event;
};

}  // namespace vaed::client

#endif  // VAED_REPLIES_H_
