// vaed/cuda_buffer.h: device memory allocated through the run-time loaded
// driver (cuda_driver.h) in the device's primary context. Unrun on a GPU.
#include "vaed/cuda_buffer.h"

#include <utility>

#include "cuda_driver.h"

namespace vaed::client {

using internal::CudaDriver;
using internal::CUdevice;
using internal::CUdeviceptr;

namespace {

// cuMemAlloc + zero fill in `ctx` (current for the scope). cuMemsetD8 on
// device memory is asynchronous (the legacy default stream): the context
// is synchronised so that the fill is done before anyone, on any stream or
// in the daemon's process, writes the buffer.
Result<CUdeviceptr> AllocateIn(const CudaDriver& driver, internal::CUcontext ctx, uint64_t bytes,
                               const std::string& what) {
  internal::ScopedCudaContext scope(driver);
  VAED_RETURN_IF_ERROR(scope.Push(ctx));
  CUdeviceptr ptr = 0;
  VAED_RETURN_IF_ERROR(driver.Check(driver.api().cuMemAlloc(&ptr, bytes), what));
  Status zero = driver.Check(driver.api().cuMemsetD8(ptr, 0, bytes), what + ": zero-filling");
  if (zero.ok()) {
    zero = driver.Check(driver.api().cuCtxSynchronize(), what + ": waiting for the zero fill");
  }
  if (!zero.ok()) {
    (void)driver.api().cuMemFree(ptr);
    return zero;
  }
  return ptr;
}

}  // namespace

Result<CudaBuffer> CudaBuffer::Allocate(int device_ordinal, uint64_t bytes) {
  if (bytes == 0) return InvalidArgument("CudaBuffer: bytes is 0; must be at least 1");
  if (device_ordinal < 0) {
    return InvalidArgument("CudaBuffer: device ordinal is " + std::to_string(device_ordinal) +
                           "; must be >= 0");
  }
  VAED_ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::Get());
  const std::string what = "allocating " + std::to_string(bytes) + " bytes on cuda:" +
                           std::to_string(device_ordinal);
  CUdevice device = 0;
  const internal::CUresult got = driver->api().cuDeviceGet(&device, device_ordinal);
  Status found = driver->Check(got, "opening device cuda:" + std::to_string(device_ordinal));
  // CUDA_ERROR_INVALID_DEVICE (101): no such ordinal in this process.
  if (got == 101) return InvalidArgument(found.message());
  VAED_RETURN_IF_ERROR(found);
  VAED_ASSIGN_OR_RETURN(std::string uuid,
                        driver->DeviceUuid(device, "cuda:" + std::to_string(device_ordinal)));
  internal::CUcontext ctx = nullptr;
  VAED_RETURN_IF_ERROR(driver->Check(driver->api().cuDevicePrimaryCtxRetain(&ctx, device),
                                     what + ": retaining the primary context"));
  Result<CUdeviceptr> ptr = AllocateIn(*driver, ctx, bytes, what);
  if (!ptr.ok()) {
    (void)driver->api().cuDevicePrimaryCtxRelease(device);
    return ptr.status();
  }
  CudaBuffer buffer;
  buffer.data_ = reinterpret_cast<void*>(static_cast<uintptr_t>(*ptr));
  buffer.context_ = ctx;
  buffer.size_ = bytes;
  buffer.device_ordinal_ = device_ordinal;
  buffer.device_uuid_ = std::move(uuid);
  return buffer;
}

CudaBuffer::~CudaBuffer() { Release(); }

CudaBuffer::CudaBuffer(CudaBuffer&& other) noexcept { *this = std::move(other); }

CudaBuffer& CudaBuffer::operator=(CudaBuffer&& other) noexcept {
  if (this == &other) return *this;
  Release();
  data_ = std::exchange(other.data_, nullptr);
  context_ = std::exchange(other.context_, nullptr);
  size_ = std::exchange(other.size_, 0);
  device_ordinal_ = std::exchange(other.device_ordinal_, -1);
  device_uuid_ = std::exchange(other.device_uuid_, std::string());
  return *this;
}

void CudaBuffer::Release() noexcept {
  if (data_ == nullptr) return;
  // A buffer exists only once the driver loaded; errors at free are
  // ignored (nothing could be done about them in a destructor).
  Result<const CudaDriver*> driver = CudaDriver::Get();
  if (driver.ok()) {
    {
      internal::ScopedCudaContext scope(**driver);
      (void)scope.Push(static_cast<internal::CUcontext>(context_));
      (void)(*driver)->api().cuMemFree(
          static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(data_)));
    }
    CUdevice device = 0;
    if ((*driver)->api().cuDeviceGet(&device, device_ordinal_) == internal::kCudaSuccess) {
      (void)(*driver)->api().cuDevicePrimaryCtxRelease(device);
    }
  }
  data_ = nullptr;
  context_ = nullptr;
  size_ = 0;
}

}  // namespace vaed::client
