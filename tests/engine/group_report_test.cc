// The group report of a tile-parallel decode (daemon/engine/group_job.h
// MakeGroupReport): per-rank figures and the imbalance.
#include <gtest/gtest.h>

#include <vector>

#include "daemon/engine/group_job.h"

namespace vaed::engine {
namespace {

parallel::GroupSpec TwoRanks() {
  parallel::GroupSpec spec;
  spec.name = "s2.b0";
  spec.size = 2;
  spec.ranks = {0, 1};
  return spec;
}

TEST(GroupReportTest, ImbalanceIsMaxOverMeanOfTheWorkingRanks) {
  const GroupReport r = MakeGroupReport(
      TwoRanks(), 3, {{.rank = 0, .tiles = 2, .decode_seconds = 3.0},
                      {.rank = 1, .tiles = 2, .decode_seconds = 1.0}});
  EXPECT_DOUBLE_EQ(r.imbalance, 1.5);  // 3 / mean(3, 1)
  EXPECT_EQ(r.generation, 3u);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(r.ranks[1].decode_seconds, 1.0);
}

// Regression: a 1-tile request on a group of 2
// reported imbalance 1.22, because the rank that decoded no tile reported
// its wall time (waiting in collectives) as decode seconds and counted in
// the mean.
TEST(GroupReportTest, RegressionARankWithNoTilesReportsNoSecondsAndIsNotInTheImbalance) {
  const GroupReport r = MakeGroupReport(
      TwoRanks(), 1, {{.rank = 0, .tiles = 1, .decode_seconds = 2.0},
                      {.rank = 1, .tiles = 0, .decode_seconds = 1.3}});
  EXPECT_DOUBLE_EQ(r.imbalance, 1.0);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].tiles, 0);
  EXPECT_DOUBLE_EQ(r.ranks[1].decode_seconds, 0.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].decode_seconds, 2.0);
}

}  // namespace
}  // namespace vaed::engine
