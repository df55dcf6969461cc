// Stream-ordered synchronisation between a DiT worker and a GPU rank
// using CUDA interprocess events: no host synchronisation on
// the hot path.
//
//   inputs:  a Decode that names a CUDA region (latent or output) may
//            carry Decode.inputs_ready_event, the 64-byte
//            cudaIpcEventHandle_t of an event the worker recorded on its
//            stream after its last use of those tensors. ClientEventCache
//            opens each handle once (cudaIpcOpenEventHandle) and the
//            rank's stream waits on it (cudaStreamWaitEvent) before its
//            first access.
//   outputs: after its last write to the outputs the rank records one of
//            its own interprocess events (OutputEventRing) on its stream
//            and the reply carries the handle (DecodeReply.
//            outputs_ready_event); the client library makes the worker's
//            stream wait on it. The reply itself goes out only after the
//            rank's fence (rank_stream.h), so the event is complete when
//            it arrives; the worker orders its stream by the event all the
//            same, never by the reply's arrival.
// Both are used through the rank's RankStream (rank_stream.h), their one
// owner.
//
// Known limit: a worker whose inputs_ready_event never completes (a hung
// kernel, a stopped process) stalls the rank whose stream waits on it, and
// with it that rank's later requests: a stream wait cannot be cancelled,
// so deadline_ms does not end it. Only trusted, admitted workers reach
// this (the socket's access rules, quarantine); a wedged rank shows as a
// busy rank in `vaectl status` and is cleared by restarting the daemon.
//
// Event reuse: a rank records its events round robin from a ring of
// kOutputEvents. Re-recording an event only makes a wait enqueued later
// wait for the newer record (a superset of the work), never for less, so
// reuse cannot break ordering; the ring keeps that extra waiting rare.
//
// Lifetimes: opened client events are closed (cudaEventDestroy) when the
// cache is destroyed, or all at once when it holds kMaxOpenedEvents and
// another is needed (a client that went leaves its events here until
// then; a wait already enqueued stays valid after the destroy, CUDA
// releases the event when it completes); the ring's events live as long
// as the rank.
//
// Built from cuda_events.cc in GPU builds and cuda_events_unavailable.cc
// in CPU builds (every call answers kFailedPrecondition there). Unrun: no
// device has executed this code yet.
//
// Thread-safety: one instance per rank, used by that rank's thread only.
// Streams travel as `void*` (a cudaStream_t), so this header has no CUDA
// types and compiles the same way in both builds.
#ifndef VAED_DAEMON_ENGINE_CUDA_EVENTS_H_
#define VAED_DAEMON_ENGINE_CUDA_EVENTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vaed/status.h"

namespace vaed::engine {

// Bytes of a cudaIpcEventHandle_t on the wire (CUDA_IPC_HANDLE_SIZE).
inline constexpr size_t kCudaIpcEventHandleBytes = 64;

// The check every build makes before touching CUDA: `handle` has
// kCudaIpcEventHandleBytes bytes. kInvalidArgument naming `field`
// ("inputs_ready_event") otherwise.
Status CheckIpcEventHandle(const std::string& handle, const std::string& field);

// Events clients recorded, opened once per (client, handle).
class ClientEventCache {
 public:
  // Opened events kept per rank (a client library uses one per CUDA
  // context, so this is many clients' worth). This cap is the only bound:
  // a departed client's events are not destroyed when it leaves, but the
  // cache is cleared whenever it is full (destroying an event that a
  // stream still waits on is allowed; CUDA releases it after the wait).
  static constexpr size_t kMaxOpenedEvents = 64;

  ClientEventCache();
  ~ClientEventCache();  // destroys every opened event
  ClientEventCache(const ClientEventCache&) = delete;
  ClientEventCache& operator=(const ClientEventCache&) = delete;

  // Makes `stream` wait for the event `handle` of client `client_id`,
  // opening it on first use. Errors: CheckIpcEventHandle's; the CUDA
  // runtime's (cuda_status.h), kInvalidArgument when the handle is not an
  // interprocess event.
  Status StreamWait(uint64_t client_id, const std::string& handle, void* stream);

  // Test hook: the number of opened events the cache holds now, so a test
  // can check that a failed open caches nothing. Production code does not
  // call it.
  size_t SizeForTesting() const;

 private:
  struct Opened;  // the CUDA event, in the .cc
  std::map<std::pair<uint64_t, std::string>, std::unique_ptr<Opened>> events_;
};

// A rank's own interprocess events for DecodeReply.outputs_ready_event.
class OutputEventRing {
 public:
  static constexpr int kOutputEvents = 8;

  // Creates kOutputEvents events (cudaEventInterprocess |
  // cudaEventDisableTiming) on `device` (CUDA ordinal) and exports their
  // handles. Errors: the CUDA runtime's; kFailedPrecondition in CPU builds.
  static Result<std::unique_ptr<OutputEventRing>> Create(int device);
  ~OutputEventRing();
  OutputEventRing(const OutputEventRing&) = delete;
  OutputEventRing& operator=(const OutputEventRing&) = delete;

  // Records the next event of the ring on `stream` and returns its handle
  // (kCudaIpcEventHandleBytes bytes) for the reply.
  Result<std::string> Record(void* stream);

 private:
  struct Event;  // the CUDA event and its handle, in the .cc
  explicit OutputEventRing(std::vector<std::unique_ptr<Event>> events);
  std::vector<std::unique_ptr<Event>> events_;
  [[maybe_unused]] size_t next_ = 0;  // unused by the CPU stand-in
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_CUDA_EVENTS_H_
