// vaed C++ client library. No LibTorch dependency: tensors are raw memory
// (region, byte offset, dtype, shape).
//
// Typical use by a DiT worker:
//
//   auto client = vaed::client::Client::Connect({.socket = "/run/vaed/vaed.sock",
//                                                .client_name = "dit-rank0"});
//   auto in  = vaed::client::SharedRegion::Create(latent_bytes);
//   auto out = vaed::client::SharedRegion::Create(frame_bytes);
//   auto in_id  = (*client)->RegisterRegion(**in);    // once
//   auto out_id = (*client)->RegisterRegion(**out);   // once
//   memcpy((*in)->data(), latent, latent_bytes);     // or write in place
//   auto reply = (*client)->Decode({.model = "taef2",
//                                   .latent = {*in_id, 0, DType::kFloat32, {16, 32, 34, 80}},
//                                   .output = {*out_id, 0, DType::kUInt8, {16, 272, 640, 3}}});
//
// Errors: every call returns Status/Result and none throws (Decode() hands
// back what a progress callback throws; see DecodeRequest::progress).
// kUnavailable means the daemon is not running, did not answer in time, or
// could not be reached again within reconnect_timeout_ms (the message names
// the socket); kVersionMismatch means client and daemon speak different
// protocol versions; kResourceExhausted "out of memory" and kInternal
// "unexpected exception: <what()>" are failures inside this library (when
// one strikes while a request is on the wire, the connection is taken as
// broken and the next call reconnects, as after a daemon that went away);
// any other code is the daemon's rejection of the request, with its message
// (which names the field and the rule that was broken).
//
// Liveness and reconnect (the zguide's heartbeat pattern): while a call
// waits for its reply, the library sends a Heartbeat after every
// wait_heartbeat_interval_ms of silence; the daemon answers them even while
// it decodes. When HelloReply.heartbeat_liveness of them go unanswered in a
// row (the daemon crashed or was killed), or the daemon answers
// kUnknownClient (it restarted, or dropped this client after
// client_timeout_ms without heartbeats), the library closes its connection,
// opens a fresh one and says Hello again with back-off (100 ms, doubling to
// 2 s) for up to reconnect_timeout_ms, re-registers every region this Client
// registered, and retries the call once (every call: Decode, PlanDecode,
// GetStatus, RegisterRegion, UnregisterRegion and ReleaseQuarantine). A
// Decode that was running when the daemon died runs again from the start on
// the new daemon and rewrites its output. Region ids keep the values
// RegisterRegion returned; client_id() changes.
// Connect() itself does not retry.
//
// Thread-safety: a Client may be used from several threads; calls are
// serialized on its one socket (a call that reconnects holds the others
// back until it is done). A SharedRegion is not synchronized: do not write a
// region while a Decode that reads it is in flight.
//
// fork(): a Client belongs to the process that connected it. In a forked
// child every call fails with kFailedPrecondition (create a new Client
// there), and the destructor releases nothing (the parent's heartbeat
// thread, socket and ZeroMQ context are not the child's to stop).
#ifndef VAED_CLIENT_H_
#define VAED_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vaed/client_export.h"
#include "vaed/replies.h"
#include "vaed/shared_region.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"

namespace vaed::client {

// The daemon's default control socket.
inline constexpr const char* kDefaultSocket = "/run/vaed/vaed.sock";

// Environment variable naming the daemon's socket for every client (C++,
// C ABI, Python, vaectl): one rule, Client::SocketPath.
inline constexpr const char* kSocketEnvironmentVariable = "VAED_SOCKET";

struct ClientOptions {
  // Path of the daemon's Unix socket (without "ipc://"). Empty (the
  // default): $VAED_SOCKET when set and non-empty, else kDefaultSocket
  // (Client::SocketPath).
  std::string socket = "";
  // Shown in the daemon's logs and status.
  std::string client_name = "vaed-client";
  // How long Connect() waits for the connection, and then for the Hello
  // reply, before kUnavailable; 0 = forever. Also how long a reconnect
  // waits for the Hello reply once a daemon took the connection.
  int connect_timeout_ms = 3000;
  // How long any request waits for its reply before kUnavailable. Decode of
  // long videos on CPU can take minutes; 0 = wait forever.
  int request_timeout_ms = 600000;
  // Send a heartbeat every HelloReply.heartbeat_interval_ms from a
  // background thread (none when the daemon asks for no heartbeats) so the
  // daemon keeps this client's regions while it is idle; a beat is skipped
  // while a call is in flight. The thread never reconnects by itself: when
  // its heartbeats go unanswered, the daemon no longer knows this client,
  // or the thread itself fails (out of memory), the connection is marked
  // broken and the next call reconnects.
  bool heartbeats = true;
  // How long a call may spend getting back to a daemon that went away
  // (fresh connection, Hello with back-off, re-registering regions) before
  // it fails with kUnavailable. 0 = never reconnect: calls fail as they
  // come, with kUnavailable or kUnknownClient. Must be >= 0.
  int reconnect_timeout_ms = 30000;
  // While a call waits for its reply: send a Heartbeat after this many
  // milliseconds without any message from the daemon, or after
  // HelloReply.heartbeat_interval_ms if that is shorter. When
  // HelloReply.heartbeat_liveness (default 3) heartbeats in a row get no
  // answer within this interval each, the daemon is taken as gone, so a
  // dead daemon is noticed within about (liveness + 1) x this. Smaller
  // finds a dead daemon sooner and sends more heartbeats during long
  // decodes; a daemon whose control thread stalls for longer is taken as
  // gone too, and a retried Decode then runs twice (the first may still
  // finish, writing the same output). Must be > 0.
  int wait_heartbeat_interval_ms = 1000;
};

// A tensor inside a region this client registered. Units: bytes for
// offset, elements for shape; C-contiguous.
struct TensorView {
  uint64_t region_id = 0;
  uint64_t offset = 0;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
};

// A CUDA allocation registered with the daemon (Client::RegisterCudaRegion).
// The region is the whole allocation (cudaMalloc / cuMemAlloc block) that
// holds the registered pointer, since a CUDA IPC handle names an allocation,
// never a pointer inside it. Units: bytes.
struct CudaRegion {
  uint64_t region_id = 0;     // TensorView.region_id of tensors in it
  uint64_t offset_bytes = 0;  // where the registered pointer lies: its TensorView.offset
  uint64_t size_bytes = 0;    // the whole allocation
  std::string device_uuid;    // its device, "GPU-..." (vaed/device_uuid.h)
};

// Layout of decoded frames in the output region.
enum class OutputFormat {
  // uint8 [frames, height_px, width_px, 3] RGB (round half to even of
  // clamp(x,0,1)*255).
  kUInt8NHWC = 1,
  // float32 [frames, 3, height_px, width_px], raw decoder output in the
  // decoder's own space (H3 video: ImageNet-normalised RGB, not clamped).
  kFloat32NCHW = 2,
  // float32 [frames, 3, height_px, width_px], RGB in [0, 1] after the
  // model's official post-processing.
  kFloat32NCHWUnit = 3,
};

// Tile scheduling of tiled models (= vaed.v1.StackTiling). Output bytes do
// not depend on it; a model without stacked tiles rejects kOn, and kAuto
// resolves to off there (the reply says why).
enum class StackTiling {
  kDefault = 0,  // the model's configured default
  kOff = 1,
  kOn = 2,
  kAuto = 3,  // the model decides; the reply says what and why
};

// A view left default-constructed (dtype kUnknown, empty shape) is "not
// sent": a request with no `latent` is audio-only, one with no
// `audio_latent` is video-only.
inline bool IsSet(const TensorView& view) {
  return view.dtype != DType::kUnknown || !view.shape.empty();
}

// Compiled plans (= vaed.v1.Compile). Output bytes do not depend on it; a
// model without the "compiled_plans" capability rejects kOn.
enum class Compile {
  kDefault = 0,  // the profile decides (safe: off)
  kOff = 1,
  kOn = 2,
  kAuto = 3,  // compiled where possible, else eager; the reply says which
};

struct DecodeRequest {
  std::string model;  // "" = the daemon's default model
  // Video/image latent (model layout, e.g. H3 float32 [1, 24, T, h, w]).
  TensorView latent;
  TensorView output;  // dtype/shape must match what PlanDecode() returns
  OutputFormat format = OutputFormat::kUInt8NHWC;
  StackTiling stack_tiling = StackTiling::kDefault;
  // Audio latent (models with the "audio" capability): H3 float32
  // [channels (1 mono, 2 stereo L,R), 32, T] at 40 latent frames per second.
  TensorView audio_latent = {};
  // float32 [channels, samples] planar; H3: samples = 800 * T at 32000 Hz.
  TensorView audio_output = {};
  // Video frames per second (durations, A/V length rule); 0 = the model's.
  double fps = 0;
  // With both latents the daemon requires audio T == round(frames / fps *
  // 40) (the reply's expected_audio_latent_frames); true waives that.
  bool independent_lengths = false;
  // The space of `latent` and `audio_latent` (vaed/replies.h LatentSpace; kUnspecified =
  // kNormalized).
  LatentSpace latent_space = LatentSpace::kNormalized;
  // Decode profile: "" = the daemon's default; safe, optimized, diagnostic
  // or student within what the daemon allows (StatusReply.allowed_profiles).
  std::string profile = {};
  Compile compile = Compile::kDefault;
  // Testing only (DecodeOptions.inject_faults): refused unless the daemon
  // allows fault injection.
  std::vector<std::string> inject_faults = {};
  // Output-changing knob (DecodeOptions.tiling): profile "diagnostic" and a
  // model with the "tunable_tiling" capability (TAEF2) only. Latent cells.
  struct Tiling {
    uint32_t tile_latent = 40;
    uint32_t overlap_latent = 16;
  };
  std::optional<Tiling> tiling = std::nullopt;
  // Milliseconds from when the daemon receives the request, queue time
  // included (DecodeOptions.deadline_ms); 0 = no deadline. Past it the
  // daemon answers kDeadlineExceeded: a queued request is not decoded, a
  // running one is cancelled between tiles and its output region holds an
  // unspecified prefix. A retry after a reconnect gets the full deadline
  // again.
  uint32_t deadline_ms = 0;
  // Ranks of the daemon's VAE group that decode the video tile-parallel
  // (DecodeOptions.group_size): 0 = the daemon's group.size, otherwise one
  // of its qualified sizes. Same bytes for every size; the reply's
  // GroupReport says which ranks ran and how evenly.
  uint32_t group_size = 0;
  // Per-window progress (DecodeOptions.progress): when set, the daemon
  // sends Progress messages while the request runs and Decode() calls this
  // for each, in order, on the calling thread, before it returns; the last
  // has fraction 1 (unless the decode failed). A Decode retried after a
  // reconnect reports its progress again from the start. It runs while the
  // Client's lock is held: it must not call this Client, and should return
  // quickly (the daemon's heartbeat answers wait behind it). Not sent by
  // PlanDecode().
  //
  // If it throws, the exception is caught where the library called it and
  // the callback is not called again for this Decode; Decode() keeps
  // waiting for the reply (the daemon is still writing the output region,
  // and the connection stays in step), then releases the Client and
  // rethrows that exception to its caller, on the calling thread, whether
  // the decode succeeded or not. No exception unwinds through the library.
  // The C ABI passes a vaed_progress to a C callback (vaed_c.h vaed_request).
  std::function<void(const Progress&)> progress = nullptr;
  // Streamed output (DecodeOptions.stream_output): when set, the daemon
  // writes each part of the output as soon as it is final (H3: after each
  // temporal window; TAEF2: after each frame batch; the audio once) and
  // Decode() calls this for each, in order, on the calling thread, before
  // it returns: `range` names the stage ("video": pixel frames of
  // `output`, unit "frames"; "audio": samples per channel of
  // `audio_output`, unit "samples") and the half-open [begin, end) that is
  // final. From the call on, those bytes are the caller's: the daemon has
  // written them and this request never touches them again (the caller may
  // read, encode or overwrite them). Per stage the ranges are contiguous
  // from 0 and the last ends at range.total. Same bytes as without
  // streaming. CUDA outputs: before the call the library makes
  // `cuda_stream` wait on the range's event, so work enqueued on it from
  // the callback on sees the range (the host must synchronise that stream
  // before it reads the range itself).
  //
  // A failed or cancelled decode keeps what was delivered: the returned
  // Status's final_frames() / final_samples() (vaed.v1.Error's) say where
  // the final part ends.
  // A streamed Decode that delivered a range is not retried after the
  // daemon went away (a retry would write the delivered frames again): it
  // fails at once with kUnavailable (the next call reconnects). Threading, locking and exceptions
  // as `progress` (they share one slot: the first exception either throws stops both). The C ABI
  // passes a vaed_final_range to a C callback.
  std::function<void(const FinalRange&)> final_range = nullptr;
  // GPU (requests naming a CUDA region; ignored otherwise): the caller's
  // stream, a CUstream / cudaStream_t value (nullptr or (void*)1 = the
  // legacy default stream of the calling thread's current context,
  // (void*)2 = the per-thread default stream). When any tensor of the
  // request (latent or output) lies in a CUDA region, Decode() records an
  // interprocess event on this stream and sends it
  // (Decode.inputs_ready_event): the daemon's stream waits on the device
  // for the work enqueued on this stream so far before it reads the
  // latents or writes the outputs, so the caller need not synchronise. When
  // the reply carries an outputs-ready event, Decode() makes this stream
  // wait on it before returning (without blocking the host): work enqueued
  // on this stream afterwards sees the outputs; other streams and the host
  // must wait on this stream first. Unrun on a GPU.
  void* cuda_stream = nullptr;
};

class VAED_CLIENT_API Client {
 public:
  // Connects to the daemon and performs the Hello handshake (once; no
  // reconnect here). Errors: kInvalidArgument (reconnect_timeout_ms < 0 or
  // wait_heartbeat_interval_ms <= 0), kUnavailable (no socket file; no
  // connection within connect_timeout_ms, as when the daemon's access
  // control refuses this process; or no reply within connect_timeout_ms),
  // kVersionMismatch, and the daemon's refusals (kQuarantined, ...).
  // ClientOptions.socket is resolved by SocketPath first.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  // The socket a client connects to when asked for `requested`: `requested`
  // when non-empty, else $VAED_SOCKET when set and non-empty, else
  // kDefaultSocket. Reads the environment on each call (getenv; not
  // thread-safe against a concurrent setenv, like getenv itself).
  static std::string SocketPath(const std::string& requested);

  // Stops the heartbeat thread, then sends Goodbye (best effort, at most
  // 0.5 s; skipped when the daemon was found gone).
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The id the daemon gave this client in the latest Hello; it changes
  // when the library reconnects. Thread-safe.
  uint64_t client_id() const;
  // The reply to the latest Hello; replaced when the library reconnects.
  // The reference stays valid for the Client's lifetime (earlier replies
  // are kept, one per reconnect), but it is the latest one only until the
  // next reconnect. Thread-safe.
  const HelloReply& hello() const;
  // How many times this Client reconnected successfully (a fresh Hello
  // after the daemon went away or forgot it), for tests and logs.
  // Thread-safe.
  uint64_t reconnects() const;

  // Registers a region once; reuse the id for every request. The daemon
  // opens the segment, checks its real size and maps it. The Client
  // remembers the region's name and size and re-registers it after every
  // reconnect; the returned id stays valid across reconnects (the library
  // translates it to the daemon's current id), so the segment (owned by
  // `region`, or by the SharedRegion it is moved into) must outlive its
  // registration. If a re-registration fails (e.g. the segment was
  // unlinked), requests naming the region fail with that error. When the
  // daemon runs as another user, the segment is first opened to that uid
  // alone (a POSIX ACL; without ACL support, the socket's group and mode
  // 0660). Errors: kFailedPrecondition for an empty (moved-from) region,
  // the daemon's (kNotFound: no such segment; kOutOfRange: larger than the
  // segment; kResourceExhausted), kUnavailable.
  Result<uint64_t> RegisterRegion(const SharedRegion& region);
  // Unregisters a region this Client registered; the daemon unmaps it and
  // the Client stops re-registering it. OK also when the daemon no longer
  // has the region (it restarted, dropped or quarantined this client).
  //
  // OK means the daemon will never read or write the region's memory
  // again: the region may be reused or freed. When decodes the daemon still
  // runs use the region (a Decode that timed out here, or one of another
  // thread's raw requests), the daemon answers only after the last of them
  // has ended, without cancelling them; this call waits for that, up to
  // request_timeout_ms (as long as a Decode waits), sending heartbeats.
  // Meanwhile decodes naming the region are refused (kFailedPrecondition
  // "region N is being unregistered").
  //
  // Errors: kNotFound for an id this Client never registered (the daemon's
  // message); kUnavailable (no answer in time, or the daemon went away; the
  // region is forgotten here all the same, and a daemon still running
  // decodes into it may write into its memory until they end: do not
  // reuse that memory while one might); kFailedPrecondition when the
  // region is being unregistered already (an earlier call that gave up
  // waiting); any other refusal of the daemon (the region stays
  // registered).
  Status UnregisterRegion(uint64_t region_id);

  // Registers the CUDA allocation that holds the `bytes` bytes at
  // `device_ptr` (device memory of this process, e.g. a tensor's data
  // pointer): the library finds the allocation (cuMemGetAddressRange),
  // exports its IPC handle and its device's UUID, and sends
  // RegisterRegion{cuda}. Name tensors in it with the returned region_id
  // and their byte offset in the allocation (offset_bytes for the tensor
  // at device_ptr). Like RegisterRegion(), the id survives reconnects (the
  // handle is sent again to a restarted daemon).
  //
  // When the daemon has no CUDA ranks (hello().cuda_devices empty) this
  // fails at once with kFailedPrecondition "this daemon has no CUDA ranks",
  // before the CUDA driver is loaded or anything exported. Otherwise the
  // driver is loaded at run time (dlopen("libcuda.so.1"), once per
  // process): the library links nothing of CUDA.
  //
  // Lifetime: the memory is the caller's. It must stay allocated (not
  // freed, and not handed back to a caching allocator that could give it
  // to another tensor the daemon must not write) until UnregisterRegion()
  // of this id returned OK, or this Client is destroyed. Register an
  // allocation once and locate every tensor in it by its offset: a second
  // registration of the same allocation is a second region, which the
  // daemon may refuse. The daemon reads and writes only the byte ranges
  // requests name.
  //
  // Errors: kFailedPrecondition (no CUDA ranks; "libcuda.so.1 could not be
  // loaded (...): this machine has no NVIDIA driver"; a driver too old),
  // kInvalidArgument (null pointer, bytes == 0, not device memory, a range
  // past the allocation's end, an allocation legacy CUDA IPC cannot share:
  // cudaMallocAsync pools, cuMemCreate / PyTorch's expandable segments),
  // the driver's errors with their CUDA error name and code, the daemon's
  // refusal of the region, kUnavailable. Thread-safe. Unrun on a GPU.
  Result<CudaRegion> RegisterCudaRegion(const void* device_ptr, uint64_t bytes);

  // Asks the daemon what decoding `latent` would produce (no decode, no
  // memory read). Fills output_shape, output_dtype, output_bytes, frames,
  // height_px, width_px, fps and video_seconds, the profile and compile
  // decision, and for tiled models the tile grid (DecodeReply::tiling);
  // planned_only is true.
  Result<DecodeReply> PlanDecode(const std::string& model, DType latent_dtype,
                                 const std::vector<int64_t>& latent_shape, OutputFormat format);

  // As above for any request: plans the video part (latent dtype/shape,
  // format, stack_tiling) and the audio part (audio_latent dtype/shape) of
  // `request`, checking the A/V length rule; region ids, offsets and
  // outputs are ignored. The reply's `audio` gives the audio output shape.
  Result<DecodeReply> PlanDecode(const DecodeRequest& request);

  // Decodes and writes the output into the client's region. The reply
  // carries timings per component ("decode", ...), shapes, warm/cold.
  // Throws only what request.progress threw, once the decode is over
  // (see DecodeRequest::progress); the Client stays usable.
  Result<DecodeReply> Decode(const DecodeRequest& request);

  Result<StatusReply> GetStatus();

  // Admin: lifts the daemon's quarantine of every entry matching `client`
  // (a client id, "pid:N", "uid:N", a client name, or "all"); the reply
  // lists the entries released. Errors: kPermissionDenied unless this
  // process runs as uid 0, the daemon's uid or one of server.admin_uids;
  // kNotFound when nothing matches; kUnavailable.
  Result<ReleaseQuarantineReply> ReleaseQuarantine(const std::string& client);

 private:
  // In-tree tools read the protocol messages behind these calls
  // (client/internal/vaed/client_protocol.h, not installed).
  friend class ClientProtocol;
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vaed::client

#endif  // VAED_CLIENT_H_
