# shellcheck shell=bash
# Sourced by scripts/gpu/check.sh in each step's own process: the steps.
#
# A step function step_NAME runs under `timeout` with check.sh's settings in
# the environment (MODE, BUILD, WORK, GOLDEN_DIR, ...). It may write figures
# (`fig KEY VALUE...`, into $FIGURES) and a reason (`reason TEXT`, into
# $REASON), prints its log on stdout/stderr (check.sh appends it to
# check.log), and returns its status:
readonly PASSED=0 FAILED=1 MISSING=3 SKIPPED=4
# passed/failed: it ran and its check held or not; missing: a program, test
# or option it needs does not exist in this build; skipped: it does not
# apply here (e.g. a CPU build), with the reason.

fig() { "$REPORT_PY" "$HERE/check_report.py" set "$FIGURES" "$@"; }
reason() { echo "$*" >> "$REASON"; }
# The "reason" a step's helper wrote into $FIGURES (empty when none).
figure_reason() {
  "$REPORT_PY" -c 'import json, sys
try:
    print(json.load(open(sys.argv[1])).get("reason", ""))
except (OSError, ValueError, AttributeError):
    pass' "$FIGURES"
}
# Lines of a daemon log that report a CUDA error (shm/memory/src/cuda_status.cc,
# daemon/models/torch_status.cc's sticky messages, CUDA's own).
CUDA_ERROR_PATTERN='cuda error|cudaError|CUDA_ERROR|illegal memory access|illegal instruction|misaligned address|unspecified launch failure|device-side assert|sticky device error|context is destroyed'

# Whether this build defines target $1 (check.sh lists them after configuring).
defined() { grep -qxF "$1" "$WORK/targets.txt" 2>/dev/null; }

# Fails (with the reason) when the build step could not configure: then no
# step can tell a missing program from one that did not build.
need_configured() {
  [ -f "$WORK/configure-failed" ] || return 0
  reason "the build was not configured (see the build step in check.log)"
  return $FAILED
}

# Status for program $1 of target $2: 0 when it was built; else the reason
# is recorded and the status returned (failed: it did not build; missing:
# the build has no such target).
need_program() {
  [ -x "$1" ] && return 0
  need_configured || return
  if defined "$2"; then reason "$2 was not built (see the build step in check.log)"; return $FAILED; fi
  reason "this build defines no target $2"
  return $MISSING
}

# Whether this build's vaed has CUDA ranks (the executor.device
# key). Prints the reason when not.
daemon_has_cuda_ranks() {
  "$VAED" --print-config 2>/dev/null | grep -q '^device = ' && return 0
  reason "this build's vaed has no executor.device key: no CUDA ranks to decode on"
  return 1
}

# Writes the daemon config of this mode to $1: CUDA ranks on the GPU, and
# fault injection when $2 is "faults".
write_daemon_config() {
  {
    echo "[executor]"
    [ "$MODE" = gpu ] && echo 'device = "cuda"'
    [ "${2:-}" = faults ] && echo 'allow_fault_injection = true'
  } > "$1"
}

# Starts vaed with arguments "$@" on a private socket and waits until it
# answers `vaectl status` (at most 120 s: full-size models load first).
# Sets DAEMON_PID, DAEMON_SOCKET, DAEMON_LOG. Returns 1 (with the log's tail
# printed) when it exits or does not answer.
start_daemon() {
  local dir waited=0
  dir=$(mktemp -d /tmp/vaed-gpucheck.XXXXXX)  # short: socket paths hold 107 bytes
  echo "$dir" >> "$WORK/socket-dirs"  # check.sh removes them, also after a timeout
  DAEMON_SOCKET="$dir/vaed.sock"
  DAEMON_LOG="$WORK/daemon-$STEP.log"
  "$VAED" --socket "$DAEMON_SOCKET" --metrics-address 127.0.0.1:0 "$@" > "$DAEMON_LOG" 2>&1 &
  DAEMON_PID=$!
  while [ $waited -lt 240 ]; do
    if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
      wait "$DAEMON_PID"
      reason "vaed exited with status $? before it answered (log: check.log)"
      tail -n 30 "$DAEMON_LOG"
      return 1
    fi
    "$VAECTL" --socket "$DAEMON_SOCKET" status >/dev/null 2>&1 && return 0
    sleep 0.5
    waited=$((waited + 1))
  done
  reason "vaed did not answer vaectl status within 120 s"
  tail -n 30 "$DAEMON_LOG"
  return 1
}

# Stops the daemon (SIGTERM, then SIGKILL after 15 s) and prints its log.
# Prints nothing of the exit status; callers that need it wait themselves.
stop_daemon() {
  [ -n "${DAEMON_PID:-}" ] || return 0
  if kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill -TERM "$DAEMON_PID" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$DAEMON_PID" 2>/dev/null
  fi
  wait "$DAEMON_PID" 2>/dev/null
  echo "--- daemon log ($STEP)"
  cat "$DAEMON_LOG"
  rm -rf "$(dirname "$DAEMON_SOCKET")"
  DAEMON_PID=
}

# The golden tiny H3 decoders (video + audio, float32) as one model "h3".
golden_model_arg() {
  local g=$GOLDEN_DIR
  echo "h3=h3:$g/video_tiny_weights.safetensors:$g/video_tiny_config.json:$g/audio_tiny_weights.safetensors:$g/audio_tiny_config.json"
}

need_golden() {
  [ -f "$GOLDEN_DIR/video_tiny_weights.safetensors" ] && return 0
  reason "no golden data at $GOLDEN_DIR (run scripts/gpu/fetch-debs.sh here and carry .gpu-golden)"
  return 1
}

step_environment() {
  fig mode "$MODE" deps "$DEPS" build_dir "$BUILD" nproc "$(nproc)"
  fig os "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")" kernel "$(uname -r)"
  fig glibc "$(ldd --version 2>/dev/null | head -n1)"
  fig cxx "$(c++ --version 2>/dev/null | head -n1)" cmake "$(cmake --version | head -n1)"
  fig git_commit "$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
  fig git_dirty "$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -c . || true)"
  fig python "$(python3 --version 2>&1)"
  fig torch "$(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n1)"
  if command -v nvidia-smi >/dev/null; then
    fig gpu "$(nvidia-smi --query-gpu=name,driver_version,memory.total,uuid --format=csv,noheader 2>&1 | head -n4)"
  else
    fig gpu "none (no nvidia-smi)"
  fi
  if command -v nvcc >/dev/null; then fig nvcc "$(nvcc --version | tail -n2 | head -n1)"; fi
  return $PASSED
}

# The build step. On the GPU (MODE=gpu) it first tries the prebuilt
# programs of .gpu-bin (try_prebuilt); only when they are absent (or
# --no-prebuilt) or do not start does it configure and build here. It
# records which (figures.build_path prebuilt or built, and $WORK/build-path
# for check.sh's log line) and the seconds of each part.
step_build() {
  local t0 t_all status=$PASSED why=""
  t0=$(date +%s) t_all=$(date +%s)
  if [ "$DEPS" = debs ]; then
    if ! unpack_debs; then
      touch "$WORK/configure-failed"
      reason "unpacking .gpu-debs failed"
      return $FAILED
    fi
    # The carried protoc and pkgconf need their libraries while building,
    # and the prebuilt programs those the machine lacks.
    local libs
    libs=$(runtime_library_path)
    [ -n "$libs" ] && export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fig deps_s $(($(date +%s) - t0))
  fi
  if [ "$MODE" = gpu ]; then
    if [ "${USE_PREBUILT:-1}" = 0 ]; then
      why="--no-prebuilt"
    elif ! prebuilt_present; then
      why="no prebuilt programs in $BIN_DIR (scripts/gpu/pack-binaries.sh makes them)"
    else
      try_prebuilt
      case $? in
        0|2)
          echo prebuilt > "$WORK/build-path"
          fig build_path prebuilt build_s $(($(date +%s) - t_all))
          [ -f "$WORK/prebuilt-why" ] || return $PASSED
          reason "$(cat "$WORK/prebuilt-why")"
          return $FAILED ;;
        *) why=$(cat "$WORK/prebuilt-why") ;;
      esac
    fi
    echo "build: building here: $why"
    fig prebuilt_not_used "$why"
    forget_prebuilt
  fi
  echo built > "$WORK/build-path"
  t0=$(date +%s)
  if ! configure_build; then
    touch "$WORK/configure-failed"
    reason "cmake configure failed (see check.log)"
    return $FAILED
  fi
  fig configure_s $(($(date +%s) - t0))
  [ "${CONFIGURE_ONLY:-0}" = 1 ] && { reason "--configure-only: not built"; return $PASSED; }
  t0=$(date +%s)
  ninja -C "$BUILD" -t targets all 2>/dev/null | sed -n 's/^\([A-Za-z0-9_.-]*\): phony$/\1/p' \
    > "$WORK/targets.txt"
  fig targets "$(build_targets | tr '\n' ' ')"
  if ! build_all; then
    reason "some targets failed to build (see check.log); the steps that need them say so"
    status=$FAILED
  fi
  fig build_path built build_s $(($(date +%s) - t_all))
  return $status
}

# The prebuilt half of the build step (check_prebuilt.sh): unpacks .gpu-bin
# into $BUILD, finds this machine's torch and the libraries the programs
# need, checks that the daemon starts, then provides the Python client.
# Returns 0 when all of that worked; 2 when the programs are usable but
# the Python client could not be built (reason in $WORK/prebuilt-why); 1
# when the programs are not usable and must be built here (reason in
# $WORK/prebuilt-why).
try_prebuilt() {
  local t0 m="$BUILD/prebuilt/manifest" unresolved differing
  t0=$(date +%s)
  echo "build: $(prebuilt_summary)"
  if ! unpack_prebuilt; then
    echo "the prebuilt programs did not unpack (see check.log)" > "$WORK/prebuilt-why"
    return 1
  fi
  fig prebuilt_commit "$(manifest_value commit "$m")" \
      prebuilt_changed_files "$(manifest_value changed_files "$m")" \
      prebuilt_stale "$(manifest_value stale "$m")" prebuilt_torch "$(manifest_value torch "$m")"
  # Programs built from other sources than this checkout's are still used
  # (a build here would cost the minutes the steps need), with a warning.
  if differing=$(prebuilt_matches_checkout "$BUILD/prebuilt"); then
    fig prebuilt_matches_checkout true
  else
    fig prebuilt_matches_checkout false prebuilt_differences "$differing"
    echo "build: WARNING: $differing"
  fi
  if ! prebuilt_library_path; then
    echo "$(command -v python3) imports no torch: no LibTorch for the prebuilt programs" \
      > "$WORK/prebuilt-why"
    return 1
  fi
  fig libraries "$(tr '\n' ';' < "$BUILD/prebuilt/libraries")" \
      ld_library_path "$(cat "$BUILD/prebuilt/ld-library-path")"
  unresolved=$(prebuilt_unresolved)
  if [ -n "$unresolved" ]; then
    fig unresolved_libraries "$(sort -u <<<"$unresolved" | tr '\n' ';')"
    echo "build: libraries the loader does not find for the prebuilt programs:"
    echo "$unresolved"
  fi
  if ! prebuilt_starts > "$WORK/prebuilt-why"; then
    echo "build: the prebuilt daemon does not start: $(cat "$WORK/prebuilt-why")"
    echo "build: glibc here: $(ldd --version 2>/dev/null | head -n1); the prebuilt files ask for:"
    awk '$1 == "requires" {print "  " $2 ": " $3 " " $4}' "$m"
    sed -i 's/^/the prebuilt programs do not start: /' "$WORK/prebuilt-why"
    return 1
  fi
  rm -f "$WORK/prebuilt-why"
  fig prebuilt_s $(($(date +%s) - t0))
  awk '$1 == "file" && $2 != "-" {print $2}' "$m" > "$WORK/targets.txt"
  t0=$(date +%s)
  prebuilt_python_client
  fig python_client "$(cat "$BUILD/prebuilt/python-client")" python_client_s $(($(date +%s) - t0))
  if [ "$(cut -d' ' -f1 "$BUILD/prebuilt/python-client")" = none ] && [ "$PYTHON_CLIENT" = 1 ]; then
    echo "the Python client could not be built here (see check.log); the prebuilt programs are in use" \
      > "$WORK/prebuilt-why"
    return 2
  fi
  return 0
}

step_ctest_gpu() {
  local junit="$WORK/ctest-gpu.xml" rc
  need_configured || return
  ctest --test-dir "$BUILD" -N -L gpu > "$WORK/ctest-list.txt" 2>&1
  if ! grep -q 'Test *#' "$WORK/ctest-list.txt"; then
    if [ "$MODE" = cpu ]; then
      reason "CPU build: the tests labelled gpu exist in GPU builds only"
      return $SKIPPED
    fi
    reason "no test labelled gpu in this build"
    return $MISSING
  fi
  VAED_SHARED_DIR="$GOLDEN_ROOT" ctest --test-dir "$BUILD" -L gpu --output-on-failure \
    --output-junit "$junit" --timeout "$((STEP_TIMEOUT > 20 ? STEP_TIMEOUT - 10 : STEP_TIMEOUT - 3))"
  rc=$?
  "$REPORT_PY" - "$junit" "$FIGURES" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except (OSError, ET.ParseError) as e:
    figures = {"junit": f"unreadable: {e}"}
else:
    status = {}
    for c in cases:
        status[c.get("name")] = c.get("status") or ("failed" if c.find("failure") is not None else "run")
    figures = {"tests": len(status), "failed_tests": sorted(n for n, s in status.items() if s == "fail" or s == "failed"),
               "statuses": status}
json.dump(figures, open(sys.argv[2], "w"), indent=1)
EOF
  [ $rc -eq 0 ] && return $PASSED
  reason "ctest -L gpu failed (exit $rc)"
  return $FAILED
}

step_golden_h3() {
  local status config="$WORK/golden.toml"
  need_golden || return $SKIPPED
  need_program "$VAED" vaed || return
  need_program "$VAECTL" vaectl || return
  if [ "$MODE" = gpu ]; then daemon_has_cuda_ranks || return $MISSING; fi
  write_daemon_config "$config"
  start_daemon --config "$config" --model "$(golden_model_arg)" || { stop_daemon; return $FAILED; }
  PYTHONPATH="$BUILD/python" "$CLIENT_PY" "$HERE/golden_check.py" --vaectl "$VAECTL" \
    --socket "$DAEMON_SOCKET" --golden "$GOLDEN_DIR" --model h3 --figures "$FIGURES"
  status=$?
  stop_daemon
  [ $status -eq 0 ] && return $PASSED
  reason "golden cases outside their tolerance or not decoded (figures.failed)"
  return $FAILED
}

step_sticky_error() {
  local config="$WORK/sticky.toml" rc waited=0
  need_program "$VAED" vaed || return
  if [ "$PYTHON_CLIENT" = 0 ]; then
    reason "no Python client: ${PYTHON_CLIENT_WHY:-this build has none (no Python headers for this python3)}"
    return $MISSING
  fi
  if [ "$MODE" = gpu ]; then daemon_has_cuda_ranks || return $MISSING; fi
  write_daemon_config "$config" faults
  start_daemon --config "$config" || { stop_daemon; return $FAILED; }
  PYTHONPATH="$BUILD/python" "$CLIENT_PY" "$HERE/sticky_error.py" --socket "$DAEMON_SOCKET" \
    --figures "$FIGURES"
  rc=$?
  # The daemon must now exit by itself, non-zero (it stops ~1 s after the
  # error; 20 s is generous).
  while kill -0 "$DAEMON_PID" 2>/dev/null && [ $waited -lt 40 ]; do sleep 0.5; waited=$((waited + 1)); done
  if kill -0 "$DAEMON_PID" 2>/dev/null; then
    fig daemon_exit "still running after 20 s"
    reason "the daemon did not exit after the sticky error"
    stop_daemon
    return $FAILED
  fi
  wait "$DAEMON_PID"
  local exit_status=$?
  fig daemon_exit_status "$exit_status" daemon_exit_after_s "$(awk -v w=$waited 'BEGIN {print w / 2}')"
  DAEMON_PID=
  echo "--- daemon log ($STEP)"
  cat "$DAEMON_LOG"
  if [ $rc -ne 0 ]; then reason "the injected decode did not fail as expected"; return $FAILED; fi
  if [ "$exit_status" -eq 0 ]; then reason "the daemon exited 0 after a sticky error"; return $FAILED; fi
  return $PASSED
}

# A Python "DiT worker" with CUDA tensors can run here: the build has the
# Python client, and torch sees a CUDA device. Sets the reason and returns
# $MISSING or $SKIPPED otherwise.
need_torch_worker() {
  if [ "$PYTHON_CLIENT" = 0 ]; then
    reason "no Python client: ${PYTHON_CLIENT_WHY:-this build has none (no Python headers for this python3)}"
    return $MISSING
  fi
  if ! "$CLIENT_PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    reason "no CUDA device for torch here: the worker's tensors cannot be CUDA tensors"
    return $SKIPPED
  fi
  return 0
}

step_ipc_decode() {
  local rc
  need_torch_worker || return
  need_golden || return $SKIPPED
  need_program "$VAED" vaed || return
  daemon_has_cuda_ranks || return $MISSING
  write_daemon_config "$WORK/ipc.toml"
  start_daemon --config "$WORK/ipc.toml" --model "$(golden_model_arg)" || { stop_daemon; return $FAILED; }
  PYTHONPATH="$BUILD/python" "$CLIENT_PY" "$HERE/ipc_worker.py" --socket "$DAEMON_SOCKET" \
    --latent "$GOLDEN_DIR/video_case_grid_2x2.safetensors" --model h3 --figures "$FIGURES"
  rc=$?
  stop_daemon
  case $rc in
    0) return $PASSED ;;
    3) reason "the Python client has no CUDA path (see figures.reason)"; return $MISSING ;;
    4) reason "the worker found no CUDA device (see figures.reason)"; return $SKIPPED ;;
    *) reason "the IPC decode failed or differs from the host path (see figures.reason)"; return $FAILED ;;
  esac
}

# The daemon's device-side ordering rules with a real worker
# (ipc_worker.py --mode ordering): a host latent with a CUDA output waits
# for the work queued on the worker's stream before writing, and two
# registrations of one CUDA allocation share one mapping. A CPU build has
# no CUDA rank to check them on: missing there.
step_ipc_ordering() {
  local rc
  if [ "$MODE" = cpu ]; then
    reason "CPU build: no CUDA ranks (the ordering rules are those of a CUDA rank's stream)"
    return $MISSING
  fi
  need_torch_worker || return
  need_golden || return $SKIPPED
  need_program "$VAED" vaed || return
  daemon_has_cuda_ranks || return $MISSING
  write_daemon_config "$WORK/ordering.toml"
  start_daemon --config "$WORK/ordering.toml" --model "$(golden_model_arg)" || { stop_daemon; return $FAILED; }
  PYTHONPATH="$BUILD/python" "$CLIENT_PY" "$HERE/ipc_worker.py" --mode ordering \
    --socket "$DAEMON_SOCKET" --latent "$GOLDEN_DIR/video_case_grid_2x2.safetensors" --model h3 \
    --figures "$FIGURES"
  rc=$?
  stop_daemon
  case $rc in
    0) return $PASSED ;;
    3) reason "the Python client has no CUDA path: $(figure_reason)"; return $MISSING ;;
    4) reason "the worker found no CUDA device: $(figure_reason)"; return $SKIPPED ;;
    *) reason "$(figure_reason)"; return $FAILED ;;
  esac
}

# A worker SIGKILLed while the daemon decodes into its CUDA tensors (issue
# 19 §5: "client dies during a decode into a CUDA region"): client_death.py
# kills ipc_worker.py --mode long in the middle of a slow decode (the
# golden tiny model, 96 tile calls each 50 ms late by the slow_tiles fault)
# and checks with `vaectl status --json` that the dead client and its
# regions are gone and the daemon is healthy, then that a fresh worker
# decodes correctly. Here: that the daemon is still running afterwards and
# that its log has no CUDA error.
step_ipc_client_death() {
  local rc helper_rc helper_s config="$WORK/client-death.toml" errors
  if [ "$MODE" = cpu ]; then
    reason "CPU build: the dying worker's latent and output are CUDA tensors decoded on a CUDA rank; this step needs a GPU"
    return $SKIPPED
  fi
  need_torch_worker || return
  need_golden || return $SKIPPED
  need_program "$VAED" vaed || return
  need_program "$VAECTL" vaectl || return
  daemon_has_cuda_ranks || return $MISSING
  write_daemon_config "$config" faults
  start_daemon --config "$config" --model "$(golden_model_arg)" || { stop_daemon; return $FAILED; }
  # The helper's time: what is left of the step (SECONDS counts from the
  # step's start) less the daemon's stop (at most 15 s) and this function's
  # own checks.
  helper_s=$((STEP_TIMEOUT - SECONDS - 18))
  local started_s=$SECONDS
  if [ "$helper_s" -lt 15 ]; then
    reason "only $helper_s s left for the check after the daemon started (step timeout $STEP_TIMEOUT s)"
    stop_daemon
    return $FAILED
  fi
  PYTHONPATH="$BUILD/python" "$CLIENT_PY" "$HERE/client_death.py" --socket "$DAEMON_SOCKET" \
    --vaectl "$VAECTL" --latent "$GOLDEN_DIR/video_case_grid_2x2.safetensors" --model h3 \
    --timeout "$helper_s" --figures "$FIGURES"
  helper_rc=$?
  rc=$helper_rc
  fig daemon_started_after_s "$started_s" helper_timeout_s "$helper_s"  # after: the helper writes $FIGURES anew
  if kill -0 "$DAEMON_PID" 2>/dev/null; then
    fig daemon_running_after true
  else
    fig daemon_running_after false
    [ $rc -eq 0 ] && rc=1 && reason "the daemon exited during the check"
  fi
  stop_daemon
  # A CUDA error in the daemon's log: its own messages (cuda_status.cc,
  # torch_status.cc's sticky ones) and CUDA's.
  errors=$(grep -i -E "$CUDA_ERROR_PATTERN" "$DAEMON_LOG")
  fig daemon_log_cuda_errors "$(grep -c . <<<"$errors")"
  if [ -n "$errors" ]; then
    fig daemon_log_cuda_error_lines "$(head -n 5 <<<"$errors")"
    reason "the daemon's log has CUDA errors: $(head -n1 <<<"$errors" | cut -c1-200)"
    [ $rc -eq 0 ] && rc=1
  fi
  case $rc in
    0) return $PASSED ;;
    3) reason "the Python client has no CUDA path: $(figure_reason)"; return $MISSING ;;
    4) reason "the worker found no CUDA device: $(figure_reason)"; return $SKIPPED ;;
    *)
      if [ "$helper_rc" -ne 0 ]; then
        local why
        why=$(figure_reason)
        reason "${why:-client_death.py exited $helper_rc (see check.log)}"
      fi
      return $FAILED ;;
  esac
}

step_matmul_bf16() {
  if [ "$MODE" = cpu ]; then reason "CPU build: the reference is the GPU's bf16 matmul"; return $SKIPPED; fi
  python3 "$HERE/matmul_tflops.py" --figures "$FIGURES"
  case $? in
    0) return $PASSED ;;
    4) reason "torch sees no CUDA device"; return $SKIPPED ;;
    *) reason "the matmul reference failed (see figures.reason)"; return $FAILED ;;
  esac
}

# step_bench_h3 T H W DTYPE: the full-size H3 video decoder (36 blocks x
# 2048) on latent [1, 24, T, H, W] in compute dtype DTYPE (float16: the
# official fp16 recipe; bfloat16), sequential and stacked tiles, through
# vaed_bench_h3_video. Its weights are seeded random values generated on
# the host (Vit3dDecoder::CreateRandom: windows of one seeded pool, each
# tensor in the dtype it is stored in), then moved to the GPU once
# (PlaceWeights), as the weights of a model loaded from a file are; that
# takes part of the step's time, once per step. Needs the benchmark's
# --device option (GPU decode); without --dtypes only bfloat16 can be
# measured (--skip-fp32) and the float16 steps end missing. The benchmark
# runs under its own timeout a little shorter than the step's, so that a
# run cut short still leaves the modes it finished in the figures (from
# the "  float16 sequential: 6.10 s" lines it prints as it goes).
step_bench_h3() {
  local t=$1 h=$2 w=$3 dtype=$4 bin="$BUILD/ops/bench/vaed_bench_h3_video" help args rc out limit
  if [ "$MODE" = cpu ]; then
    reason "CPU build: the full-size decoder (36 x 2048) takes hours per decode on a CPU"
    return $SKIPPED
  fi
  need_program "$bin" vaed_bench_h3_video || return
  help=$("$bin" --help 2>&1)
  if ! grep -q -- '--device' <<<"$help"; then
    reason "vaed_bench_h3_video has no --device option: it decodes on the CPU only"
    return $MISSING
  fi
  args=(--device cuda --layers 36 --latent-frames "$t" --height-latent "$h" --width-latent "$w"
        --iterations 1 --json)
  if grep -q -- '--dtypes' <<<"$help"; then
    args+=(--dtypes "$dtype")
  elif [ "$dtype" = bfloat16 ]; then
    args+=(--skip-fp32)
  else
    reason "vaed_bench_h3_video has no --dtypes option: $dtype cannot be selected"
    return $MISSING
  fi
  out="$WORK/bench-$STEP.txt"
  limit=$((STEP_TIMEOUT - 8))
  [ "$limit" -lt 10 ] && limit=$((STEP_TIMEOUT - 2))
  echo "bench (timeout ${limit} s): $bin ${args[*]}"
  timeout -k 3 "$limit" "$bin" "${args[@]}" > "$out" 2>&1
  rc=$?
  cat "$out"
  fig latent_shape "[1, 24, $t, $h, $w]" dtype "$dtype" command "$(basename "$bin") ${args[*]}" \
    exit_status $rc
  # The JSON the benchmark prints last, with TFLOP/s and their ratio to the
  # bf16 matmul measured in this run; without it (cut short or failed), the
  # modes it finished, from its progress lines.
  "$REPORT_PY" - "$out" "$FIGURES" "$WORK/steps/matmul_bf16.figures.json" <<'EOF'
import json, re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
starts = [i for i, l in enumerate(lines) if l == "{"]
figures = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else {}
try:
    bench = json.loads("\n".join(lines[starts[-1]:])) if starts else None
except ValueError:
    bench = None
try:
    matmul = json.load(open(sys.argv[3])).get("bf16_matmul_tflops")
except (OSError, ValueError):
    matmul = None
if bench is None:
    figures["bench"] = "no JSON printed"
    finished = {}
    for line in lines:
        m = re.match(r"^  (float32|float16|bfloat16) (sequential|stacked): ([0-9.]+) s$", line)
        if m:
            finished[f"{m.group(1)} {m.group(2)}"] = float(m.group(3))
    if finished:
        figures["finished_modes_decode_s"] = finished
else:
    for mode in bench.get("modes", []):
        if "gflops" in mode:
            mode["tflops"] = mode["gflops"] / 1e3
            if matmul:
                mode["fraction_of_bf16_matmul"] = mode["tflops"] / matmul
        for key in ("peak_device_bytes", "peak_bytes"):
            if key in mode:
                mode["peak_gib"] = mode[key] / 2**30
    figures["bench"] = bench
    figures["bf16_matmul_tflops_same_run"] = matmul
json.dump(figures, open(sys.argv[2], "w"), indent=1)
EOF
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    reason "vaed_bench_h3_video did not finish within ${limit} s (figures.finished_modes_decode_s: the modes it finished)"
    return $FAILED
  fi
  if [ $rc -ne 0 ]; then
    reason "vaed_bench_h3_video exited $rc: $(grep -v '^ ' "$out" | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
    return $FAILED
  fi
  return $PASSED
}
