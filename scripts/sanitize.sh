#!/usr/bin/env bash
# The sanitizer pass: builds vaed's daemon, client library and the
# reliability tests with AddressSanitizer + UndefinedBehaviorSanitizer in
# build-asan/, reusing the decoders from the main build (build/, run
# scripts/test.sh or `cmake --build --preset default` first), then runs:
#   - the protocol state machine's tests (request_handler_test),
#   - the load test (VAED_LOAD_CLIENTS x VAED_LOAD_DECODES decodes through an
#     instrumented daemon; default here 8 x 50, the full acceptance run is
#     `VAED_LOAD_DECODES=200 scripts/sanitize.sh`),
#   - the hostile-input tests (truncated segments, floods, deadlines, ...),
#   - the control socket's contract against libzmq (shm_raw_socket_test).
# Any sanitizer report aborts the process and fails the pass.
#
# Usage: scripts/sanitize.sh [GTEST_FILTER]
#   GTEST_FILTER: a GoogleTest filter for the test binaries, e.g.
#   '-*Flood*:*ClientKilled*' (what scripts/test.sh passes: the slow flood and
#   crash cases run in the plain suite); default all.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh

models=build/daemon/models/libvaed_models.a
if [ ! -f "$models" ]; then
  echo "sanitize.sh: $models is missing; build the main tree first (cmake --build --preset default)" >&2
  exit 2
fi
export VAED_LOAD_CLIENTS="${VAED_LOAD_CLIENTS:-8}"
export VAED_LOAD_DECODES="${VAED_LOAD_DECODES:-50}"
# Leak checking stays on; LibTorch's and protobuf's process-lifetime
# singletons are reachable at exit, so they are not reported.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:handle_segv=0:handle_sigbus=0:allow_user_segv_handler=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# clang: its sanitizers, and its thread-safety analysis of vaed's locks
# (vaed/mutex.h; -Wthread-safety, an error like every warning).
# vaed_models_thread_safety: the prebuilt decoders' locked sources, compiled
# for the analysis only (daemon/models/CMakeLists.txt).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DVAED_SANITIZE=address,undefined -DVAED_PREBUILT_MODELS="$PWD/$models" > /dev/null
cmake --build build-asan -j "$(nproc)" --target vaed vaectl victim_client hostile_client \
  load_test request_handler_test hostile_input_test shm_raw_socket_test \
  vaed_models_thread_safety
# Each binary whole, in one process (its suites share their daemons).
filter="${1:-*}"
status=0
for t in shm/shm_raw_socket_test daemon/request_handler_test integration/load_test \
  integration/hostile_input_test; do
  echo "sanitize.sh: $t --gtest_filter='$filter'"
  (cd "build-asan/tests/${t%/*}" && timeout 900 "./${t#*/}" --gtest_filter="$filter") || status=1
done
exit $status
