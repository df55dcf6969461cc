#!/usr/bin/env bash
# The GPU build's vaed (build-cuda/, scripts/cuda-build.sh: linked against
# the wheel's libtorch_cuda) starts on a machine without an NVIDIA driver
# and, asked for CUDA ranks (executor.device = "cuda"), stops before any
# model loads with a message that says why:
#   - it starts at all (every library it NEEDs resolves: libtorch_cuda and
#     the CUDA libraries behind it);
#   - it exits 1 within 60 s, its log's critical line naming the CUDA
#     device listing (cudaGetDeviceCount) and its error;
#   - no rank was set up and no model loaded (no "rank 0:" line: ranks are
#     logged just before their models load).
# Skipped (exit 77) where the GPU build is absent or a driver is present
# (/dev/nvidiactl: there the device check runs this build for real).
#
# Usage: gpu_daemon_without_driver_test.sh GPU_VAED SHARED_DIR
set -euo pipefail
vaed=${1:?usage: gpu_daemon_without_driver_test.sh GPU_VAED SHARED_DIR}
shared=${2:?usage: gpu_daemon_without_driver_test.sh GPU_VAED SHARED_DIR}
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -x "$vaed" ]; then
  echo "SKIP: $vaed is absent (scripts/cuda-build.sh builds it)" >&2
  exit 77
fi
if [ -e /dev/nvidiactl ]; then
  echo "SKIP: an NVIDIA driver is present here" >&2
  exit 77
fi
! ldd "$vaed" | grep 'not found' || fail "a library of the GPU vaed is not found"
ldd "$vaed" | grep -q 'libtorch_cuda.so => ' || fail "the GPU vaed does not load libtorch_cuda.so"

dir=$(mktemp -d /tmp/vaed-gpu-no-driver-XXXXXX)
trap 'rm -rf "$dir"' EXIT
printf '[executor]\ndevice = "cuda"\n' > "$dir/vaed.toml"
args=(--socket "$dir/vaed.sock" --config "$dir/vaed.toml")
golden=$shared/golden/h3
if [ -f "$golden/video_tiny_weights.safetensors" ]; then
  args+=(--model "h3=h3_video:$golden/video_tiny_weights.safetensors:$golden/video_tiny_config.json")
fi
rc=0
timeout 60 "$vaed" "${args[@]}" > "$dir/vaed.log" 2>&1 || rc=$?
cat "$dir/vaed.log"
[ "$rc" != 124 ] || fail "the GPU vaed did not stop within 60 s"
[ "$rc" = 1 ] || fail "the GPU vaed exited $rc, not 1"
grep -q 'critical.*cudaGetDeviceCount' "$dir/vaed.log" ||
  fail "no critical line naming the CUDA device listing (cudaGetDeviceCount)"
! grep -q 'rank 0:' "$dir/vaed.log" || fail "a rank was set up (models load after that line)"
[ ! -S "$dir/vaed.sock" ] || fail "the control socket was created"
echo "PASS: the GPU vaed without a driver stopped before loading: $(grep critical "$dir/vaed.log")"
