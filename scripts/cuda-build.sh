#!/usr/bin/env bash
# Compiles and links the GPU build (VAED_WITH_CUDA=ON, the `cuda` preset,
# folder build-cuda/) without running it: the daemon and the GPU test
# binaries. CI runs it after the CPU build (scripts/test.sh), so that CUDA
# code that no longer compiles fails CI although no device is there.
#
# The GPU build shares every object but the CUDA sources with the CPU build
# (same flags, same folder depth), so with the compiler cache the CPU build
# filled it compiles only those and links.
#
# Without a CUDA toolkit (no nvcc under /usr/local/cuda or on PATH) it says
# so and exits 0: the CPU product does not need one.
#
# Usage: scripts/cuda-build.sh [extra targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "cuda-build.sh: no CUDA toolkit (nvcc) here; the GPU build was not compiled"
  exit 0
fi
cmake --preset cuda >/dev/null
targets=(vaed shm_cuda_ipc_device_test nccl_communicator_test cuda_events_device_test "$@")
# LibTorch's CUDA side is linked only against a CUDA LibTorch; with
# Debian's CPU LibTorch it is compiled as a check (daemon/CMakeLists.txt).
if grep -q 'vaed_torch_cuda_check' build-cuda/build.ninja; then
  targets+=(vaed_torch_cuda_check)
fi
cmake --build --preset cuda -j "$(nproc)" --target "${targets[@]}"
echo "cuda-build.sh: GPU build compiled and linked: ${targets[*]} (build-cuda/; not run here)"
