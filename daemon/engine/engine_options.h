// The engine's options: the executor ([executor] of the daemon config) and
// the daemon's VAE process group ([group]). Plain values, filled and
// validated by the server's config reader (daemon/server/config.h); the
// engine only reads them.
//
// Thread-safety: plain values.
#ifndef VAED_DAEMON_ENGINE_ENGINE_OPTIONS_H_
#define VAED_DAEMON_ENGINE_ENGINE_OPTIONS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/engine/rank_devices.h"
#include "daemon/parallel/backend.h"
#include "daemon/parallel/group_layout.h"
#include "vaed/status.h"

namespace vaed::engine {

struct ExecutorOptions {
  // LibTorch intra-op threads of the executor (at::set_num_threads). More
  // threads: faster single decodes until memory bandwidth saturates; fewer:
  // leaves cores to the DiT workers on the same node.
  int intra_op_threads = 2;
  // Decode requests waiting beyond the one running; past it requests are
  // answered at once with BUSY and a retry-after (back-pressure).
  uint32_t queue_capacity = 64;
  // Heap the daemon keeps between requests for reuse (MiB). Freed decode
  // activations are kept as a pool because re-faulting pages is expensive;
  // after a request leaving more heap than this, the free part is returned
  // to the OS. Larger: fewer page faults for big decodes; smaller: lower
  // idle RSS after one.
  uint64_t retained_heap_mib = 4096;
  // Budget for LibTorch host tensors of the whole daemon (weights, cached
  // plans, decode buffers), MiB; 0 = none. An allocation past it fails as
  // out of memory, which the decode's failure ladder handles (fewer tiles
  // per call) before answering resource_exhausted; stack_tiling auto
  // checks its measured estimate against it. Smaller: a hard cap on what
  // vaed takes from the node; too small: requests fail.
  uint64_t memory_budget_mib = 0;
  // Testing only: honour DecodeOptions.inject_faults. Off in production
  // (requests carrying faults are then refused).
  bool allow_fault_injection = false;
  // Where the ranks decode: "cpu" (every build) or "cuda" (GPU builds: one
  // rank per device, group.ranks of them; rank_devices.h).
  DeviceKind device = DeviceKind::kCpu;
  // device = "cuda": the UUIDs (device_uuid.h text form) of the ranks'
  // devices, exactly group.ranks of them; empty = the group.ranks visible
  // devices with the smallest UUIDs. Ranks are numbered in UUID order.
  // Must be empty for "cpu".
  std::vector<std::string> devices;
};

// The daemon's own VAE process group (daemon/parallel/): its local
// ranks and the group sizes requests run on.
struct GroupOptions {
  // Local ranks (CPU builds: worker ranks, each with its own executor thread
  // and its own copy of the models, sharing executor.intra_op_threads
  // cores each; GPU builds: one per device).
  uint32_t ranks = 1;
  // Group size of a request that asks for none (DecodeOptions.group_size
  // 0); one of qualified_sizes.
  uint32_t size = 1;
  // Sizes requests may ask for (1 is always allowed). Every size forms
  // contiguous blocks of ranks (group_layout.h).
  std::vector<uint32_t> qualified_sizes = {1};
  // Fewer tiles per window than the group has ranks: "pad" (idle ranks send
  // empty payloads) or "shrink" (the largest qualified size the tiles fill).
  parallel::FewTiles few_tiles = parallel::FewTiles::kPad;
  // Communicator backend: "gloo" (every build; LibTorch c10d) or "nccl"
  // (builds with VAED_WITH_CUDA; local rank r uses its own CUDA device).
  parallel::Backend backend = parallel::Backend::kGloo;
  // Limit of a collective and of a (re)built communicator's rendezvous.
  uint32_t collective_timeout_ms = 30000;
  // Address the Gloo transport binds and announces to its peers: loopback
  // for one daemon; the node's address when groups span daemons.
  std::string host = "127.0.0.1";
  // Groups spanning daemons (nodes): "host:port" of the TCPStore that node
  // 0 serves and every node joins ("" = this daemon alone, an in-process
  // store). world_nodes daemons with the same group.ranks each; node_rank
  // is this daemon's index. Global rank = node_rank * ranks + local rank.
  std::string store_address;
  uint32_t world_nodes = 1;
  uint32_t node_rank = 0;
};

// The sizes qualified when a config or --group-ranks sets group.ranks but
// no group.qualified_sizes: 1, 2, 4, ... up to the ranks of all nodes
// (ranks x world_nodes), every size a request could fill.
inline std::vector<uint32_t> DefaultQualifiedSizes(const GroupOptions& group) {
  const uint32_t world = group.ranks * std::max<uint32_t>(1, group.world_nodes);
  std::vector<uint32_t> sizes = {1};
  for (uint32_t s = 2; s <= world; s *= 2) sizes.push_back(s);
  return sizes;
}

// The VAE groups of `group` (all nodes; group_layout.h). Errors
// (kInvalidArgument) name the group.* key (ranks, size, qualified_sizes).
inline Result<parallel::GroupLayout> MakeGroupLayout(const GroupOptions& group) {
  parallel::GroupLayoutOptions layout;
  layout.ranks_per_node = static_cast<int>(group.ranks);
  layout.world_nodes = static_cast<int>(group.world_nodes);
  layout.node_rank = static_cast<int>(group.node_rank);
  layout.qualified_sizes.assign(group.qualified_sizes.begin(), group.qualified_sizes.end());
  layout.default_size = static_cast<int>(group.size);
  return parallel::GroupLayout::Plan(layout);
}

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_ENGINE_OPTIONS_H_
