// The daemon's VAE communicator on NCCL (daemon/parallel/nccl_communicator.h),
// built only in GPU builds. Ranks of one process on one device each, in
// their own threads, meeting through a HashStore. Tests that need devices
// skip, saying how many they need, where fewer are visible; the answer of a
// machine without a device is tested there.
#include "daemon/parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <utility>
#include <vector>

namespace vaed::parallel {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

#define VAED_NEED_CUDA_DEVICES(n)                                       \
  if (const int found = DeviceCount(); found < (n))                     \
  GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " << found \
               << " (a GPU machine runs this test)"

c10::intrusive_ptr<c10d::Store> LocalStore() {
  auto store = MakeStore({});
  EXPECT_TRUE(store.ok());
  return *store;
}

CommunicatorOptions Options(const std::string& name, int rank, int size, uint64_t generation,
                            std::chrono::milliseconds timeout) {
  return {
      .group_name = name, .rank = rank, .size = size, .generation = generation, .timeout = timeout};
}

// Builds all `size` ranks of a group concurrently (NCCL's init needs them
// all), rank r on device r.
std::vector<std::unique_ptr<Communicator>> CreateGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const std::string& name, int size,
                                                       uint64_t generation,
                                                       std::chrono::milliseconds timeout) {
  std::vector<std::future<Result<std::unique_ptr<Communicator>>>> pending;
  for (int r = 0; r < size; ++r) {
    pending.push_back(std::async(std::launch::async, [&, r] {
      return CreateNcclCommunicator(store, Options(name, r, size, generation, timeout), r);
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

// Runs fn(rank) for every rank on its own thread and waits for all.
template <typename Fn>
void OnEveryRank(int size, Fn fn) {
  std::vector<std::future<void>> done;
  for (int r = 0; r < size; ++r) done.push_back(std::async(std::launch::async, fn, r));
  for (auto& d : done) d.get();
}

// --- Without a device -------------------------------------------------------

TEST(NcclCommunicatorTest, ARankOutsideTheGroupIsRefused) {
  auto c = CreateNcclCommunicator(LocalStore(), Options("x", 2, 2, 0, std::chrono::seconds(1)), 0);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("rank 2 must be in [0, size = 2)"));
}

// A GPU build on a node without a device (or without a driver) answers
// kUnavailable at once, on every rank: no crash, no wait for the store.
TEST(NcclCommunicatorTest, WithoutADeviceCreationIsUnavailable) {
  if (const int found = DeviceCount(); found > 0) {
    GTEST_SKIP() << "this machine has " << found
                 << " CUDA device(s); the no-device answer is checked on one without";
  }
  auto store = LocalStore();
  for (int rank : {0, 1}) {
    const auto t0 = Clock::now();
    auto c =
        CreateNcclCommunicator(store, Options("s2.b0", rank, 2, 3, std::chrono::seconds(20)), rank);
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
    EXPECT_THAT(c.status().message(), HasSubstr("no CUDA device"));
    EXPECT_THAT(c.status().message(), HasSubstr("group s2.b0 generation 3"));
    EXPECT_LT(waited, 10.0) << "rank " << rank << " waited for the store";
  }
}

// --- One device ---------------------------------------------------------------

TEST(NcclCommunicatorTest, ADeviceThatIsNotThereIsRefused) {
  VAED_NEED_CUDA_DEVICES(1);
  const int count = DeviceCount();
  auto c = CreateNcclCommunicator(LocalStore(), Options("s1.b0", 0, 1, 0, std::chrono::seconds(5)),
                                  count);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("CUDA device " + std::to_string(count)));
}

TEST(NcclCommunicatorTest, OneRankGathersBroadcastsAndPassesTheBarrier) {
  VAED_NEED_CUDA_DEVICES(1);
  auto ranks = CreateGroup(LocalStore(), "s1.b0", 1, 0, std::chrono::seconds(30));
  ASSERT_EQ(ranks.size(), 1u);
  Communicator& c = *ranks[0];
  auto parts = c.Gather(torch::arange(6, torch::kFloat), 0);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_TRUE(torch::equal((*parts)[0], torch::arange(6, torch::kFloat)));
  torch::Tensor b = torch::arange(4, torch::kLong);
  ASSERT_TRUE(c.Broadcast(b, 0).ok());
  EXPECT_TRUE(torch::equal(b, torch::arange(4, torch::kLong)));
  EXPECT_TRUE(c.Barrier().ok());
}

// Rank 0 alone: the init waits for rank 1 up to the timeout, then fails.
// Rank 1 alone: it waits for rank 0's id up to the timeout, then fails.
TEST(NcclCommunicatorTest, AMissingRankTimesOutTheInit) {
  VAED_NEED_CUDA_DEVICES(1);
  for (int rank : {0, 1}) {
    const auto t0 = Clock::now();
    auto c = CreateNcclCommunicator(
        LocalStore(), Options("s2.b1", rank, 2, 0, std::chrono::milliseconds(1500)), 0);
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_FALSE(c.ok()) << "rank " << rank;
    EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
    EXPECT_THAT(c.status().message(),
                HasSubstr("building communicator of group s2.b1 generation 0"));
    EXPECT_THAT(c.status().message(),
                rank == 0 ? HasSubstr("timed out") : HasSubstr("for rank 0's NCCL id"));
    EXPECT_GE(waited, 1.0);
    EXPECT_LT(waited, 15.0);
  }
}

// --- Two devices --------------------------------------------------------------

TEST(NcclCommunicatorTest, TwoRanksGatherAndBroadcastCpuTensors) {
  VAED_NEED_CUDA_DEVICES(2);
  auto ranks = CreateGroup(LocalStore(), "s2.b0", 2, 0, std::chrono::seconds(30));
  ASSERT_EQ(ranks.size(), 2u);
  OnEveryRank(2, [&](int r) {
    Communicator& c = *ranks[size_t(r)];
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.size(), 2);
    // Twice, the second larger (the staging buffer grows).
    for (int64_t n : {3, 1 << 20}) {
      auto parts = c.Gather(torch::full({n}, float(10 * r + 1)), 0);
      ASSERT_TRUE(parts.ok()) << parts.status().ToString();
      if (r == 0) {
        ASSERT_EQ(parts->size(), 2u);
        for (int from = 0; from < 2; ++from) {
          EXPECT_TRUE(torch::equal((*parts)[size_t(from)], torch::full({n}, float(10 * from + 1))));
        }
      } else {
        EXPECT_TRUE(parts->empty());
      }
    }
    // An empty payload (a rank without tiles) still takes part.
    auto empty = c.Gather(torch::empty({0}), 0);
    ASSERT_TRUE(empty.ok()) << empty.status().ToString();
    EXPECT_EQ(empty->size(), r == 0 ? 2u : 0u);
    // Any dtype: bytes travel.
    torch::Tensor b = r == 1 ? torch::arange(5, torch::kLong) : torch::zeros({5}, torch::kLong);
    ASSERT_TRUE(c.Broadcast(b, 1).ok());
    EXPECT_TRUE(torch::equal(b, torch::arange(5, torch::kLong)));
    EXPECT_TRUE(c.Barrier().ok());
    // TileGroup's entry point.
    auto tiles = c.GatherToOutputRank(torch::full({4}, float(r)));
    EXPECT_EQ(tiles.size(), r == 0 ? 2u : 0u);
  });
}

TEST(NcclCommunicatorTest, TwoRanksGatherCudaTensorsInPlace) {
  VAED_NEED_CUDA_DEVICES(2);
  if (!torch::cuda::is_available() || torch::cuda::device_count() < 2) {
    GTEST_SKIP() << "LibTorch of this build has no CUDA (2 devices needed); CPU tensors are "
                    "tested above";
  }
  auto ranks = CreateGroup(LocalStore(), "s2.b0", 2, 0, std::chrono::seconds(30));
  ASSERT_EQ(ranks.size(), 2u);
  OnEveryRank(2, [&](int r) {
    const auto on = torch::TensorOptions().device(torch::kCUDA, r);
    auto parts = ranks[size_t(r)]->Gather(torch::full({7}, float(r + 1), on), 0);
    ASSERT_TRUE(parts.ok()) << parts.status().ToString();
    if (r == 0) {
      ASSERT_EQ(parts->size(), 2u);
      EXPECT_TRUE((*parts)[1].is_cuda());
      EXPECT_TRUE(torch::equal((*parts)[1].cpu(), torch::full({7}, 2.0f)));
    }
    torch::Tensor b = r == 0 ? torch::full({3}, 9.0f, on) : torch::zeros({3}, on);
    ASSERT_TRUE(ranks[size_t(r)]->Broadcast(b, 0).ok());
    EXPECT_TRUE(torch::equal(b.cpu(), torch::full({3}, 9.0f)));
  });
}

// An injected failure on rank 0 aborts its communicator; rank 1 fails too
// (at its timeout at the latest) and is aborted: in the same gather, or,
// since NCCL may complete a small send into the peer's buffers without its
// receive, in the barrier after it. Generation 1 of the group, from the
// same store, works on both.
TEST(NcclCommunicatorTest, InjectedFailureAbortsAndTheNextGenerationWorks) {
  VAED_NEED_CUDA_DEVICES(2);
  auto store = LocalStore();
  auto gen0 = CreateGroup(store, "s2.b0", 2, 0, std::chrono::seconds(5));
  ASSERT_EQ(gen0.size(), 2u);
  gen0[0]->FailNthCollective(2);  // the second gather
  std::vector<std::future<Status>> results;
  for (int r = 0; r < 2; ++r) {
    results.push_back(std::async(std::launch::async, [&, r]() -> Status {
      Communicator& c = *gen0[size_t(r)];
      if (auto first = c.Gather(torch::ones({4}), 0); !first.ok()) return first.status();
      if (auto second = c.Gather(torch::ones({4}), 0); !second.ok()) return second.status();
      return c.Barrier();
    }));
  }
  const Status s0 = results[0].get();
  const Status s1 = results[1].get();
  EXPECT_EQ(s0.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s0.message(), HasSubstr("injected collective failure"));
  EXPECT_THAT(s0.message(), HasSubstr("group s2.b0 generation 0"));
  EXPECT_EQ(s1.code(), StatusCode::kUnavailable) << s1.ToString();
  EXPECT_THAT(s1.message(), HasSubstr("of group s2.b0 generation 0 (rank 1 of 2) failed"));
  EXPECT_TRUE(gen0[0]->aborted());
  EXPECT_TRUE(gen0[1]->aborted());
  // Later calls fail at once; Abort is idempotent.
  EXPECT_THAT(gen0[0]->Barrier().message(), HasSubstr("was aborted"));
  gen0[0]->Abort("again");
  EXPECT_THAT(gen0[0]->abort_reason(), HasSubstr("injected collective failure"));

  auto gen1 = CreateGroup(store, "s2.b0", 2, 1, std::chrono::seconds(30));
  ASSERT_EQ(gen1.size(), 2u);
  EXPECT_EQ(gen1[0]->generation(), 1u);
  auto ok0 = std::async(std::launch::async, [&] { return gen1[0]->Gather(torch::ones({4}), 0); });
  auto ok1 = gen1[1]->Gather(torch::full({4}, 2.0f), 0);
  ASSERT_TRUE(ok1.ok()) << ok1.status().ToString();
  auto parts = ok0.get();
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_TRUE(torch::equal((*parts)[1], torch::full({4}, 2.0f)));
}

// A rank that never joins the collective: the other fails at the timeout,
// not later, and its communicator is aborted.
TEST(NcclCommunicatorTest, AMissingRankTimesOutTheCollective) {
  VAED_NEED_CUDA_DEVICES(2);
  auto ranks = CreateGroup(LocalStore(), "s2.b1", 2, 0, std::chrono::milliseconds(1500));
  ASSERT_EQ(ranks.size(), 2u);
  const auto t0 = Clock::now();
  auto parts = ranks[0]->Gather(torch::ones({2}), 0);
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(parts.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(parts.status().message(), AnyOf(HasSubstr("timed out"), HasSubstr("nccl error")));
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 10.0);
  EXPECT_TRUE(ranks[0]->aborted());
  ranks[1]->Abort("test over");
}

}  // namespace
}  // namespace vaed::parallel
