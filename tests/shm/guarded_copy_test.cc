#include "vaed/guarded_copy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "scratch_segment.h"
#include "vaed/host_region.h"

namespace vaed {
namespace {

using shm_test::PageBytes;
using shm_test::ScratchSegment;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed);
  return v;
}

// A client segment of 4 pages mapped by the daemon, then cut by the client
// to 1 page: pages 1..3 of the mapping now raise SIGBUS when touched.
struct ShrunkRegion {
  ScratchSegment segment{"guard", 4 * PageBytes()};
  std::unique_ptr<HostRegion> region;

  void SetUp() {
    ASSERT_TRUE(segment.ok());
    Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(segment.name(), 4 * PageBytes());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    region = std::move(r).value();
    ASSERT_TRUE(segment.ShrinkTo(PageBytes()));
  }
};

TEST(GuardedCopyTest, CopiesNormalMemory) {
  for (size_t n : {size_t{1}, size_t{4095}, size_t{1} << 20, (size_t{3} << 20) + 17}) {
    std::vector<uint8_t> src = Pattern(n, 5);
    std::vector<uint8_t> dst(n, 0);
    Status s = GuardedCopy(dst.data(), src.data(), n, "latent");
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(dst, src) << n << " bytes";
  }
}

TEST(GuardedCopyTest, ZeroBytesTouchesNothing) {
  EXPECT_TRUE(GuardedCopy(nullptr, nullptr, 0, "empty").ok());
}

TEST(GuardedCopyTest, CopiesFromAndToAHostRegion) {
  ScratchSegment segment("guard-ok", 8192);
  ASSERT_TRUE(segment.ok());
  Result<std::unique_ptr<HostRegion>> r = HostRegion::Open(segment.name(), 8192);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<uint8_t> in = Pattern(8192, 1);
  ASSERT_TRUE(GuardedCopy((*r)->data(), in.data(), in.size(), "output").ok());
  std::vector<uint8_t> out(8192, 0);
  ASSERT_TRUE(GuardedCopy(out.data(), (*r)->data(), out.size(), "latent").ok());
  EXPECT_EQ(out, in);
}

TEST(GuardedCopyTest, ReturnsClientFaultWhenSourceSegmentShrank) {
  ShrunkRegion shrunk;
  ASSERT_NO_FATAL_FAILURE(shrunk.SetUp());
  const size_t n = 4 * PageBytes();
  std::vector<uint8_t> dst(n);
  Status s = GuardedCopy(dst.data(), shrunk.region->data(), n, "decode: latent");
  EXPECT_EQ(s.code(), StatusCode::kClientFault);
  EXPECT_THAT(s.message(), StartsWith("decode: latent: memory fault (SIGBUS) while copying " +
                                      std::to_string(n) +
                                      " bytes; the client's segment shrank or was unmapped"));
  EXPECT_THAT(s.message(), HasSubstr("source byte"));
}

TEST(GuardedCopyTest, ReturnsClientFaultWhenDestinationSegmentShrank) {
  ShrunkRegion shrunk;
  ASSERT_NO_FATAL_FAILURE(shrunk.SetUp());
  const size_t n = 2 * PageBytes();
  std::vector<uint8_t> src = Pattern(n, 9);
  // Bytes [page, 3 pages) of the mapping lie past the segment's new end.
  Status s = GuardedCopy(shrunk.region->data() + PageBytes(), src.data(), n, "output");
  EXPECT_EQ(s.code(), StatusCode::kClientFault);
  EXPECT_THAT(s.message(), HasSubstr("SIGBUS"));
  EXPECT_THAT(s.message(), HasSubstr("destination byte"));
}

TEST(GuardedCopyTest, KeepsWorkingAndCatchesAgainAfterAFault) {
  ShrunkRegion shrunk;
  ASSERT_NO_FATAL_FAILURE(shrunk.SetUp());
  const size_t n = 4 * PageBytes();
  std::vector<uint8_t> dst(n);
  for (int round = 0; round < 3; ++round) {
    Status fault = GuardedCopy(dst.data(), shrunk.region->data(), n, "latent");
    EXPECT_EQ(fault.code(), StatusCode::kClientFault) << "round " << round;

    // The first page is still backed: a copy inside it works.
    std::vector<uint8_t> src = Pattern(PageBytes(), static_cast<uint8_t>(round));
    ASSERT_TRUE(GuardedCopy(shrunk.region->data(), src.data(), src.size(), "output").ok());
    std::vector<uint8_t> back(PageBytes());
    ASSERT_TRUE(GuardedCopy(back.data(), shrunk.region->data(), back.size(), "latent").ok());
    EXPECT_EQ(back, src);
  }
}

TEST(GuardedCopyTest, FaultsOnOneThreadDoNotDisturbCopiesOnOthers) {
  ShrunkRegion shrunk;
  ASSERT_NO_FATAL_FAILURE(shrunk.SetUp());
  std::atomic<int> faults{0};
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const size_t n = 4 * PageBytes();
      std::vector<uint8_t> dst(n);
      std::vector<uint8_t> src = Pattern(1 << 20, static_cast<uint8_t>(t));
      std::vector<uint8_t> copy(1 << 20);
      for (int i = 0; i < 50; ++i) {
        if (GuardedCopy(dst.data(), shrunk.region->data(), n, "latent").code() ==
            StatusCode::kClientFault) {
          ++faults;
        }
        if (GuardedCopy(copy.data(), src.data(), src.size(), "buffer").ok() && copy == src) {
          ++good;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(faults.load(), 200);
  EXPECT_EQ(good.load(), 200);
}

// Reads one byte outside any GuardedCopy, without leaving a core file.
void TouchWithoutGuard(volatile uint8_t* p) {
  const rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  (void)*p;
}

// The guard must not swallow faults outside GuardedCopy: a real bug still
// kills the process with the original signal.
TEST(GuardedCopyDeathTest, UnguardedFaultStillKillsTheProcess) {
  ShrunkRegion shrunk;
  ASSERT_NO_FATAL_FAILURE(shrunk.SetUp());
  uint8_t byte = 0;
  ASSERT_TRUE(GuardedCopy(&byte, shrunk.region->data(), 1, "arm").ok());  // handlers installed
  volatile uint8_t* past_end = shrunk.region->data() + 2 * PageBytes();
  EXPECT_EXIT(TouchWithoutGuard(past_end), ::testing::KilledBySignal(SIGBUS), "");
}

// A handler installed before the first GuardedCopy (a crash reporter, say)
// still sees faults that are not ours. Runs in a fresh process ("threadsafe"
// death tests re-execute the binary) so that ours is installed after it.
void ExitFromSegvHandler(int) { _exit(42); }

// Installs a SIGSEGV handler that exits with 42, arms the guard (so ours is
// installed on top and chains to it), then faults outside any GuardedCopy.
void FaultWithPreviousHandlerInstalled() {
  struct sigaction previous;
  std::memset(&previous, 0, sizeof(previous));
  previous.sa_handler = ExitFromSegvHandler;
  sigemptyset(&previous.sa_mask);
  sigaction(SIGSEGV, &previous, nullptr);
  uint8_t a = 1;
  uint8_t b = 0;
  if (!GuardedCopy(&b, &a, 1, "arm").ok()) _exit(1);
  void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  (void)*static_cast<volatile uint8_t*>(page);
  _exit(2);
}

TEST(GuardedCopyDeathTest, ChainsUnguardedFaultToPreviousHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(FaultWithPreviousHandlerInstalled(), ::testing::ExitedWithCode(42), "");
}

}  // namespace
}  // namespace vaed
