// The daemon's VAE communicator on Gloo (daemon/parallel/communicator.h):
// collectives among ranks of one process (HashStore) and of two processes
// (TCPStore on loopback), injected and real failures, and rebuilding a new
// generation.
#include "daemon/parallel/communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tests/common/free_port.h"

namespace vaed::parallel {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Builds all `size` ranks of a group concurrently (the rendezvous needs
// them all).
std::vector<std::unique_ptr<Communicator>> CreateGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const std::string& name, int size,
                                                       uint64_t generation,
                                                       std::chrono::milliseconds timeout) {
  std::vector<std::future<Result<std::unique_ptr<Communicator>>>> pending;
  for (int r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [&, r] {
      return CreateGlooCommunicator(store, {.group_name = name,
                                            .rank = r,
                                            .size = size,
                                            .generation = generation,
                                            .timeout = timeout});
    }));
  }
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (auto& p : pending) {
    Result<std::unique_ptr<Communicator>> c = p.get();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) ranks.push_back(std::move(c).value());
  }
  return ranks;
}

c10::intrusive_ptr<c10d::Store> LocalStore() {
  auto store = MakeStore({});
  EXPECT_TRUE(store.ok());
  return *store;
}

TEST(CommunicatorTest, GatherBroadcastAndBarrierAmongFourRanks) {
  auto ranks = CreateGroup(LocalStore(), "s4.b0", 4, 0, std::chrono::seconds(10));
  ASSERT_EQ(ranks.size(), 4u);
  std::vector<std::future<void>> done;
  for (int r = 0; r < 4; ++r) {
    done.push_back(std::async(std::launch::async, [&, r] {
      Communicator& c = *ranks[size_t(r)];
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.size(), 4);
      auto parts = c.Gather(torch::full({3}, float(10 * r)), 0);
      ASSERT_TRUE(parts.ok()) << parts.status().ToString();
      if (r == 0) {
        ASSERT_EQ(parts->size(), 4u);
        for (int from = 0; from < 4; ++from) {
          EXPECT_TRUE(torch::equal((*parts)[size_t(from)], torch::full({3}, float(10 * from))));
        }
      } else {
        EXPECT_TRUE(parts->empty());
      }
      torch::Tensor b = r == 2 ? torch::arange(5, torch::kFloat) : torch::zeros({5});
      ASSERT_TRUE(c.Broadcast(b, 2).ok());
      EXPECT_TRUE(torch::equal(b, torch::arange(5, torch::kFloat)));
      EXPECT_TRUE(c.Barrier().ok());
    }));
  }
  for (auto& d : done) d.get();
}

// An injected failure on rank 0 aborts its communicator; rank 1, waiting
// inside the same gather, fails as soon as rank 0 releases its side (far
// sooner than the 20 s timeout); generation 1 works on both.
TEST(CommunicatorTest, InjectedFailureAbortsBothSidesAndTheNextGenerationWorks) {
  auto store = LocalStore();
  auto gen0 = CreateGroup(store, "s2.b0", 2, 0, std::chrono::seconds(20));
  ASSERT_EQ(gen0.size(), 2u);
  gen0[0]->FailNthCollective(2);  // the second gather
  std::vector<std::future<std::pair<Status, double>>> results;
  for (int r = 0; r < 2; ++r) {
    results.push_back(std::async(std::launch::async, [&, r]() -> std::pair<Status, double> {
      Communicator& c = *gen0[size_t(r)];
      if (auto first = c.Gather(torch::ones({4}), 0); !first.ok()) return {first.status(), 0};
      const auto t0 = Clock::now();
      auto second = c.Gather(torch::ones({4}), 0);
      return {second.status(), std::chrono::duration<double>(Clock::now() - t0).count()};
    }));
  }
  auto [s0, t0] = results[0].get();
  auto [s1, t1] = results[1].get();
  EXPECT_EQ(s0.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s0.message(), HasSubstr("injected collective failure"));
  EXPECT_THAT(s0.message(), HasSubstr("group s2.b0 generation 0"));
  EXPECT_EQ(s1.code(), StatusCode::kUnavailable) << s1.ToString();
  EXPECT_LT(t1, 10.0) << "the peer waited for its timeout";
  EXPECT_TRUE(gen0[0]->aborted());
  EXPECT_TRUE(gen0[1]->aborted());
  // Later calls fail at once.
  EXPECT_THAT(gen0[0]->Barrier().message(), HasSubstr("was aborted"));

  auto gen1 = CreateGroup(store, "s2.b0", 2, 1, std::chrono::seconds(20));
  ASSERT_EQ(gen1.size(), 2u);
  EXPECT_EQ(gen1[0]->generation(), 1u);
  auto ok0 = std::async(std::launch::async, [&] { return gen1[0]->Gather(torch::ones({4}), 0); });
  auto ok1 = gen1[1]->Gather(torch::full({4}, 2.0f), 0);
  ASSERT_TRUE(ok1.ok()) << ok1.status().ToString();
  auto parts = ok0.get();
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_TRUE(torch::equal((*parts)[1], torch::full({4}, 2.0f)));
}

// A rank that never joins the collective: the others fail at the timeout,
// not later, and the communicator is aborted.
TEST(CommunicatorTest, AMissingRankTimesOutTheCollective) {
  auto ranks = CreateGroup(LocalStore(), "s2.b1", 2, 0, std::chrono::milliseconds(1500));
  ASSERT_EQ(ranks.size(), 2u);
  const auto t0 = Clock::now();
  auto parts = ranks[0]->Gather(torch::ones({2}), 0);
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(parts.status().code(), StatusCode::kUnavailable);
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 10.0);
  EXPECT_TRUE(ranks[0]->aborted());
  ranks[1]->Abort("test over");
}

TEST(CommunicatorTest, ARankOutsideTheGroupIsRefused) {
  auto c = CreateGlooCommunicator(LocalStore(), {.group_name = "x", .rank = 2, .size = 2});
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("rank 2 must be in [0, size = 2)"));
}

TEST(StoreTest, MalformedAddressesAreRefusedNamingTheField) {
  for (const char* bad : {"localhost", "localhost:", ":29500", "host:0", "host:70000", "h:x1"}) {
    auto s = MakeStore({.address = bad, .node_rank = 0, .world_nodes = 1});
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("group.store_address")) << bad;
  }
  auto rank = MakeStore({.address = "127.0.0.1:29999", .node_rank = 2, .world_nodes = 2});
  EXPECT_THAT(rank.status().message(), HasSubstr("group.node_rank 2"));
}

// Two processes (as two daemons would be) form one group of 2 through a
// TCPStore served by node 0.
TEST(CommunicatorTest, TwoProcessesRendezvousThroughATcpStore) {
  const std::string address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  const pid_t child = fork();
  if (child == 0) {
    auto store = MakeStore({.address = address, .node_rank = 1, .world_nodes = 2,
                            .timeout = std::chrono::seconds(20)});
    if (!store.ok()) _exit(2);
    auto c = CreateGlooCommunicator(*store, {.group_name = "s2.b0", .rank = 1, .size = 2,
                                             .timeout = std::chrono::seconds(20)});
    if (!c.ok()) _exit(3);
    auto parts = (*c)->Gather(torch::full({8}, 7.0f), 0);
    _exit(parts.ok() ? 0 : 4);
  }
  auto store = MakeStore({.address = address, .node_rank = 0, .world_nodes = 2,
                          .timeout = std::chrono::seconds(20)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto c = CreateGlooCommunicator(*store, {.group_name = "s2.b0", .rank = 0, .size = 2,
                                           .timeout = std::chrono::seconds(20)});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto parts = (*c)->Gather(torch::zeros({8}), 0);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_TRUE(torch::equal((*parts)[1], torch::full({8}, 7.0f)));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace vaed::parallel
