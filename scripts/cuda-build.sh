#!/usr/bin/env bash
# Compiles and links the GPU build (VAED_WITH_CUDA=ON, the `cuda` preset,
# folder build-cuda/) against the wheel's libtorch_cuda and the toolkit's
# CUDA 13.0 libraries, without running it: the daemon, the GPU test
# programs and vaed_bench_h3_video. CI runs it after the CPU build
# (scripts/test.sh), so that CUDA code that no longer compiles or links
# fails CI although no device is there.
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
# The daemon, every GPU test program and the benchmark the device check
# runs, against the wheel's libtorch_cuda (cmake/libtorch.cmake), plus
# vaectl and the Python client the check's steps drive them with: all that
# scripts/gpu/pack-binaries.sh carries to the GPU machine.
targets=(vaed shm_cuda_ipc_device_test nccl_communicator_test cuda_events_device_test
         vaed_bench_h3_video vaectl vaed_python "$@")
cmake --build --preset cuda -j "$(nproc)" --target "${targets[@]}"
echo "cuda-build.sh: GPU build compiled and linked: ${targets[*]} (build-cuda/; not run here)"
# The link line of vaed, and what the linked program needs: libtorch_cuda.so
# must be there (LibTorch registers its CUDA backend when it loads).
link=$(ninja -C build-cuda -t commands daemon/vaed | tail -n 1)
echo "cuda-build.sh: vaed's link line names: $(grep -o '[^ ]*libtorch_cuda[^ ]*' <<< "$link" | sort -u | tr '\n' ' ')"
needed=$(readelf -d build-cuda/daemon/vaed | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "cuda-build.sh: build-cuda/daemon/vaed NEEDs: $needed"
if ! grep -q 'libtorch_cuda.so' <<< "$needed"; then
  echo "cuda-build.sh: build-cuda/daemon/vaed does not need libtorch_cuda.so: LibTorch's CUDA side is not linked" >&2
  exit 1
fi
