// How ranks form VAE groups (daemon/parallel/group_layout.h).
#include "daemon/parallel/group_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vaed::parallel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<const GroupSpec*>& groups) {
  std::vector<std::string> out;
  for (const GroupSpec* g : groups) out.push_back(g->name);
  return out;
}

TEST(GroupLayoutTest, FourRanksFormContiguousBlocksForEveryQualifiedSize) {
  auto layout = GroupLayout::Plan({.ranks_per_node = 4, .qualified_sizes = {4, 2}, .default_size = 2});
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->world_ranks(), 4);
  EXPECT_THAT(layout->options().qualified_sizes, ElementsAre(1, 2, 4));
  std::vector<std::string> names;
  for (const GroupSpec& g : layout->groups()) names.push_back(g.name);
  EXPECT_THAT(names, ElementsAre("s1.b0", "s1.b1", "s1.b2", "s1.b3", "s2.b0", "s2.b1", "s4.b0"));
  EXPECT_THAT(layout->OfSize(2)[1]->ranks, ElementsAre(2, 3));
  // Rank 3 is in s1.b3, s2.b1 and s4.b0, in that (creation) order.
  EXPECT_THAT(Names(layout->OfRank(3)), ElementsAre("s1.b3", "s2.b1", "s4.b0"));
  EXPECT_EQ(layout->LedHereForTesting().size(), 7u);
}

TEST(GroupLayoutTest, RanksPastTheLastWholeBlockBelongToNoGroupOfThatSize) {
  auto layout = GroupLayout::Plan({.ranks_per_node = 3, .qualified_sizes = {2}, .default_size = 2});
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->OfSize(2).size(), 1u);
  EXPECT_THAT(Names(layout->OfRank(2)), ElementsAre("s1.b2"));
}

// Two daemons of one rank each: the size-2 group spans them; node 0 leads
// it, node 1 leads only its own size-1 group.
TEST(GroupLayoutTest, AGroupSpanningTwoNodesIsLedByTheNodeOfItsFirstRank) {
  auto node1 = GroupLayout::Plan(
      {.ranks_per_node = 1, .world_nodes = 2, .node_rank = 1, .qualified_sizes = {2}, .default_size = 2});
  ASSERT_TRUE(node1.ok()) << node1.status().ToString();
  EXPECT_EQ(node1->GlobalRank(0), 1);
  EXPECT_TRUE(node1->IsLocal(1));
  EXPECT_FALSE(node1->IsLocal(0));
  EXPECT_EQ(node1->OfSize(2)[0]->leader_node, 0);
  EXPECT_THAT(Names(node1->LedHereForTesting()), ElementsAre("s1.b1"));
}

TEST(GroupLayoutTest, BadSettingsNameTheirKey) {
  EXPECT_THAT(GroupLayout::Plan({.ranks_per_node = 0}).status().message(), HasSubstr("group.ranks is 0"));
  EXPECT_THAT(GroupLayout::Plan({.world_nodes = 2, .node_rank = 2}).status().message(),
              HasSubstr("group.node_rank is 2"));
  EXPECT_THAT(GroupLayout::Plan({.ranks_per_node = 2, .qualified_sizes = {4}}).status().message(),
              HasSubstr("group.qualified_sizes has 4; each size must be in [1, 2]"));
  EXPECT_THAT(GroupLayout::Plan({.ranks_per_node = 4, .qualified_sizes = {4}, .default_size = 2})
                  .status()
                  .message(),
              HasSubstr("group.size is 2; must be one of group.qualified_sizes [1, 4]"));
}

TEST(ChooseGroupSizeTest, DefaultRequestedPadAndShrink) {
  auto layout = GroupLayout::Plan({.ranks_per_node = 4, .qualified_sizes = {2, 4}, .default_size = 4});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(*ChooseGroupSize(*layout, 0, 8, FewTiles::kPad), 4);
  EXPECT_EQ(*ChooseGroupSize(*layout, 2, 8, FewTiles::kPad), 2);
  // Fewer tiles than ranks: pad keeps the group, shrink takes the largest
  // qualified size that the tiles fill.
  EXPECT_EQ(*ChooseGroupSize(*layout, 0, 1, FewTiles::kPad), 4);
  EXPECT_EQ(*ChooseGroupSize(*layout, 0, 1, FewTiles::kShrink), 1);
  EXPECT_EQ(*ChooseGroupSize(*layout, 0, 2, FewTiles::kShrink), 2);
  EXPECT_EQ(*ChooseGroupSize(*layout, 0, 3, FewTiles::kShrink), 2);
  EXPECT_EQ(*ChooseGroupSize(*layout, 4, 4, FewTiles::kShrink), 4);
  auto bad = ChooseGroupSize(*layout, 3, 8, FewTiles::kPad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("options.group_size is 3; must be 0 (the daemon's group.size 4) or one of "
                        "group.qualified_sizes [1, 2, 4]"));
}

// Bug: the handler cast the request's uint32
// options.group_size to int, so 2^31 was refused as "options.group_size is
// -2147483648". The value is now passed whole and named as sent.
TEST(ChooseGroupSizeTest, RegressionAGroupSizeBeyondIntIsNamedAsSent) {
  GroupLayoutOptions o;
  o.ranks_per_node = 4;
  o.qualified_sizes = {1, 2, 4};
  o.default_size = 4;
  auto layout = GroupLayout::Plan(o);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  auto bad = ChooseGroupSize(*layout, int64_t{1} << 31, 8, FewTiles::kPad);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("options.group_size is 2147483648;"));
}

TEST(OrderByDeviceUuidTest, RanksFollowUuidOrderNotEnumerationOrder) {
  EXPECT_THAT(OrderByDeviceUuid({"GPU-c", "GPU-a", "GPU-b"}), ElementsAre(1, 2, 0));
  EXPECT_TRUE(OrderByDeviceUuid({}).empty());
}

}  // namespace
}  // namespace vaed::parallel
