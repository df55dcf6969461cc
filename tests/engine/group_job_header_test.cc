// The one encoding of group jobs (daemon/engine/group_job_header.h).
#include "daemon/engine/group_job_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vaed::engine {
namespace {

using ::testing::HasSubstr;

// A header of a job that runs on a latent of `shape`.
GroupJobHeader Header(std::vector<int64_t> shape) {
  GroupJobHeader h;
  h.go = true;
  h.latent_shape = std::move(shape);
  return h;
}

TEST(GroupJobHeaderTest, RoundTripsEverySettingAMemberDecodesWith) {
  models::DecodeSettings s;
  s.stack_tiling = models::StackTiling::kOn;
  s.compile = models::CompileMode::kAuto;
  s.tiling = models::TilingOverride{.tile_latent = 24, .overlap_latent = 6};
  s.faults.slow_unit_ms = 50;
  s.faults.collective_failure = 1;  // the output rank's own: does not travel
  s.latent_space = models::LatentSpace::kDenormalized;
  const auto words = EncodeGroupJobHeader(MakeGroupJobHeader({1, 24, 7, 20, 20}, 2, s));
  Result<GroupJobHeader> h = DecodeGroupJobHeader(words);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_TRUE(h->go);
  EXPECT_EQ(h->latent_shape, (std::vector<int64_t>{1, 24, 7, 20, 20}));
  EXPECT_EQ(h->model_name_bytes, 2);
  const models::DecodeSettings m = MemberSettings(*h);
  EXPECT_EQ(m.stack_tiling, models::StackTiling::kOn);
  EXPECT_EQ(m.compile, models::CompileMode::kAuto);
  ASSERT_TRUE(m.tiling.has_value());
  EXPECT_EQ(m.tiling->tile_latent, 24);
  EXPECT_EQ(m.tiling->overlap_latent, 6);
  EXPECT_EQ(m.faults.slow_unit_ms, 50);
  EXPECT_EQ(m.faults.collective_failure, 0);
  EXPECT_EQ(m.latent_space, models::LatentSpace::kDenormalized);
}

TEST(GroupJobHeaderTest, AStandDownCarriesNoJob) {
  Result<GroupJobHeader> h = DecodeGroupJobHeader(EncodeGroupJobHeader(GroupJobHeader{}));
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->go);
  EXPECT_TRUE(h->latent_shape.empty());
}

TEST(GroupJobHeaderTest, AnotherVersionIsRefusedNamingBoth) {
  auto words = EncodeGroupJobHeader(Header({4}));
  words[1] = kGroupJobVersion + 1;
  Result<GroupJobHeader> h = DecodeGroupJobHeader(words);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("version 3; this daemon reads version 2"));
}

TEST(GroupJobHeaderTest, MalformedWordsAreRefusedNamingTheWord) {
  auto good = EncodeGroupJobHeader(Header({1, 2}));
  auto bad = good;
  bad[0] = 7;
  EXPECT_THAT(DecodeGroupJobHeader(bad).status().message(), HasSubstr("magic"));
  bad = good;
  bad[3] = 6;
  EXPECT_THAT(DecodeGroupJobHeader(bad).status().message(), HasSubstr("latent rank"));
  bad = good;
  bad[4] = -1;
  EXPECT_THAT(DecodeGroupJobHeader(bad).status().message(), HasSubstr("negative"));
  bad = good;
  bad[9] = kMaxModelNameBytes + 1;
  EXPECT_THAT(DecodeGroupJobHeader(bad).status().message(), HasSubstr("model name length"));
  bad = good;
  bad[10] = 99;
  EXPECT_THAT(DecodeGroupJobHeader(bad).status().message(), HasSubstr("stack_tiling"));
  bad = good;
  bad[11] = -3;
  EXPECT_THAT(DecodeGroupJobHeader(bad).status().message(), HasSubstr("compile"));
  bad = good;
  bad[16] = 2;
  EXPECT_THAT(DecodeGroupJobHeader(bad).status().message(), HasSubstr("latent_space"));
  EXPECT_THAT(DecodeGroupJobHeader(std::span<const int64_t>(good.data(), 3)).status().message(),
              HasSubstr("3 words"));
}

}  // namespace
}  // namespace vaed::engine
