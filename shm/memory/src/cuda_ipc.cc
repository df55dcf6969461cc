// GPU builds only (VAED_WITH_CUDA; see shm/memory/CMakeLists.txt). CPU builds
// link cuda_ipc_unavailable.cc instead.
#include "vaed/cuda_ipc.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>

#include "vaed/cuda_status.h"
#include "vaed/tensor_ref.h"

namespace vaed {

namespace {

// The driver API is reached through the runtime's entry-point lookup rather
// than by linking libcuda: libcuda.so.1 ships with the NVIDIA driver, not
// the toolkit, so a link-time dependency would stop a VAED_WITH_CUDA binary
// (daemon or test) from even starting on a node without a driver, where it
// should instead answer "no device". cudart loads the driver lazily.
struct DriverApi {
  PFN_cuMemGetAddressRange_v3020 mem_get_address_range = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
};

// Resolves the driver entry points; the runtime must already work (call it
// after a successful cudaSetDevice).
Result<DriverApi> LoadDriverApi() {
  DriverApi api;
  struct Entry {
    const char* symbol;
    void** fn;
    unsigned int version;
  };
  const Entry entries[] = {
      {"cuMemGetAddressRange", reinterpret_cast<void**>(&api.mem_get_address_range), 3020},
      {"cuGetErrorName", reinterpret_cast<void**>(&api.get_error_name), 6000},
      {"cuGetErrorString", reinterpret_cast<void**>(&api.get_error_string), 6000},
  };
  for (const Entry& e : entries) {
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion(e.symbol, e.fn, e.version, cudaEnableDefault, &found);
    if (err != cudaSuccess) {
      return CudaStatus(err, std::string("look up CUDA driver function ") + e.symbol);
    }
    if (found != cudaDriverEntryPointSuccess || *e.fn == nullptr) {
      return FailedPrecondition(std::string("the CUDA driver does not provide ") + e.symbol +
                                " (version " + std::to_string(e.version) + ")");
    }
  }
  return api;
}

// The CUDA driver adapter (only cuMemGetAddressRange needs the driver API).
Status CuDriverStatus(const DriverApi& api, CUresult res, std::string_view context) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.get_error_name(res, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUresult";
  if (api.get_error_string(res, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
  std::string m(context);
  m += ": ";
  m += text;
  m += " (";
  m += name;
  m += ", cuda driver error ";
  m += std::to_string(static_cast<int>(res));
  m += ")";
  switch (res) {
    case CUDA_ERROR_INVALID_VALUE:
      return InvalidArgument(std::move(m));
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_INVALID_CONTEXT:
      return FailedPrecondition(std::move(m));
    default:
      return Internal(std::move(m));
  }
}

}  // namespace

bool CudaIpcAvailable() { return true; }

CudaIpcMapping::CudaIpcMapping(void* data, uint64_t size, uint64_t allocation_bytes, int device,
                               std::string device_uuid)
    : data_(data),
      size_(size),
      allocation_bytes_(allocation_bytes),
      device_(device),
      device_uuid_(std::move(device_uuid)) {}

CudaIpcMapping::~CudaIpcMapping() { Close(); }

CudaIpcMapping::CudaIpcMapping(CudaIpcMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      allocation_bytes_(std::exchange(other.allocation_bytes_, 0)),
      device_(std::exchange(other.device_, -1)),
      device_uuid_(std::move(other.device_uuid_)) {}

CudaIpcMapping& CudaIpcMapping::operator=(CudaIpcMapping&& other) noexcept {
  if (this != &other) {
    Close();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    allocation_bytes_ = std::exchange(other.allocation_bytes_, 0);
    device_ = std::exchange(other.device_, -1);
    device_uuid_ = std::move(other.device_uuid_);
  }
  return *this;
}

void CudaIpcMapping::Close() noexcept {
  if (data_ == nullptr) return;
  // The mapping belongs to the context of device_; make it current for the
  // close (the caller's device comes back with the guard).
  {
    ScopedCudaDevice on_device;
    if (on_device.Set(device_).ok()) {
      // Failure here (e.g. after a sticky error) leaves nothing to undo.
      (void)cudaIpcCloseMemHandle(data_);
    }
  }
  (void)cudaGetLastError();
  data_ = nullptr;
}

Result<std::unique_ptr<CudaIpcMapping>> CudaIpcMapping::Open(const std::string& handle_bytes,
                                                             uint64_t claimed_bytes,
                                                             const std::string& device_uuid) {
  static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes,
                "cudaIpcMemHandle_t changed size; the wire format assumes 64 bytes");
  VAED_ASSIGN_OR_RETURN(const DeviceUuid wanted,
                        CheckCudaIpcArguments(handle_bytes, claimed_bytes, device_uuid));

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return CudaStatus(err, "cudaGetDeviceCount");
  int device = -1;
  std::string uuid;
  std::string visible;
  for (int i = 0; i < count && device < 0; ++i) {
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      return CudaStatus(err, "cudaGetDeviceProperties(" + std::to_string(i) + ")");
    }
    const DeviceUuid found = ToDeviceUuid(prop.uuid);
    std::string formatted = FormatDeviceUuid(found);
    if (found == wanted) {
      device = i;
      uuid = std::move(formatted);
    } else {
      if (!visible.empty()) visible += ", ";
      visible += std::to_string(i) + " " + formatted;
    }
  }
  if (device < 0) {
    return NotFound(
        "register_region.cuda.device_uuid '" + device_uuid + "' is not a device visible to vaed" +
        (visible.empty() ? std::string(" (no devices visible)") : " (visible: " + visible + ")"));
  }

  const std::string label = "CUDA IPC region on device " + std::to_string(device) + " " + uuid;
  ScopedCudaDevice scoped;
  VAED_RETURN_IF_ERROR(scoped.Set(device).WithContext(label));

  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, handle_bytes.data(), sizeof(handle));
  void* ptr = nullptr;
  err = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) return CudaStatus(err, label + ": cudaIpcOpenMemHandle");
  // Owns the mapping from here on, so every early return below closes it.
  auto mapping =
      std::unique_ptr<CudaIpcMapping>(new CudaIpcMapping(ptr, claimed_bytes, 0, device, uuid));

  VAED_ASSIGN_OR_RETURN(const DriverApi driver, LoadDriverApi());
  CUdeviceptr base = 0;
  size_t alloc_size = 0;
  const CUresult res =
      driver.mem_get_address_range(&base, &alloc_size, reinterpret_cast<CUdeviceptr>(ptr));
  if (res != CUDA_SUCCESS) return CuDriverStatus(driver, res, label + ": cuMemGetAddressRange");
  // The handle names an allocation; ptr may not be its start, so count only
  // the bytes from ptr to the allocation's end.
  const uint64_t available =
      static_cast<uint64_t>(base) + alloc_size - reinterpret_cast<uint64_t>(ptr);
  if (claimed_bytes > available) {
    return OutOfRange(label + ": client claims " + std::to_string(claimed_bytes) +
                      " bytes but the allocation holds " + std::to_string(available) +
                      " bytes from the handle's address (cuMemGetAddressRange)");
  }
  mapping->allocation_bytes_ = available;
  return mapping;
}

}  // namespace vaed
