#include "vaed/host_region.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "scratch_segment.h"

namespace vaed {
namespace {

using shm_test::ScratchSegment;
using ::testing::HasSubstr;

void ExpectNameRejected(std::string_view name) {
  Status s = ValidateRegionName(name);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "name '" << name << "'";
  EXPECT_THAT(s.message(), HasSubstr("region.name"));
}

TEST(ValidateRegionNameTest, RejectsEmpty) { ExpectNameRejected(""); }
TEST(ValidateRegionNameTest, RejectsDot) { ExpectNameRejected("."); }
TEST(ValidateRegionNameTest, RejectsDotDot) { ExpectNameRejected(".."); }
TEST(ValidateRegionNameTest, RejectsParentPath) { ExpectNameRejected("../x"); }

TEST(ValidateRegionNameTest, RejectsSlashNamingIt) {
  Status s = ValidateRegionName("a/b");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'/'"));
}

TEST(ValidateRegionNameTest, RejectsLeadingSlash) { ExpectNameRejected("/vaed-1"); }
TEST(ValidateRegionNameTest, RejectsSpaceAndControlBytes) {
  ExpectNameRejected("a b");
  ExpectNameRejected(std::string("a\nb"));
  ExpectNameRejected(std::string("a\0b", 3));
}

TEST(ValidateRegionNameTest, RejectsTooLong) {
  ExpectNameRejected(std::string(kMaxRegionNameLength + 1, 'a'));
}

TEST(ValidateRegionNameTest, AcceptsTypicalNames) {
  EXPECT_TRUE(ValidateRegionName("vaed-1-2").ok());
  EXPECT_TRUE(ValidateRegionName("dit_rank0.latents-A9").ok());
  EXPECT_TRUE(ValidateRegionName("...").ok());
}

TEST(ValidateRegionNameTest, AcceptsLongestName) {
  EXPECT_TRUE(ValidateRegionName(std::string(kMaxRegionNameLength, 'a')).ok());
}

TEST(HostRegionTest, OpenRejectsMissingSegmentNamingIt) {
  const std::string name = shm_test::UniqueSegmentName("missing");
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(name, 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr(name));
}

TEST(HostRegionTest, OpenRejectsInvalidName) {
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open("../etc/passwd", 16);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("region.name"));
}

TEST(HostRegionTest, OpenRejectsZeroClaimedBytes) {
  ScratchSegment seg("zero", 4096);
  ASSERT_TRUE(seg.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(HostRegionTest, OpenRejectsClaimLargerThanSegmentUsingFstat) {
  ScratchSegment seg("claim", 4096);
  ASSERT_TRUE(seg.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 4097);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(r.status().message(),
              HasSubstr("region '" + seg.name() +
                        "': client claims 4097 bytes but the segment holds 4096 bytes (fstat)"));
}

TEST(HostRegionTest, OpenRejectsHugeClaim) {
  ScratchSegment seg("huge", 4096);
  ASSERT_TRUE(seg.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), UINT64_MAX);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
}

TEST(HostRegionTest, OpenMapsExactlyTheClaimedBytes) {
  ScratchSegment seg("exact", 8192);
  ASSERT_TRUE(seg.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 100);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->size(), 100u);
  EXPECT_EQ((*r)->name(), seg.name());
  EXPECT_NE((*r)->data(), nullptr);
}

TEST(HostRegionTest, SharesBytesWithTheSegmentOwner) {
  ScratchSegment seg("share", 4096);
  ASSERT_TRUE(seg.ok());
  const char kFromClient[] = "latent bytes";
  ASSERT_TRUE(seg.Write(10, kFromClient, sizeof(kFromClient)));
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 4096);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::memcmp((*r)->data() + 10, kFromClient, sizeof(kFromClient)), 0);

  const char kFromDaemon[] = "decoded frames";
  std::memcpy((*r)->data() + 2000, kFromDaemon, sizeof(kFromDaemon));
  char back[sizeof(kFromDaemon)] = {};
  ASSERT_TRUE(seg.Read(2000, back, sizeof(back)));
  EXPECT_EQ(std::memcmp(back, kFromDaemon, sizeof(kFromDaemon)), 0);
}

TEST(HostRegionTest, CheckRangeAcceptsInsideAndRejectsPastMapping) {
  ScratchSegment seg("range", 4096);
  ASSERT_TRUE(seg.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->CheckRange(0, 1000, "latent").ok());
  // Past the claimed size, though still inside the segment.
  Status s = (*r)->CheckRange(900, 101, "latent");
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("latent"));
  EXPECT_EQ((*r)->CheckRange(8, UINT64_MAX - 3, "latent").code(), StatusCode::kOutOfRange);
}

TEST(HostRegionTest, CurrentSegmentBytesSeesClientShrink) {
  ScratchSegment seg("shrink", 8192);
  ASSERT_TRUE(seg.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 8192);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<uint64_t> before = (*r)->CurrentSegmentBytes();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(*before, 8192u);
  ASSERT_TRUE(seg.ShrinkTo(100));
  Result<uint64_t> after = (*r)->CurrentSegmentBytes();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, 100u);
  EXPECT_EQ((*r)->size(), 8192u);  // the mapping keeps its registered size
}

TEST(HostRegionTest, DestructionDoesNotUnlinkTheClientsSegment) {
  ScratchSegment seg("keep", 4096);
  ASSERT_TRUE(seg.ok());
  {
    Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 4096);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Result<std::unique_ptr<HostRegion>> again = HostRegion::Open(seg.name(), 4096);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST(HostRegionTest, MoveTransfersTheMapping) {
  ScratchSegment seg("move", 4096);
  ASSERT_TRUE(seg.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(seg.name(), 4096);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  uint8_t* data = (*r)->data();
  HostRegion moved(std::move(**r));
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(moved.size(), 4096u);
  EXPECT_EQ((*r)->data(), nullptr);
  EXPECT_EQ((*r)->size(), 0u);
  EXPECT_FALSE((*r)->CurrentSegmentBytes().ok());
  data[0] = 7;  // still mapped through `moved`
  uint8_t back = 0;
  ASSERT_TRUE(seg.Read(0, &back, 1));
  EXPECT_EQ(back, 7);
}

}  // namespace
}  // namespace vaed
