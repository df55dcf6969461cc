#include "cuda_export.h"

#include <string>

namespace vaed::client::internal {

namespace {

// The allocation's context (pointer attributes need no current context
// with unified addressing, which every 64-bit CUDA platform has).
Result<CUcontext> ContextOf(const CudaDriver& driver, CUdeviceptr ptr, std::string_view field) {
  unsigned int memory_type = 0;
  Status s = driver.Check(
      driver.api().cuPointerGetAttribute(&memory_type, kCuPointerAttributeMemoryType, ptr),
      std::string(field) + ": asking CUDA what memory it is");
  // CUDA_ERROR_INVALID_VALUE here: a pointer CUDA does not know (plain
  // host memory).
  if (!s.ok()) {
    return InvalidArgument(std::string(field) + " is not CUDA device memory (" + s.message() + ")");
  }
  if (memory_type != kCuMemoryTypeDevice) {
    return InvalidArgument(std::string(field) +
                           " is host memory known to CUDA (pinned or registered), not device "
                           "memory: pass it as a host array");
  }
  CUcontext ctx = nullptr;
  VAED_RETURN_IF_ERROR(
      driver.Check(driver.api().cuPointerGetAttribute(&ctx, kCuPointerAttributeContext, ptr),
                   std::string(field) + ": asking CUDA for the memory's context"));
  if (ctx == nullptr) {
    // cuMemCreate (VMM) memory has no context: legacy IPC cannot export it.
    return InvalidArgument(std::string(field) +
                           " is a virtual-memory (cuMemCreate) allocation, which legacy CUDA IPC "
                           "cannot share (e.g. PyTorch's expandable_segments): allocate it with "
                           "cudaMalloc");
  }
  return ctx;
}

// "GPU-..." of the device that holds `ptr` (context current).
Result<std::string> DeviceUuidOf(const CudaDriver& driver, CUdeviceptr ptr,
                                 std::string_view field) {
  int ordinal = -1;
  VAED_RETURN_IF_ERROR(driver.Check(
      driver.api().cuPointerGetAttribute(&ordinal, kCuPointerAttributeDeviceOrdinal, ptr),
      std::string(field) + ": asking CUDA for the memory's device"));
  CUdevice device = 0;
  VAED_RETURN_IF_ERROR(
      driver.Check(driver.api().cuDeviceGet(&device, ordinal),
                   std::string(field) + ": opening device " + std::to_string(ordinal)));
  return driver.DeviceUuid(device, field);
}

}  // namespace

Result<CudaExport> ExportCudaAllocation(const CudaDriver& driver, const void* device_ptr,
                                        uint64_t bytes, std::string_view field) {
  if (device_ptr == nullptr) return InvalidArgument(std::string(field) + " is a null pointer");
  if (bytes == 0) return InvalidArgument(std::string(field) + ": 0 bytes; must be > 0");
  const auto ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(device_ptr));
  VAED_ASSIGN_OR_RETURN(CUcontext ctx, ContextOf(driver, ptr, field));
  ScopedCudaContext scope(driver);
  VAED_RETURN_IF_ERROR(scope.Push(ctx));

  CudaExport out;
  CUdeviceptr base = 0;
  size_t size = 0;
  VAED_RETURN_IF_ERROR(driver.Check(driver.api().cuMemGetAddressRange(&base, &size, ptr),
                                    std::string(field) + ": finding the memory's allocation"));
  out.base_address = base;
  out.allocation_bytes = size;
  out.offset_bytes = ptr - base;
  if (bytes > out.allocation_bytes - out.offset_bytes) {
    return InvalidArgument(std::string(field) + ": " + std::to_string(bytes) + " bytes at offset " +
                           std::to_string(out.offset_bytes) + " run past the end of its " +
                           std::to_string(out.allocation_bytes) + "-byte CUDA allocation");
  }
  int ipc_capable = 1;
  // An older driver without the attribute (before CUDA 11.2): let
  // cuIpcGetMemHandle decide.
  if (driver.api().cuPointerGetAttribute(&ipc_capable, kCuPointerAttributeIsLegacyCudaIpcCapable,
                                         ptr) == kCudaSuccess &&
      ipc_capable == 0) {
    return InvalidArgument(std::string(field) +
                           " lies in an allocation that legacy CUDA IPC cannot share (a "
                           "cudaMallocAsync pool or a cuMemCreate allocation): allocate it with "
                           "cudaMalloc (PyTorch: the default caching allocator, without "
                           "expandable_segments)");
  }
  CUipcMemHandle handle{};
  VAED_RETURN_IF_ERROR(
      driver.Check(driver.api().cuIpcGetMemHandle(&handle, base),
                   std::string(field) + ": exporting the allocation's IPC handle"));
  out.ipc_handle.assign(handle.reserved, sizeof(handle.reserved));
  VAED_ASSIGN_OR_RETURN(out.device_uuid, DeviceUuidOf(driver, ptr, field));
  return out;
}

}  // namespace vaed::client::internal
