#!/usr/bin/env bash
# Prepares, on this Debian 12 machine, what scripts/gpu/check.sh needs on the
# GPU machine besides the checkout and the prebuilt programs (.gpu-bin,
# scripts/gpu/pack-binaries.sh), in two git-ignored folders that the device
# call carries (docs/gpu.md, "The device check"):
#
#   .gpu-debs/    the Debian 12 packages of vaed's build dependencies that the
#                 GPU image lacks (it has CUDA, PyTorch's LibTorch, CMake and
#                 ninja, but no -dev packages), fetched with `apt-get
#                 download`, plus the shared libraries they need at run time
#                 (found by following DT_NEEDED of every shared object and
#                 program in them). check.sh unpacks them with `dpkg -x` into
#                 a prefix under its build folder, never into /: the
#                 prebuilt programs take from them the libraries the machine
#                 lacks (libzmq5, libprotobuf32, libspdlog1.10, ...), and a
#                 build there (when the prebuilt programs do not start, or
#                 the Python client for another Python) the -dev packages.
#                 Boost is not carried as its 9.5 MB package: only the headers
#                 vaed's #include <boost/...> lines reach (whole modules, so a
#                 different compiler there finds what its #if branches want)
#                 and Boost's CMake config, re-packed as boost-headers.tar.gz.
#   .gpu-golden/  the golden H3 data the GPU check compares with, re-packed
#                 small from ../shared/golden/h3 (scripts/gpu/repack_golden.py)
#                 to what the GPU steps read: tiny weights and configs, each
#                 video case's latent and uint8 frames, the first two raw
#                 frames where the case has raw output, each audio case's
#                 latent and waveform; not the float32 outputs (104 MB).
#
# Prints the size of each folder and of everything that would travel
# (scripts/gpu/carry_size.sh; the device tool's limit is 64 MiB: tracked
# files, untracked files git does not ignore, and the carried folders). Run
# it in the checkout that the device call sends (the session's own), after
# any change to the dependency lists.
#
# Usage: scripts/gpu/fetch-debs.sh [--debs-only | --golden-only] [--shared DIR]
# Needs: apt-get (network to the Debian mirror), dpkg-deb, readelf, g++
# (for the Boost header list), /usr/bin/python3. Exit status: 0 ready, 1 a
# package or library could not be fetched, 2 usage.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
debs_dir="$root/.gpu-debs"
golden_dir="$root/.gpu-golden"
shared="$root/../shared"
do_debs=1
do_golden=1

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}
while [ $# -gt 0 ]; do
  case "$1" in
    --debs-only) do_golden=0 ;;
    --golden-only) do_debs=0 ;;
    --shared) [ $# -ge 2 ] || { echo "fetch-debs.sh: --shared needs a folder" >&2; exit 2; }
              shared=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fetch-debs.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# The -dev packages of every find_package / pkg_check_modules / find_library
# in the CMake files (scripts/install-deps.sh installs the same here), with
# the library packages their .so links point into. Not carried: LibTorch,
# CUDA and NCCL (the GPU image's own), pybind11 (the image's pip package),
# Python headers (must match the image's python3; check.sh builds without the
# Python client when they are missing), Google Benchmark (no target uses it).
# libgloo-dev: Gloo headers, used only when the image's LibTorch ships none
# (ProcessGroupGloo.hpp includes them). pkgconf: the image may have no
# pkg-config, which cppzmq, libsystemd and cpp-httplib are found through.
dev_packages=(
  libprotobuf-dev protobuf-compiler libprotobuf32 libprotobuf-lite32 libprotoc32
  libzmq3-dev cppzmq-dev libzmq5
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libtomlplusplus-dev libtomlplusplus3
  libcli11-dev nlohmann-json3-dev
  libcpp-httplib-dev libcpp-httplib0.11
  libsystemd-dev libsystemd0
  libssl-dev libssl3
  libacl1-dev libacl1
  libgtest-dev libgmock-dev
  libgloo-dev
  pkgconf pkgconf-bin libpkgconf3
)
# Shared objects any Linux machine with a C++ toolchain has (glibc, the GCC
# runtime): not fetched.
base_sonames=" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 "
base_sonames+="libstdc++.so.6 libgcc_s.so.1 ld-linux-x86-64.so.2 libutil.so.1 libanl.so.1 "

apt_download() {  # into the current folder
  apt-get download -q -o APT::Sandbox::User=root "$@" >/dev/null
}

# Sonames that the ELF files under $1 need and none of them provides.
missing_sonames() {
  local tree=$1
  local provided needed
  provided=$(find "$tree" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)
  needed=$(find "$tree" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0 |
             xargs -0 -r readelf -d 2>/dev/null |
             sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
  comm -23 <(echo "$needed") <(echo "$provided") |
    while read -r so; do
      [ -n "$so" ] && [[ "$base_sonames" != *" $so "* ]] && echo "$so"
    done
  return 0
}

# The Debian package that holds soname $1 (installed here: this machine builds
# vaed with the same packages).
package_of() {
  dpkg -S "*/$1" 2>/dev/null | head -n1 | cut -d: -f1
}

fetch_debs() {
  local tmp tree round missing pkg extra
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  rm -rf "$debs_dir"
  mkdir -p "$debs_dir"
  (cd "$debs_dir" && apt_download "${dev_packages[@]}")
  tree="$tmp/tree"
  mkdir -p "$tree"
  for deb in "$debs_dir"/*.deb; do dpkg-deb -x "$deb" "$tree"; done
  # The run-time closure: follow DT_NEEDED until every soname is provided.
  for round in 1 2 3 4 5 6; do
    missing=$(missing_sonames "$tree")
    [ -z "$missing" ] && break
    extra=()
    for so in $missing; do
      pkg=$(package_of "$so")
      if [ -z "$pkg" ]; then
        echo "fetch-debs.sh: no installed package provides $so (needed by the carried libraries)" >&2
        return 1
      fi
      [[ " ${extra[*]:-} " == *" $pkg "* ]] || extra+=("$pkg")
    done
    echo "fetch-debs.sh: round $round: libraries for ${missing//$'\n'/ }: ${extra[*]}"
    (cd "$debs_dir" && apt_download "${extra[@]}")
    for pkg in "${extra[@]}"; do dpkg-deb -x "$debs_dir/${pkg}"_*.deb "$tree"; done
  done
  missing=$(missing_sonames "$tree")
  if [ -n "$missing" ]; then
    echo "fetch-debs.sh: still unresolved: $missing" >&2
    return 1
  fi
  for deb in "$debs_dir"/*.deb; do slim_deb "$deb" "$tmp/slim"; done
  pack_boost "$tmp"
}

# Rebuilds package $1 without what neither the build nor the run needs:
# static libraries (vaed links the shared ones; GoogleTest ships only static
# ones, so those stay), documentation (but its copyright files) and manuals. Saves about 7 MB of the
# 64 MiB the device call may carry. The result is still a .deb for `dpkg -x`
# (its md5sums list only the files kept); packages with nothing to drop are
# left as Debian built them.
slim_deb() {
  local deb=$1 dir=$2 dropped
  rm -rf "$dir"
  dpkg-deb -R "$deb" "$dir"
  dropped=$(cd "$dir" && find usr \( -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' \) -o \
                 -path 'usr/share/doc/*' -type f ! -name copyright -o -path 'usr/share/man/*' -type f -o \
                 -path 'usr/share/locale/*' -type f 2>/dev/null | sort)
  [ -z "$dropped" ] && return 0
  (cd "$dir" && echo "$dropped" | xargs rm -f)
  if [ -f "$dir/DEBIAN/md5sums" ]; then  # lines "<md5>  <path>"
    awk 'NR == FNR { drop[$0] = 1; next } !($2 in drop)' <(echo "$dropped") \
        "$dir/DEBIAN/md5sums" > "$dir/md5sums.kept" || true
    mv "$dir/md5sums.kept" "$dir/DEBIAN/md5sums"
  fi
  dpkg-deb --root-owner-group -Zxz -b "$dir" "$deb" >/dev/null
}

# boost-headers.tar.gz: the Boost headers vaed's sources include, widened to
# the whole Boost modules they touch, plus Boost's CMake package config.
pack_boost() {
  local tmp=$1 bx list modules
  bx="$tmp/boost"
  mkdir -p "$bx"
  (cd "$tmp" && apt_download libboost1.74-dev)
  dpkg-deb -x "$tmp"/libboost1.74-dev_*.deb "$bx"
  grep -rhoE '#include <boost/[^>]+>' --include='*.cc' --include='*.h' \
      "$root/shm" "$root/client" "$root/daemon" "$root/ops" "$root/tests" | sort -u > "$tmp/boost.cc"
  # Every header the compiler opens for them, as paths under usr/include.
  g++ -std=c++20 -M -I "$bx/usr/include" -x c++ "$tmp/boost.cc" | tr ' \\' '\n\n' |
    sed -n "s|^$bx/||p" | grep '^usr/include/boost/' | sort -u > "$tmp/boost.files"
  # Top-level module folders those headers sit in (boost/interprocess, ...).
  modules=$(sed -n 's|^usr/include/boost/\([^/]*\)/.*|usr/include/boost/\1|p' "$tmp/boost.files" | sort -u)
  list="$tmp/boost.list"
  { grep -v '^usr/include/boost/[^/]*/' "$tmp/boost.files"; echo "$modules";
    (cd "$bx" && ls -d usr/lib/x86_64-linux-gnu/cmake/Boost-* usr/lib/x86_64-linux-gnu/cmake/boost_headers-* \
                       usr/lib/x86_64-linux-gnu/cmake/BoostDetectToolset-*); } > "$list"
  tar -C "$bx" -czf "$debs_dir/boost-headers.tar.gz" -T "$list"
  echo "fetch-debs.sh: Boost: $(wc -l < "$tmp/boost.files") headers reached from" \
       "$(wc -l < "$tmp/boost.cc") includes; carried modules: $(echo "$modules" | sed 's|usr/include/boost/||' | tr '\n' ' ')"
}

mib() { du -sb "$@" 2>/dev/null | awk '{s+=$1} END {printf "%.1f MiB", s/1048576}'; }

if [ "$do_debs" = 1 ]; then
  fetch_debs
  echo "fetch-debs.sh: $debs_dir: $(ls "$debs_dir" | wc -l) files, $(mib "$debs_dir")"
fi
if [ "$do_golden" = 1 ]; then
  if [ ! -d "$shared/golden/h3" ]; then
    echo "fetch-debs.sh: $shared/golden/h3 is missing: cannot re-pack the golden data" >&2
    exit 1
  fi
  rm -rf "$golden_dir"  # nothing of an older re-pack may stay behind
  /usr/bin/python3 "$root/scripts/gpu/repack_golden.py" "$shared/golden/h3" "$golden_dir/golden/h3"
  echo "fetch-debs.sh: $golden_dir: $(find "$golden_dir" -type f | wc -l) files, $(mib "$golden_dir")"
fi

# What the device call would send, the prebuilt programs included.
"$root/scripts/gpu/carry_size.sh" || {
  echo "fetch-debs.sh: over the device tool's 64 MiB limit less its margin" >&2; exit 1; }
