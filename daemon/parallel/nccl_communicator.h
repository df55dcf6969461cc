// The NCCL backend of the daemon's VAE communicator (DESIGN.md §2
// item 9; the interface is daemon/parallel/communicator.h). Implemented in
// GPU builds (VAED_WITH_CUDA=ON, the `cuda` preset: nccl_communicator.cc);
// CPU builds link nccl_unavailable.cc, whose CreateNcclCommunicator answers
// kFailedPrecondition, and use CreateGlooCommunicator. The header is the
// same in both builds (no CUDA or NCCL types).
//
// One communicator per rank of a group, each on its own CUDA device, made
// from a unique id: rank 0 makes an ncclUniqueId and publishes it in the
// store under "<group_name>/gen<generation>/nccl_id"; the other ranks wait
// for it (up to options.timeout) and read it. Every generation has its own
// key, so a rebuilt group (generation + 1) never sees an old id. Init is
// non-blocking (ncclConfig_t.blocking = 0) and polled with
// ncclCommGetAsyncError against a deadline of options.timeout, so a rank
// that never joins costs one timeout, not a hang.
//
// Collectives (Broadcast, Gather, Barrier) run on the communicator's own
// CUDA stream and copy bytes: any dtype works, shapes and dtypes must match
// across ranks as communicator.h says. Tensors must be contiguous and either
//   - on the CPU (the models of a CPU-LibTorch build): they are staged
//     through a device buffer owned by the communicator (cudaMemcpyAsync on
//     its stream; the buffer grows to the largest collective seen, for
//     Gather on the root size() x the tensor's bytes), or
//   - on CUDA device `device`: used in place. The communicator's stream is
//     a non-blocking one; before each collective it waits for an event
//     recorded on the caller's current LibTorch stream of `device` (the
//     rank's stream), so a tensor is read only after the work that produced
//     it there, as ProcessGroupNCCL does. Device tensors the stream reads or
//     writes are marked used on it for LibTorch's caching allocator
//     (recordStream), so their memory is not reused before its work is
//     done. Gather's outputs on the root are allocated with
//     torch::empty_like(tensor), on the same device.
// Gather is ncclSend / ncclRecv to the root inside one ncclGroupStart/End;
// Barrier is a one-element ncclAllReduce. Every call returns only when its
// stream work is done: the stream is polled together with
// ncclCommGetAsyncError until done, an NCCL error, or options.timeout.
//
// Errors (all abort the communicator, as the Gloo backend does: the group
// is out of step and peers would otherwise wait for their timeout):
//   kUnavailable   "collective <op> of group <name> generation <g> (rank r
//                  of s) failed: ..." for an NCCL error (its error string
//                  and ncclGetLastError's text), a timeout, an injected
//                  failure (FailNthCollective), a non-sticky CUDA error, or
//                  a tensor that breaks the rules above (not contiguous,
//                  on another device, root outside the group);
//   kInternal      a sticky CUDA error (the CUDA context of this process is
//                  lost; see IsStickyCudaError in vaed/cuda_status.h).
// Abort(why) is ncclCommAbort (kernels of this communicator stop; peers
// inside a collective fail at their own timeout or at once when NCCL
// reports the remote error); idempotent. The destructor also uses
// ncclCommAbort, which never waits on peers, then frees the stream and
// buffers.
//
// Thread-safety: as communicator.h: a communicator belongs to its rank's
// thread (Abort included); generation(), aborted() and abort_reason() may
// be read from other threads. Every call makes `device` current on the
// calling thread for its duration and restores the previous device.
#ifndef VAED_DAEMON_PARALLEL_NCCL_COMMUNICATOR_H_
#define VAED_DAEMON_PARALLEL_NCCL_COMMUNICATOR_H_

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include "daemon/parallel/communicator.h"
#include "daemon/parallel/nccl_available.h"
#include "vaed/status.h"

namespace vaed::parallel {

// Creates rank options.rank's NCCL communicator of the group on CUDA
// device `device` (a cudaSetDevice index), blocking until all options.size
// ranks joined (the id exchange through `store` and the NCCL init, each up
// to options.timeout). options.host is not used (NCCL picks its own
// interfaces; NCCL_SOCKET_IFNAME and friends apply).
// Errors: kInvalidArgument for a bad rank/size or a device index outside
// [0, cudaGetDeviceCount()); kUnavailable "no CUDA device" when the runtime
// sees no device (or no driver), and kUnavailable "building communicator of
// group <name> generation <g> (rank r of s): ..." when the id exchange or
// the init fails or times out (a timed-out or failed init is aborted);
// kFailedPrecondition in CPU builds ("group.backend \"nccl\" needs a GPU
// build").
Result<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, const CommunicatorOptions& options, int device);

}  // namespace vaed::parallel

#endif  // VAED_DAEMON_PARALLEL_NCCL_COMMUNICATOR_H_
