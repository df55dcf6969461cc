// How the daemon's ranks form VAE groups (DESIGN.md §2 item 9).
//
// Ranks: each daemon (node) has `ranks_per_node` local ranks (GPU builds:
// one per configured device, ordered by device UUID, OrderByDeviceUuid;
// CPU builds: worker ranks in index order). Global rank = node_rank *
// ranks_per_node + local rank, so world = world_nodes * ranks_per_node.
//
// Groups: for every qualified size S, the world is cut into contiguous
// blocks of S ranks: block b = global ranks [b*S, (b+1)*S) (ranks past the
// last whole block belong to no group of that size). A group's output rank
// is its first rank; the daemon that owns it leads the group's requests.
// The same configuration always gives the same groups. Group names are
// "s<S>.b<b>" (store keys, status, logs).
//
// Thread-safety: pure functions and immutable values.
#ifndef VAED_DAEMON_PARALLEL_GROUP_LAYOUT_H_
#define VAED_DAEMON_PARALLEL_GROUP_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/models/named_enum.h"
#include "vaed/status.h"

namespace vaed::parallel {

struct GroupLayoutOptions {
  int ranks_per_node = 1;
  int world_nodes = 1;
  int node_rank = 0;
  // Group sizes requests may use (group.qualified_sizes); 1 is always
  // qualified (added if absent). Plan() sorts them and drops duplicates.
  std::vector<int> qualified_sizes = {1};
  int default_size = 1;  // group.size: one of qualified_sizes
};

struct GroupSpec {
  std::string name;          // "s2.b0"
  int size = 1;
  int block = 0;
  std::vector<int> ranks;    // global ranks, ascending; ranks[0] is the output rank
  int leader_node = 0;       // node owning ranks[0]
};

class GroupLayout {
 public:
  // Errors (kInvalidArgument, naming the config key): ranks_per_node or
  // world_nodes < 1; node_rank outside [0, world_nodes); a qualified size
  // < 1 or > the world's ranks; default_size not qualified.
  static Result<GroupLayout> Plan(const GroupLayoutOptions& options);

  int world_ranks() const { return options_.ranks_per_node * options_.world_nodes; }
  const GroupLayoutOptions& options() const { return options_; }
  // Every group, by size ascending then block.
  const std::vector<GroupSpec>& groups() const { return groups_; }
  // Groups of size `size` (empty for an unqualified size).
  std::vector<const GroupSpec*> OfSize(int size) const;
  // Groups that `global_rank` belongs to, in the order above: the order in
  // which every rank builds its communicators (the same on all ranks, so
  // the rendezvous never deadlocks).
  std::vector<const GroupSpec*> OfRank(int global_rank) const;
  // Test hook: the groups this node leads (its local ranks include the
  // output rank), so a test can check how a layout splits leadership across
  // nodes. Production code does not call it.
  std::vector<const GroupSpec*> LedHereForTesting() const;
  int GlobalRank(int local_rank) const { return options_.node_rank * options_.ranks_per_node + local_rank; }
  bool IsLocal(int global_rank) const {
    return global_rank / options_.ranks_per_node == options_.node_rank;
  }
  int LocalRank(int global_rank) const { return global_rank % options_.ranks_per_node; }

 private:
  GroupLayoutOptions options_;
  std::vector<GroupSpec> groups_;
};

// What a request gets when its decode has fewer tiles per unit of work
// (H3 window, TAEF2 frame batch) than the group has ranks
// (group.few_tiles): kPad keeps the group (idle ranks send empty payloads);
// kShrink uses the largest qualified size <= the tile count.
enum class FewTiles { kPad, kShrink };
inline constexpr models::NameTable<FewTiles, 2> kFewTilesNames = {{
    {FewTiles::kPad, "pad"},
    {FewTiles::kShrink, "shrink"},
}};

// The group size a request runs on: `requested` (0 = the layout's
// default_size; otherwise it must be qualified), reduced by `few_tiles`
// when `tiles_per_unit` < that size; 1 for untiled requests
// (tiles_per_unit <= 1 under kShrink). Errors: kInvalidArgument naming
// options.group_size and the qualified sizes.
Result<int> ChooseGroupSize(const GroupLayout& layout, int64_t requested, int64_t tiles_per_unit,
                            FewTiles few_tiles);

// GPU builds: device indices ordered by their UUID strings (ascending), so
// that rank order does not depend on CUDA_VISIBLE_DEVICES enumeration.
// Returns the device index of each local rank.
std::vector<int> OrderByDeviceUuid(const std::vector<std::string>& uuids);

}  // namespace vaed::parallel

#endif  // VAED_DAEMON_PARALLEL_GROUP_LAYOUT_H_
