// The CUDA events of daemon/engine/cuda_events.h on a device (GPU builds,
// label gpu; scripts/gpu/check.sh runs it). Without a device every test
// skips. The cross-process half (a worker's event waited on by a rank, the
// rank's event waited on by the worker) is exercised by
// scripts/gpu/ipc_worker.py through a daemon; here: the ring's handles and
// reuse, and a handle that is not an event refused with its field named.
#include "daemon/engine/cuda_events.h"

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace vaed::engine {
namespace {

class CudaEventsDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device here";
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaEventsDeviceTest, TheRingHandsOutItsHandlesRoundRobin) {
  Result<std::unique_ptr<OutputEventRing>> ring = OutputEventRing::Create(0);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  std::set<std::string> handles;
  std::string first;
  for (int i = 0; i < OutputEventRing::kOutputEvents; ++i) {
    Result<std::string> h = (*ring)->Record(stream_);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->size(), kCudaIpcEventHandleBytes);
    if (i == 0) first = *h;
    handles.insert(*h);
  }
  EXPECT_EQ(handles.size(), static_cast<size_t>(OutputEventRing::kOutputEvents));
  Result<std::string> wrapped = (*ring)->Record(stream_);
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ(*wrapped, first);  // the ring wrapped to its first event
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

TEST_F(CudaEventsDeviceTest, AHandleThatIsNoEventIsRefusedNamingTheField) {
  ClientEventCache cache;
  const Status s = cache.StreamWait(7, std::string(kCudaIpcEventHandleBytes, '\x5a'), stream_);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("inputs_ready_event"));
  EXPECT_EQ(cache.SizeForTesting(), 0u);  // nothing cached for a failed open
  cudaGetLastError();           // clear the runtime's last error
}

}  // namespace
}  // namespace vaed::engine
