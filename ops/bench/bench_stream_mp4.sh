#!/usr/bin/env bash
# Decode-to-MP4 wall time with and without streamed output:
# `vaectl decode --format mp4` (frames fed to one ffmpeg as the daemon
# announces them final) against `vaectl decode --format mp4 --no-stream`
# (the whole decode, then the encode). A benchmark, not a test.
#
# Starts its own `vaed` (built tree, private socket in a temp dir) with
#   h3v    the golden tiny MiniMax-H3 video decoder (../shared/golden/h3),
#          decoding a seeded random latent of --h3-shape (default
#          1,24,49,32,32: 49 latent frames, several temporal windows);
#   taef2  the real TAEF2 decoder (../shared/data/taef2), decoding the
#          bikes clip (16 frames of 640x272) at 25 fps;
# a case whose files are absent is skipped with a message. Each case gets
# one untimed run of each mode (cold shape buckets, page cache), then
# --runs rounds; a round runs both modes, the order alternating every round
# (streamed first, then --no-stream first, ...) so drifts of the machine hit
# both alike. Timed: the whole vaectl process (bash's $EPOCHREALTIME around
# it; the bikes case skips vaectl's PSNR comparisons);
# also read from its --json report: round_trip_seconds (the decode) and
# mp4_tail_seconds (reply to complete MP4).
#
# Prints per case and mode the mean wall seconds, decode round trip and
# MP4 tail, and the ratio of the mean walls (streamed / not streamed) of
# this run.
#
#   ops/bench/bench_stream_mp4.sh --runs 5
#   ops/bench/bench_stream_mp4.sh --runs 3 --h3-shape 1,24,33,16,16 --threads 1
#
# Options: --runs N (default 5), --build DIR (default build), --threads N
# (the daemon's --intra-op-threads, default 2), --h3-shape S, --keep (keep
# the temp dir: the daemon log and the MP4s).
# Exit status: 0 measured; 1 bad usage or a decode failed; 2 the daemon
# could not be started.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

runs=5
build=build
threads=2
h3_shape=1,24,49,32,32
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --h3-shape) h3_shape=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_stream_mp4.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done
case "$runs" in ''|*[!0-9]*|0) echo "--runs must be a positive integer" >&2; exit 1 ;; esac

vaed="$root/$build/daemon/vaed"
vaectl="$root/$build/ops/vaectl/vaectl"
golden="$root/../shared/golden/h3"
taef="$root/../shared/data/taef2"
for bin in "$vaed" "$vaectl"; do
  [ -x "$bin" ] || { echo "$bin is not built (cmake --build --preset default --target vaed vaectl)" >&2; exit 1; }
done
command -v ffmpeg >/dev/null || { echo "ffmpeg is not installed" >&2; exit 1; }

work=$(mktemp -d /tmp/vaed-bench-stream-XXXXXX)
socket="$work/vaed.sock"
daemon_args=(--socket "$socket" --intra-op-threads "$threads")
cases=()
if [ -f "$golden/video_tiny_weights.safetensors" ] && [ -f "$golden/video_tiny_config.json" ]; then
  daemon_args+=(--model "h3v=h3_video:$golden/video_tiny_weights.safetensors:$golden/video_tiny_config.json")
  cases+=(h3)
else
  echo "== skipping the H3 case: $golden (tiny video decoder) is absent"
fi
if [ -f "$taef/taef2_decoder.safetensors" ] && [ -f "$taef/video_bikes.safetensors" ]; then
  daemon_args+=(--taef2-weights "$taef/taef2_decoder.safetensors")
  cases+=(bikes)
else
  echo "== skipping the bikes case: $taef (TAEF2 decoder, bikes clip) is absent"
fi
[ ${#cases[@]} -gt 0 ] || { echo "no case has its files; nothing to measure" >&2; exit 1; }

"$vaed" "${daemon_args[@]}" >"$work/vaed.log" 2>&1 &
vaed_pid=$!
cleanup() {
  if kill -0 "$vaed_pid" 2>/dev/null; then
    kill -TERM "$vaed_pid"
    wait "$vaed_pid" || true
  fi
  if [ "$keep" = 1 ]; then echo "== kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
for _ in $(seq 1 600); do
  [ -S "$socket" ] && break
  kill -0 "$vaed_pid" 2>/dev/null || { cat "$work/vaed.log" >&2; exit 2; }
  sleep 0.1
done
[ -S "$socket" ] || { echo "vaed did not create $socket" >&2; cat "$work/vaed.log" >&2; exit 2; }

# Sets `args` to the vaectl decode arguments of case $1.
case_args() {
  case "$1" in
    h3) args=(--random-latent "$h3_shape" --seed 1 --model h3v --fps 24) ;;
    bikes) args=("$taef/video_bikes.safetensors" --model taef2 --fps 25 --reference-key ""
                 --original-key none) ;;
  esac
}

# Runs one decode of case $1 in mode $2 (stream | no-stream); appends
# "wall round_trip tail" to $work/$1.$2.
run_once() {
  local name=$1 mode=$2
  local out="$work/$name.$mode.mp4" json="$work/$name.$mode.json"
  local t0 t1 args
  case_args "$name"
  [ "$mode" = no-stream ] && args+=(--no-stream)
  t0=$EPOCHREALTIME
  if ! "$vaectl" --socket "$socket" decode "${args[@]}" --format mp4 --progress none \
      --out "$out" --json >"$json" 2>"$work/$name.$mode.err"; then
    echo "vaectl decode failed ($name, $mode):" >&2
    cat "$work/$name.$mode.err" >&2
    exit 1
  fi
  t1=$EPOCHREALTIME
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }') \
$(jq -r '"\(.round_trip_seconds) \(.mp4_tail_seconds)"' "$json")" >>"$work/$name.$mode"
}

# "mean_wall mean_round_trip mean_tail" of a results file.
means() {
  awk '{ w += $1; r += $2; t += $3; n++ } END { printf "%.3f %.3f %.3f", w / n, r / n, t / n }' "$1"
}

echo "== vaed $("$vaed" --version 2>/dev/null | head -n 1 || echo '?'), $(nproc) cores, intra-op threads $threads, $runs rounds per case"
for name in "${cases[@]}"; do
  case_args "$name"
  echo "== $name: vaectl decode ${args[*]} --format mp4 [--no-stream]"
  run_once "$name" stream      # untimed: cold shape bucket, page cache
  run_once "$name" no-stream
  frames=$(jq -r '"\(.frames) frames of \(.width_px)x\(.height_px) px" +
    (if .tiling then ", \(.tiling.windows) temporal windows" else "" end)' "$work/$name.stream.json")
  rm -f "$work/$name.stream" "$work/$name.no-stream"
  for i in $(seq 1 "$runs"); do
    if [ $((i % 2)) = 1 ]; then
      run_once "$name" stream; run_once "$name" no-stream
    else
      run_once "$name" no-stream; run_once "$name" stream
    fi
  done
  read -r sw sr st <<<"$(means "$work/$name.stream")"
  read -r nw nr nt <<<"$(means "$work/$name.no-stream")"
  echo "   $frames"
  printf '   %-12s %10s %12s %10s\n' mode "wall s" "decode s" "mp4 tail s"
  printf '   %-12s %10s %12s %10s\n' streamed "$sw" "$sr" "$st"
  printf '   %-12s %10s %12s %10s\n' no-stream "$nw" "$nr" "$nt"
  awk -v s="$sw" -v n="$nw" 'BEGIN { printf "   ratio streamed / no-stream (mean wall): %.3f (%+.3f s)\n", s / n, s - n }'
done
