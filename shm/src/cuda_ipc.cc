// Built only with VAED_WITH_CUDA (see shm/CMakeLists.txt).
#include "vaed/cuda_ipc.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <utility>

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

// Parses 32 hex digits (dashes and a "GPU-"/"MIG-" prefix allowed) into 16
// bytes. Returns false if the text has any other shape.
bool ParseUuid(std::string_view text, unsigned char out[16]) {
  if (text.size() >= 4 && (text.substr(0, 4) == "GPU-" || text.substr(0, 4) == "gpu-" ||
                           text.substr(0, 4) == "MIG-" || text.substr(0, 4) == "mig-")) {
    text.remove_prefix(4);
  }
  int digits = 0;
  for (char c : text) {
    if (c == '-') continue;
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      return false;
    }
    if (digits >= 32) return false;
    if (digits % 2 == 0) {
      out[digits / 2] = static_cast<unsigned char>(v << 4);
    } else {
      out[digits / 2] = static_cast<unsigned char>(out[digits / 2] | v);
    }
    ++digits;
  }
  return digits == 32;
}

// Makes `device` current for its lifetime and restores the caller's device
// afterwards, so Open() has no lasting effect on the calling thread.
class ScopedDevice {
 public:
  ScopedDevice() = default;
  ~ScopedDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

  Status Set(int device) {
    int previous = -1;
    cudaError_t err = cudaGetDevice(&previous);
    if (err != cudaSuccess) return CudaStatus(err, "cudaGetDevice");
    err = cudaSetDevice(device);
    if (err != cudaSuccess) {
      return CudaStatus(err, "cudaSetDevice(" + std::to_string(device) + ")");
    }
    previous_ = previous;
    return Status::Ok();
  }

 private:
  int previous_ = -1;
};

}  // namespace

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
      return true;
    default:
      return false;
  }
}

Status CudaStatus(cudaError_t err, std::string_view context) {
  std::string m(context);
  m += ": ";
  m += cudaGetErrorString(err);
  m += " (";
  m += cudaGetErrorName(err);
  m += ", cuda error ";
  m += std::to_string(static_cast<int>(err));
  m += ")";
  if (IsStickyCudaError(err)) {
    m += "; sticky error: this process's CUDA context is unusable and the daemon must restart";
    return Internal(std::move(m)).WithReason(ErrorReason::kStickyDevice);
  }
  // A failed runtime call also records the error as the thread's "last
  // error"; consume it so an unrelated later cudaGetLastError() check does
  // not report this one again.
  (void)cudaGetLastError();
  switch (err) {
    case cudaErrorMemoryAllocation:
      return ResourceExhausted(std::move(m)).WithReason(ErrorReason::kOutOfMemory);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidDevice:
    case cudaErrorMapBufferObjectFailed:
      return InvalidArgument(std::move(m));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorPeerAccessUnsupported:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return FailedPrecondition(std::move(m));
    default:
      return Internal(std::move(m));
  }
}

std::string FormatCudaUuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char buf[48];
  std::snprintf(buf, sizeof(buf),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

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
  // close and put the caller's device back.
  int previous = -1;
  const bool have_previous = cudaGetDevice(&previous) == cudaSuccess;
  if (cudaSetDevice(device_) == cudaSuccess) {
    // Failure here (e.g. after a sticky error) leaves nothing to undo.
    (void)cudaIpcCloseMemHandle(data_);
  }
  if (have_previous) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
  data_ = nullptr;
}

Status CudaIpcMapping::CheckRange(uint64_t offset, uint64_t size, std::string_view what) const {
  return CheckByteRange(offset, size, size_, what);
}

Result<std::unique_ptr<CudaIpcMapping>> CudaIpcMapping::Open(const std::string& handle_bytes,
                                                             uint64_t claimed_bytes,
                                                             const std::string& device_uuid) {
  static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes,
                "cudaIpcMemHandle_t changed size; the wire format assumes 64 bytes");
  if (handle_bytes.size() != kCudaIpcHandleBytes) {
    return InvalidArgument("region.cuda_ipc_handle has " + std::to_string(handle_bytes.size()) +
                           " bytes; a cudaIpcMemHandle_t has " +
                           std::to_string(kCudaIpcHandleBytes));
  }
  if (claimed_bytes == 0) {
    return InvalidArgument("region.size is 0; a region must hold at least one byte");
  }
  unsigned char wanted[16];
  if (!ParseUuid(device_uuid, wanted)) {
    return InvalidArgument("region.device_uuid '" + device_uuid +
                           "' is not a device UUID (32 hex digits, e.g. "
                           "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
  }

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
    std::string formatted = FormatCudaUuid(prop.uuid);
    if (std::memcmp(prop.uuid.bytes, wanted, sizeof(wanted)) == 0) {
      device = i;
      uuid = std::move(formatted);
    } else {
      if (!visible.empty()) visible += ", ";
      visible += std::to_string(i) + " " + formatted;
    }
  }
  if (device < 0) {
    return NotFound(
        "region.device_uuid '" + device_uuid + "' is not a device visible to vaed" +
        (visible.empty() ? std::string(" (no devices visible)") : " (visible: " + visible + ")"));
  }

  const std::string label = "CUDA IPC region on device " + std::to_string(device) + " " + uuid;
  ScopedDevice scoped;
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
