#include "daemon/engine/rank_communicators.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/parallel/nccl_communicator.h"

namespace vaed::engine {

bool MembershipContext::SpansNodes(const parallel::GroupSpec& spec) const {
  return std::any_of(spec.ranks.begin(), spec.ranks.end(),
                     [&](int r) { return !layout->IsLocal(r); });
}

RankCommunicators::RankCommunicators(const MembershipContext* context, int local_rank,
                                     int nccl_device)
    : context_(context),
      nccl_device_(nccl_device),
      global_rank_(context->layout->GlobalRank(local_rank)) {}

GroupChannel* RankCommunicators::Live(const parallel::GroupSpec& spec, uint64_t generation) {
  auto it = channels_.find(spec.name);
  if (it == channels_.end()) return nullptr;
  GroupChannel& ch = it->second;
  if (!ch.comm || ch.comm->generation() != generation || ch.comm->aborted()) return nullptr;
  return &ch;
}

Result<GroupChannel*> RankCommunicators::Get(const parallel::GroupSpec& spec,
                                             uint64_t generation, bool fresh) {
  if (GroupChannel* live = Live(spec, generation); live != nullptr && !fresh) return live;
  GroupChannel& ch = channels_[spec.name];
  ch = GroupChannel{};
  last_failure_was_build_ = false;
  const int index = static_cast<int>(
      std::find(spec.ranks.begin(), spec.ranks.end(), global_rank_) - spec.ranks.begin());
  const bool spans = context_->SpansNodes(spec);
  const int node = static_cast<int>(context_->options.node_rank);
  std::unique_ptr<GroupStore> store;
  if (!context_->options.store_address.empty()) {
    VAED_ASSIGN_OR_RETURN(store, Connect(spec));
  }
  if (spans && index == 0) {
    // Tell the other daemons which generation to meet (store_watcher.h).
    VAED_RETURN_IF_ERROR(store->Set(LatestKey(spec), std::to_string(generation)));
    VAED_RETURN_IF_ERROR(store->Set(StateKey(spec, generation), kGenerationBuilding));
  } else if (spans && spec.leader_node != node) {
    VAED_RETURN_IF_ERROR(store->Set(JoinedKey(spec, generation, node),
                                    std::to_string(context_->incarnation)));
  }
  Result<std::unique_ptr<parallel::Communicator>> built =
      Build(spec, generation, store ? store->store() : context_->shared_store);
  if (spans && index == 0) {
    // A failure to record it only delays the members (they wait for the
    // next generation); the build's own outcome decides.
    (void)store->Set(StateKey(spec, generation),
                     built.ok() ? kGenerationBuilt : kGenerationFailed);
  }
  if (!built.ok()) {
    last_failure_was_build_ = true;
    spdlog::error("executor: rank {}: {}", global_rank_, built.status().ToString());
    return built.status();
  }
  if ((generation > 0 || spans) && index == 0) {
    spdlog::info("executor: group {} {} (generation {})", spec.name,
                 generation > 0 ? "rebuilt" : "built", generation);
  }
  ch.comm = std::move(built).value();
  ch.store = std::move(store);
  return &ch;
}

Result<std::unique_ptr<GroupStore>> RankCommunicators::Connect(const parallel::GroupSpec& spec) {
  const GroupOptions& o = context_->options;
  Result<c10::intrusive_ptr<c10d::Store>> connected = parallel::MakeStore(
      {.address = o.store_address,
       .node_rank = static_cast<int>(o.node_rank),
       .world_nodes = static_cast<int>(o.world_nodes),
       .timeout = std::chrono::milliseconds(o.collective_timeout_ms),
       .serve = false});
  if (!connected.ok()) {
    spdlog::error("executor: rank {}: group {}: {}", global_rank_, spec.name,
                  connected.status().ToString());
    return connected.status();
  }
  return std::make_unique<GroupStore>(std::move(connected).value());
}

Result<std::unique_ptr<parallel::Communicator>> RankCommunicators::Build(
    const parallel::GroupSpec& spec, uint64_t generation,
    const c10::intrusive_ptr<c10d::Store>& store) {
  const GroupOptions& o = context_->options;
  const int index = static_cast<int>(
      std::find(spec.ranks.begin(), spec.ranks.end(), global_rank_) - spec.ranks.begin());
  const parallel::CommunicatorOptions options{
      .group_name = spec.name,
      .rank = index,
      .size = spec.size,
      .generation = generation,
      .timeout = std::chrono::milliseconds(o.collective_timeout_ms),
      .host = o.host};
  // group.backend = "nccl" (GPU builds; configuration refuses it in CPU
  // builds): the communicator runs on the rank's own device (its UUID-ordered
  // device, rank_devices.h CudaOrdinalOfRank), where its tensors live.
  if (o.backend == parallel::Backend::kNccl) {
    if (nccl_device_ < 0) {
      return FailedPrecondition("group.backend \"nccl\" needs CUDA ranks; rank " +
                                std::to_string(global_rank_) +
                                " decodes on the CPU (executor.device)");
    }
    return parallel::CreateNcclCommunicator(store, options, nccl_device_);
  }
  return parallel::CreateGlooCommunicator(store, options);
}

}  // namespace vaed::engine
