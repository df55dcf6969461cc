#!/bin/bash
# regression.TheFirstDecodeOfAProcessGivesTheBytesOfEveryLaterOne
#
# The bug: MKL's VML sets itself up on its first call in a process; when two
# intra-op threads made that first call at once, one thread's elements came
# out of another code path, so the first decode of a process (H3's RoPE
# tables, TAEF2's tanh) differed in its last bits from every later decode of
# the same latent, at random (about 2 % of processes on a loaded 2-core
# machine: the final-frames, golden-grid and frame-batch tests failed now
# and then). The fix: vaed's main() (and every test's) makes VML's first
# call alone on one thread (daemon/models/mkl_reproducibility.h).
#
# The race needs concurrent load: PARALLEL loops of RUNS fresh probe
# processes each run side by side, first as before the fix (no set-up; the
# count is printed to show whether the race shows on this machine), then
# with the set-up, where any differing process fails the test. The race is
# rare (about 1 probe process in 300 here, a few in 100 for a whole test
# binary), so one run of this test catches it only sometimes: it guards
# against the set-up being dropped, over many CI runs.
# Usage: vml_first_call_test.sh PROBE [RUNS] [PARALLEL]
set -u
probe=$1
runs=${2:-50}
parallel=${3:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One loop: runs the probe `runs` times with the given arguments and writes
# the number that differed to $out/<loop>; "error" if a probe failed.
loop() {
  local n=$1 differed=0 i status
  shift
  for ((i = 0; i < runs; i++)); do
    "$probe" "$@" > "$out/log.$n" 2>&1
    status=$?
    if [ "$status" = 3 ]; then
      differed=$((differed + 1))
    elif [ "$status" != 0 ]; then
      echo error > "$out/$n"
      return
    fi
  done
  echo "$differed" > "$out/$n"
}

# Prints the total that differed over all loops; exits 1 on a probe error.
run_loops() {
  local j total=0
  for ((j = 0; j < parallel; j++)); do loop "$j" "$@" & done
  wait
  for ((j = 0; j < parallel; j++)); do
    if [ "$(cat "$out/$j")" = error ]; then
      echo "probe $* failed:" >&2
      cat "$out/log.$j" >&2
      return 1
    fi
    total=$((total + $(cat "$out/$j")))
  done
  echo "$total"
}

total=$((runs * parallel))
without=$(run_loops) || exit 1
echo "[ vml ] without the set-up: $without of $total processes' first cos differed from their second"
with=$(run_loops --set-up) || exit 1
echo "[ vml ] with the set-up:    $with of $total processes' first cos differed from their second"
if [ "$with" != 0 ]; then
  echo "FAIL: the first VML call of a set-up process still differs from later ones" >&2
  exit 1
fi
