#include "ops/common/psnr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <span>
#include <vector>

#include "daemon/models/safetensors.h"
#include "tests/common/test_paths.h"

namespace vaed::ops {
namespace {

std::span<const uint8_t> S(const std::vector<uint8_t>& v) { return v; }

TEST(PsnrTest, IdenticalInputsGiveInfinity) {
  const std::vector<uint8_t> a = {0, 17, 255, 128};
  EXPECT_EQ(MeanSquaredError(S(a), S(a)), 0.0);
  EXPECT_TRUE(std::isinf(PsnrDb(S(a), S(a))));
}

TEST(PsnrTest, ConstantErrorOfOneGivesClosedForm) {
  const std::vector<uint8_t> a(300, 100), b(300, 101);
  EXPECT_DOUBLE_EQ(MeanSquaredError(S(a), S(b)), 1.0);
  EXPECT_NEAR(PsnrDb(S(a), S(b)), 20.0 * std::log10(255.0), 1e-12);  // 48.1308 dB
}

TEST(PsnrTest, MaximalErrorGivesZeroDb) {
  const std::vector<uint8_t> a(12, 0), b(12, 255);
  EXPECT_NEAR(PsnrDb(S(a), S(b)), 0.0, 1e-12);
}

TEST(PsnrTest, SymmetricInItsArguments) {
  const std::vector<uint8_t> a = {1, 2, 3, 250}, b = {3, 2, 1, 200};
  EXPECT_DOUBLE_EQ(PsnrDb(S(a), S(b)), PsnrDb(S(b), S(a)));
}

TEST(MeanFramePsnrTest, AveragesPerFramePsnrNotPooledMse) {
  // Frame 0 off by 1 everywhere, frame 1 off by 2: the mean of the two
  // PSNRs, which differs from the PSNR of the pooled MSE.
  std::vector<uint8_t> a(2 * 6, 50), b(2 * 6, 50);
  for (int i = 0; i < 6; ++i) b[i] = 51;
  for (int i = 6; i < 12; ++i) b[i] = 52;
  const FramePsnr p = MeanFramePsnr(S(a), S(b), 6);
  const double f0 = 10 * std::log10(255.0 * 255.0 / 1.0);
  const double f1 = 10 * std::log10(255.0 * 255.0 / 4.0);
  EXPECT_EQ(p.frames, 2u);
  EXPECT_NEAR(p.mean_db, (f0 + f1) / 2, 1e-12);
  EXPECT_NEAR(p.min_db, f1, 1e-12);
  EXPECT_NEAR(p.max_db, f0, 1e-12);
  EXPECT_GT(std::abs(p.mean_db - PsnrDb(S(a), S(b))), 0.1);
}

TEST(CompareU8Test, CountsDifferingValuesAndMaxAbsDiff) {
  const std::vector<uint8_t> a = {0, 10, 200, 255, 7}, b = {0, 11, 197, 255, 7};
  const U8Diff d = CompareU8(S(a), S(b));
  EXPECT_EQ(d.values, 5u);
  EXPECT_EQ(d.values_differing, 2u);
  EXPECT_EQ(d.max_abs_diff, 3);
}

TEST(CompareU8Test, IdenticalInputsHaveNoDifferences) {
  const std::vector<uint8_t> a = {9, 9, 9};
  const U8Diff d = CompareU8(S(a), S(a));
  EXPECT_EQ(d.values_differing, 0u);
  EXPECT_EQ(d.max_abs_diff, 0);
}

// The definition must reproduce the table of shared/data/taef2/README.md §6
// from the stored tensors.
struct ReadmeRow {
  const char* file;
  const char* original_key;
  double mean_db, min_db, max_db;
};

class ReadmePsnrTableTest : public ::testing::TestWithParam<ReadmeRow> {};

TEST_P(ReadmePsnrTableTest, ReferenceDecodeVsOriginalMatchesReadme) {
  const ReadmeRow& row = GetParam();
  const std::string path = std::string(VAED_SHARED_DIR) + "/data/taef2/" + row.file;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const TensorEntry* decoded = (*file)->Find("decoded_u8");
  const TensorEntry* original = (*file)->Find(row.original_key);
  ASSERT_NE(decoded, nullptr);
  ASSERT_NE(original, nullptr);
  ASSERT_EQ(decoded->nbytes, original->nbytes);
  const auto& shape = decoded->shape;  // [N,H,W,3] or [H,W,3]
  const size_t per_frame =
      static_cast<size_t>(shape[shape.size() - 3] * shape[shape.size() - 2] * shape.back());
  const FramePsnr p =
      MeanFramePsnr(std::span<const uint8_t>(decoded->data, decoded->nbytes),
                    std::span<const uint8_t>(original->data, original->nbytes), per_frame);
  EXPECT_NEAR(p.mean_db, row.mean_db, 0.005);
  if (row.min_db > 0) {
    EXPECT_NEAR(p.min_db, row.min_db, 0.005);
    EXPECT_NEAR(p.max_db, row.max_db, 0.005);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Readme, ReadmePsnrTableTest,
    ::testing::Values(ReadmeRow{"photo_astronaut.safetensors", "image_u8", 31.18, 0, 0},
                      ReadmeRow{"photo_coffee.safetensors", "image_u8", 29.69, 0, 0},
                      ReadmeRow{"photo_chelsea.safetensors", "image_u8", 32.57, 0, 0},
                      ReadmeRow{"video_bikes.safetensors", "frames_u8", 37.90, 37.61, 38.26},
                      ReadmeRow{"video_carphone.safetensors", "frames_u8", 31.88, 31.22, 32.27}),
    [](const auto& info) {
      const std::string file = info.param.file;
      return file.substr(0, file.find('.'));  // e.g. "video_bikes"
    });

}  // namespace
}  // namespace vaed::ops
