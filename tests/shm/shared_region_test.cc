// vaed::client::SharedRegion, the client side of a host region, checked
// against the daemon side (HostRegion).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "vaed/client.h"
#include "vaed/host_region.h"

namespace vaed {
namespace {

using client::SharedRegion;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(SharedRegionTest, CreateMakesZeroFilledRegionOfRequestedSize) {
  Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(10000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->size(), 10000u);
  for (uint64_t i = 0; i < (*r)->size(); ++i) ASSERT_EQ((*r)->data()[i], 0) << "byte " << i;
}

TEST(SharedRegionTest, CreateGeneratesDistinctValidNames) {
  Result<std::unique_ptr<SharedRegion>> a = SharedRegion::Create(16);
  Result<std::unique_ptr<SharedRegion>> b = SharedRegion::Create(16);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->name(), (*b)->name());
  const std::string prefix = "vaed-" + std::to_string(::getpid()) + "-";
  EXPECT_THAT((*a)->name(), StartsWith(prefix));
  EXPECT_TRUE(ValidateRegionName((*a)->name()).ok());
  EXPECT_TRUE(ValidateRegionName((*b)->name()).ok());
}

TEST(SharedRegionTest, CreateRejectsZeroBytes) {
  Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(SharedRegionTest, CreateRejectsInvalidName) {
  Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create("a/b", 16);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("region.name"));
}

TEST(SharedRegionTest, CreateWithTakenNameFailsWithAlreadyExists) {
  Result<std::unique_ptr<SharedRegion>> first = SharedRegion::Create(16);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<std::unique_ptr<SharedRegion>> second = SharedRegion::Create((*first)->name(), 16);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr((*first)->name()));
  // The failed attempt must not have unlinked the first region's name.
  EXPECT_TRUE(HostRegion::Open((*first)->name(), 16).ok());
}

TEST(SharedRegionTest, SegmentIsReadWriteForItsOwnerOnly) {
  Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm/" + (*r)->name()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(SharedRegionTest, HostRegionSeesBytesWrittenThroughSharedRegionAndBack) {
  Result<std::unique_ptr<SharedRegion>> client = SharedRegion::Create(1 << 20);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  for (uint64_t i = 0; i < (*client)->size(); ++i)
    (*client)->data()[i] = static_cast<uint8_t>(i * 7);

  Result<std::unique_ptr<HostRegion>> daemon = HostRegion::Open((*client)->name(), 1 << 20);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_NE((*daemon)->data(), (*client)->data());  // two distinct mappings
  EXPECT_EQ(std::memcmp((*daemon)->data(), (*client)->data(), 1 << 20), 0);

  std::memset((*daemon)->data() + 4096, 0xab, 100);
  for (int i = 0; i < 100; ++i) ASSERT_EQ((*client)->data()[4096 + i], 0xab);
}

TEST(SharedRegionTest, HostRegionRejectsClaimBeyondSharedRegion) {
  Result<std::unique_ptr<SharedRegion>> client = SharedRegion::Create(5000);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Result<std::unique_ptr<HostRegion>> daemon = HostRegion::Open((*client)->name(), 5001);
  ASSERT_FALSE(daemon.ok());
  EXPECT_EQ(daemon.status().code(), StatusCode::kOutOfRange);
}

TEST(SharedRegionTest, DestructionUnlinksTheSegment) {
  std::string name;
  {
    Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(64);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    name = (*r)->name();
    ASSERT_TRUE(HostRegion::Open(name, 64).ok());
  }
  Result<std::unique_ptr<HostRegion>> after = HostRegion::Open(name, 64);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(after.status().message(), HasSubstr(name));
}

TEST(SharedRegionTest, DaemonMappingOutlivesClientUnlink) {
  Result<std::unique_ptr<SharedRegion>> client = SharedRegion::Create(64);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  (*client)->data()[3] = 9;
  Result<std::unique_ptr<HostRegion>> daemon = HostRegion::Open((*client)->name(), 64);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  client->reset();  // destroys the SharedRegion: unmap + unlink
  EXPECT_EQ((*daemon)->data()[3], 9);
}

}  // namespace
}  // namespace vaed
