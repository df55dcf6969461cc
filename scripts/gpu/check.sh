#!/usr/bin/env bash
# The GPU check, in one command on the device machine:
#
#   scripts/gpu/check.sh --out DIR
#
# runs the GPU build's programs prebuilt on the Debian machine (.gpu-bin,
# made there by scripts/gpu/pack-binaries.sh from build-cuda/, against the
# same torch 2.11 wheel as this machine's python3) with the Debian libraries
# carried in .gpu-debs (scripts/gpu/fetch-debs.sh), and builds only what
# cannot come prebuilt; then it runs these steps, each in its own process
# under its own timeout, so that one failure never hides the others'
# figures (in this order):
#
#   environment    machine, GPU, driver, torch, compilers, commit
#   build          unpack .gpu-debs and .gpu-bin, link the prebuilt
#                  programs to this machine's torch and libraries, check
#                  that `vaed --help` starts, and take the carried Python
#                  extension when python3 is the one it was built for (else
#                  build the client alone, -DVAED_CLIENT_ONLY=ON). Only when
#                  the prebuilt programs are absent or do not start:
#                  configure the `cuda` preset and build the targets the
#                  steps need (keeps going past a failed one). Its figures
#                  say which (build_path: prebuilt or built) and the seconds
#   ctest_gpu      ctest -L gpu (tests read the carried golden data:
#                  VAED_SHARED_DIR=.gpu-golden)
#   golden_h3      every golden H3 case (5 video, 3 audio) decoded on the
#                  daemon's CUDA ranks in fp32 vs .gpu-golden (golden_check.py)
#   ipc_decode     scripts/gpu/ipc_worker.py, a stand-in DiT worker, decodes
#                  its own CUDA tensors by CUDA IPC, compared with the host path
#   ipc_host_copies  the host copies the daemon reports for that request (0)
#   matmul_bf16    bf16 matmul TFLOP/s and copy GB/s measured by torch now
#   bench_h3_1344x768x209_fp16   the full-size decoder (36 x 2048, seeded
#                  random weights made on the host and moved to the GPU once)
#                  on latent [1,24,62,48,84], the official fp16 recipe,
#                  sequential and stacked (vaed_bench_h3_video)
#   sticky_error   a daemon allowing fault injection gets a device_fatal
#                  request: the decode fails and the daemon exits non-zero
#   ipc_ordering   ipc_worker.py --mode ordering: a host latent with a CUDA
#                  output on a busy stream gives the host-path frames (the
#                  daemon waits for the worker's queued work before writing),
#                  and one CUDA allocation registered by two clients is
#                  mapped once and decodes right; missing on --cpu-only
#   ipc_client_death  a worker is SIGKILLed while the daemon decodes into
#                  its CUDA tensors: the daemon keeps serving (a fresh worker
#                  decodes correctly), the dead client and its regions are
#                  gone from `vaectl status`, and its log has no CUDA error
#   bench_h3_1536x2688x111_fp16  the same on latent [1,24,33,96,168]
#   bench_h3_1344x768x209_bf16, bench_h3_1536x2688x111_bf16   both in bf16
#
# Each step ends passed, failed, missing (the program, test or option it
# needs does not exist in this build yet) or skipped (with the reason), with
# its seconds and figures, in DIR/check.json; all output goes to
# DIR/check.log; stdout gets one line per step and a table at the end.
#
# Time. The whole run is bounded by --budget (default 480 s on the GPU,
# build included). Every step has a default timeout (its cap) and a
# minimum, the least time in which it can give its figures; golden_h3,
# ipc_decode and the two fp16 benchmarks are reserved: while any step
# before them runs, their minimums are kept free. When a step starts, its
# timeout is its cap cut to what is left of the budget less the reserved
# minimums of the later steps; a step whose cut timeout is below its own
# minimum is skipped ("not enough budget left for this step's minimum of
# N s"), and the later steps still get their turn. A benchmark cut at its
# timeout still reports the modes it finished. --dry-run prints the plan
# with the cut timeouts of the worst case (every step running to its
# timeout). What a run skipped is rerun on the warm machine with
# --skip-build --only NAME,...
#
# Options:
#   --out DIR        where check.json and check.log go (required; created)
#   --dry-run        check the arguments and the carried folders, print the
#                    prebuilt programs it would use (path, size, commit),
#                    the carried sizes, and the plan (the configure command
#                    of a build there, for when they cannot be used; the
#                    steps and their timeouts); run nothing
#   --cpu-only       the same steps as a CPU build here (VAED_WITH_CUDA=OFF,
#                    the system's packages, ccache, build-gpucheck/); the
#                    steps that need a GPU are skipped with their reason
#   --skip-build     use the build folder as it is, prebuilt or built (a
#                    rerun on a warm machine)
#   --no-prebuilt    build here even when .gpu-bin holds prebuilt programs
#   --build-dir D    build folder (default build-gpu/, or build-gpucheck/
#                    with --cpu-only)
#   --budget S       wall seconds for the whole run (default 480; 14400 with
#                    --cpu-only)
#   --only A,B       run only these steps (environment and build always run
#                    unless --skip-build); a name may be a prefix that ends
#                    before an underscore: bench_h3 = the four benchmarks,
#                    bench_h3_1344x768x209 = both of its dtypes
#   --deps debs|system  where the build dependencies come from (default:
#                    debs on the GPU, system with --cpu-only)
#   --configure-only stop after configuring (checks the dependency set)
#   -h, --help       this text
#
# Exit status: 0 no step failed (missing and skipped do not count), 1 a step
# failed, 2 bad arguments or a carried folder is missing.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# In the order they run (the most wanted figures first; see "Time" above).
STEPS_ALL=(environment build ctest_gpu golden_h3 ipc_decode matmul_bf16
           bench_h3_1344x768x209_fp16 sticky_error ipc_ordering ipc_client_death
           bench_h3_1536x2688x111_fp16 bench_h3_1344x768x209_bf16 bench_h3_1536x2688x111_bf16)

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "check.sh: $*" >&2; exit 2; }

OUT="" DRY_RUN=0 MODE=gpu SKIP_BUILD=0 BUILD="" BUDGET="" ONLY="" DEPS="" CONFIGURE_ONLY=0 USE_PREBUILT=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT=$2; shift ;;
    --dry-run) DRY_RUN=1 ;;
    --cpu-only) MODE=cpu ;;
    --skip-build) SKIP_BUILD=1 ;;
    --no-prebuilt) USE_PREBUILT=0 ;;
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a folder"; BUILD=$2; shift ;;
    --budget) [ $# -ge 2 ] || die "--budget needs seconds"; BUDGET=$2; shift ;;
    --only) [ $# -ge 2 ] || die "--only needs step names"; ONLY=$2; shift ;;
    --deps) [ $# -ge 2 ] || die "--deps needs debs or system"; DEPS=$2; shift ;;
    --configure-only) CONFIGURE_ONLY=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

[ -n "$OUT" ] || die "--out DIR is required (where check.json and check.log go)"
[ -e "$OUT" ] && [ ! -d "$OUT" ] && die "--out $OUT exists and is not a folder"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
if [ -z "$BUDGET" ]; then BUDGET=$([ $MODE = cpu ] && echo 14400 || echo 480); fi
[[ "$BUDGET" =~ ^[1-9][0-9]*$ ]] || die "--budget must be a positive number of seconds, got '$BUDGET'"
[ -n "$DEPS" ] || DEPS=$([ $MODE = cpu ] && echo system || echo debs)
[[ "$DEPS" =~ ^(debs|system)$ ]] || die "--deps must be debs or system, got '$DEPS'"
[ -n "$BUILD" ] || BUILD="$ROOT/$([ $MODE = cpu ] && echo build-gpucheck || echo build-gpu)"
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
# Whether --only name $2 names step $1 (itself, or a prefix of it that ends
# before an underscore: bench_h3_1344x768x209 names both of its dtypes).
only_names() { [ "$1" = "$2" ] || [[ "$1" == "$2"_* ]]; }
if [ -n "$ONLY" ]; then
  for o in ${ONLY//,/ }; do
    known=0
    for s in "${STEPS_ALL[@]}"; do only_names "$s" "$o" && known=1; done
    [ $known = 1 ] || die "--only: unknown step '$o' (steps: ${STEPS_ALL[*]})"
  done
fi
[ "$SKIP_BUILD" = 1 ] && [ ! -f "$BUILD/CMakeCache.txt" ] && [ ! -f "$BUILD/prebuilt/manifest" ] &&
  die "--skip-build: $BUILD holds neither a configured build nor unpacked prebuilt programs"
[ "$SKIP_BUILD" = 1 ] && [ "$CONFIGURE_ONLY" = 1 ] && die "--skip-build and --configure-only exclude each other"

DEBS_DIR="$ROOT/.gpu-debs"
BIN_DIR="$ROOT/.gpu-bin"                 # prebuilt programs (pack-binaries.sh)
GOLDEN_ROOT="$ROOT/.gpu-golden"          # VAED_SHARED_DIR of the tests
GOLDEN_DIR="$GOLDEN_ROOT/golden/h3"
if [ "$DEPS" = debs ] && [ "$SKIP_BUILD" = 0 ]; then
  if ! ls "$DEBS_DIR"/*.deb >/dev/null 2>&1 || [ ! -f "$DEBS_DIR/boost-headers.tar.gz" ]; then
    die "$DEBS_DIR has no packages: run scripts/gpu/fetch-debs.sh on the Debian machine and carry .gpu-debs"
  fi
fi
golden_note="present"
[ -f "$GOLDEN_DIR/video_tiny_weights.safetensors" ] ||
  golden_note="MISSING (the golden steps will be skipped; scripts/gpu/fetch-debs.sh makes it)"

WORK="$BUILD/gpucheck"
REPORT_PY=$(command -v python3) || die "python3 is needed (the report and the step helpers are Python)"
VAED="$BUILD/daemon/vaed"
VAECTL="$BUILD/ops/vaectl/vaectl"
# The Python client can be built only where this python3 has its headers.
PYTHON_CLIENT=1
PYBIND11_CMAKE_DIR=""
if [ "$MODE" = gpu ]; then
  python3 -c 'import os, sysconfig, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' 2>/dev/null ||
    PYTHON_CLIENT=0
  PYBIND11_CMAKE_DIR=$(python3 -m pybind11 --cmakedir 2>/dev/null) || PYTHON_CLIENT=0
fi

source "$HERE/check_build.sh"
source "$HERE/check_prebuilt.sh"

selected() {  # whether step $1 runs
  local o
  case "$1" in
    environment) return 0 ;;
    build) [ "$SKIP_BUILD" = 0 ] ;;
    *)
      [ "$CONFIGURE_ONLY" = 0 ] || return 1
      [ -z "$ONLY" ] && return 0
      for o in ${ONLY//,/ }; do only_names "$1" "$o" && return 0; done
      return 1 ;;
  esac
}
step_args() {  # the arguments of the step function of step $1
  case "$1" in
    bench_h3_1344x768x209_fp16) echo "bench_h3 62 48 84 float16" ;;
    bench_h3_1344x768x209_bf16) echo "bench_h3 62 48 84 bfloat16" ;;
    bench_h3_1536x2688x111_fp16) echo "bench_h3 33 96 168 float16" ;;
    bench_h3_1536x2688x111_bf16) echo "bench_h3 33 96 168 bfloat16" ;;
    *) echo "$1" ;;
  esac
}
# step_limits NAME: "CAP MIN RESERVED" in seconds. CAP: the step's default
# timeout. MIN: the least time in which it gives its figures (a benchmark's
# minimum covers building its weights and its sequential decode if the
# decoder is within about twice its GPU target (docs/benchmarks.md); its stacked half may
# then be cut); a step is not started with less. RESERVED 1: its minimum is
# kept free while the steps before it run. The GPU figures are estimates:
# nothing here has run on a GPU yet. On --cpu-only the steps that need a
# GPU end at once with their reason (no minimum, nothing reserved) and the
# CPU decodes get CPU-sized caps.
step_limits() {
  if [ "$MODE" = cpu ]; then
    case "$1" in
      environment) echo "60 5 0" ;;
      build) echo "10800 60 0" ;;
      ctest_gpu) echo "300 20 0" ;;
      golden_h3) echo "900 60 0" ;;
      ipc_decode|sticky_error) echo "300 20 0" ;;
      *) echo "60 1 0" ;;  # matmul_bf16, ipc_ordering, ipc_client_death, bench_h3_*: end at once
    esac
    return
  fi
  case "$1" in
    environment) echo "20 5 0" ;;
    build) echo "330 90 0" ;;
    ctest_gpu) echo "90 20 0" ;;
    golden_h3) echo "75 25 1" ;;
    ipc_decode) echo "60 25 1" ;;
    matmul_bf16) echo "30 10 0" ;;
    bench_h3_1344x768x209_fp16) echo "150 50 1" ;;
    sticky_error) echo "40 15 0" ;;
    ipc_ordering) echo "45 20 0" ;;
    ipc_client_death) echo "90 50 0" ;;
    bench_h3_1536x2688x111_fp16) echo "150 60 1" ;;
    bench_h3_1344x768x209_bf16) echo "150 50 0" ;;
    bench_h3_1536x2688x111_bf16) echo "150 60 0" ;;
  esac
}
# plan_step NAME LEFT: sets PLAN_TIMEOUT (the cut timeout), PLAN_CAP,
# PLAN_MIN, PLAN_KEPT (seconds kept for later steps) and PLAN_KEPT_FOR (their
# names) for step NAME starting with LEFT seconds of the budget. Kept: the
# minimums of the later selected reserved steps, in order, as long as they
# fit into LEFT (with this step's own minimum first when it is reserved
# itself, or environment/build, which every later step needs); a minimum
# that cannot fit any more is not kept, since that step will be skipped
# anyway.
plan_step() {
  local name=$1 left=$2 reserved later=0 s min res room
  read -r PLAN_CAP PLAN_MIN reserved <<<"$(step_limits "$name")"
  PLAN_KEPT=0 PLAN_KEPT_FOR=""
  room=$left
  case "$name" in environment|build) reserved=1 ;; esac
  [ "$reserved" = 1 ] && room=$((left - PLAN_MIN))
  for s in "${STEPS_ALL[@]}"; do
    if [ "$s" = "$name" ]; then later=1; continue; fi
    [ $later = 1 ] && selected "$s" || continue
    read -r _ min res <<<"$(step_limits "$s")"
    [ "$res" = 1 ] && [ $((PLAN_KEPT + min)) -le "$room" ] || continue
    PLAN_KEPT=$((PLAN_KEPT + min))
    PLAN_KEPT_FOR+="${PLAN_KEPT_FOR:+, }$s"
  done
  PLAN_TIMEOUT=$((left - PLAN_KEPT))
  [ "$PLAN_TIMEOUT" -gt "$PLAN_CAP" ] && PLAN_TIMEOUT=$PLAN_CAP
  return 0
}
# Why step NAME (planned by plan_step with LEFT seconds) does not start.
budget_reason() {
  local name=$1 left=$2
  echo -n "not enough budget left for this step's minimum of $PLAN_MIN s: $left s left of --budget $BUDGET s"
  [ "$PLAN_KEPT" -gt 0 ] && echo -n ", $PLAN_KEPT s of it kept for the minimums of $PLAN_KEPT_FOR"
  if [ "$name" = build ]; then echo " (a larger --budget, or --skip-build on a built folder)"
  else echo " (rerun: --skip-build --only $name)"; fi
}
# The build step's seconds with prebuilt programs, for --dry-run's plan:
# unpacking .gpu-debs and .gpu-bin, finding the libraries, `vaed --help`
# and importing the Python client. An estimate from the Debian machine
# (docs/gpu.md); a Python client built there adds about a minute.
PREBUILT_ESTIMATE_S=20
# Steps that a CPU build skips at once (their functions say why).
needs_gpu() {
  case "$1" in matmul_bf16|ipc_ordering|ipc_client_death|bench_h3_*) [ "$MODE" = cpu ] ;; *) return 1 ;; esac
}

if [ "$DRY_RUN" = 1 ]; then
  echo "check.sh --dry-run: mode $MODE, deps $DEPS, build $BUILD, budget ${BUDGET} s, out $OUT"
  echo "  carried packages: $( [ "$DEPS" = debs ] && echo "$(ls "$DEBS_DIR"/*.deb 2>/dev/null | wc -l) in $DEBS_DIR" || echo "not used (system packages)")"
  echo "  golden data: $GOLDEN_DIR: $golden_note"
  if [ "$MODE" = cpu ]; then
    echo "  Python client: built with the CPU build"
  elif [ "$USE_PREBUILT" = 0 ]; then
    echo "  prebuilt programs: not used (--no-prebuilt): the build step builds on the GPU machine"
  elif prebuilt_present; then
    echo "  $(prebuilt_summary):"
    awk '$1 == "file" {printf "    %-46s %6.1f MiB stripped  sha256 %s\n", $3, $4 / 1048576, substr($5, 1, 16)}' \
      "$BIN_DIR/manifest"
    echo "    (as $BIN_DIR/programs.tar.xz: $(du -h "$BIN_DIR/programs.tar.xz" | cut -f1))"
    if differing=$(prebuilt_matches_checkout "$BIN_DIR"); then
      echo "  this checkout: the same sources the prebuilt programs were built from"
    else
      echo "  WARNING (they would still be used): $differing" | sed '2,$s/^/    /'
    fi
    echo "  the build step uses them when \`vaed --help\` starts on the GPU machine, else builds there (below)"
    echo "  Python client: the carried extension when that python3's EXT_SUFFIX is" \
         "$(manifest_value python_ext_suffix "$BIN_DIR/manifest"), else built there with -DVAED_CLIENT_ONLY=ON" \
         "(here: $(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null))"
  else
    echo "  prebuilt programs: NONE in $BIN_DIR (scripts/gpu/pack-binaries.sh makes them): the build step builds on the GPU machine"
  fi
  [ "$MODE" = gpu ] && "$HERE/carry_size.sh" | sed 's/^/  /'
  echo "  configure of a build$([ "$MODE" = gpu ] && echo " there, only without usable prebuilt programs") (one shell line, after the build step unpacked the packages):"
  echo "    $(configure_command_line 2>/dev/null)"
  prebuilt_planned=0
  if [ "$MODE" = gpu ] && [ "$USE_PREBUILT" = 1 ] && [ "$SKIP_BUILD" = 0 ] && prebuilt_present; then
    prebuilt_planned=1
  fi
  echo "  steps, worst case (each runs to its cut timeout; a step that ends sooner leaves its time"
  echo "  to the later ones, and each timeout is recomputed from the clock when its step starts)$(
        [ $prebuilt_planned = 1 ] && echo ", the prebuilt programs starting"):"
  elapsed=0 build_skipped=0
  for s in "${STEPS_ALL[@]}"; do
    if ! selected "$s"; then echo "    $s: not selected"; continue; fi
    left=$((BUDGET - elapsed))
    plan_step "$s" "$left"
    kept=""
    [ "$PLAN_KEPT" -gt 0 ] && kept="; $PLAN_KEPT s kept for $PLAN_KEPT_FOR"
    if [ "$s" = build ] && [ $prebuilt_planned = 1 ] && [ "$PLAN_TIMEOUT" -ge "$PLAN_MIN" ]; then
      echo "    build: at +${elapsed} s, prebuilt: about $PREBUILT_ESTIMATE_S s (an estimate); timeout $PLAN_TIMEOUT s" \
           "for a build there if they do not start (--dry-run --no-prebuilt: that plan)"
      elapsed=$((elapsed + PREBUILT_ESTIMATE_S))
    elif [ $build_skipped = 1 ] && [ "$s" != environment ]; then
      echo "    $s: skipped: the build step was skipped"
    elif needs_gpu "$s"; then
      echo "    $s: skipped at once: a CPU build (it needs a GPU)"
    elif [ "$PLAN_TIMEOUT" -lt "$PLAN_MIN" ]; then
      echo "    $s: skipped at +${elapsed} s: $(budget_reason "$s" "$left")"
      [ "$s" = build ] && build_skipped=1
    else
      echo "    $s: at +${elapsed} s, timeout $PLAN_TIMEOUT s (cap $PLAN_CAP, minimum $PLAN_MIN$kept)"
      elapsed=$((elapsed + PLAN_TIMEOUT))
    fi
    [ "$s" = ipc_decode ] && echo "    ipc_host_copies: judged from ipc_decode's reply (no time of its own)"
  done
  echo "  worst-case end: +${elapsed} s of --budget $BUDGET s"
  exit 0
fi

mkdir -p "$OUT" || die "cannot create --out $OUT"
LOG="$OUT/check.log"
: > "$LOG"
mkdir -p "$BUILD"
rm -rf "$WORK"
mkdir -p "$WORK/steps"
if [ "$MODE" = cpu ]; then source "$ROOT/scripts/ccache-env.sh"; fi
RUNTIME_LIBS=""

say() { echo "$*" | tee -a "$LOG"; }
STARTED=$(date +%s)
DEADLINE=$((STARTED + BUDGET))

# Runs step $1 in its own process under its cut timeout (plan_step), and
# records it; skips it when the budget left cannot hold its minimum, or
# when the build it needs was skipped.
run_step() {
  local name=$1 left timeout t0 rc status seconds plan
  local figures="$WORK/steps/$name.figures.json" reason="$WORK/steps/$name.reason"
  left=$((DEADLINE - $(date +%s)))
  plan_step "$name" "$left"
  timeout=$PLAN_TIMEOUT
  plan="{\"cap_s\": $PLAN_CAP, \"min_s\": $PLAN_MIN, \"left_s\": $left, \"kept_for_later_s\": $PLAN_KEPT}"
  if [ "$name" != environment ] && [ "$name" != build ] && [ -f "$WORK/build-skipped" ]; then
    echo "the build step was skipped (not enough budget left for it): nothing to run" > "$reason"
    "$REPORT_PY" "$HERE/check_report.py" step "$WORK/steps.jsonl" "$name" skipped 0 0 "$reason" "" "$plan"
    say "[$(($(date +%s) - STARTED))s] $name: skipped (no build)"
    return
  fi
  if [ "$timeout" -lt "$PLAN_MIN" ]; then
    budget_reason "$name" "$left" > "$reason"
    "$REPORT_PY" "$HERE/check_report.py" step "$WORK/steps.jsonl" "$name" skipped 0 0 "$reason" "" "$plan"
    say "[$(($(date +%s) - STARTED))s] $name: skipped: $(cat "$reason")"
    [ "$name" = build ] && touch "$WORK/build-skipped"
    return
  fi
  say "[$(($(date +%s) - STARTED))s] $name: running (timeout ${timeout} s)"
  echo "===== step $name (timeout ${timeout} s) =====" >> "$LOG"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046  # step_args splits into the function and its arguments
  STEP=$name STEP_TIMEOUT=$timeout FIGURES=$figures REASON=$reason \
    timeout -k 5 "$timeout" bash -c 'source "$HERE/check_build.sh"; source "$HERE/check_prebuilt.sh"
                                      source "$HERE/check_steps.sh"
                                      fn=$1; shift; "step_$fn" "$@"' _ $(step_args "$name") >> "$LOG" 2>&1
  rc=$?
  seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  case $rc in
    0) status=passed ;;
    3) status=missing ;;
    4) status=skipped ;;
    124|137) status=failed; echo "timed out after ${timeout} s" >> "$reason" ;;
    *) status=failed ;;
  esac
  "$REPORT_PY" "$HERE/check_report.py" step "$WORK/steps.jsonl" "$name" "$status" "$seconds" \
    "$timeout" "$reason" "$figures" "$plan"
  local how=""  # the build step: whether it took the prebuilt programs or built
  [ "$name" = build ] && [ -f "$WORK/build-path" ] && how="$(cat "$WORK/build-path"), "
  say "[$(($(date +%s) - STARTED))s] $name: $status (${how}${seconds} s)$( [ -s "$reason" ] && echo ": $(head -n1 "$reason")")"
}

# ipc_host_copies: judged from ipc_decode's figures (the reply's count).
record_host_copies() {
  local figures="$WORK/steps/ipc_decode.figures.json" reason="$WORK/steps/ipc_host_copies.reason"
  local verdict
  verdict=$("$REPORT_PY" - "$figures" "$WORK/steps.jsonl" <<'EOF'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ipc = next((s for s in steps if s["name"] == "ipc_decode"), None)
if ipc is None or ipc["status"] != "passed":
    print("skipped the IPC decode did not pass, so there is no request to count")
elif ipc["figures"].get("host_copies_field") is None:
    print("missing the daemon's reply has no host_copies field")
elif ipc["figures"]["host_copies"] == 0:
    print("passed")
else:
    print(f"failed the daemon reports {ipc['figures']['host_copies']} host copies")
EOF
  )
  echo "${verdict#* }" | grep -v '^passed$' > "$reason"
  "$REPORT_PY" "$HERE/check_report.py" step "$WORK/steps.jsonl" ipc_host_copies "${verdict%% *}" 0 0 "$reason"
  say "[$(($(date +%s) - STARTED))s] ipc_host_copies: ${verdict%% *}"
}

export ROOT HERE MODE DEPS BUILD WORK OUT DEBS_DIR BIN_DIR GOLDEN_ROOT GOLDEN_DIR REPORT_PY VAED VAECTL
export PYTHON_CLIENT PYBIND11_CMAKE_DIR CONFIGURE_ONLY USE_PREBUILT
say "check.sh: mode $MODE, deps $DEPS, build $BUILD, budget $BUDGET s, golden $golden_note"
for name in "${STEPS_ALL[@]}"; do
  selected "$name" || continue
  run_step "$name"
  if [ "$name" = build ] || { [ "$name" = environment ] && [ "$SKIP_BUILD" = 1 ]; }; then
    # After the build (or instead of it): the library path, the targets and
    # the client's python. Prebuilt programs ($BUILD/prebuilt, left by the
    # build step or an earlier run's): the path the build step worked out
    # for them, the programs the manifest lists, this machine's python3 and
    # the Python client the build step provided. Built ones: the carried
    # libraries this machine lacks, the targets the build defines, and the
    # python the extension was built for.
    if [ -f "$BUILD/prebuilt/ld-library-path" ]; then
      RUNTIME_LIBS=$(cat "$BUILD/prebuilt/ld-library-path")
      [ -f "$WORK/targets.txt" ] ||
        awk '$1 == "file" && $2 != "-" {print $2}' "$BUILD/prebuilt/manifest" > "$WORK/targets.txt"
      export CLIENT_PY=$REPORT_PY
      PYTHON_CLIENT_WHY=$(cat "$BUILD/prebuilt/python-client" 2>/dev/null || echo "none (not provided)")
      if [ "${PYTHON_CLIENT_WHY%% *}" = none ]; then PYTHON_CLIENT=0; else PYTHON_CLIENT=1; fi
      export PYTHON_CLIENT_WHY
    else
      RUNTIME_LIBS=$(runtime_library_path)
      [ -f "$WORK/targets.txt" ] ||
        ninja -C "$BUILD" -t targets all 2>/dev/null | sed -n 's/^\([A-Za-z0-9_.-]*\): phony$/\1/p' > "$WORK/targets.txt"
      CLIENT_PY=$(sed -n 's/^VAED_PYTHON_EXECUTABLE:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
      export CLIENT_PY=${CLIENT_PY:-$REPORT_PY}
      if grep -q '^VAED_BUILD_PYTHON:BOOL=OFF' "$BUILD/CMakeCache.txt" 2>/dev/null; then PYTHON_CLIENT=0; fi
    fi
    [ -n "$RUNTIME_LIBS" ] && export LD_LIBRARY_PATH="$RUNTIME_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  [ "$name" = ipc_decode ] && record_host_copies
done

# The daemons' socket folders (a step killed at its timeout leaves its own).
[ -f "$WORK/socket-dirs" ] && xargs -r rm -rf < "$WORK/socket-dirs"
"$REPORT_PY" - "$WORK/meta.json" "$MODE" "$BUDGET" "$(($(date +%s) - STARTED))" <<'EOF'
import json, sys, time
json.dump({"check": "scripts/gpu/check.sh", "mode": sys.argv[2], "budget_s": int(sys.argv[3]),
           "elapsed_s": int(sys.argv[4]), "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
          open(sys.argv[1], "w"))
EOF
"$REPORT_PY" "$HERE/check_report.py" final "$WORK/steps.jsonl" "$WORK/meta.json" "$OUT/check.json" |
  tee -a "$LOG"
say "check.sh: $OUT/check.json, $OUT/check.log ($(($(date +%s) - STARTED)) s)"
grep -q '"status": "failed"' "$WORK/steps.jsonl" && exit 1
exit 0
