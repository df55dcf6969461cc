// The one owner of a rank's device work: the stream its requests queue on,
// the events it waits on (clients' inputs_ready_event) and records (its
// outputs_ready_event), and the fence that ends a request. Everything that
// queues device work for a request reaches the device through the rank's
// RankStream; a CPU rank's RankStream has no device and orders nothing
// (its copies are synchronous).
//
// The rule, for every request a rank takes part in (output rank or
// member): no reply, error or success, and no release of a client's region
// while device work the request queued is unfinished. Copies into and out
// of CUDA regions are asynchronous on the rank's stream, so a reply sent
// ahead of them would let the worker reuse or free memory vaed is still
// writing, and a region closed behind the reply (a deferred
// UnregisterRegion) would unmap memory a copy still targets. RequestFence
// enforces it by construction: the rank makes one at the start of the
// request, before any device work, and it waits for the stream when
// released at the end or, on any other way out (an exception), when
// destroyed; the reply and the job's region references are handed over
// only after it (decode_run.h, rank_loop.cc). Since the reply follows the
// fence, its outputs_ready_event is complete when it arrives; it stays in
// the protocol so that a worker orders its stream by the event, not by the
// reply's arrival.
//
// Where a GPU rank's thread waits for its device during a request, each
// because a host value is needed there (nowhere else):
//   - the latents' finite check (region_io.h CheckLatentFinite): a
//     non-finite latent is refused before any decode; one read per latent;
//   - the model's component timings (models/interval_timer.h): CUDA event
//     pairs read once after its decode was queued;
//   - the sanity figures of each output (models/postprocess.h
//     SummarizeValues): reduced on the device, read once;
//   - copies into host regions (the bytes themselves);
//   - the fence (RequestFence), before the reply.
// So the rank does not start its next request while this one's device work
// runs: a rank serves one request at a time, and the fence is a host wait.
//
// Seam: the device behind a RankStream is a DeviceQueue. Ranks on CUDA
// devices use the one in rank_stream.cc (LibTorch's pool stream,
// cuda_events.h); tests pass a double that records the calls, to check
// the order of fences and replies without a device.
//
// Thread-safety: one RankStream per rank, used by that rank's thread only
// (LibTorch's current stream is per thread). Lifetime: the rank's.
#ifndef VAED_DAEMON_ENGINE_RANK_STREAM_H_
#define VAED_DAEMON_ENGINE_RANK_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "vaed/status.h"

namespace vaed::engine {

// What a rank does to its device. Errors follow the CUDA and LibTorch
// adapters (cuda_status.h, torch_status.h): a sticky device error keeps
// ErrorReason::kStickyDevice.
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // The rank's stream (a cudaStream_t), current on the rank's thread.
  virtual void* stream() const = 0;
  // The stream waits for the client's interprocess event `handle` (64
  // bytes) before the work queued after this call.
  virtual Status WaitForClientEvent(uint64_t client_id, const std::string& handle) = 0;
  // Records one of the rank's interprocess events after the work queued so
  // far and returns its handle (64 bytes).
  virtual Result<std::string> RecordEvent() = 0;
  // Blocks the calling thread until the work queued so far has finished.
  virtual Status Synchronize() = 0;
};

class RankStream {
 public:
  // A CPU rank's: no device.
  RankStream() = default;
  // A rank on `device` (tests: a double).
  explicit RankStream(std::unique_ptr<DeviceQueue> device) : device_(std::move(device)) {}
  // A rank on CUDA device `ordinal`: makes it the calling thread's current
  // device, takes a stream from LibTorch's pool and makes it current, and
  // creates the rank's events. Call on the rank's thread, before anything
  // runs there. Errors: kFailedPrecondition without CUDA LibTorch; the
  // CUDA runtime's and LibTorch's.
  static Result<std::unique_ptr<RankStream>> OnCudaDevice(int ordinal);

  bool on_device() const { return device_ != nullptr; }
  // The cudaStream_t; null on a CPU rank.
  void* cuda_stream() const { return device_ ? device_->stream() : nullptr; }

  // Decode.inputs_ready_event of client `client_id`: the stream waits on
  // it before reading the latents. kFailedPrecondition naming the field on
  // a rank without a device (`rank`: the global rank, for the message).
  Status WaitForInputs(uint64_t client_id, const std::string& handle, int rank);
  // DecodeReply.outputs_ready_event after the writes queued so far.
  // kFailedPrecondition on a rank without a device.
  Result<std::string> RecordOutputsReady(int rank);
  // Waits for everything queued so far; Ok at once on a CPU rank.
  Status Fence();

 private:
  std::unique_ptr<DeviceQueue> device_;
};

// A request's hold on its rank's stream (the rule above). Make it first,
// release it last: Release() fences and says how that went; a fence not
// released is made in the destructor (an exception's path), its failure
// logged.
class RequestFence {
 public:
  explicit RequestFence(RankStream& stream) : stream_(&stream) {}
  ~RequestFence();
  RequestFence(const RequestFence&) = delete;
  RequestFence& operator=(const RequestFence&) = delete;

  Status Release();

 private:
  RankStream* stream_;  // null once released
};

// The outcome of a request once its fence is released: `result` as it
// was when the fence held; the fence's error when the work had succeeded;
// when both failed, the fence's error if it is a sticky device error (the
// daemon must restart: that reason must reach the executor), else
// `result`'s.
template <typename T>
Result<T> AfterFence(Result<T> result, const Status& fenced) {
  if (fenced.ok()) return result;
  if (result.ok() || fenced.reason() == ErrorReason::kStickyDevice) return fenced;
  return result;
}

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_RANK_STREAM_H_
