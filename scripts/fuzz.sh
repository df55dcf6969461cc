#!/usr/bin/env bash
# Builds the protocol fuzz target (fuzz/, clang + libFuzzer + ASan/UBSan)
# and runs it for a bounded time, then replays fuzz/regressions/.
#
#   scripts/fuzz.sh [SECONDS]        (default 60; `scripts/fuzz.sh 600` for a long run)
#
# Needs the main build (its static libraries): VAED_BUILD_DIR, default build/.
# Environment:
#   VAED_BUILD_DIR        main (gcc) build directory          [build]
#   VAED_FUZZ_BUILD_DIR   where the fuzz target is built      [build-fuzz]
#   VAED_FUZZ_JOBS        parallel compile jobs               [nproc]
#   VAED_FUZZ_BUILD_WRAPPER  command prefix for configure/build, e.g.
#                         "flock /tmp/vaed-build.lock"        [none]
#   VAED_FUZZ_ARGS        extra libFuzzer flags               [none]
# Crashes are written to $VAED_FUZZ_BUILD_DIR/artifacts/ (crash-*, leak-*,
# timeout-*, oom-*). Exit status: 0 when nothing crashed, 1 otherwise, 2 on
# usage or build errors.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh
root=$PWD
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
  echo "usage: scripts/fuzz.sh [SECONDS]   (SECONDS: a positive integer, default 60)" >&2
  exit 2
fi

main_build=${VAED_BUILD_DIR:-build}
[[ $main_build = /* ]] || main_build=$root/$main_build
fuzz_build=${VAED_FUZZ_BUILD_DIR:-build-fuzz}
[[ $fuzz_build = /* ]] || fuzz_build=$root/$fuzz_build
jobs=${VAED_FUZZ_JOBS:-$(nproc)}
read -r -a wrapper <<< "${VAED_FUZZ_BUILD_WRAPPER:-}"
read -r -a extra_args <<< "${VAED_FUZZ_ARGS:-}"

die() { echo "fuzz.sh: $*" >&2; exit 2; }

# ---- prerequisites
for lib in daemon/libvaed_daemon_lib.a daemon/models/libvaed_models.a shm/memory/libvaed_shm.a \
           shm/protocol/proto/libvaed_proto.a shm/protocol/proto/gen/vaed/v1/vaed.pb.h; do
  [[ -e $main_build/$lib ]] || die "the main build is missing ($main_build/$lib).
  Build it first:  cmake --preset default && cmake --build --preset default
  (or set VAED_BUILD_DIR to an existing main build directory)"
done
command -v clang++ >/dev/null || die "clang++ not found (Debian: apt-get install clang libclang-rt-dev)"
command -v ninja >/dev/null || die "ninja not found (Debian: apt-get install ninja-build)"

# ---- configure (once, or when the main build directory changed) and build
mkdir -p "$fuzz_build"
log=$fuzz_build/build.log
configured_for=$(sed -n 's/^VAED_BUILD_DIR:PATH=//p' "$fuzz_build/CMakeCache.txt" 2>/dev/null || true)
if [[ ! -f $fuzz_build/build.ninja || $configured_for != "$main_build" ]]; then
  echo "fuzz.sh: configuring $fuzz_build (main build: $main_build)"
  if ! "${wrapper[@]}" cmake -S fuzz -B "$fuzz_build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
       "${launcher[@]}" -DVAED_BUILD_DIR="$main_build" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "configuring the fuzz target failed (full log: $log)"
  fi
fi
start=$(date +%s)
if ! "${wrapper[@]}" cmake --build "$fuzz_build" -j "$jobs" >>"$log" 2>&1; then
  grep -E 'error|undefined reference|multiple definition' "$log" | head -n 30 >&2 || true
  tail -n 20 "$log" >&2
  die "building the fuzz target failed (full log: $log)"
fi
echo "fuzz.sh: fuzz target up to date ($(( $(date +%s) - start )) s)"
fuzzer=$fuzz_build/vaed_request_fuzzer

# ---- fuzz
artifacts=$fuzz_build/artifacts
mkdir -p "$artifacts"
work=$(mktemp -d "${TMPDIR:-/tmp}/vaed-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp fuzz/corpus/* "$work/corpus/"
run_log=$fuzz_build/fuzz.log
echo "fuzz.sh: fuzzing for ${seconds} s (corpus: fuzz/corpus, $(ls fuzz/corpus | wc -l) seeds; log: $run_log)"
status=0
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "${extra_args[@]}" "$work/corpus" >"$run_log" 2>&1 || status=$?

runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run_log" | tail -n 1)
last=$(grep -E '^#[0-9]+' "$run_log" | tail -n 1 || true)
echo "fuzz.sh: executed ${runs:-?} runs; last status: ${last:-none}"
if (( status != 0 )); then
  echo "fuzz.sh: THE FUZZER FOUND A CRASH (exit $status). Report:" >&2
  grep -n -m1 -E 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|libFuzzer)|runtime error|INVARIANT VIOLATED' "$run_log" >&2 || true
  sed -n '/^==[0-9]*==ERROR\|INVARIANT VIOLATED\|runtime error/,$p' "$run_log" | head -n 60 >&2
  ls -1 "$artifacts" >&2
  echo "fuzz.sh: reproduce with: $fuzzer <artifact>; keep it as fuzz/regressions/<name> once fixed" >&2
fi

# ---- regressions: every saved input must run clean
shopt -s nullglob
regressions=(fuzz/regressions/*)
shopt -u nullglob
if (( ${#regressions[@]} > 0 )); then
  reg_log=$fuzz_build/regressions.log
  if "$fuzzer" -rss_limit_mb=4096 -timeout=10 "${regressions[@]}" >"$reg_log" 2>&1; then
    echo "fuzz.sh: ${#regressions[@]} regression inputs ran clean"
  else
    echo "fuzz.sh: A REGRESSION INPUT CRASHED (log: $reg_log):" >&2
    grep -E '^Running:' "$reg_log" | tail -n 1 >&2 || true
    sed -n '/^==[0-9]*==ERROR\|INVARIANT VIOLATED\|runtime error/,$p' "$reg_log" | head -n 40 >&2
    status=1
  fi
fi

(( status == 0 )) || exit 1
echo "fuzz.sh: no crashes"
