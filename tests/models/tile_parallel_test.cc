// Tile-parallel decode in the models (tile_group.h): every golden H3 case
// and a multi-tile TAEF2 hybrid decode give the same bytes on groups of 1,
// 2 and 4 ranks (round-robin tiles, gathered to rank 0, merged in tile
// order), also with fewer tiles than ranks. Ranks are threads with their own
// model instance, as in the daemon; the gather goes through shared memory
// (tests/common/thread_tile_group.h). The daemon's communicator is tested in
// tests/parallel.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "daemon/models/h3/tiled_decode.h"
#include "daemon/models/h3/video_tiling.h"
#include "daemon/models/h3/video_vae.h"
#include "daemon/models/safetensors.h"
#include "daemon/models/taef2.h"
#include "daemon/models/tile_group.h"
#include "tests/common/test_paths.h"
#include "tests/common/thread_tile_group.h"

namespace vaed::models {
namespace {

using testing::ThreadTileGroups;

std::string Golden(const std::string& name) {
  return std::string(VAED_SHARED_DIR) + "/golden/h3/" + name;
}

// Runs decode(rank, group) on `size` threads; returns rank 0's output and
// checks that the others returned an undefined tensor.
torch::Tensor RunGroup(int size,
                       const std::function<Result<torch::Tensor>(int, TileGroup*)>& decode) {
  ThreadTileGroups groups(size);
  std::vector<std::future<Result<torch::Tensor>>> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      return decode(r, size > 1 ? groups.rank(r) : nullptr);
    }));
  }
  torch::Tensor out;
  for (int r = 0; r < size; ++r) {
    Result<torch::Tensor> result = ranks[static_cast<size_t>(r)].get();
    EXPECT_TRUE(result.ok()) << "rank " << r << ": " << result.status().ToString();
    if (!result.ok()) continue;
    if (r == 0) {
      out = *result;
    } else {
      EXPECT_FALSE(result->defined()) << "rank " << r << " returned an output";
    }
  }
  return out;
}

// ------------------------------------------------------------ GatherTiles

TEST(GatherTilesTest, RoundRobinTilesComeBackInIndexOrderOnRankZero) {
  for (int size : {2, 3, 4}) {
    for (int64_t count : {1, 2, 3, 5, 8}) {
      SCOPED_TRACE("size " + std::to_string(size) + ", tiles " + std::to_string(count));
      // Tile i: [i + 1, 2] filled with i (shapes differ per tile).
      auto shape = [](int64_t i) { return std::vector<int64_t>{i + 1, 2}; };
      ThreadTileGroups groups(size);
      std::vector<std::future<std::vector<torch::Tensor>>> ranks;
      for (int r = 0; r < size; ++r) {
        ranks.push_back(std::async(std::launch::async, [&, r] {
          std::vector<torch::Tensor> mine;
          for (int64_t i = r; i < count; i += size) {
            mine.push_back(torch::full(shape(i), float(i)));
          }
          TileCommunicationStats stats;
          auto all = GatherTiles(*groups.rank(r), count, shape, mine, torch::kCPU, &stats);
          EXPECT_EQ(stats.collectives, 1);
          EXPECT_EQ(stats.tiles_decoded_here, int64_t(mine.size()));
          return all;
        }));
      }
      for (int r = 1; r < size; ++r) EXPECT_TRUE(ranks[size_t(r)].get().empty());
      std::vector<torch::Tensor> all = ranks[0].get();
      ASSERT_EQ(int64_t(all.size()), count);
      for (int64_t i = 0; i < count; ++i) {
        EXPECT_TRUE(torch::equal(all[size_t(i)], torch::full(shape(i), float(i)))) << "tile " << i;
      }
    }
  }
}

TEST(GatherTilesTest, ATileOfTheWrongShapeIsRefused) {
  ThreadTileGroups groups(1);
  EXPECT_THROW(GatherTiles(
                   *groups.rank(0), 1, [](int64_t) { return std::vector<int64_t>{2}; },
                   {torch::zeros({3})}, torch::kCPU, nullptr),
               c10::Error);
}

// ------------------------------------------------------------ H3 video

class H3TileParallelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(Golden("video_tiny_weights.safetensors"))) return;
    at::set_num_threads(2);
    for (int r = 0; r < 4; ++r) {
      h3::VideoVaeOptions options;
      options.name = "h3";
      options.config_path = Golden("video_tiny_config.json");
      options.weights = {Golden("video_tiny_weights.safetensors")};
      auto m = h3::VideoVae::Create(options);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      models_.push_back(std::move(m).value());
    }
  }
  static void TearDownTestSuite() { models_.clear(); }
  void SetUp() override {
    if (models_.empty()) {
      GTEST_SKIP() << "shared golden data absent: " << Golden("video_tiny_weights.safetensors");
    }
  }
  static torch::Tensor Latent(const std::string& golden_case) {
    auto file = SafetensorsFile::Open(Golden("video_case_" + golden_case + ".safetensors"));
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    if (!file.ok()) return {};
    const TensorEntry* e = (*file)->Find("latent");
    EXPECT_NE(e, nullptr);
    if (e == nullptr) return {};
    torch::Tensor t = torch::empty(e->shape, torch::kFloat);
    std::memcpy(t.data_ptr(), e->data, e->nbytes);
    return t;
  }
  // The decode on a group of `size` ranks (rank 0's output).
  static torch::Tensor Decode(const torch::Tensor& latent, int size, StackTiling stack,
                              std::vector<DecodeReport>* reports = nullptr) {
    if (reports) reports->assign(size_t(size), DecodeReport{});
    return RunGroup(size, [&](int r, TileGroup* group) {
      DecodeSettings settings;
      settings.stack_tiling = stack;
      settings.group = group;
      return models_[size_t(r)]->Decode(latent, settings, reports ? &(*reports)[size_t(r)] : nullptr);
    });
  }
  static std::vector<std::unique_ptr<h3::VideoVae>> models_;
};
std::vector<std::unique_ptr<h3::VideoVae>> H3TileParallelTest::models_;

// Every golden case: 1, 2 and 4 tiles per window; one and two windows.
// Groups of 2 and 4 give the single rank's bytes, sequential and stacked,
// including fewer tiles than ranks (one_tile on 4 ranks, two tiles on 4).
TEST_F(H3TileParallelTest, GoldenCasesAreByteIdenticalOnOneTwoAndFourRanks) {
  for (const char* name :
       {"one_tile", "two_windows_two_tiles", "grid_2x2", "padded_windows", "small_canvas"}) {
    SCOPED_TRACE(name);
    const torch::Tensor latent = Latent(name);
    ASSERT_TRUE(latent.defined());
    const torch::Tensor single = Decode(latent, 1, StackTiling::kOff);
    ASSERT_TRUE(single.defined());
    for (int size : {2, 4}) {
      for (StackTiling stack : {StackTiling::kOff, StackTiling::kOn}) {
        SCOPED_TRACE("ranks " + std::to_string(size) +
                     (stack == StackTiling::kOn ? ", stacked" : ", sequential"));
        const torch::Tensor out = Decode(latent, size, stack);
        ASSERT_TRUE(out.defined());
        EXPECT_TRUE(torch::equal(out, single))
            << "max |diff| " << (out - single).abs().max().item<double>();
      }
    }
  }
}

// Three tiles on two ranks (rank 0 decodes tiles 0 and 2, rank 1 tile 1):
// same bytes, the report counts each rank's tiles and the communication.
TEST_F(H3TileParallelTest, ThreeTilesOnTwoRanksSplitTwoAndOne) {
  // 640 px wide: three 256-px tiles along the width (two 64-px overlaps).
  auto grid = h3::PlanTileGrid(16, 40);
  ASSERT_TRUE(grid.ok()) << grid.status().ToString();
  ASSERT_EQ(grid->num_tiles(), 3);
  const torch::Tensor latent =
      torch::randn({1, 24, 7, 16, 40}, torch::Generator(at::detail::createCPUGenerator(7)));
  const torch::Tensor single = Decode(latent, 1, StackTiling::kOff);
  std::vector<DecodeReport> reports;
  const torch::Tensor pair = Decode(latent, 2, StackTiling::kOff, &reports);
  ASSERT_TRUE(pair.defined());
  EXPECT_TRUE(torch::equal(pair, single));
  EXPECT_EQ(reports[0].tiling.tiles_decoded_here, 2);
  EXPECT_EQ(reports[1].tiling.tiles_decoded_here, 1);
  EXPECT_GT(reports[0].timings.Get("video_vae.tile_communication"), 0.0);
}

// ------------------------------------------------------------ TAEF2

// The hybrid tiled decode (diagnostic tiling) on a 3 x 4 tile grid with the
// stem on every rank and the tails spread: same bytes on 1, 2 and 4 ranks.
TEST(Taef2TileParallelTest, HybridTiledDecodeIsByteIdenticalOnOneTwoAndFourRanks) {
  std::vector<std::unique_ptr<Taef2Decoder>> models;
  for (int r = 0; r < 4; ++r) {
    auto m = Taef2Decoder::CreateDemo("taef2", 11);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    models.push_back(std::move(m).value());
  }
  auto plan = PlanTaef2Tiles(20, 28, 10, 4);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_GE(plan->num_tiles(), 6);
  const torch::Tensor latent =
      torch::randn({3, 32, 20, 28}, torch::Generator(at::detail::createCPUGenerator(5)));
  auto decode = [&](int size) {
    return RunGroup(size, [&](int r, TileGroup* group) {
      DecodeSettings settings;
      settings.tiling = TilingOverride{.tile_latent = 10, .overlap_latent = 4};
      settings.group = group;
      return models[size_t(r)]->Decode(latent, settings, nullptr);
    });
  };
  const torch::Tensor single = decode(1);
  ASSERT_TRUE(single.defined());
  for (int size : {2, 4}) {
    const torch::Tensor out = decode(size);
    ASSERT_TRUE(out.defined());
    EXPECT_TRUE(torch::equal(out, single))
        << size << " ranks: max |diff| " << (out - single).abs().max().item<double>();
  }
}

}  // namespace
}  // namespace vaed::models
