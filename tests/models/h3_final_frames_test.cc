// Tests of the frames final after each temporal window
// (daemon/models/h3/final_frames.h, issue 22): the rule on the planner's
// windows, and on a real decoder that the frames it calls final do not
// change when later latent frames do, while the next ones do (so the rule
// is neither too late nor too early).
#include "daemon/models/h3/final_frames.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "daemon/models/h3/video_vae.h"
#include "h3_tiny_video_vae.h"

namespace vaed::models::h3 {
namespace {

std::vector<int64_t> FinalEnds(int64_t latent_frames) {
  Result<TemporalPlan> plan = PlanTemporal(latent_frames);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<int64_t> ends;
  for (int64_t k = 0; plan.ok() && k < plan->num_windows(); ++k) {
    ends.push_back(FinalPixelFramesAfterWindow(*plan, k));
  }
  return ends;
}

TEST(H3FinalFramesTest, EachWindowFinalizesUpToTheNextCrossFadeAndTheLastEverything) {
  // T = 33 (the RFC's latent): 7 windows, 111 frames.
  EXPECT_EQ(FinalEnds(33), (std::vector<int64_t>{17, 34, 51, 68, 85, 102, 111}));
  // T = 7: one window, every frame at once.
  EXPECT_EQ(FinalEnds(7), (std::vector<int64_t>{22}));
  // T = 18 is padded (4 pad latent frames): the last window ends at the
  // output's length, not the assembled one.
  Result<TemporalPlan> padded = PlanTemporal(18);
  ASSERT_TRUE(padded.ok());
  ASSERT_GT(padded->pad_pixel_frames, 0);
  EXPECT_EQ(FinalEnds(18).back(), padded->output_pixel_frames);
  for (int64_t t = 3; t <= 60; ++t) {
    SCOPED_TRACE("T = " + std::to_string(t));
    const std::vector<int64_t> ends = FinalEnds(t);
    ASSERT_FALSE(ends.empty());
    for (size_t k = 1; k < ends.size(); ++k) EXPECT_GT(ends[k], ends[k - 1]);
    EXPECT_EQ(ends.back(), *OutputPixelFrames(t));
  }
}

TEST(H3FinalFramesTest, LaterLatentFramesChangeNoFinalFrameButTheNextOnes) {
  at::set_num_threads(2);
  Result<std::unique_ptr<VideoVae>> created = test_util::TinyRandomVideoVae(11);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  VideoVae* model = created->get();
  constexpr int64_t kT = 17;  // 3 windows, 56 frames
  Result<TemporalPlan> plan = PlanTemporal(kT);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->num_windows(), 3);
  torch::Generator g = at::detail::createCPUGenerator(5);
  const torch::Tensor a = torch::randn({1, 24, kT, 4, 4}, g, torch::kFloat);
  Result<torch::Tensor> out_a = model->Decode(a, DecodeSettings{}, nullptr);
  ASSERT_TRUE(out_a.ok()) << out_a.status().ToString();
  for (int64_t k = 0; k + 1 < plan->num_windows(); ++k) {
    SCOPED_TRACE("window " + std::to_string(k));
    // Latent frames from 5k + 7 on feed only windows after k.
    const int64_t first_unseen = plan->windows[size_t(k)].stream_end_latent;
    torch::Tensor b = a.clone();
    b.narrow(2, first_unseen, kT - first_unseen).normal_(0.0, 1.0, g);
    Result<torch::Tensor> out_b = model->Decode(b, DecodeSettings{}, nullptr);
    ASSERT_TRUE(out_b.ok()) << out_b.status().ToString();
    const int64_t end = FinalPixelFramesAfterWindow(*plan, k);
    EXPECT_TRUE(torch::equal(out_a->narrow(0, 0, end), out_b->narrow(0, 0, end)))
        << "a frame called final after window " << k << " changed with a later window";
    // The next frames (the cross-fade with window k + 1) are not final yet.
    // Frame `end` itself is not checked: the official ramp gives the next
    // window weight 0 there (BlendRamp: a * (1 - p/e) + b * p/e from p = 0),
    // so its value survives for finite b, but the next window's blend still
    // writes it (a non-finite b or a signed zero would change it), so it is
    // not announced before that window.
    for (int64_t f = end + 1; f < end + kTailPixelFrames; ++f) {
      EXPECT_FALSE(torch::equal(out_a->select(0, f), out_b->select(0, f)))
          << "frame " << f << " was already final after window " << k;
    }
  }
}

}  // namespace
}  // namespace vaed::models::h3
