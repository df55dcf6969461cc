// The engine's result on the wire (daemon/server/decode_reply.h): the host
// copies a decode made reach DecodeReply.host_copies / host_copy_bytes
// (CUDA regions). That CPU decodes report 0 is checked through a daemon
// (tests/integration/h3_video_test.cc).
#include "daemon/server/decode_reply.h"

#include <gtest/gtest.h>

#include "daemon/models/taef2.h"

namespace vaed::server {
namespace {

engine::DecodeJob DemoJob(models::VaeModel* model) {
  engine::DecodeJob job;
  job.request_id = 7;
  job.model = model;
  return job;
}

TEST(DecodeReplyTest, HostCopiesOfTheResultAreInTheReply) {
  auto model = models::Taef2Decoder::CreateDemo("demo", 0);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const engine::DecodeJob job = DemoJob(model->get());
  engine::DecodeResult result;
  result.host_copies = 3;
  result.host_copy_bytes = 123456789012ull;
  const v1::Reply reply = FinishedReply(job, result);
  ASSERT_TRUE(reply.has_decode());
  EXPECT_EQ(reply.decode().host_copies(), 3u);
  EXPECT_EQ(reply.decode().host_copy_bytes(), 123456789012ull);
}

// Regression: there was no way to see the tile grid without
// decoding. A plan's grid reaches every reply, plan-only ones included.
TEST(DecodeReplyTest, ThePlansTileGridIsInTheGeometry) {
  auto model = models::Taef2Decoder::CreateDemo("demo", 0);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  engine::VideoPart video;
  video.plan.frames = 111;
  video.plan.tile_rows = 4;
  video.plan.tile_cols = 4;
  video.plan.windows = 7;
  v1::DecodeReply out;
  FillDecodeGeometry(**model, video, std::nullopt, engine::RequestFacts{}, &out);
  ASSERT_TRUE(out.has_tiling());
  EXPECT_EQ(out.tiling().tile_rows(), 4u);
  EXPECT_EQ(out.tiling().tile_cols(), 4u);
  EXPECT_EQ(out.tiling().windows(), 7u);
  // An untiled model's plan has no grid, and the reply no tiling.
  v1::DecodeReply untiled;
  FillDecodeGeometry(**model, engine::VideoPart{}, std::nullopt, engine::RequestFacts{}, &untiled);
  EXPECT_FALSE(untiled.has_tiling());
}

}  // namespace
}  // namespace vaed::server
