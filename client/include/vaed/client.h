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
// Errors: every call returns Status/Result. kUnavailable means the daemon is
// not running or did not answer in time (the message names the socket);
// kVersionMismatch means client and daemon speak different protocol
// versions; any other code is the daemon's rejection of the request, with
// its message (which names the field and the rule that was broken).
//
// Thread-safety: a Client may be used from several threads; calls are
// serialized on its one socket. A SharedRegion is not synchronized: do not
// write a region while a Decode that reads it is in flight.
#ifndef VAED_CLIENT_H_
#define VAED_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vaed/status.h"
#include "vaed/tensor_ref.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::client {

// The daemon's default control socket.
inline constexpr const char* kDefaultSocket = "/run/vaed/vaed.sock";

struct ClientOptions {
  // Path of the daemon's Unix socket (without "ipc://").
  std::string socket = kDefaultSocket;
  // Shown in the daemon's logs and status.
  std::string client_name = "vaed-client";
  // How long Connect() waits for the Hello reply before kUnavailable.
  int connect_timeout_ms = 3000;
  // How long any request waits for its reply before kUnavailable. Decode of
  // long videos on CPU can take minutes; 0 = wait forever.
  int request_timeout_ms = 600000;
  // Send heartbeats from a background thread so the daemon keeps this
  // client's regions while it is idle.
  bool heartbeats = true;
};

// A POSIX shared-memory segment created and owned by this process (host
// memory). The segment is unlinked and unmapped by the destructor, so the
// daemon's mapping of a registered region stays valid only until then.
// Move-only.
class SharedRegion {
 public:
  // Creates a segment of `bytes` bytes (zero-filled) under a unique name
  // "vaed-<pid>-<counter>-<random>". Errors: kInvalidArgument for 0 bytes,
  // kResourceExhausted / kIoError from shm_open, ftruncate or mmap.
  static Result<std::unique_ptr<SharedRegion>> Create(uint64_t bytes);
  // As above with an explicit name (letters, digits, '.', '_', '-'; no '/').
  static Result<std::unique_ptr<SharedRegion>> Create(const std::string& name, uint64_t bytes);

  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The shm name without the leading '/'.
  const std::string& name() const { return name_; }

 private:
  struct Mapping;  // owns the Boost.Interprocess mapping; defined in shared_region.cc
  SharedRegion(std::string name, std::unique_ptr<Mapping> mapping);
  std::string name_;
  std::unique_ptr<Mapping> mapping_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// A tensor inside a region this client registered. Units: bytes for
// offset, elements for shape; C-contiguous.
struct TensorView {
  uint64_t region_id = 0;
  uint64_t offset = 0;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
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
  kAuto = 3,     // the model decides; the reply says what and why
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
  kAuto = 3,     // compiled where possible, else eager; the reply says which
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
};

class Client {
 public:
  // Connects to the daemon and performs the Hello handshake.
  // Errors: kUnavailable (no socket file, or no reply within
  // connect_timeout_ms), kVersionMismatch.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  ~Client();  // sends Goodbye (best effort), stops the heartbeat thread
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  uint64_t client_id() const;
  const v1::HelloReply& hello() const;

  // Registers a region once; reuse the id for every request. The daemon
  // opens the segment, checks its real size and maps it.
  Result<uint64_t> RegisterRegion(const SharedRegion& region);
  Status UnregisterRegion(uint64_t region_id);

  // Asks the daemon what decoding `latent` would produce (no decode, no
  // memory read). Fills output_shape, output_dtype, output_bytes, frames,
  // height_px, width_px.
  Result<v1::DecodeReply> PlanDecode(const std::string& model, DType latent_dtype,
                                     const std::vector<int64_t>& latent_shape,
                                     OutputFormat format);

  // As above for any request: plans the video part (latent dtype/shape,
  // format, stack_tiling) and the audio part (audio_latent dtype/shape) of
  // `request`, checking the A/V length rule; region ids, offsets and
  // outputs are ignored. The reply's `audio` gives the audio output shape.
  Result<v1::DecodeReply> PlanDecode(const DecodeRequest& request);

  // Decodes and writes the output into the client's region. The reply
  // carries timings per component ("decode", ...), shapes, warm/cold.
  Result<v1::DecodeReply> Decode(const DecodeRequest& request);

  Result<v1::StatusReply> GetStatus();

  // Sends one raw, already-serialized message and waits for the reply;
  // for tests of the daemon's handling of malformed input.
  Result<v1::Reply> SendRaw(const std::string& bytes);

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vaed::client

#endif  // VAED_CLIENT_H_
