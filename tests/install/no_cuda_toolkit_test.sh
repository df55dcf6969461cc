#!/usr/bin/env bash
# The CPU daemon runs and decodes on a machine without a CUDA toolkit.
# LibTorch 2.11's libtorch_cpu.so (PyPI's CUDA 13.0 wheel) NEEDs
# libcudart.so.13 and libcupti.so.13; vaed must get them from beside its
# LibTorch (the nvidia/cu13/lib folder of the torch venv, which its RPATH
# names), never from a toolkit. In a private mount namespace every
# /usr/local/cuda* folder is hidden under an empty tmpfs, and then:
#   1. ldd of vaed resolves every library, none from /usr/local/cuda;
#   2. vaed starts on a private socket with the tiny golden H3 decoders
#      (../shared/golden/h3), or the built-in demo model without them;
#   3. vaectl decodes the golden one-tile case and compares it with the
#      official uint8 frames (within the golden tolerance), or a seeded
#      random latent on the demo model;
#   4. vaed stops cleanly on SIGTERM.
# Needs root and unshare (util-linux): exit 77 (skipped) otherwise.
#
# Usage: no_cuda_toolkit_test.sh BUILD_DIR SHARED_DIR
set -euo pipefail
build=${1:?usage: no_cuda_toolkit_test.sh BUILD_DIR SHARED_DIR}
shared=${2:?usage: no_cuda_toolkit_test.sh BUILD_DIR SHARED_DIR}
build=$(cd "$build" && pwd)
if [ "$(id -u)" != 0 ] || ! command -v unshare > /dev/null; then
  echo "SKIP: needs root and unshare (a private mount namespace hides /usr/local/cuda*)" >&2
  exit 77
fi
toolkits=(/usr/local/cuda*)
[ -e "${toolkits[0]}" ] || echo "note: no /usr/local/cuda* here; the test runs as is"

# Everything below runs inside the namespace; its mounts vanish with it.
checker=$(cd "$(dirname "$0")" && pwd)/golden_report_check.py
exec unshare --mount --propagation private -- bash -s "$build" "$shared" "$checker" <<'INSIDE'
set -euo pipefail
build=$1
shared=$2
checker=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
for d in /usr/local/cuda*; do
  [ -d "$d" ] && mount -t tmpfs -o ro,size=4k vaed-no-cuda "$d"
done
for d in /usr/local/cuda*; do
  [ -z "$(ls -A "$d")" ] || fail "$d is still visible"
done
vaed=$build/daemon/vaed
vaectl=$build/ops/vaectl/vaectl
echo "--- ldd $vaed (toolkit hidden)"
libs=$(ldd "$vaed")
echo "$libs" | grep -E 'torch|c10|cuda|cupti|gomp' || true
! grep -q 'not found' <<< "$libs" || fail "a library of vaed is not found without the toolkit: $(grep 'not found' <<< "$libs")"
! grep -q '/usr/local/cuda' <<< "$libs" || fail "vaed loads a library from /usr/local/cuda"
grep -q 'libcudart.so.13 => ' <<< "$libs" || fail "libcudart.so.13 (NEEDed by libtorch_cpu.so) did not resolve"

dir=$(mktemp -d /tmp/vaed-no-cuda-XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; wait "$pid" || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
golden=$shared/golden/h3
args=(--socket "$dir/vaed.sock" --intra-op-threads 2)
if [ -f "$golden/video_tiny_weights.safetensors" ]; then
  args+=(--model "h3=h3_video:$golden/video_tiny_weights.safetensors:$golden/video_tiny_config.json")
  decode=("$golden/video_case_one_tile.safetensors" --model h3 --reference-key frames_u8)
else
  echo "note: $golden is absent: decoding a random latent on the demo model instead"
  decode=(--random-latent 1,32,16,16 --model demo --reference-key '')
fi
"$vaed" "${args[@]}" > "$dir/vaed.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  [ -S "$dir/vaed.sock" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/vaed.log" >&2; fail "vaed exited before creating its socket"; }
  sleep 0.05
done
[ -S "$dir/vaed.sock" ] || { cat "$dir/vaed.log" >&2; fail "vaed did not create its socket within 60 s"; }
echo "--- vaectl decode ${decode[*]}"
"$vaectl" --socket "$dir/vaed.sock" decode "${decode[@]}" --format none --json > "$dir/report.json" ||
  { cat "$dir/report.json" "$dir/vaed.log" >&2; fail "the decode failed"; }
python3 "$checker" "$dir/report.json" || fail "the decode is outside the golden tolerance"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || { cat "$dir/vaed.log" >&2; fail "vaed exited $rc on SIGTERM"; }
echo "PASS: vaed decoded with every /usr/local/cuda* hidden"
INSIDE
