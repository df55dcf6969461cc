// CUDA memory through the client library without a GPU: the
// run-time driver loader's errors, and CUDA regions refused at once by a
// daemon with no CUDA ranks, before the driver is loaded. Links the object
// library for the internal loader (client/src/cuda_driver.h).
//
// What needs a GPU (exporting a real allocation, the stream-ordered
// events) is not run here; see docs/gpu.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cuda_driver.h"
#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/cuda_buffer.h"
#include "vaed/vaed_c.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using client::internal::CudaDriver;
using testing::DaemonProcess;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// --- the driver loader ------------------------------------------------------

TEST(CudaDriverLoaderTest, AMissingLibraryIsReportedAsNoNvidiaDriver) {
  Result<const CudaDriver*> driver = CudaDriver::Load("libvaed-test-no-such-cuda.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(driver.status().message(),
              StartsWith("libvaed-test-no-such-cuda.so.1 could not be loaded ("));
  // dlerror()'s reason is kept.
  EXPECT_THAT(driver.status().message(), HasSubstr("cannot open shared object file"));
  EXPECT_THAT(driver.status().message(), HasSubstr("): this machine has no NVIDIA driver"));
}

TEST(CudaDriverLoaderTest, LibcudaIsReportedMissingOnAMachineWithoutTheDriver) {
  Result<const CudaDriver*> driver = CudaDriver::Load("libcuda.so.1");
  if (driver.ok()) GTEST_SKIP() << "this machine has libcuda.so.1 (an NVIDIA driver)";
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(driver.status().message(), StartsWith("libcuda.so.1 could not be loaded ("));
  EXPECT_THAT(driver.status().message(), HasSubstr("this machine has no NVIDIA driver"));
}

TEST(CudaDriverLoaderTest, ALibraryWithoutTheDriverSymbolsNamesTheMissingOne) {
  // libdl/libc is loaded everywhere and has none of the driver's symbols.
  Result<const CudaDriver*> driver = CudaDriver::Load("libc.so.6");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(driver.status().message(), HasSubstr("libc.so.6 has no symbol cu"));
  EXPECT_THAT(driver.status().message(), HasSubstr("older than vaed's client library needs"));
}

// --- managed buffers (vaed/cuda_buffer.h) ------------------------------------

TEST(CudaBufferTest, ArgumentsAreCheckedBeforeTheDriver) {
  Result<client::CudaBuffer> empty = client::CudaBuffer::Allocate(0, 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.status().message(), "CudaBuffer: bytes is 0; must be at least 1");
  Result<client::CudaBuffer> negative = client::CudaBuffer::Allocate(-1, 16);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(), "CudaBuffer: device ordinal is -1; must be >= 0");
}

TEST(CudaBufferTest, WithoutADriverAllocationSaysSo) {
  if (CudaDriver::Load("libcuda.so.1").ok()) {
    GTEST_SKIP() << "this machine has libcuda.so.1 (an NVIDIA driver)";
  }
  Result<client::CudaBuffer> buffer = client::CudaBuffer::Allocate(0, 16);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(buffer.status().message(), StartsWith("libcuda.so.1 could not be loaded ("));
  EXPECT_THAT(buffer.status().message(), HasSubstr("this machine has no NVIDIA driver"));
}

TEST(CudaBufferTest, AnEmptyBufferOwnsNothingAndMovesAsEmpty) {
  client::CudaBuffer empty;
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.device_ordinal(), -1);
  client::CudaBuffer moved(std::move(empty));
  EXPECT_EQ(moved.data(), nullptr);
  EXPECT_TRUE(moved.device_uuid().empty());
}

// The CUDA toolkit's stub libcuda.so has every symbol and fails every
// call: a real driver-shaped library whose errors go through Check().
TEST(CudaDriverLoaderTest, DriverErrorsCarryTheirCodeAndWhatWasBeingDone) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << stub << " is absent (no CUDA toolkit)";
  Result<const CudaDriver*> driver = CudaDriver::Load(stub);
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  EXPECT_TRUE((*driver)->Check(0, "anything").ok());
  const Status init = (*driver)->Check((*driver)->api().cuInit(0), "initialising the driver");
  ASSERT_FALSE(init.ok());
  EXPECT_THAT(init.message(), StartsWith("initialising the driver: "));
  // Out of memory is typed for the caller, whatever the name lookup says.
  const Status oom = (*driver)->Check(2, "exporting");
  EXPECT_EQ(oom.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(oom.message(), HasSubstr(" (2): "));
  EXPECT_EQ(oom.reason(), ErrorReason::kOutOfMemory);
  EXPECT_EQ((*driver)->Check(1, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*driver)->Check(100, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*driver)->Check(999, "x").code(), StatusCode::kInternal);
  EXPECT_EQ((*driver)->Check(999, "x").reason(), ErrorReason::kNone);
  // A lost context (CUDA_ERROR_ILLEGAL_ADDRESS) is classified as the
  // daemon classifies it (vaed/cuda_error_class.h).
  EXPECT_EQ((*driver)->Check(700, "x").reason(), ErrorReason::kStickyDevice);
}

// --- a daemon with no CUDA ranks ---------------------------------------------

class CudaRegionOnCpuDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new DaemonProcess({}); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->Log(); }

  static std::unique_ptr<client::Client> Connect() {
    auto c = client::Client::Connect({.socket = daemon_->socket(), .client_name = "cuda-test"});
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return nullptr;
    return std::move(c).value();
  }

  static inline DaemonProcess* daemon_ = nullptr;
};

TEST_F(CudaRegionOnCpuDaemonTest, RegisterCudaRegionIsRefusedBeforeTheDriverIsLoaded) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(ClientProtocol::Hello(*c).cuda_devices_size(), 0)
      << "a CPU build's daemon has no CUDA ranks";
  // Any address: the refusal comes before anything looks at it.
  float not_device_memory[4] = {};
  Result<client::CudaRegion> region = c->RegisterCudaRegion(not_device_memory, sizeof(float) * 4);
  ASSERT_FALSE(region.ok());
  EXPECT_EQ(region.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(region.status().message(), HasSubstr("this daemon has no CUDA ranks"));
  EXPECT_EQ(region.status().field(), "register_region.cuda");
  EXPECT_FALSE(CudaDriver::LoadAttemptedForTesting()) << "the refusal must not load libcuda.so.1";
}

TEST_F(CudaRegionOnCpuDaemonTest, HostDecodesWithACudaStreamNeverLoadTheDriver) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const std::vector<int64_t> latent_shape = {1, 32, 4, 4};
  auto plan = ClientProtocol::PlanDecode(*c, "demo", DType::kFloat32, latent_shape,
                                         client::OutputFormat::kUInt8NHWC);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto in = client::SharedRegion::Create(1 * 32 * 4 * 4 * sizeof(float));
  auto out = client::SharedRegion::Create(plan->output_bytes());
  ASSERT_TRUE(in.ok() && out.ok());
  auto in_id = c->RegisterRegion(**in);
  auto out_id = c->RegisterRegion(**out);
  ASSERT_TRUE(in_id.ok() && out_id.ok());
  client::DecodeRequest request;
  request.model = "demo";
  request.latent = {*in_id, 0, DType::kFloat32, latent_shape};
  request.output = {*out_id, 0, DType::kUInt8,
                    std::vector<int64_t>(plan->output_shape().begin(), plan->output_shape().end())};
  // A stream value that would crash the driver if it were ever used.
  request.cuda_stream = reinterpret_cast<void*>(0xdead);
  auto reply = ClientProtocol::Decode(*c, request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->outputs_ready_event().empty());
  EXPECT_FALSE(CudaDriver::LoadAttemptedForTesting());
}

TEST_F(CudaRegionOnCpuDaemonTest, CApiRegisterCudaRegionIsRefusedWithItsStatus) {
  vaed_client* c = nullptr;
  char err[512] = {};
  ASSERT_EQ(vaed_connect(daemon_->socket().c_str(), "cuda-c-test", &c, err, sizeof(err)), 0) << err;
  float not_device_memory[4] = {};
  vaed_cuda_region region;
  std::memset(&region, 0x5a, sizeof(region));
  EXPECT_EQ(vaed_register_cuda_region(c, not_device_memory, sizeof(not_device_memory), &region, err,
                                      sizeof(err)),
            static_cast<int>(StatusCode::kFailedPrecondition));
  EXPECT_THAT(
      std::string(err),
      StartsWith("failed_precondition: register_cuda_region: this daemon has no CUDA ranks"));
  EXPECT_EQ(region.region_id, 0x5a5a5a5a5a5a5a5aull) << "a failed call leaves *out alone";
  EXPECT_EQ(vaed_register_cuda_region(c, not_device_memory, 16, nullptr, err, sizeof(err)),
            static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_EQ(vaed_register_cuda_region(nullptr, not_device_memory, 16, &region, err, sizeof(err)),
            static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_FALSE(CudaDriver::LoadAttemptedForTesting());
  vaed_client_free(c);
}

TEST_F(CudaRegionOnCpuDaemonTest, CApiUnregisterRegionReleasesAHostRegion) {
  vaed_client* c = nullptr;
  vaed_region* r = nullptr;
  char err[512] = {};
  ASSERT_EQ(vaed_connect(daemon_->socket().c_str(), "cuda-c-test", &c, err, sizeof(err)), 0) << err;
  ASSERT_EQ(vaed_region_create(4096, &r, err, sizeof(err)), 0) << err;
  uint64_t id = 0;
  ASSERT_EQ(vaed_register_region(c, r, &id, err, sizeof(err)), 0) << err;
  EXPECT_EQ(vaed_unregister_region(c, id, err, sizeof(err)), 0) << err;
  // Gone at the daemon: a decode naming it is refused, naming the region.
  vaed_tensor latent = {id, 0, VAED_DTYPE_FLOAT32, 4, {1, 32, 4, 4}};
  vaed_decode_result plan{};
  ASSERT_EQ(vaed_plan_decode(c, "demo", &latent, VAED_OUTPUT_UINT8_NHWC, &plan, err, sizeof(err)),
            0)
      << err;
  vaed_tensor output = {id, 0, plan.output_dtype, plan.output_ndim, {}};
  for (int i = 0; i < plan.output_ndim; ++i) output.shape[i] = plan.output_shape[i];
  EXPECT_NE(
      vaed_decode(c, "demo", &latent, &output, VAED_OUTPUT_UINT8_NHWC, nullptr, err, sizeof(err)),
      0);
  EXPECT_THAT(std::string(err), HasSubstr("region"));
  EXPECT_EQ(vaed_unregister_region(nullptr, id, err, sizeof(err)),
            static_cast<int>(StatusCode::kInvalidArgument));
  vaed_region_free(r);
  vaed_client_free(c);
}

}  // namespace
}  // namespace vaed
