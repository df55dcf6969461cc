// Stream-ordered hand-over of CUDA memory between a client's stream and the
// daemon's, without a host synchronisation: the client
// records an interprocess event on its stream after writing the latents
// (Decode.inputs_ready_event), and makes its stream wait on the event the
// daemon recorded after writing the outputs
// (DecodeReply.outputs_ready_event). Internal to the client library.
//
// Unrun: written against cuda.h of CUDA 13.0 and compiled, never run on a
// GPU.
#ifndef VAED_CLIENT_SRC_CUDA_STREAM_SYNC_H_
#define VAED_CLIENT_SRC_CUDA_STREAM_SYNC_H_

#include <map>
#include <string>

#include "cuda_driver.h"
#include "vaed/status.h"

namespace vaed::client::internal {

// One Client's CUDA events: its own inputs-ready event (one per CUDA
// context it was used in) and the daemon's outputs-ready events it opened,
// by handle (opened once each: the daemon reuses a client's few events).
//
// Ownership: owns every event it created or opened; the destructor
// destroys them (noexcept; errors ignored: nothing could be done then).
// Thread-safety: none; the Client uses it under its lock. Event reuse is
// safe because a Client runs one Decode at a time: the inputs event is
// recorded again only for the next Decode, after the daemon's reply to the
// previous one, by which time the daemon has enqueued its wait on it
// (vaed.proto, Decode.inputs_ready_event).
class CudaStreamSync {
 public:
  explicit CudaStreamSync(const CudaDriver& driver) : driver_(driver) {}
  ~CudaStreamSync();
  CudaStreamSync(const CudaStreamSync&) = delete;
  CudaStreamSync& operator=(const CudaStreamSync&) = delete;

  // Records this client's interprocess event on `stream` (a CUstream /
  // cudaStream_t value; nullptr or (void*)1 = the legacy default stream,
  // (void*)2 = the per-thread default stream) and returns its IPC handle
  // (64 raw bytes) for Decode.inputs_ready_event. Errors: the driver's.
  Result<std::string> RecordInputsReady(void* stream);

  // Makes `stream` wait, on the device, for the daemon's event `handle`
  // (64 raw bytes of a cudaIpcEventHandle_t). Returns at once. Errors:
  // kProtocolError for a handle of another size, the driver's.
  Status WaitOutputsReady(void* stream, const std::string& handle);

 private:
  // The context `stream` belongs to (for the legacy default stream, the
  // caller's current context).
  Result<CUcontext> ContextOf(void* stream) const;

  const CudaDriver& driver_;
  std::map<CUcontext, CUevent> inputs_ready_;  // created here, per context
  std::map<std::string, CUevent> opened_;      // the daemon's, by handle bytes
};

}  // namespace vaed::client::internal

#endif  // VAED_CLIENT_SRC_CUDA_STREAM_SYNC_H_
