// The H3 video decode's memory estimate (daemon/models/h3/video_memory.h),
// checked against the buffer sizes worked out by hand for the RFC's
// benchmark shape, latent [1, 24, 33, 96, 168]: 111 frames of 1536x2688,
// 8 x 14 = 112 tiles of 256x256 px, 37 padded latent frames.
#include "daemon/models/h3/video_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vaed::models::h3 {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kFrame = 3ull * 1536 * 2688 * 4;  // one float32 RGB frame

TEST(H3VideoMemoryTest, RfcShapeTermsMatchTheBuffersByHand) {
  auto e = EstimateVideoMemory(VideoDecoderConfig{}, 4, 33, 96, 168);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->output_bytes, 111 * kFrame);
  EXPECT_EQ(e->latent_bytes, 3ull * 24 * 37 * 96 * 168 * 4);
  // 112 raw tiles of [3, 28, 256, 256] + the window and its 5-frame tail.
  EXPECT_EQ(e->window_bytes, 112ull * 3 * 28 * 256 * 256 * 4 + 33 * kFrame);
  // 7 x 16 x 16 tokens + 4 registers + 1, float32.
  const uint64_t tokens = 7 * 256 + 5;
  const uint64_t call = (tokens * (6 * 2048 + 3 * 8192) + 2 * 32 * tokens * tokens) * 4 +
                        tokens * (3 * 4 * 16 * 16) * 4;
  EXPECT_EQ(e->call_bytes, call);
  EXPECT_EQ(e->format_bytes, e->output_bytes + e->output_bytes / 4);
  // Formatting (raw + unit range + uint8) is the peak here.
  EXPECT_EQ(e->peak_bytes(), e->latent_bytes + e->output_bytes + e->format_bytes);
  EXPECT_GT(e->peak_bytes(), 11ull << 30);  // 11.7 GiB
  EXPECT_LT(e->peak_bytes(), 12ull << 30);
  EXPECT_THAT(e->Describe(), HasSubstr("output 5.1 GiB"));
}

TEST(H3VideoMemoryTest, Bf16HalvesOnlyTheDecoderCall) {
  auto f32 = EstimateVideoMemory(VideoDecoderConfig{}, 4, 12, 48, 84);
  auto bf16 = EstimateVideoMemory(VideoDecoderConfig{}, 2, 12, 48, 84);
  ASSERT_TRUE(f32.ok() && bf16.ok());
  EXPECT_EQ(bf16->output_bytes, f32->output_bytes);
  EXPECT_EQ(bf16->window_bytes, f32->window_bytes);
  EXPECT_LT(bf16->call_bytes, f32->call_bytes);
  EXPECT_GT(bf16->call_bytes, f32->call_bytes * 2 / 5);
}

TEST(H3VideoMemoryTest, GrowsWithFramesAndCanvas) {
  auto base = EstimateVideoMemory(VideoDecoderConfig{}, 4, 12, 48, 84);
  auto longer = EstimateVideoMemory(VideoDecoderConfig{}, 4, 62, 48, 84);
  auto wider = EstimateVideoMemory(VideoDecoderConfig{}, 4, 12, 48, 168);
  ASSERT_TRUE(base.ok() && longer.ok() && wider.ok());
  EXPECT_GT(longer->peak_bytes(), base->peak_bytes());
  EXPECT_GT(wider->peak_bytes(), base->peak_bytes());
  EXPECT_EQ(longer->window_bytes, base->window_bytes);  // one window at a time
}

TEST(H3VideoMemoryTest, RefusesWhatThePlannerRefuses) {
  EXPECT_THAT(EstimateVideoMemory(VideoDecoderConfig{}, 4, 2, 16, 16).status().message(),
              HasSubstr("T >= 3"));
  EXPECT_FALSE(EstimateVideoMemory(VideoDecoderConfig{}, 4, 7, 0, 16).ok());
}

}  // namespace
}  // namespace vaed::models::h3
