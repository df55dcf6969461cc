// The scheduler's rules (daemon/engine/scheduler.h), without threads.
#include "daemon/engine/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

namespace vaed::engine {
namespace {

// A tiled model whose decodes have `tiles` tiles per unit of work.
class FakeModel : public models::VaeModel {
 public:
  explicit FakeModel(int64_t tiles) : tiles_(tiles) {
    info_.name = "fake";
    info_.caps.spatial_sharding = true;
  }
  const models::ModelInfo& info() const override { return info_; }
  torch::Device device() const override { return torch::kCPU; }
  Result<models::DecodePlan> Plan(DType, const std::vector<int64_t>&) const override {
    return models::DecodePlan{};
  }
  Result<torch::Tensor> Decode(const torch::Tensor&, const models::DecodeSettings&,
                               models::DecodeReport*) override {
    return Internal("not used");
  }
  int64_t TilesPerUnit(const std::vector<int64_t>&, const models::DecodeSettings&) const override {
    return tiles_;
  }

 private:
  models::ModelInfo info_;
  int64_t tiles_;
};

// Sizes 1, 2 (and 4 when there are 4 ranks in all).
parallel::GroupLayout Layout(int ranks_per_node, int world_nodes, int node_rank) {
  std::vector<int> sizes = {1, 2};
  if (ranks_per_node * world_nodes >= 4) sizes.push_back(4);
  Result<parallel::GroupLayout> l = parallel::GroupLayout::Plan(
      {.ranks_per_node = ranks_per_node,
       .world_nodes = world_nodes,
       .node_rank = node_rank,
       .qualified_sizes = sizes,
       .default_size = 1});
  if (!l.ok()) throw std::runtime_error(l.status().ToString());
  return *l;
}

std::shared_ptr<DecodeJob> Job(models::VaeModel* model, uint32_t group_size, uint64_t id = 1) {
  auto job = std::make_shared<DecodeJob>();
  job->model = model;
  job->request_id = id;
  job->client_id = id;
  job->video.emplace();
  job->video->latent.shape = {1, 24, 7, 32, 32};
  job->requested_group_size = group_size;
  return job;
}

class SchedulerTest : public ::testing::Test {
 protected:
  FakeModel four_tiles_{4};
  FakeModel untiled_{0};
};

TEST_F(SchedulerTest, TheHeadGoesToTheFirstIdleGroupOfItsSize) {
  const parallel::GroupLayout layout = Layout(4, 1, 0);
  Scheduler s(&layout, parallel::FewTiles::kPad, 4);
  s.Push(Job(&four_tiles_, 2, 1));
  s.Push(Job(&four_tiles_, 2, 2));
  s.Push(Job(&four_tiles_, 2, 3));
  ASSERT_TRUE(s.Schedule());
  ASSERT_TRUE(s.task(0) && s.task(1));
  EXPECT_EQ(s.task(0)->spec->name, "s2.b0");
  EXPECT_EQ(s.task(0)->job->request_id, 1u);
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(2)->spec->name, "s2.b1");
  EXPECT_EQ(s.task(3)->job->request_id, 2u);
  EXPECT_FALSE(s.Schedule()) << "every rank is busy: job 3 waits";
  EXPECT_EQ(s.queued(), 1u);
  EXPECT_EQ(s.Running().size(), 2u);
  s.Finish(0);
  EXPECT_FALSE(s.Schedule()) << "rank 1 still holds s2.b0";
  s.Finish(1);
  EXPECT_FALSE(s.group("s2.b0").busy);
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(0)->job->request_id, 3u);
}

TEST_F(SchedulerTest, AnUntiledOrCancelledJobRunsOnOneRank) {
  const parallel::GroupLayout layout = Layout(4, 1, 0);
  Scheduler s(&layout, parallel::FewTiles::kPad, 4);
  s.Push(Job(&untiled_, 4));
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(0)->spec->size, 1);
  EXPECT_FALSE(s.busy(1));
  auto cancelled = Job(&four_tiles_, 4, 2);
  cancelled->cancel->Cancel(Cancelled("client gone"));
  s.Push(cancelled);
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(1)->spec->size, 1);
}

TEST_F(SchedulerTest, AFailedGroupIsRebuiltBeforeTheNextJob) {
  const parallel::GroupLayout layout = Layout(2, 1, 0);
  Scheduler s(&layout, parallel::FewTiles::kPad, 2);
  const parallel::GroupSpec& g = *layout.OfSize(2).front();
  EXPECT_TRUE(s.RecordCollectiveFailure(g, 0, "gather failed"));
  EXPECT_FALSE(s.RecordCollectiveFailure(g, 0, "seen by the other rank")) << "counted once";
  EXPECT_EQ(s.group("s2.b0").failures, 1u);
  s.Push(Job(&four_tiles_, 2));
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(0)->job, nullptr) << "a rebuild comes first";
  EXPECT_EQ(s.task(0)->generation, 1u);
  s.Finish(0);
  s.Finish(1);
  ASSERT_TRUE(s.Schedule());
  ASSERT_NE(s.task(0)->job, nullptr);
  EXPECT_EQ(s.task(0)->generation, 1u);
}

TEST_F(SchedulerTest, RunsOfAnotherDaemonsGroupGoFirstAndABuildDropsOlderGenerations) {
  const parallel::GroupLayout layout = Layout(1, 2, 1);  // node 1 of 2, one rank each
  Scheduler s(&layout, parallel::FewTiles::kPad, 1);
  const parallel::GroupSpec* g = layout.OfSize(2).front();
  s.Push(Job(&four_tiles_, 1));
  s.QueueMemberRun(g, 3, false);
  s.QueueMemberRun(g, 4, false);  // drops generation 3's build
  s.QueueMemberRun(g, 4, true);
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(0)->generation, 4u);
  EXPECT_FALSE(s.task(0)->member_job);
  s.Finish(0);
  ASSERT_TRUE(s.Schedule());
  EXPECT_TRUE(s.task(0)->member_job);
  s.Finish(0);
  ASSERT_TRUE(s.Schedule());
  EXPECT_NE(s.task(0)->job, nullptr) << "its own request last";
  EXPECT_EQ(s.group("s2.b0").generation, 4u);
}

TEST_F(SchedulerTest, AGroupSpanningDaemonsWaitsForItsFreshnessCheck) {
  const parallel::GroupLayout layout = Layout(1, 2, 0);  // node 0 leads s2.b0
  Scheduler s(&layout, parallel::FewTiles::kPad, 1);
  const parallel::GroupSpec& g = *layout.OfSize(2).front();
  EXPECT_FALSE(s.CheckWanted(g).has_value()) << "no job asks yet";
  s.Push(Job(&four_tiles_, 2));
  EXPECT_FALSE(s.Schedule()) << "the job waits for the check";
  std::optional<GenerationFacts> facts = s.CheckWanted(g);
  ASSERT_TRUE(facts.has_value());
  EXPECT_FALSE(facts->started);
  EXPECT_FALSE(s.CheckWanted(g).has_value()) << "one check at a time";
  EXPECT_FALSE(s.Schedule());
  s.CheckDone(g, 7, true);
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(0)->spec->name, "s2.b0");
  EXPECT_EQ(s.task(0)->generation, 7u);
  s.Finish(0);
  // The next job needs a check of its own.
  s.Push(Job(&four_tiles_, 2, 2));
  EXPECT_FALSE(s.Schedule());
  facts = s.CheckWanted(g);
  ASSERT_TRUE(facts.has_value());
  EXPECT_TRUE(facts->started);
  EXPECT_EQ(facts->generation, 7u);
  s.CheckDone(g, 7, false);
  ASSERT_TRUE(s.Schedule());
  EXPECT_EQ(s.task(0)->generation, 7u);
}

}  // namespace
}  // namespace vaed::engine
