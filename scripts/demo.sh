#!/usr/bin/env bash
# The main job, end to end on a fresh Debian 12 machine (as root):
#   1. installs the Debian packages and LibTorch 2.11 (scripts/install-deps.sh)
#      and builds what it runs, vaed and vaectl (CPU preset);
#   2. starts `vaed` with its embedded default config (plus the real TAEF2
#      weights from ../shared/data/taef2 when they are there);
#   3. decodes a latent through the client library with `vaectl decode`:
#      the real bikes clip (16 frames, 640x272) when ../shared is present,
#      otherwise a seeded random latent on the built-in demo model;
#   4. writes the result (an MP4 and one PNG per frame) under out/demo/ and
#      prints the timing breakdown; with ../shared/golden/h3 present it also
#      serves the tiny MiniMax-H3 video + audio decoders (model kind h3) and
#      decodes a golden video case (4 tiles, stacked) together with a golden
#      audio latent of the matching length (22 frames -> 37 audio latent
#      frames) into out/demo/h3_grid_2x2.mp4 (AAC audio) and .wav,
#      comparing both with the official decode;
#   5. stops the daemon with SIGTERM and checks it exited cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
# The compiler cache of every script (test, GPU build, sanitizer, fuzz):
# what the demo compiles, scripts/test.sh then finds in the cache.
source scripts/ccache-env.sh
root=$(pwd)
shared="$root/../shared/data/taef2"
golden="$root/../shared/golden/h3"

scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" --target vaed vaectl

run_dir=$(mktemp -d /tmp/vaed-demo-XXXXXX)
socket="$run_dir/vaed.sock"
out="$root/out/demo"
mkdir -p "$out"
daemon_args=(--socket "$socket")
if [ -f "$shared/taef2_decoder.safetensors" ]; then
  daemon_args+=(--taef2-weights "$shared/taef2_decoder.safetensors")
fi
if [ -f "$golden/video_tiny_weights.safetensors" ]; then
  daemon_args+=(--model "h3=h3:$golden/video_tiny_weights.safetensors:$golden/video_tiny_config.json:$golden/audio_tiny_weights.safetensors:$golden/audio_tiny_config.json")
fi

echo "== starting vaed (embedded default config) on $socket"
build/daemon/vaed "${daemon_args[@]}" >"$run_dir/vaed.log" 2>&1 &
vaed_pid=$!
stop_daemon() {
  if kill -0 "$vaed_pid" 2>/dev/null; then
    kill -TERM "$vaed_pid"
    wait "$vaed_pid" && echo "== vaed stopped cleanly (exit 0)" || echo "== vaed exited with $?"
  fi
}
trap stop_daemon EXIT
for _ in $(seq 1 300); do
  [ -S "$socket" ] && break
  kill -0 "$vaed_pid" 2>/dev/null || { cat "$run_dir/vaed.log"; exit 1; }
  sleep 0.1
done
build/ops/vaectl/vaectl --socket "$socket" status

if [ -f "$shared/video_bikes.safetensors" ]; then
  echo "== decoding the real bikes clip (TAEF2, 16 frames of 640x272)"
  build/ops/vaectl/vaectl --socket "$socket" decode "$shared/video_bikes.safetensors" \
    --model taef2 --format mp4 --fps 25 --out "$out/bikes.mp4"
  build/ops/vaectl/vaectl --socket "$socket" decode "$shared/video_bikes.safetensors" \
    --model taef2 --format png --out "$out/bikes_png"
else
  echo "== ../shared/data/taef2 is absent: decoding a seeded random latent on the DEMO model"
  build/ops/vaectl/vaectl --socket "$socket" decode --random-latent 4,32,34,80 \
    --model demo --format mp4 --out "$out/demo.mp4"
fi
if [ -f "$golden/video_case_grid_2x2.safetensors" ]; then
  echo "== decoding H3 video + audio golden cases in one request (tiny seeded H3 decoders, 2x2 tiles, stacked)"
  build/ops/vaectl/vaectl --socket "$socket" decode "$golden/video_case_grid_2x2.safetensors" \
    --audio-latent "$golden/audio_case_odd_length.safetensors" \
    --model h3 --format mp4 --stack-tiling on --reference-key frames_u8 \
    --out "$out/h3_grid_2x2.mp4"
fi
echo "== daemon log (last lines)"
tail -n 5 "$run_dir/vaed.log"
stop_daemon
trap - EXIT
rm -rf "$run_dir"
echo "== outputs in $out"
ls -la "$out"
