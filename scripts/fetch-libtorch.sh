#!/usr/bin/env bash
# Fetches and installs vaed's one torch: the wheels scripts/libtorch-wheels.txt
# pins (PyPI's torch 2.11.0, the CUDA 13.0 build, and the CUDA libraries it
# needs that /usr/local/cuda lacks), each checked against its SHA-256, into
# one Python environment. Its site-packages is the LibTorch of every vaed
# build (torch/include, torch/lib, torch/share/cmake; nvidia/*/lib beside
# torch/, where the libraries' RPATHs $ORIGIN/../../nvidia/<lib>/lib look)
# and its python3 is the torch of the Python tests: one copy of the files.
#
#   cache   $VAED_WHEEL_CACHE (default /var/cache/vaed/wheels): the wheels
#           as downloaded; one already there with the right SHA-256 is not
#           downloaded again.
#   venv    $VAED_TORCH_VENV (default /opt/vaed/torch-2.11.0): a venv of
#           Debian's /usr/bin/python3 (3.11) that also sees Debian's
#           packages (numpy, pytest, and torch's own Python dependencies,
#           scripts/install-deps.sh installs them), with the pinned wheels
#           installed --no-deps. The LibTorch prefix (CMake's
#           VAED_LIBTORCH_PREFIX, cmake/libtorch.cmake) is its
#           lib/python3.11/site-packages.
#
# The wheel's bundled fmt and protobuf headers stay where they are: the
# build compiles against a view of LibTorch's include folder without them
# (cmake/libtorch.cmake says why and checks it).
#
# Idempotent: a venv whose stamp names the same pins is left as it is; a
# second run downloads and installs nothing. Needs pip to download (any;
# the wheels are chosen by platform and Python version below, not by the
# pip that runs) and Debian's python3-venv.
#
# Usage: scripts/fetch-libtorch.sh [--print-prefix]
#   --print-prefix  print the LibTorch prefix (the venv's site-packages) and exit
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pins="$here/libtorch-wheels.txt"
cache="${VAED_WHEEL_CACHE:-/var/cache/vaed/wheels}"
venv="${VAED_TORCH_VENV:-/opt/vaed/torch-2.11.0}"
prefix="$venv/lib/python3.11/site-packages"
usage="usage: scripts/fetch-libtorch.sh [--print-prefix | --help]"
case "$#:${1:-}" in
  0:) ;;
  1:--print-prefix) echo "$prefix"; exit 0 ;;
  1:-h | 1:--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac

pip_cmd() {
  if command -v pip3 >/dev/null; then pip3 "$@"; elif command -v pip >/dev/null; then pip "$@"
  else python3 -m pip "$@"; fi
}

# name==version from a wheel's file name (PEP 427: name-version-...).
requirement() {
  local file=$1 name version
  name=${file%%-*}
  version=${file#*-}
  version=${version%%-*}
  echo "${name//_/-}==$version"
}

fetch() {  # fetch <file> <sha256>
  local file=$1 sum=$2 have
  if [ -f "$cache/$file" ]; then
    have=$(sha256sum "$cache/$file" | cut -d' ' -f1)
    [ "$have" = "$sum" ] && return 0
    echo "fetch-libtorch: $file in the cache has SHA-256 $have, not $sum: fetching it again" >&2
    rm -f "$cache/$file"
  fi
  echo "fetch-libtorch: downloading $(requirement "$file") ($file)"
  # The wheel for this file name exactly: CPython 3.11 tags, manylinux x86-64.
  if ! pip_cmd download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_25_x86_64 --platform manylinux_2_17_x86_64 \
      -d "$cache/.partial" "$(requirement "$file")"; then
    echo "fetch-libtorch: could not download $file: this needs PyPI (pypi.org) or the wheel" \
         "already in $cache" >&2
    exit 1
  fi
  if [ ! -f "$cache/.partial/$file" ]; then
    echo "fetch-libtorch: pip did not fetch $file (got: $(ls "$cache/.partial"))" >&2
    exit 1
  fi
  have=$(sha256sum "$cache/.partial/$file" | cut -d' ' -f1)
  if [ "$have" != "$sum" ]; then
    echo "fetch-libtorch: $file has SHA-256 $have, scripts/libtorch-wheels.txt pins $sum; refusing it" >&2
    rm -f "$cache/.partial/$file"
    exit 1
  fi
  mv "$cache/.partial/$file" "$cache/$file"
}

# The venv is complete when its stamp names these pins and what the builds
# and the tests load is there.
venv_complete() {
  [ -f "$venv/.vaed-pins" ] && [ "$(cat "$venv/.vaed-pins")" = "$stamp" ] &&
    [ -f "$prefix/torch/share/cmake/Torch/TorchConfig.cmake" ] &&
    [ -f "$prefix/torch/lib/libtorch_cpu.so" ] && [ -f "$prefix/torch/lib/libc10.so" ] &&
    [ -f "$prefix/nvidia/cu13/lib/libcudart.so.13" ]
}

mkdir -p "$cache" "$(dirname "$venv")"
# One run at a time per venv (checkouts share it).
exec 9> "$venv.lock"
flock 9
wheels=$(grep -v '^\s*\(#\|$\)' "$pins")
# The stamp covers the wheels, not the comments around them.
stamp=$(sha256sum <<< "$wheels" | cut -d' ' -f1)
if venv_complete; then
  echo "fetch-libtorch: $venv is up to date (LibTorch prefix $prefix)"
  exit 0
fi
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
  echo "fetch-libtorch: $venv exists and is not a venv; refusing to replace it" \
       "(set VAED_TORCH_VENV to another folder)" >&2
  exit 1
fi
while read -r file sum; do fetch "$file" "$sum"; done <<< "$wheels"
rm -rf "$cache/.partial"
# A fresh venv; the stamp is written last, so a run that failed half-way
# is done again in full by the next.
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
files=()
while read -r file _; do files+=("$cache/$file"); done <<< "$wheels"
echo "fetch-libtorch: installing ${#files[@]} wheels into $venv"
"$venv/bin/python3" -m pip install -q --no-deps --no-index --no-compile \
  --disable-pip-version-check "${files[@]}"
echo "$stamp" > "$venv/.vaed-pins"
echo "fetch-libtorch: torch 2.11.0 in $venv ($(du -sh "$venv" | cut -f1)); LibTorch prefix $prefix"
