#!/usr/bin/env bash
# Runs the C ABI test program (c_abi_test.c) against a real
# daemon started here on a private socket: with the H3 tiny golden decoders
# (model "hv": video + audio) when ../shared/golden/h3 is present, else with
# the demo model only (the program then runs the video checks and exits 77:
# skipped, saying why). Quarantine is off: the test sends bad requests on
# purpose.
# Usage: c_abi_test.sh <vaed binary> <c_abi_test binary> <shared dir>
set -euo pipefail
vaed=$1
program=$2
shared=$3

dir=$(mktemp -d /tmp/vaed-c-abi-XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

printf '[quarantine]\nfault_threshold = 0\n' > "$dir/vaed.toml"
args=(--socket "$dir/vaed.sock" --config "$dir/vaed.toml" --intra-op-threads 2)
golden=$shared/golden/h3
mode=demo
if [ -f "$golden/video_tiny_weights.safetensors" ] && [ -f "$golden/audio_tiny_weights.safetensors" ]; then
  mode=h3
  args+=(--model "hv=h3:$golden/video_tiny_weights.safetensors:$golden/video_tiny_config.json:$golden/audio_tiny_weights.safetensors:$golden/audio_tiny_config.json")
else
  echo "note: $golden is absent: the audio and A/V checks will be skipped"
fi

"$vaed" "${args[@]}" > "$dir/vaed.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  [ -S "$dir/vaed.sock" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: vaed exited before creating its socket; its log:" >&2
    cat "$dir/vaed.log" >&2
    exit 1
  fi
  sleep 0.05
done
if [ ! -S "$dir/vaed.sock" ]; then
  echo "FAIL: vaed did not create $dir/vaed.sock within 60 s; its log:" >&2
  cat "$dir/vaed.log" >&2
  exit 1
fi

set +e
"$program" "$dir/vaed.sock" "$mode"
rc=$?
set -e

kill -TERM "$pid"
daemon_rc=0
wait "$pid" || daemon_rc=$?
pid=
if [ "$daemon_rc" -ne 0 ]; then
  echo "FAIL: vaed exited with $daemon_rc after SIGTERM; its log:" >&2
  cat "$dir/vaed.log" >&2
  exit 1
fi
if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
  echo "--- vaed log ---" >&2
  tail -n 50 "$dir/vaed.log" >&2
fi
exit "$rc"
