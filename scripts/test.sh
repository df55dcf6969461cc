#!/usr/bin/env bash
# Sets up and runs the whole vaed test suite on Debian 12 (as root):
# installs the Debian packages, configures and builds the CPU preset,
# compiles and links the GPU build (scripts/cuda-build.sh; not run), runs
# every test with ctest, then the sanitizer pass (scripts/sanitize.sh: clang
# with ASan + UBSan and the thread-safety analysis) and a 60 s fuzz run
# (scripts/fuzz.sh). Tests that need ../shared (real weights, golden data)
# read it in place and skip with a message when it is absent.
#
# Compiler cache: every build goes through ccache (scripts/ccache-env.sh),
# keyed on paths relative to this checkout, so a fresh clone in another
# folder compiles only what changed since the cache was filled; a machine
# without a cache builds everything (slower, same result).
#
# ctest runs each GoogleTest suite as one test (one process, one fixture)
# and $(nproc) of them at once; suites that measure time or load the machine
# are marked RUN_SERIAL and run alone (tests/CMakeLists.txt, vaed_add_test).
# Extra arguments go to ctest and skip the two extra passes (e.g.
# `scripts/test.sh -R BadInput` or `scripts/test.sh -L unit`).
#
# At the end it prints how long each phase took.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh

phases=()
started=$(date +%s)
phase_start=$started
phase() {  # records the phase that just ended
  local now
  now=$(date +%s)
  phases+=("$(printf '%-10s %5d s' "$1" $((now - phase_start)))")
  phase_start=$now
}
report() {
  echo "test.sh: phases (wall):"
  printf '  %s\n' "${phases[@]}"
  echo "test.sh: total $(($(date +%s) - started)) s"
  if command -v ccache >/dev/null; then ccache --show-stats 2>/dev/null | grep -E 'Hits|Misses' || true; fi
}
trap report EXIT

scripts/install-deps.sh --test-tools
phase install
# The integration tests' venv: pinned diffusers and transformers from PyPI
# on top of the torch venv (cached on the machine; about 45 s when made).
integrations_python=$(scripts/integration-env.sh --print-python)
phase integ-env
cmake --preset default -DVAED_INTEGRATIONS_PYTHON="$integrations_python"
phase configure
cmake --build --preset default -j "$(nproc)"
phase build
# The GPU build compiles and links here too (no device: not run).
scripts/cuda-build.sh
phase cuda-build
ctest --preset default --timeout 1800 -j "$(nproc)" "$@"
phase ctest

# The reliability passes, on a full run only (not with ctest
# filters): the handler, hostile-input and load tests once more under
# AddressSanitizer + UndefinedBehaviorSanitizer (a shorter load, 8 x 25; the
# slow flood and crash cases run in the plain suite above), then a bounded
# libFuzzer run on the protocol decoder and request validator.
if [ $# -eq 0 ]; then
  VAED_LOAD_DECODES=25 scripts/sanitize.sh '-*Flood*:*ClientKilled*'
  phase sanitize
  scripts/fuzz.sh 60
  phase fuzz
fi
