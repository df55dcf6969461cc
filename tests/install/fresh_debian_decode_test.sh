#!/usr/bin/env bash
# The four Debian packages install on a fresh Debian 12 with nothing else
# installed, and the installed vaed serves a decode. The vaed package
# carries its LibTorch 2.11 runtime (cmake/libtorch_runtime.cmake); this
# proves that it needs nothing of the build machine: no torch venv under
# /opt/vaed, no CUDA toolkit, no GPU, no Debian libtorch.
#   1. A minimal Debian 12 root (debootstrap --variant=minbase bookworm),
#      unpacked from a cached tarball: /var/cache/vaed/fresh-debian/.
#   2. cpack -G DEB into a scratch directory (sizes and Installed-Size
#      printed).
#   3. In a private mount and PID namespace (every mount, and every process
#      started, goes with it): chroot into the root, apt-get install
#      --no-install-recommends the four .debs, which pulls their Depends from
#      Debian (downloaded .debs kept in the cache beside the base); no
#      libtorch, OpenBLAS or CUDA package comes with them; ldd of the
#      installed /usr/sbin/vaed resolves everything in the root, its
#      LibTorch from /usr/lib/vaed.
#   4. The installed /usr/sbin/vaed (not through systemd) on a private
#      socket with the tiny golden H3 decoders (../shared/golden/h3, bind-
#      mounted read-only), the installed vaectl decodes the one-tile video
#      case with its audio, and the output is compared with the official
#      decode within the golden tolerance (tests/common/golden_tolerance.h);
#      without ../shared, a seeded random latent on the built-in demo model.
#      vaed stops cleanly on SIGTERM.
# The first run downloads the base system and the Depends (18 MB) from
# deb.debian.org; later runs use the cache and need no network, unless
# Debian has since replaced a package in the cached lists (then the lists
# are refreshed for the run). Prints the time of each step.
#
# Usage: fresh_debian_decode_test.sh BUILD_DIR SHARED_DIR
# Exit 77 (skipped): not root, a tool is missing (unshare, chroot; or
# debootstrap, which the test installs with apt-get when it can), or no
# network to build a cache that is not there yet.
set -euo pipefail
build=${1:?usage: fresh_debian_decode_test.sh BUILD_DIR SHARED_DIR}
shared=${2:?usage: fresh_debian_decode_test.sh BUILD_DIR SHARED_DIR}
build=$(cd "$build" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (debootstrap, chroot, mounts)"
for tool in cpack dpkg-deb unshare chroot mount python3; do
  command -v "$tool" > /dev/null || skip "$tool is not installed"
done
[[ -f $build/CPackConfig.cmake ]] || fail "$build/CPackConfig.cmake is missing (configure the full tree)"

start=$(date +%s.%N)
step_start=$start
# step NAME: prints the seconds since the previous step.
step() {
  local now
  now=$(date +%s.%N)
  awk -v what="$1" -v s="$(awk -v a="$now" -v b="$step_start" 'BEGIN { print a - b }')" \
    'BEGIN { printf "time: %-34s %6.1f s\n", what, s }'
  step_start=$now
}

suite=bookworm
mirror=http://deb.debian.org/debian
arch=$(dpkg --print-architecture)
cache=/var/cache/vaed/fresh-debian
base=$cache/$suite-minbase-$arch.tar
archives=$cache/apt-archives-$suite-$arch
mkdir -p "$cache" "$archives/partial"
mirror_reachable() {
  local host=${mirror#http://}
  timeout 20 bash -c "exec 3<> /dev/tcp/${host%%/*}/80" 2> /dev/null
}

scratch=$(mktemp -d /tmp/vaed-fresh-debian-XXXXXX)
root=$scratch/root
cleanup() {
  # The mounts under the root live and die with the namespace; a root with
  # anything still mounted (../shared among them) is never deleted.
  if grep -qF " $scratch/" /proc/self/mountinfo; then
    echo "not removing $scratch: something is still mounted under it" >&2
  else
    rm -rf "$scratch"
  fi
}
trap cleanup EXIT

# --- 1. the fresh Debian 12 root --------------------------------------------
# Made once: debootstrap, then the package lists (apt-get update), so that a
# later run installs from the cache without the network.
(
  flock 9
  [[ -f $base ]] && exit 0
  mirror_reachable || skip "no cached base $base and $mirror is not reachable"
  if ! command -v debootstrap > /dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap \
      > "$scratch/apt-debootstrap.log" 2>&1 ||
      { cat "$scratch/apt-debootstrap.log" >&2; skip "debootstrap is not installed and apt-get could not install it"; }
  fi
  fresh=$scratch/base
  debootstrap --variant=minbase "$suite" "$fresh" "$mirror" > "$scratch/debootstrap.log" 2>&1 ||
    { tail -30 "$scratch/debootstrap.log" >&2; fail "debootstrap --variant=minbase $suite failed"; }
  cp /etc/resolv.conf "$fresh/etc/resolv.conf"
  chroot "$fresh" apt-get update -q > "$scratch/apt-update.log" 2>&1 ||
    { cat "$scratch/apt-update.log" >&2; fail "apt-get update in the new root failed"; }
  chroot "$fresh" apt-get clean  # its .debs are installed; the Depends go to $archives
  rm -f "$fresh/etc/resolv.conf"
  tar -C "$fresh" --numeric-owner -cf "$base.new" .
  mv "$base.new" "$base"
  rm -rf "$fresh"
  echo "base: made $base ($(du -h "$base" | cut -f1))"
) 9> "$cache/lock"
mkdir "$root"
tar -C "$root" --numeric-owner -xf "$base"
step "fresh Debian 12 root"

# --- 2. the packages -------------------------------------------------------
if ! (cd "$build" && cpack -G DEB -B "$scratch/out") > "$scratch/cpack.log" 2>&1; then
  cat "$scratch/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
debs=()
for package in vaed vaectl libvaed-client0 libvaed-client-dev; do
  deb=$scratch/out/${package}_${version}_$arch.deb
  [[ -f $deb ]] || { ls "$scratch/out" >&2; fail "cpack made no $(basename "$deb")"; }
  debs+=("$deb")
  printf 'package: %-38s %11s bytes, Installed-Size %8s KiB\n' "$(basename "$deb")" \
         "$(stat -c %s "$deb")" "$(dpkg-deb -f "$deb" Installed-Size)"
done
mkdir "$scratch/debs"
mv "${debs[@]}" "$scratch/debs/"
rm -rf "$scratch/out"
step "cpack -G DEB"

# --- 3 and 4, in the namespace ---------------------------------------------
golden=$shared/golden/h3
[[ -f $golden/video_tiny_weights.safetensors ]] ||
  echo "note: $golden is absent: decoding a random latent on the demo model instead"
export -f fail step  # to the script in the namespace
set +e
checker=$(cd "$(dirname "$0")" && pwd)/golden_report_check.py
flock "$cache/lock" unshare --mount --propagation private --pid --fork -- \
  bash -s "$root" "$scratch/debs" "$archives" "$shared" "$checker" << 'INSIDE'
set -euo pipefail
root=$1
debs=$2
archives=$3
shared=$4
checker=$5
step_start=$(date +%s.%N)
# A command in the root, with a clean environment. (The daemon runs as
# "${in_root[@]}" ... &, so that $! is its pid: chroot and env exec it.)
in_root=(chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
in_root() { "${in_root[@]}" "$@"; }

mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
mount -t tmpfs -o mode=0755 vaed-dev "$root/dev"
cp -a /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty "$root/dev/"
mkdir "$root/dev/shm" "$root/dev/pts"
mount -t tmpfs -o mode=1777 vaed-shm "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
mount -t tmpfs -o mode=0755 vaed-run "$root/run"
mount -t tmpfs -o mode=1777 vaed-tmp "$root/tmp"
mkdir -p "$root/mnt/debs" "$root/mnt/shared"
mount --bind -o ro "$debs" "$root/mnt/debs"
if [[ -d $shared ]]; then mount --bind -o ro "$shared" "$root/mnt/shared"; fi
mount --bind "$archives" "$root/var/cache/apt/archives"
cp /etc/resolv.conf "$root/etc/resolv.conf"

# --- 3. install: Depends from Debian ---------------------------------------
in_root_debs=()
for deb in "$debs"/*.deb; do in_root_debs+=("/mnt/debs/$(basename "$deb")"); done
install_debs() {
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${in_root_debs[@]}" > "$root/tmp/apt-install.log" 2>&1
}
if ! install_debs; then
  # The cached lists may name versions Debian has since replaced. Refreshed
  # here for this run only: the cached base keeps its lists.
  echo "apt-get install failed; refreshing the package lists and trying again" \
       "(if this happens on every run: rm -r /var/cache/vaed/fresh-debian, for a new base)"
  tail -5 "$root/tmp/apt-install.log"
  in_root apt-get update -q > "$root/tmp/apt-update.log" 2>&1 ||
    { cat "$root/tmp/apt-update.log" >&2; fail "apt-get update in the root failed"; }
  install_debs || { cat "$root/tmp/apt-install.log" >&2; fail "apt-get install of the four .debs failed"; }
fi
grep -E '^(Need to get|After this operation)' "$root/tmp/apt-install.log" || true
for package in vaed vaectl libvaed-client0 libvaed-client-dev; do
  in_root dpkg-query -W -f '${Status}\n' "$package" | grep -qx 'install ok installed' ||
    fail "$package is not installed in the root"
done
unwanted=$(in_root dpkg-query -W -f '${Package}\n' | grep -E '^(libtorch|libopenblas|libblas|nvidia-|libcuda|libcudart|python3-torch)' || true)
[[ -z $unwanted ]] || fail "installing the packages pulled in: $unwanted"
echo "installed: $(in_root dpkg-query -W -f '${Package}\n' | wc -l) packages in the root; /usr/lib/vaed holds" \
     "$(in_root du -sh /usr/lib/vaed | cut -f1)"
step "apt-get install ./*.deb"

libs=$(in_root ldd /usr/sbin/vaed)
echo "$libs" | grep -E 'torch|c10|gomp|cudart|cupti'
! grep -q 'not found' <<< "$libs" || fail "the installed vaed lacks libraries: $(grep 'not found' <<< "$libs")"
for lib in libtorch_cpu.so libc10.so libgomp.so.1 libcudart.so.13 libcupti.so.13; do
  grep -qE "^\s*$lib => /usr/(sbin/\.\./)?lib/(x86_64-linux-gnu/)?vaed/$lib " <<< "$libs" ||
    fail "the installed vaed does not load $lib from its private folder: $(grep "$lib" <<< "$libs" || echo absent)"
done

# --- 4. serve a decode -----------------------------------------------------
mkdir -p -m 0750 "$root/tmp/vaed"
mkdir -p "$root/tmp/out"
golden=/mnt/shared/golden/h3
args=(--socket /tmp/vaed/vaed.sock --intra-op-threads 2 --no-metrics)
if [[ -f $root$golden/video_tiny_weights.safetensors ]]; then
  args+=(--model "h3=h3:$golden/video_tiny_weights.safetensors:$golden/video_tiny_config.json:$golden/audio_tiny_weights.safetensors:$golden/audio_tiny_config.json")
  decode=("$golden/video_case_one_tile.safetensors" --audio-latent "$golden/audio_case_odd_length.safetensors"
          --model h3 --reference-key frames_u8 --audio-out /tmp/out/)
else
  decode=(--random-latent 1,32,16,16 --model demo --reference-key '')
fi
"${in_root[@]}" /usr/sbin/vaed "${args[@]}" > "$root/tmp/vaed.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  [[ -S $root/tmp/vaed/vaed.sock ]] && break
  kill -0 "$pid" 2> /dev/null || { cat "$root/tmp/vaed.log" >&2; fail "the installed vaed exited before creating its socket"; }
  sleep 0.05
done
[[ -S $root/tmp/vaed/vaed.sock ]] || { cat "$root/tmp/vaed.log" >&2; fail "the installed vaed did not create its socket within 60 s"; }
step "vaed started (models loaded)"
in_root /usr/bin/vaectl --socket /tmp/vaed/vaed.sock decode "${decode[@]}" --format none --json \
  > "$root/tmp/report.json" || { cat "$root/tmp/report.json" "$root/tmp/vaed.log" >&2; fail "the decode failed"; }
step "vaectl decode"
python3 "$checker" "$root/tmp/report.json" ||
  fail "the decode is outside the golden tolerance"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc -eq 0 ]] || { cat "$root/tmp/vaed.log" >&2; fail "the installed vaed exited $rc on SIGTERM"; }
step "vaed stopped"
INSIDE
rc=$?
set -e
[[ $rc -eq 0 ]] || exit "$rc"
step_start=$start
step total
echo "PASS: the four packages install on a fresh Debian 12 and the installed vaed decodes"
