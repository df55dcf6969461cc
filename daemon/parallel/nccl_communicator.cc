// GPU builds only (VAED_WITH_CUDA; see daemon/parallel/CMakeLists.txt).
// CPU builds link nccl_unavailable.cc instead.
#include "daemon/parallel/nccl_communicator.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "vaed/cuda_owners.h"
#include "vaed/cuda_status.h"

// Non-blocking communicators (ncclConfig_t.blocking, ncclInProgress) came
// with NCCL 2.14.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL communicator needs NCCL >= 2.14 (non-blocking communicators)"
#endif

namespace vaed::parallel {

namespace {

using Clock = std::chrono::steady_clock;

// How often a wait polls the stream and the communicator's async error:
// short next to any collective worth running on a GPU, long enough for the
// waiting rank thread not to keep a core busy.
constexpr auto kPollInterval = std::chrono::microseconds(50);

// The NCCL adapter, the one place an ncclResult_t becomes text:
// "<call>: <error string> (nccl error <n>)[: <ncclGetLastError>]". Every
// NCCL failure of a communicator is kUnavailable (communicator.h), so the
// callers only need the text.
std::string NcclError(ncclResult_t result, std::string_view call) {
  std::string m(call);
  m += ": ";
  m += ncclGetErrorString(result);
  m += " (nccl error ";
  m += std::to_string(static_cast<int>(result));
  m += ")";
  // NCCL keeps the detail of its last error process-wide (the argument is
  // unused), so this may name another communicator's error; it is still
  // the best detail there is.
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    m += ": ";
    m += last;
  }
  return m;
}

// An NCCL failure: kUnavailable like every failure of a collective, unless
// NCCL reports a CUDA error (ncclUnhandledCudaError) that the CUDA runtime
// still holds as sticky: then CudaStatus's kInternal, reason kStickyDevice
// (the daemon must restart), with NCCL's text as context. The classifier
// is the one of vaed/cuda_error_class.h; the text is never read.
Status NcclStatus(ncclResult_t result, std::string_view call) {
  if (result == ncclUnhandledCudaError) {
    // A sticky error stays the runtime's last error for good; peeking
    // does not clear a recoverable one that another check may still need.
    if (const cudaError_t err = cudaPeekAtLastError(); IsStickyCudaError(err)) {
      return CudaStatus(err, NcclError(result, call));
    }
  }
  return Unavailable(NcclError(result, call));
}

// CUDA errors keep CudaStatus's text; a sticky one keeps its kInternal (the
// daemon must restart), any other is kUnavailable like every failure of a
// collective.
Status CudaError(cudaError_t err, std::string_view call) {
  Status s = CudaStatus(err, call);
  return IsStickyCudaError(err) ? s : Unavailable(s.message());
}

std::string Ms(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

// Owns one device allocation that only grows. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { Reset(); }

  char* get() const { return static_cast<char*>(p_); }
  // Makes the buffer at least `bytes` long on the current device. Its
  // contents are lost when it grows; the stream using it must be idle.
  cudaError_t Reserve(size_t bytes) {
    if (bytes <= bytes_) return cudaSuccess;
    Reset();
    const cudaError_t err = cudaMalloc(&p_, bytes);
    if (err != cudaSuccess) {
      p_ = nullptr;
      return err;
    }
    bytes_ = bytes;
    return cudaSuccess;
  }
  void Reset() noexcept {
    if (p_ != nullptr) (void)cudaFree(std::exchange(p_, nullptr));
    bytes_ = 0;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Owns an NCCL communicator. Teardown is always ncclCommAbort: it never
// waits on peers (ncclCommFinalize/Destroy may), and it stops kernels that
// still run. Move-only.
class NcclComm {
 public:
  NcclComm() = default;
  explicit NcclComm(ncclComm_t c) : c_(c) {}
  NcclComm(NcclComm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  NcclComm& operator=(NcclComm&& o) noexcept {
    if (this != &o) {
      Abort();
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  ~NcclComm() { Abort(); }

  ncclComm_t get() const { return c_; }
  // Idempotent.
  void Abort() noexcept {
    if (c_ != nullptr) (void)ncclCommAbort(std::exchange(c_, nullptr));
  }

 private:
  ncclComm_t c_ = nullptr;
};

// Polls `comm` (and, when given, `stream`) until the communicator is out
// of ncclInProgress and the stream's work is done. Fails with the
// communicator's async error, a CUDA error, or at `deadline`. `call` names
// what is awaited, for the message.
Status Poll(ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline,
            std::chrono::milliseconds timeout, std::string_view call) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (const ncclResult_t r = ncclCommGetAsyncError(comm, &state); r != ncclSuccess) {
      return NcclStatus(r, "ncclCommGetAsyncError after " + std::string(call));
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      return NcclStatus(state, call);
    }
    bool done = state == ncclSuccess;
    if (done && stream != nullptr) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q != cudaSuccess && q != cudaErrorNotReady) {
        return CudaError(q, "cudaStreamQuery after " + std::string(call));
      }
      done = q == cudaSuccess;
    }
    if (done) return Status::Ok();
    if (Clock::now() >= deadline) {
      return Unavailable(std::string(call) + " timed out after " + Ms(timeout) +
                         " (CommunicatorOptions.timeout)");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(CommunicatorOptions options, int device, NcclComm comm, CudaStream stream,
                   DeviceBuffer scratch)
      : Communicator(std::move(options)),
        device_(device),
        stream_(std::move(stream)),
        scratch_(std::move(scratch)),
        comm_(std::move(comm)) {}

  ~NcclCommunicator() override {
    ScopedCudaDevice on;
    (void)on.Set(device_);
    // The communicator first: its kernels may still use the buffers.
    comm_.Abort();
    staging_.Reset();
    scratch_.Reset();
    stream_.Reset();
  }

  Status Broadcast(torch::Tensor& tensor, int root) override {
    return Run("broadcast", [&](Clock::time_point deadline) -> Status {
      VAED_RETURN_IF_ERROR(CheckTensor(tensor, root));
      const size_t bytes = tensor.nbytes();
      if (bytes == 0) return Status::Ok();
      const bool staged = !tensor.is_cuda();
      UsedOnCommStream(tensor);
      char* buf = static_cast<char*>(tensor.data_ptr());
      if (staged) {
        VAED_RETURN_IF_ERROR(Reserve(bytes));
        buf = staging_.get();
        if (rank() == root) {
          VAED_RETURN_IF_ERROR(Copy(buf, tensor.data_ptr(), bytes, cudaMemcpyHostToDevice));
        }
      }
      VAED_RETURN_IF_ERROR(
          Enqueue(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_.get(), stream_.get()),
                  "ncclBroadcast", deadline));
      VAED_RETURN_IF_ERROR(Wait("ncclBroadcast", deadline));
      if (staged && rank() != root) {
        // Only now: a copy into pageable memory blocks the host until the
        // stream reaches it, which must not happen before the deadline
        // poll above.
        VAED_RETURN_IF_ERROR(Copy(tensor.data_ptr(), buf, bytes, cudaMemcpyDeviceToHost));
        VAED_RETURN_IF_ERROR(Wait("copying the broadcast to the host", deadline));
      }
      return Status::Ok();
    });
  }

  Result<std::vector<torch::Tensor>> Gather(const torch::Tensor& tensor, int root) override {
    std::vector<torch::Tensor> outputs;
    VAED_RETURN_IF_ERROR(Run("gather", [&](Clock::time_point deadline) -> Status {
      VAED_RETURN_IF_ERROR(CheckTensor(tensor, root));
      const bool is_root = rank() == root;
      if (is_root) {
        for (int r = 0; r < size(); ++r) outputs.push_back(torch::empty_like(tensor));
      }
      const size_t bytes = tensor.nbytes();
      if (bytes == 0) return Status::Ok();
      const bool staged = !tensor.is_cuda();
      UsedOnCommStream(tensor);
      for (const torch::Tensor& o : outputs) UsedOnCommStream(o);
      auto out = [&](int r) { return static_cast<char*>(outputs[size_t(r)].data_ptr()); };
      const char* send = static_cast<const char*>(tensor.data_ptr());
      char* recv = nullptr;  // root, staged: rank r's bytes at recv + r * bytes
      if (staged) {
        VAED_RETURN_IF_ERROR(Reserve(is_root ? size_t(size()) * bytes : bytes));
        if (is_root) {
          recv = staging_.get();
          std::memcpy(out(root), send, bytes);
        } else {
          VAED_RETURN_IF_ERROR(Copy(staging_.get(), send, bytes, cudaMemcpyHostToDevice));
          send = staging_.get();
        }
      } else if (is_root) {
        VAED_RETURN_IF_ERROR(Copy(out(root), send, bytes, cudaMemcpyDeviceToDevice));
      }
      if (size() > 1) {
        VAED_RETURN_IF_ERROR(Enqueue(ncclGroupStart(), "ncclGroupStart", deadline));
        // Inside a group the calls only record work; ncclGroupEnd launches
        // it and must run even after a failed call, to close the group.
        Status recorded = Status::Ok();
        for (int r = 0; r < size() && recorded.ok(); ++r) {
          if (is_root && r != root) {
            void* into = staged ? static_cast<void*>(recv + size_t(r) * bytes) : out(r);
            recorded = Recorded(ncclRecv(into, bytes, ncclUint8, r, comm_.get(), stream_.get()),
                                "ncclRecv");
          } else if (!is_root && r == root) {
            recorded = Recorded(ncclSend(send, bytes, ncclUint8, root, comm_.get(), stream_.get()),
                                "ncclSend");
          }
        }
        const Status ended = Enqueue(ncclGroupEnd(), "ncclGroupEnd", deadline);
        VAED_RETURN_IF_ERROR(recorded);
        VAED_RETURN_IF_ERROR(ended);
      }
      VAED_RETURN_IF_ERROR(Wait("gather (ncclSend/ncclRecv)", deadline));
      if (staged && is_root && size() > 1) {
        for (int r = 0; r < size(); ++r) {
          if (r == root) continue;
          VAED_RETURN_IF_ERROR(
              Copy(out(r), recv + size_t(r) * bytes, bytes, cudaMemcpyDeviceToHost));
        }
        VAED_RETURN_IF_ERROR(Wait("copying the gathered tensors to the host", deadline));
      }
      return Status::Ok();
    }));
    return outputs;
  }

  Status Barrier() override {
    return Run("barrier", [&](Clock::time_point deadline) -> Status {
      float* one = reinterpret_cast<float*>(scratch_.get());
      VAED_RETURN_IF_ERROR(
          Enqueue(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, comm_.get(), stream_.get()),
                  "ncclAllReduce (barrier)", deadline));
      return Wait("ncclAllReduce (barrier)", deadline);
    });
  }

  void Abort(const std::string& why) override {
    MarkAborted(why);
    ScopedCudaDevice on;
    (void)on.Set(device_);
    comm_.Abort();
  }

 private:
  // Every collective: refuse after an abort, count down the injected
  // failure, make the device current, run `fn` with the deadline, and on
  // any failure abort and answer as communicator.h says.
  template <typename Fn>
  Status Run(const char* op, Fn&& fn) {
    VAED_RETURN_IF_ERROR(BeginCollective(op));
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    Status s;
    {
      ScopedCudaDevice on;
      s = on.Set(device_);
      if (s.ok()) s = AfterCallersStream();
      if (s.ok()) {
        try {
          s = fn(deadline);
        } catch (...) {  // LibTorch (empty_like, data_ptr) throws
          s = Unavailable(ExceptionMessage());
        }
      }
    }
    // A sticky error keeps its kInternal (CudaStatus); any other failure
    // of the collective is kUnavailable (communicator.h).
    if (!s.ok() && s.reason() != ErrorReason::kStickyDevice) s = Unavailable(s.message());
    if (s.ok()) return s;
    // kUnavailable carries only what failed; any other error (a sticky
    // CUDA error above all) keeps its code and reason, the collective
    // named as context.
    s = s.code() == StatusCode::kUnavailable ? Failed(op, s.message())
                                              : s.WithContext(Describe(op) + " failed");
    Abort(s.message());
    return s;
  }

  // The collective reads what the caller queued on its current stream of
  // device_ (LibTorch's; the rank's stream, rank_stream.h): the
  // communicator's stream waits for an event recorded there first, as
  // ProcessGroupNCCL orders its stream after the caller's.
  Status AfterCallersStream() {
    cudaStream_t caller = nullptr;
    try {
      caller = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
    } catch (...) {
      return Unavailable("the caller's CUDA stream: " + ExceptionMessage());
    }
    if (caller == stream_.get()) return Status::Ok();
    if (ordering_.get() == nullptr) {
      VAED_ASSIGN_OR_RETURN(ordering_, CudaEvent::Create(cudaEventDisableTiming,
                                                         "the communicator's ordering event"));
    }
    if (const cudaError_t err = cudaEventRecord(ordering_.get(), caller); err != cudaSuccess) {
      return CudaError(err, "cudaEventRecord on the caller's stream");
    }
    if (const cudaError_t err = cudaStreamWaitEvent(stream_.get(), ordering_.get(), 0);
        err != cudaSuccess) {
      return CudaError(err, "cudaStreamWaitEvent on the communicator's stream");
    }
    return Status::Ok();
  }

  // A device tensor the communicator's stream reads or writes: the caching
  // allocator does not reuse its memory until that stream's work queued so
  // far is done (recordStream), even if the caller frees it first.
  void UsedOnCommStream(const torch::Tensor& tensor) {
    if (!tensor.is_cuda() || tensor.nbytes() == 0) return;
    c10::cuda::CUDACachingAllocator::recordStream(
        tensor.storage().data_ptr(),
        c10::cuda::getStreamFromExternal(stream_.get(), static_cast<c10::DeviceIndex>(device_)));
  }

  // The rules of communicator.h and nccl_communicator.h for `tensor`.
  Status CheckTensor(const torch::Tensor& tensor, int root) const {
    if (root < 0 || root >= size()) {
      return Unavailable("root " + std::to_string(root) +
                         " must be in [0, size = " + std::to_string(size()) + ")");
    }
    if (!tensor.defined()) return Unavailable("the tensor is undefined");
    if (!tensor.is_contiguous()) return Unavailable("the tensor must be contiguous");
    if (tensor.is_cuda()) {
      if (tensor.get_device() != device_) {
        return Unavailable("the tensor is on cuda:" + std::to_string(tensor.get_device()) +
                           ", the communicator on cuda:" + std::to_string(device_));
      }
    } else if (!tensor.is_cpu()) {
      return Unavailable("the tensor must be on the CPU or on cuda:" + std::to_string(device_) +
                         ", not " + tensor.device().str());
    }
    return Status::Ok();
  }

  Status Reserve(size_t bytes) {
    const cudaError_t err = staging_.Reserve(bytes);
    if (err == cudaSuccess) return Status::Ok();
    return CudaError(err, "cudaMalloc of a " + std::to_string(bytes) + "-byte staging buffer");
  }

  Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind, stream_.get());
    if (err == cudaSuccess) return Status::Ok();
    return CudaError(err, "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes");
  }

  // A call outside a group: a non-blocking communicator may answer
  // ncclInProgress, and must be back to ncclSuccess before the next call.
  Status Enqueue(ncclResult_t r, std::string_view call, Clock::time_point deadline) {
    if (r == ncclSuccess) return Status::Ok();
    if (r != ncclInProgress) return NcclStatus(r, call);
    return Poll(comm_.get(), nullptr, deadline, options_.timeout, call);
  }

  // A call inside ncclGroupStart/End: only records work.
  static Status Recorded(ncclResult_t r, std::string_view call) {
    if (r == ncclSuccess || r == ncclInProgress) return Status::Ok();
    return NcclStatus(r, call);
  }

  Status Wait(std::string_view what, Clock::time_point deadline) {
    return Poll(comm_.get(), stream_.get(), deadline, options_.timeout, what);
  }

  const int device_;
  // Declared before comm_, so destroyed after it (see ~NcclCommunicator).
  CudaStream stream_;
  CudaEvent ordering_;  // AfterCallersStream's, made at the first collective
  DeviceBuffer scratch_;  // one float for the barrier's all-reduce
  DeviceBuffer staging_;  // CPU tensors travel through here
  NcclComm comm_;
};

}  // namespace

bool NcclAvailable() { return true; }

Result<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, const CommunicatorOptions& options, int device) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("communicator of group " + options.group_name + ": rank " +
                           std::to_string(options.rank) +
                           " must be in [0, size = " + std::to_string(options.size) + ")");
  }
  const std::string label = "communicator of group " + options.group_name + " generation " +
                            std::to_string(options.generation) + " (rank " +
                            std::to_string(options.rank) + " of " + std::to_string(options.size) +
                            ")";
  // Context added, never rebuilt: a sticky error keeps its reason, so a
  // communicator that fails to build on a lost device restarts the daemon.
  auto failed = [&](const Status& s) { return s.WithContext("building " + label); };

  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    // No driver, no device, or none visible: a normal state of a GPU build
    // on a CPU node, not a crash.
    return Unavailable("no CUDA device for the NCCL " + label + ": " +
                       (err != cudaSuccess ? CudaStatus(err, "cudaGetDeviceCount").message()
                                           : std::string("cudaGetDeviceCount found 0 devices")));
  }
  if (device < 0 || device >= count) {
    return InvalidArgument(label + ": CUDA device " + std::to_string(device) + " must be in [0, " +
                           std::to_string(count) + ")");
  }
  ScopedCudaDevice on;
  if (Status set = on.Set(device); !set.ok()) {
    return failed(set.reason() == ErrorReason::kStickyDevice ? set : Unavailable(set.message()));
  }

  // The id of this generation: made by rank 0, read by the others.
  ncclUniqueId id;
  const std::string key =
      options.group_name + "/gen" + std::to_string(options.generation) + "/nccl_id";
  if (options.rank == 0) {
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return failed(NcclStatus(r, "ncclGetUniqueId"));
    }
    try {
      const auto* b = reinterpret_cast<const uint8_t*>(&id);
      store->set(key, std::vector<uint8_t>(b, b + sizeof(id)));
    } catch (...) {
      return failed(
          Unavailable("publishing the NCCL id under '" + key + "': " + ExceptionMessage()));
    }
  } else {
    std::vector<uint8_t> value;
    try {
      store->wait({key}, options.timeout);
      value = store->get(key);
    } catch (...) {
      return failed(Unavailable("waiting " + Ms(options.timeout) + " for rank 0's NCCL id under '" +
                                key + "': " + ExceptionMessage()));
    }
    if (value.size() != sizeof(id)) {
      return failed(Unavailable("the NCCL id under '" + key + "' has " +
                                std::to_string(value.size()) + " bytes, not " +
                                std::to_string(sizeof(id))));
    }
    std::memcpy(&id, value.data(), sizeof(id));
  }

  // Non-blocking: every collective orders it after the caller's stream by
  // an event (AfterCallersStream), never through the legacy default stream.
  Result<CudaStream> stream =
      CudaStream::Create(cudaStreamNonBlocking, "the communicator's stream");
  if (!stream.ok()) {
    const Status& err = stream.status();
    return failed(err.reason() == ErrorReason::kStickyDevice ? err : Unavailable(err.message()));
  }
  DeviceBuffer scratch;
  if (const cudaError_t err = scratch.Reserve(sizeof(float)); err != cudaSuccess) {
    return failed(CudaError(err, "cudaMalloc of the barrier's scratch float"));
  }
  if (const cudaError_t err = cudaMemset(scratch.get(), 0, sizeof(float)); err != cudaSuccess) {
    return failed(CudaError(err, "cudaMemset of the barrier's scratch float"));
  }

  // Non-blocking init: the call returns at once (ncclInProgress) and the
  // poll below bounds the wait for the other ranks by options.timeout.
  const std::string comm_name = options.group_name + ".gen" + std::to_string(options.generation);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = comm_name.c_str();
  ncclComm_t raw_comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&raw_comm, options.size, id, options.rank, &config);
  NcclComm comm(raw_comm);  // aborted on every early return below
  if (r != ncclSuccess && r != ncclInProgress) {
    return failed(NcclStatus(r, "ncclCommInitRankConfig"));
  }
  if (raw_comm == nullptr) {
    return failed(Unavailable("ncclCommInitRankConfig returned no communicator"));
  }
  if (Status ready = Poll(raw_comm, nullptr, Clock::now() + options.timeout, options.timeout,
                          "ncclCommInitRankConfig");
      !ready.ok()) {
    return failed(ready);
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(
      options, device, std::move(comm), std::move(stream).value(), std::move(scratch)));
}

}  // namespace vaed::parallel
