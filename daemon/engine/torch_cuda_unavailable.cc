// LibTorch without CUDA (Debian's CPU LibTorch): torch_cuda.h answers that
// it is not there.
#include "daemon/engine/torch_cuda.h"

namespace vaed::engine {
namespace {

Status NoTorchCuda() {
  return FailedPrecondition(
      "this vaed links a LibTorch without CUDA (Debian's CPU LibTorch); CUDA ranks need the "
      "CUDA LibTorch of a PyTorch wheel (scripts/gpu/check.sh builds against it)");
}

}  // namespace

bool TorchCudaAvailable() { return false; }
Result<void*> UseRankStream(int) { return NoTorchCuda(); }
Result<DeviceMemoryFigures> TorchDeviceMemory(int) { return NoTorchCuda(); }
Status ResetPeakDeviceBytes(int) { return NoTorchCuda(); }
Status SynchronizeStream(int, void*) { return NoTorchCuda(); }
Status UseExactFloat32() { return NoTorchCuda(); }
Status UseCudaEventTimings() { return NoTorchCuda(); }

}  // namespace vaed::engine
