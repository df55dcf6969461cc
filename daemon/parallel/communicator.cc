#include "daemon/parallel/communicator.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <charconv>
#include <exception>

namespace vaed::parallel {

namespace {

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(CommunicatorOptions options, c10::intrusive_ptr<c10d::ProcessGroupGloo> pg)
      : Communicator(std::move(options)), pg_(std::move(pg)) {}

  ~GlooCommunicator() override { pg_.reset(); }

  Status Broadcast(torch::Tensor& tensor, int root) override {
    return Run("broadcast", [&] {
      std::vector<torch::Tensor> tensors{tensor};
      c10d::BroadcastOptions opts;
      opts.rootRank = root;
      pg_->broadcast(tensors, opts)->wait();
    });
  }

  Result<std::vector<torch::Tensor>> Gather(const torch::Tensor& tensor, int root) override {
    std::vector<std::vector<torch::Tensor>> outputs;
    if (rank() == root) {
      outputs.emplace_back();
      for (int r = 0; r < size(); ++r) outputs.back().push_back(torch::empty_like(tensor));
    }
    VAED_RETURN_IF_ERROR(Run("gather", [&] {
      std::vector<torch::Tensor> inputs{tensor};
      c10d::GatherOptions opts;
      opts.rootRank = root;
      pg_->gather(outputs, inputs, opts)->wait();
    }));
    return rank() == root ? std::move(outputs.front()) : std::vector<torch::Tensor>();
  }

  Status Barrier() override {
    return Run("barrier", [&] { pg_->barrier()->wait(); });
  }

  void Abort(const std::string& why) override {
    MarkAborted(why);
    // Closing the pairs makes peers inside a collective fail at once
    // instead of at their timeout.
    pg_.reset();
  }

 private:
  template <typename Fn>
  Status Run(const char* op, Fn&& fn) {
    VAED_RETURN_IF_ERROR(BeginCollective(op));
    try {
      fn();
      return Status::Ok();
    } catch (...) {
      const Status s = Failed(op, ExceptionMessage());
      Abort(std::string(s.message()));
      return s;
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

std::vector<torch::Tensor> Communicator::GatherToOutputRank(const torch::Tensor& packed) {
  Result<std::vector<torch::Tensor>> parts = Gather(packed, 0);
  if (!parts.ok()) throw models::CollectiveFailed(parts.status());
  return std::move(parts).value();
}

std::string Communicator::abort_reason() const {
  MutexLock lock(&mu_);
  return abort_reason_;
}

void Communicator::MarkAborted(const std::string& why) {
  MutexLock lock(&mu_);
  if (aborted_.exchange(true)) return;
  abort_reason_ = why;
}

Status Communicator::BeginCollective(const char* op) {
  if (aborted()) return Failed(op, "the communicator was aborted: " + abort_reason());
  if (fail_countdown_ <= 0 || --fail_countdown_ > 0) return Status::Ok();
  Status injected =
      fail_reason_ == ErrorReason::kStickyDevice
          ? Internal(Describe(op) + " failed: CUDA error: an illegal memory access was "
                                    "encountered (injected fault member_device_fatal)")
                .WithReason(ErrorReason::kStickyDevice)
          : Failed(op, "injected collective failure (fault injection)");
  Abort(std::string(injected.message()));
  return injected;
}

std::string Communicator::Describe(const char* op) const {
  return "collective " + std::string(op) + " of group " + options_.group_name + " generation " +
         std::to_string(options_.generation) + " (rank " + std::to_string(options_.rank) +
         " of " + std::to_string(options_.size) + ")";
}

Status Communicator::Failed(const char* op, const std::string& what) const {
  return Unavailable(Describe(op) + " failed: " + what).WithReason(ErrorReason::kCollective);
}

std::string ExceptionMessage() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

Result<c10::intrusive_ptr<c10d::Store>> MakeStore(const StoreOptions& options) {
  if (options.address.empty()) {
    return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::HashStore>());
  }
  const size_t colon = options.address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      std::from_chars(options.address.data() + colon + 1,
                      options.address.data() + options.address.size(), port)
              .ec != std::errc() ||
      port <= 0 || port > 65535) {
    return InvalidArgument("group.store_address '" + options.address +
                           "' must be host:port with a port in 1..65535");
  }
  if (options.world_nodes < 1 || options.node_rank < 0 || options.node_rank >= options.world_nodes) {
    return InvalidArgument("group.node_rank " + std::to_string(options.node_rank) +
                           " must be in [0, group.world_nodes = " +
                           std::to_string(options.world_nodes) + ")");
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(port);
  opts.isServer = options.serve && options.node_rank == 0;
  opts.waitWorkers = false;
  opts.timeout = options.timeout;
  try {
    return c10::intrusive_ptr<c10d::Store>(
        c10::make_intrusive<c10d::TCPStore>(options.address.substr(0, colon), opts));
  } catch (...) {
    return Unavailable("TCPStore at " + options.address + " (node rank " +
                       std::to_string(options.node_rank) + " of " +
                       std::to_string(options.world_nodes) + "): " + ExceptionMessage());
  }
}

Result<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, const CommunicatorOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("communicator of group " + options.group_name + ": rank " +
                           std::to_string(options.rank) + " must be in [0, size = " +
                           std::to_string(options.size) + ")");
  }
  try {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
        options.group_name + "/gen" + std::to_string(options.generation), store);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options.host));
    gloo_options->threads = 1;
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, options.rank, options.size,
                                                           gloo_options);
    return std::unique_ptr<Communicator>(new GlooCommunicator(options, std::move(pg)));
  } catch (...) {
    return Unavailable("building communicator of group " + options.group_name + " generation " +
                       std::to_string(options.generation) + " (rank " +
                       std::to_string(options.rank) + " of " + std::to_string(options.size) +
                       "): " + ExceptionMessage());
  }
}

}  // namespace vaed::parallel
