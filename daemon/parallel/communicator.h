// The daemon's VAE communicator (DESIGN.md §2 item 9): the
// collectives of one VAE group, owned by the daemon and sized independently
// of the DiT's process group.
//
// One small interface, two backends: Gloo through LibTorch's c10d
// (ProcessGroupGloo; CPU builds, this file) and NCCL (GPU builds). A group
// is `size` ranks, each with its own Communicator, created together: the
// constructor of each blocks until all ranks joined through a shared store
// (rendezvous). Collectives must be entered by every rank of the group in
// the same order.
//
// Failure: a collective that fails or times out (`timeout`, also the
// rendezvous limit) returns kUnavailable "collective <op> of group <name>
// generation <g> failed: ..." and aborts the communicator: its process
// group is released (peers still inside a collective see the connection
// close and fail at once) and every later call fails immediately. The owner
// then builds a new generation (CreateGlooCommunicator with generation + 1;
// the store keys of each generation are separate) and uses that.
//
// Thread-safety: a Communicator belongs to its rank's thread; only
// generation(), aborted() and abort_reason() may be read from other threads.
#ifndef VAED_DAEMON_PARALLEL_COMMUNICATOR_H_
#define VAED_DAEMON_PARALLEL_COMMUNICATOR_H_

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/models/tile_group.h"
#include "vaed/mutex.h"
#include "vaed/status.h"

namespace vaed::parallel {

struct CommunicatorOptions {
  std::string group_name;  // e.g. "s2.b0" (size 2, block 0); names the store keys
  int rank = 0;            // 0 .. size-1 within the group; 0 is the output rank
  int size = 1;
  uint64_t generation = 0;
  // Limit of the rendezvous and of every collective (Gloo's context
  // timeout; per-call timeouts are not honoured by Gloo).
  std::chrono::milliseconds timeout{30000};
  // Address the Gloo transport binds and announces ("127.0.0.1" for ranks
  // of one node; the node's address when a group spans daemons).
  std::string host = "127.0.0.1";
};

class Communicator : public models::TileGroup {
 public:
  ~Communicator() override = default;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  uint64_t generation() const { return options_.generation; }
  const std::string& group_name() const { return options_.group_name; }

  // Tensors are contiguous, on the CPU or on the rank's device (a GPU
  // rank's models make device tensors). Ordering contract, both backends:
  // a collective reads a device tensor only after the work the caller
  // queued on its current stream (LibTorch's; the rank's stream) before the
  // call, and its results are ready for work the caller queues on that
  // stream afterwards. NCCL orders its stream after an event recorded on
  // the caller's stream and returns when its own stream's work is done
  // (nccl_communicator.h); Gloo's process group does the same for CUDA
  // tensors itself (its CUDA work waits on the current stream, and wait()
  // makes the current stream wait for it).
  //
  // Copies root's `tensor` into `tensor` on every other rank (same shape
  // and dtype on all ranks).
  virtual Status Broadcast(torch::Tensor& tensor, int root) = 0;
  // Gathers every rank's `tensor` (same shape and dtype on all ranks) to
  // `root`: size() tensors like it on root (index = rank), {} elsewhere.
  virtual Result<std::vector<torch::Tensor>> Gather(const torch::Tensor& tensor, int root) = 0;
  virtual Status Barrier() = 0;

  // TileGroup: Gather to rank 0; throws models::CollectiveFailed.
  std::vector<torch::Tensor> GatherToOutputRank(const torch::Tensor& packed) override;

  // Releases the process group; later calls fail with `why`. Idempotent.
  virtual void Abort(const std::string& why) = 0;
  bool aborted() const { return aborted_.load(); }
  std::string abort_reason() const;

  // Fault injection (tests): the `n`-th collective from now (1 = the next)
  // fails, aborting the communicator. 0 disarms. `reason` kCollective
  // (FaultInjection.collective_failure): as a timed-out one would;
  // kStickyDevice (member_device_fatal): as the NCCL adapter reports a
  // collective whose CUDA context is lost (kInternal, the reason kept).
  void FailNthCollective(int n, ErrorReason reason = ErrorReason::kCollective) {
    fail_countdown_ = n;
    fail_reason_ = reason;
  }

 protected:
  explicit Communicator(CommunicatorOptions options) : options_(std::move(options)) {}
  // The start of every collective `op` of a backend: refused once the
  // communicator was aborted; an armed injected failure counts down and,
  // when it fires, aborts the communicator and is returned. OK = go on.
  Status BeginCollective(const char* op);
  // Marks the communicator aborted with `why` (first reason wins).
  void MarkAborted(const std::string& why);
  // "collective <op> of group <name> generation <g> (rank <r> of <n>)".
  std::string Describe(const char* op) const;
  // kUnavailable, reason kCollective: "<Describe(op)> failed: <what>".
  Status Failed(const char* op, const std::string& what) const;

  const CommunicatorOptions options_;

 private:
  std::atomic<bool> aborted_{false};
  mutable Mutex mu_;
  std::string abort_reason_ VAED_GUARDED_BY(mu_);
  int fail_countdown_ = 0;
  ErrorReason fail_reason_ = ErrorReason::kCollective;
};

// Inside a catch block: the exception's message (LibTorch's without its
// backtrace). Shared by the backends' error paths.
std::string ExceptionMessage();

// The rendezvous store of the daemon's groups.
struct StoreOptions {
  // "" = one daemon: an in-process store (c10d HashStore). Otherwise the
  // TCPStore of a multi-daemon group: "host:port" of node rank 0's store.
  std::string address;
  int node_rank = 0;     // this daemon's index; node 0 serves the store
  int world_nodes = 1;   // daemons that join
  std::chrono::milliseconds timeout{30000};
  // false: a client connection even on node 0 (whose store object serves).
  // A TCPStore connection is one socket: a wait that timed out leaves a
  // reply in flight on it, so every communicator build and every watcher
  // takes its own connection.
  bool serve = true;
};

// Node 0 (with `serve`) serves the TCPStore and connects to it; others
// connect, retrying until `timeout`. Nobody waits for the other nodes here:
// a daemon serves at once, and groups spanning nodes meet at their first
// rendezvous. Errors: kInvalidArgument for a malformed address or
// node_rank, kUnavailable when the TCPStore cannot be served or reached
// within the timeout.
Result<c10::intrusive_ptr<c10d::Store>> MakeStore(const StoreOptions& options);

// Creates rank options.rank's Gloo communicator of the group, blocking
// until all options.size ranks joined through `store` (keys under
// "<group_name>/gen<generation>/"), up to options.timeout. Errors:
// kInvalidArgument for a bad rank/size, kUnavailable when the rendezvous
// fails or times out.
Result<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, const CommunicatorOptions& options);

}  // namespace vaed::parallel

#endif  // VAED_DAEMON_PARALLEL_COMMUNICATOR_H_
