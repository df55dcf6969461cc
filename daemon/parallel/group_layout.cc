#include "daemon/parallel/group_layout.h"

#include <algorithm>
#include <numeric>

namespace vaed::parallel {

namespace {

std::string JoinSizes(const std::vector<int>& sizes) {
  std::string out;
  for (int s : sizes) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return "[" + out + "]";
}

}  // namespace

Result<GroupLayout> GroupLayout::Plan(const GroupLayoutOptions& options) {
  if (options.ranks_per_node < 1) {
    return InvalidArgument("group.ranks is " + std::to_string(options.ranks_per_node) +
                           "; must be >= 1");
  }
  if (options.world_nodes < 1) {
    return InvalidArgument("group.world_nodes is " + std::to_string(options.world_nodes) +
                           "; must be >= 1");
  }
  if (options.node_rank < 0 || options.node_rank >= options.world_nodes) {
    return InvalidArgument("group.node_rank is " + std::to_string(options.node_rank) +
                           "; must be in [0, group.world_nodes = " +
                           std::to_string(options.world_nodes) + ")");
  }
  GroupLayout layout;
  layout.options_ = options;
  std::vector<int>& sizes = layout.options_.qualified_sizes;
  // A rank alone is always possible (it is also the fallback after a
  // failed collective).
  sizes.push_back(1);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const int world = layout.world_ranks();
  for (int s : sizes) {
    if (s < 1 || s > world) {
      return InvalidArgument("group.qualified_sizes has " + std::to_string(s) +
                             "; each size must be in [1, " + std::to_string(world) +
                             "] (group.ranks x group.world_nodes)");
    }
  }
  if (std::find(sizes.begin(), sizes.end(), options.default_size) == sizes.end()) {
    return InvalidArgument("group.size is " + std::to_string(options.default_size) +
                           "; must be one of group.qualified_sizes " + JoinSizes(sizes));
  }
  for (int s : sizes) {
    for (int b = 0; (b + 1) * s <= world; ++b) {
      GroupSpec g;
      g.name = "s" + std::to_string(s) + ".b" + std::to_string(b);
      g.size = s;
      g.block = b;
      g.ranks.resize(static_cast<size_t>(s));
      std::iota(g.ranks.begin(), g.ranks.end(), b * s);
      g.leader_node = g.ranks.front() / options.ranks_per_node;
      layout.groups_.push_back(std::move(g));
    }
  }
  return layout;
}

std::vector<const GroupSpec*> GroupLayout::OfSize(int size) const {
  std::vector<const GroupSpec*> out;
  for (const GroupSpec& g : groups_) {
    if (g.size == size) out.push_back(&g);
  }
  return out;
}

std::vector<const GroupSpec*> GroupLayout::OfRank(int global_rank) const {
  std::vector<const GroupSpec*> out;
  for (const GroupSpec& g : groups_) {
    if (std::find(g.ranks.begin(), g.ranks.end(), global_rank) != g.ranks.end()) {
      out.push_back(&g);
    }
  }
  return out;
}

std::vector<const GroupSpec*> GroupLayout::LedHereForTesting() const {
  std::vector<const GroupSpec*> out;
  for (const GroupSpec& g : groups_) {
    if (g.leader_node == options_.node_rank) out.push_back(&g);
  }
  return out;
}

Result<int> ChooseGroupSize(const GroupLayout& layout, int64_t requested, int64_t tiles_per_unit,
                            FewTiles few_tiles) {
  const std::vector<int>& sizes = layout.options().qualified_sizes;
  const int64_t asked = requested == 0 ? layout.options().default_size : requested;
  if (std::find(sizes.begin(), sizes.end(), asked) == sizes.end()) {
    return InvalidArgument("options.group_size is " + std::to_string(requested) +
                           "; must be 0 (the daemon's group.size " +
                           std::to_string(layout.options().default_size) +
                           ") or one of group.qualified_sizes " + JoinSizes(sizes))
        .WithField("options.group_size");
  }
  int size = static_cast<int>(asked);  // one of the qualified sizes
  if (few_tiles == FewTiles::kShrink && tiles_per_unit < size) {
    int shrunk = 1;
    for (int s : sizes) {
      if (s <= std::max<int64_t>(tiles_per_unit, 1)) shrunk = s;
    }
    size = shrunk;
  }
  return size;
}

std::vector<int> OrderByDeviceUuid(const std::vector<std::string>& uuids) {
  std::vector<int> order(uuids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return uuids[size_t(a)] < uuids[size_t(b)]; });
  return order;
}

}  // namespace vaed::parallel
