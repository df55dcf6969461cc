// vaed::client::SharedRegion, the client side of a host region, checked
// against the daemon side (HostRegion): creation, ownership of the name,
// and moves (a move-only owner in the style of cppzmq's socket_t).
#include "vaed/shared_region.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

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

// True when a segment of that name exists and holds at least `bytes`.
bool SegmentExists(const std::string& name, uint64_t bytes) {
  return HostRegion::Open(name, bytes).ok();
}

TEST(SharedRegionTest, MoveConstructionTransfersTheSegmentAndEmptiesTheSource) {
  Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  SharedRegion& source = **r;
  source.data()[5] = 42;
  const std::string name = source.name();
  uint8_t* const data = source.data();

  SharedRegion moved(std::move(source));
  EXPECT_EQ(moved.name(), name);
  EXPECT_EQ(moved.data(), data);  // the same mapping, not a copy
  EXPECT_EQ(moved.size(), 64u);
  EXPECT_EQ(moved.data()[5], 42);
  // The moved-from region is empty.
  EXPECT_EQ(source.data(), nullptr);
  EXPECT_EQ(source.size(), 0u);
  EXPECT_EQ(source.name(), "");
  // Destroying the empty source neither unlinks nor unmaps the segment.
  r->reset();
  ASSERT_TRUE(SegmentExists(name, 64));
  EXPECT_EQ(moved.data()[5], 42);
}

TEST(SharedRegionTest, TheMovedToRegionUnlinksTheSegmentWhenDestroyed) {
  std::string name;
  {
    Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(64);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    name = (*r)->name();
    SharedRegion moved(std::move(**r));
    ASSERT_TRUE(SegmentExists(name, 64));
  }
  Result<std::unique_ptr<HostRegion>> after = HostRegion::Open(name, 64);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kNotFound);
}

TEST(SharedRegionTest, MoveAssignmentReleasesTheTargetsSegmentAndTakesTheSources) {
  Result<std::unique_ptr<SharedRegion>> a = SharedRegion::Create(64);
  Result<std::unique_ptr<SharedRegion>> b = SharedRegion::Create(128);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string name_a = (*a)->name(), name_b = (*b)->name();
  (*a)->data()[1] = 7;

  **b = std::move(**a);
  EXPECT_EQ((*b)->name(), name_a);
  EXPECT_EQ((*b)->size(), 64u);
  EXPECT_EQ((*b)->data()[1], 7);
  EXPECT_EQ((*a)->data(), nullptr);
  EXPECT_EQ((*a)->size(), 0u);
  // b's own segment was unlinked by the assignment; a's lives on in b.
  EXPECT_FALSE(SegmentExists(name_b, 128));
  EXPECT_TRUE(SegmentExists(name_a, 64));
  a->reset();
  EXPECT_TRUE(SegmentExists(name_a, 64));
}

TEST(SharedRegionTest, SelfMoveAssignmentKeepsTheRegion) {
  Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  SharedRegion& region = **r;
  region.data()[0] = 3;
  const std::string name = region.name();
  uint8_t* const data = region.data();
  SharedRegion& alias = region;  // through an alias: compilers warn on x = std::move(x)
  region = std::move(alias);
  EXPECT_EQ(region.name(), name);
  EXPECT_EQ(region.data(), data);
  EXPECT_EQ(region.size(), 64u);
  EXPECT_EQ(region.data()[0], 3);
  EXPECT_TRUE(SegmentExists(name, 64));
}

TEST(SharedRegionTest, AnEmptyRegionCanBeAssignedAgain) {
  Result<std::unique_ptr<SharedRegion>> a = SharedRegion::Create(64);
  Result<std::unique_ptr<SharedRegion>> b = SharedRegion::Create(32);
  ASSERT_TRUE(a.ok() && b.ok());
  SharedRegion holder(std::move(**a));  // *a is now empty
  **a = std::move(**b);
  EXPECT_EQ((*a)->size(), 32u);
  EXPECT_NE((*a)->data(), nullptr);
  EXPECT_EQ((*b)->data(), nullptr);
}

TEST(SharedRegionTest, MovedToRegionInAForkedChildDoesNotUnlink) {
  Result<std::unique_ptr<SharedRegion>> r = SharedRegion::Create(64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string name = (*r)->name();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child inherited the parent's region: moving it and destroying the
    // new owner must leave the parent's name alone.
    { SharedRegion moved(std::move(**r)); }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(SegmentExists(name, 64));
}

}  // namespace
}  // namespace vaed
