// CUDA IPC and the CUDA runtime adapter in GPU builds (VAED_WITH_CUDA=ON;
// label gpu). The tests that need a device skip without one; the answer of
// a machine without a driver or device is checked there.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "vaed/cuda_ipc.h"
#include "vaed/cuda_status.h"

namespace vaed {
namespace {

TEST(CudaIpcTest, AvailableInAGpuBuild) { EXPECT_TRUE(CudaIpcAvailable()); }

TEST(CudaStatusTest, DeviceUuidsFormatAsNvidiaSmiPrintsThem) {
  cudaUUID_t uuid;
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<char>(0xa0 + i);
  EXPECT_EQ(FormatDeviceUuid(ToDeviceUuid(uuid)), "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
}

TEST(CudaStatusTest, IllegalAddressIsSticky) {
  EXPECT_TRUE(IsStickyCudaError(cudaErrorIllegalAddress));
  EXPECT_FALSE(IsStickyCudaError(cudaErrorInvalidValue));
}

TEST(CudaStatusTest, NamesTheErrorAndTheContext) {
  Status s = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc 1 MiB");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), ::testing::StartsWith("cudaMalloc 1 MiB: "));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("cudaErrorMemoryAllocation"));
  EXPECT_EQ(CudaStatus(cudaErrorIllegalAddress, "x").code(), StatusCode::kInternal);
}

bool HaveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Without a driver or device (as on CPU-only CI) the answer is a clean
// kFailedPrecondition; with devices, an unknown UUID is kNotFound.
TEST(CudaIpcTest, OpenOnUnknownDeviceFailsCleanly) {
  auto r =
      CudaIpcMapping::Open(std::string(64, '\0'), 16, "GPU-00000000-0000-0000-0000-000000000000");
  ASSERT_FALSE(r.ok());
  if (HaveDevice()) {
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("visible: 0 GPU-"));
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  }
}

// Cross-process test: CUDA refuses to open an IPC handle in the process that
// exported it, so a second process (this binary, re-executed to run only the
// exporter below) allocates and exports 1 MiB filled with 0x5a.
constexpr int kToParentFd = 3;  // exporter writes: 64 handle bytes, then "<uuid>\n"
constexpr int kToChildFd = 4;   // parent writes one byte when it is done
constexpr size_t kExportBytes = 1 << 20;

TEST(CudaIpcExporter, DISABLED_ExportOneMiB) {
  if (fcntl(kToParentFd, F_GETFD) < 0 || fcntl(kToChildFd, F_GETFD) < 0) {
    GTEST_SKIP() << "only run by CudaIpcDeviceTest";
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  void* ptr = nullptr;
  ASSERT_EQ(cudaMalloc(&ptr, kExportBytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(ptr, 0x5a, kExportBytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaIpcMemHandle_t handle;
  ASSERT_EQ(cudaIpcGetMemHandle(&handle, ptr), cudaSuccess);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  std::string message(reinterpret_cast<const char*>(&handle), sizeof(handle));
  message += FormatDeviceUuid(ToDeviceUuid(prop.uuid)) + "\n";
  ASSERT_EQ(write(kToParentFd, message.data(), message.size()),
            static_cast<ssize_t>(message.size()));
  char done = 0;
  ASSERT_EQ(read(kToChildFd, &done, 1), 1);
  EXPECT_EQ(cudaFree(ptr), cudaSuccess);
}

// Reads until `n` bytes or a newline arrive, giving up after 60 s.
bool ReadFromChild(int fd, std::string* out, size_t n, bool until_newline) {
  while (out->size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) return false;
    char c;
    if (read(fd, &c, 1) != 1) return false;
    if (until_newline && c == '\n') return true;
    out->push_back(c);
  }
  return true;
}

TEST(CudaIpcDeviceTest, OpensAllocationExportedByAnotherProcess) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  int to_parent[2];
  int to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    dup2(to_parent[1], kToParentFd);
    dup2(to_child[0], kToChildFd);
    execl("/proc/self/exe", "cuda_ipc_exporter",
          "--gtest_filter=CudaIpcExporter.DISABLED_ExportOneMiB", "--gtest_also_run_disabled_tests",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_parent[1]);
  close(to_child[0]);

  std::string handle;
  std::string uuid;
  const bool got = ReadFromChild(to_parent[0], &handle, kCudaIpcHandleBytes, false) &&
                   ReadFromChild(to_parent[0], &uuid, 64, true);
  if (got) {
    {
      auto too_big = CudaIpcMapping::Open(handle, uint64_t{1} << 40, uuid);
      ASSERT_FALSE(too_big.ok());
      EXPECT_EQ(too_big.status().code(), StatusCode::kOutOfRange) << too_big.status().ToString();
      EXPECT_THAT(too_big.status().message(), ::testing::HasSubstr("cuMemGetAddressRange"));
    }
    auto mapping = CudaIpcMapping::Open(handle, kExportBytes, uuid);
    ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
    EXPECT_EQ((*mapping)->size(), kExportBytes);
    EXPECT_GE((*mapping)->allocation_bytes(), kExportBytes);
    EXPECT_EQ((*mapping)->device_uuid(), uuid);
    unsigned char tail[16] = {};
    ASSERT_EQ(cudaMemcpy(tail, static_cast<char*>((*mapping)->data()) + kExportBytes - 16, 16,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (unsigned char b : tail) EXPECT_EQ(b, 0x5a);
    EXPECT_TRUE((*mapping)->CheckRange(kExportBytes - 16, 16, "t").ok());
    EXPECT_FALSE((*mapping)->CheckRange(kExportBytes - 16, 17, "t").ok());
  }
  const char done = 1;
  (void)!write(to_child[1], &done, 1);
  close(to_child[1]);
  close(to_parent[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(got) << "the exporter process sent no handle";
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "exporter status " << wstatus;
}

}  // namespace
}  // namespace vaed
