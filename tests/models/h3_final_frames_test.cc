// Tests of the frames final after each temporal window
// (daemon/models/h3/final_frames.h): the rule on the planner's
// windows, and on a real decoder that the frames it calls final do not
// change when later latent frames do, while the next ones do (so the rule
// is neither too late nor too early).
#include "daemon/models/h3/final_frames.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <utility>
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

// DecodeSettings::final_frames on the real decoder: one call per window
// with [previous end, FinalPixelFramesAfterWindow), frames whose values at
// the call are those Decode() returns; a failed hand-over ends the decode
// with its status.
TEST(H3FinalFramesTest, DecodeHandsOverEachWindowsFinalFramesWithTheirFinalValues) {
  at::set_num_threads(2);
  Result<std::unique_ptr<VideoVae>> created = test_util::TinyRandomVideoVae(12);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  VideoVae* model = created->get();
  constexpr int64_t kT = 17;  // 3 windows, 56 frames
  Result<TemporalPlan> plan = PlanTemporal(kT);
  ASSERT_TRUE(plan.ok());
  torch::Generator g = at::detail::createCPUGenerator(6);
  const torch::Tensor latent = torch::randn({1, 24, kT, 4, 4}, g, torch::kFloat);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<torch::Tensor> seen;
  DecodeSettings settings;
  settings.final_frames = [&](const torch::Tensor& frames, int64_t begin, int64_t end) {
    EXPECT_EQ(frames.size(0), end - begin);
    ranges.emplace_back(begin, end);
    seen.push_back(frames.clone());
    return Status::Ok();
  };
  Result<torch::Tensor> out = model->Decode(latent, settings, nullptr);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(int64_t(ranges.size()), plan->num_windows());
  int64_t end = 0;
  for (size_t k = 0; k < ranges.size(); ++k) {
    EXPECT_EQ(ranges[k].first, end);
    end = FinalPixelFramesAfterWindow(*plan, int64_t(k));
    EXPECT_EQ(ranges[k].second, end);
    EXPECT_TRUE(torch::equal(seen[k], out->narrow(0, ranges[k].first, ranges[k].second -
                                                                          ranges[k].first)))
        << "window " << k << " handed over frames that changed afterwards";
  }
  EXPECT_EQ(end, out->size(0));

  // A failed hand-over stops the decode with its status.
  int calls = 0;
  settings.final_frames = [&](const torch::Tensor&, int64_t, int64_t) {
    ++calls;
    return ClientFault("output: the segment faulted");
  };
  Result<torch::Tensor> failed = model->Decode(latent, settings, nullptr);
  EXPECT_EQ(failed.status().code(), StatusCode::kClientFault) << failed.status().ToString();
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace vaed::models::h3
