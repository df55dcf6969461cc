#!/usr/bin/env bash
# Packs, on this Debian 12 machine, the GPU build's programs that
# scripts/gpu/check.sh runs on the GPU machine into .gpu-bin/, a git-ignored
# folder the device call carries (docs/gpu.md, "The device check"), so that
# the check spends its few device minutes on the GPU instead of compiling.
# They are the programs CI builds (scripts/cuda-build.sh, build-cuda/),
# linked against the LibTorch of PyPI's torch 2.11.0 (CUDA 13.0): the GPU
# machine's python3 has the same torch, and check.sh runs them against it.
#
#   manifest          what was packed, one record a line: the commit and
#                     the number of source files changed against it, the
#                     build folder and checkout they came from, the torch
#                     they link, the Python extension's suffix, and per
#                     file its target, path, stripped size and SHA-256, the
#                     sonames it NEEDs and the newest glibc / libstdc++
#                     symbol versions it asks for
#   programs.tar.xz   stripped copies (strip --strip-unneeded) at their
#                     paths in the build folder: daemon/vaed,
#                     ops/vaectl/vaectl, ops/bench/vaed_bench_h3_video, the
#                     test programs labelled gpu, the Python extension
#                     python/vaed_client/_core*.so, and the build's own
#                     shared libraries they NEED (client/libvaed_client.so.0).
#                     One xz stream of one tar: the test programs and the
#                     benchmark hold much of the daemon's code again, which
#                     xz's 64 MiB window (-9) stores once.
#   sources.sha256    the SHA-256 of every source file the build read
#                     (tracked and untracked-not-ignored files of the
#                     CMake files, cmake/, shm/, client/, daemon/, ops/,
#                     tests/), so that check.sh names the files that differ
#                     in the checkout it runs in (a device machine's copy
#                     may have no .git to compare commits with)
#   ctest/            the ctest files of the test programs labelled gpu
#                     (tests/cmake/discover_suites.cmake's *_suites.cmake),
#                     paths rewritten by check.sh, so that `ctest -L gpu`
#                     runs them there as in a build folder
#
# Refuses (exit 1) when the build folder is not a CUDA build, lacks one of
# the programs (it names the command that builds them), or is older than
# the checkout (ninja would rebuild one of them: they would not be the
# checkout's programs); --force packs such a build anyway and records it
# as stale. Then prints the carried sizes (scripts/gpu/carry_size.sh).
#
# Usage: scripts/gpu/pack-binaries.sh [--build-dir DIR] [--force]
#   --build-dir DIR  the CUDA build folder (default build-cuda/)
#   --force          pack although the build is older than the checkout
# Needs: ninja, strip, readelf, objdump, xz, sha256sum, git, python3.
# Exit status: 0 packed (and the carry fits), 1 refused or over the carry
# limit, 2 usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.gpu-bin"
build="$root/build-cuda"
force=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "pack-binaries.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || { echo "pack-binaries.sh: --build-dir needs a folder" >&2; exit 2; }
                 build=$(cd "$2" 2>/dev/null && pwd) || die "--build-dir $2 does not exist"; shift ;;
    --force) force=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "pack-binaries.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for tool in ninja strip readelf objdump xz sha256sum git python3; do
  command -v "$tool" >/dev/null || die "$tool is needed and not installed"
done

cache="$build/CMakeCache.txt"
[ -f "$cache" ] || die "$build holds no configured build (scripts/cuda-build.sh makes build-cuda/)"
grep -q '^VAED_WITH_CUDA:BOOL=ON' "$cache" ||
  die "$build is not a CUDA build (VAED_WITH_CUDA is not ON): its programs cannot decode on a GPU"

# The targets check.sh's steps run: the daemon, vaectl, the H3 benchmark,
# the Python extension, and every test program labelled gpu: what
# scripts/cuda-build.sh builds.
targets=(vaed vaectl vaed_bench_h3_video vaed_python_core)
mapfile -t -O ${#targets[@]} targets < <(python3 "$here/list_gpu_tests.py" "$root")
build_hint="scripts/cuda-build.sh"

# The file target $1 makes, relative to the build folder (its phony's input).
target_file() {
  ninja -C "$build" -t query "$1" 2>/dev/null |
    awk '/^  input: phony$/ {f = 1; next} f && /^    / {print $1; exit} /^  [a-z]/ {f = 0}'
}
declare -A file_of
for t in "${targets[@]}"; do
  f=$(target_file "$t")
  [ -n "$f" ] || die "$build defines no target $t (is it configured from this checkout?)"
  [ -f "$build/$f" ] || die "$build/$f ($t) is not built: run $build_hint"
  file_of[$t]=$f
done

# Whether the programs are this checkout's: nothing CMake read changed
# since the configure, and ninja would rebuild none of them. `ninja -n`
# alone cannot tell: the CONFIGURE_DEPENDS globs make it plan a CMake
# re-run every time and stop there. So the CMake inputs of build.ninja are
# compared with it, and ninja reads build.ninja through a wrapper file that
# nothing regenerates (paths in it stay relative to the build folder).
stale_reasons() {
  local input wrapper=$1
  while read -r input; do
    case "$input" in
      */cmake.verify_globs) continue ;;
      /*) ;;
      *) input="$build/$input" ;;
    esac
    [ "$input" -nt "$build/build.ninja" ] && echo "changed since the configure: ${input#"$root"/}"
  done < <(ninja -C "$build" -t query build.ninja |
             awk '/^  input:/ {f = 1; next} /^  [a-z]/ {f = 0} f {sub(/^ *(\| )?/, ""); print}')
  echo "include build.ninja" > "$wrapper"
  ninja -C "$build" -f "$wrapper" -n "${targets[@]}" | grep '^\[' || true
}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
stale=0
reasons=$(stale_reasons "$stage/check.ninja")
if [ -n "$reasons" ]; then
  stale=1
  echo "pack-binaries.sh: $build is older than the checkout:" >&2
  head -n 8 <<<"$reasons" | sed 's/^/  /' >&2
  [ "$force" = 1 ] || die "refusing to pack programs that are not the checkout's: run $build_hint (or --force)"
  echo "pack-binaries.sh: --force: packing them anyway (manifest: stale 1)" >&2
fi

# The build's own shared libraries the programs NEED (libvaed_client.so.0
# for vaectl), found by soname in the build folder.
needed_of() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
declare -A own_lib
while IFS= read -r -d '' lib; do
  so=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ -n "$so" ] && own_lib[$so]=${lib#"$build"/}
done < <(find "$build" -path "$build/deps" -prune -o -path "$build/libtorch-include" -prune -o \
           -type f -name 'lib*.so*' -print0)
libs=()
for t in "${targets[@]}"; do
  while read -r so; do
    [ -n "${own_lib[$so]:-}" ] && [[ " ${libs[*]:-} " != *" $so "* ]] && libs+=("$so")
  done < <(needed_of "$build/${file_of[$t]}")
done

mkdir -p "$stage/tree" "$stage/ctest"
git_commit=$(git -C "$root" rev-parse HEAD 2>/dev/null) || die "$root is not a git checkout"
source_paths=(CMakeLists.txt CMakePresets.json cmake shm client daemon ops tests)
changed=$(git -C "$root" status --porcelain -- "${source_paths[@]}" | grep -c . || true)
torch_prefix=$(sed -n 's/^VAED_LIBTORCH_PREFIX:PATH=//p' "$cache")
torch_version=$(sed -n "s/^__version__ = '\(.*\)'$/\1/p" "$torch_prefix/torch/version.py" 2>/dev/null)
ext=$(basename "${file_of[vaed_python_core]}")
ext_suffix=${ext#_core}

# newest_version FILE PREFIX: the newest symbol version FILE asks for
# (GLIBC_2.34, GLIBCXX_3.4.30): what the machine's glibc and libstdc++
# must provide.
newest_version() {
  objdump -T "$1" 2>/dev/null | grep -o "($2_[0-9.]*)" | tr -d '()' | sort -uV | tail -n1
}

{
  echo "# scripts/gpu/pack-binaries.sh; read by scripts/gpu/check.sh. One record a line."
  echo "commit $git_commit"
  echo "changed_files $changed"
  echo "stale $stale"
  echo "packed_utc $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "source_paths ${source_paths[*]}"
  echo "build_dir $build"
  echo "source_dir $root"
  echo "torch ${torch_version:-unknown}"
  echo "python_ext_suffix $ext_suffix"
} > "$stage/manifest"
pack_file() {  # pack_file TARGET PATH [PACKED_PATH]
  local target=$1 src=$2 path=${3:-$2} dst="$stage/tree/${3:-$2}"
  mkdir -p "$(dirname "$dst")"
  strip --strip-unneeded -o "$dst" "$build/$src"
  {
    echo "file $target $path $(stat -c %s "$dst") $(sha256sum "$dst" | cut -d' ' -f1)"
    echo "needed $path $(needed_of "$dst" | tr '\n' ' ')"
    echo "requires $path $(newest_version "$dst" GLIBC) $(newest_version "$dst" GLIBCXX)"
  } >> "$stage/manifest"
}
for t in "${targets[@]}"; do pack_file "$t" "${file_of[$t]}"; done
# A library goes under its soname (libvaed_client.so.0, what the programs
# ask the loader for), without the build's version links.
for so in "${libs[@]}"; do pack_file "-" "${own_lib[$so]}" "$(dirname "${own_lib[$so]}")/$so"; done

# The gpu test programs' ctest files (written next to each program when it
# is built).
mapfile -t gpu_tests < <(python3 "$here/list_gpu_tests.py" "$root")
for t in "${gpu_tests[@]}"; do
  suites="$(dirname "${file_of[$t]}")/${t}_suites.cmake"
  [ -f "$build/$suites" ] || die "$build/$suites is missing (written when $t is built): run $build_hint"
  mkdir -p "$stage/ctest/$(dirname "$suites")"
  cp "$build/$suites" "$stage/ctest/$suites"
  echo "ctest $t $suites" >> "$stage/manifest"
done

(cd "$root" && git ls-files -z --cached --others --exclude-standard -- "${source_paths[@]}" |
   xargs -0 sha256sum) > "$stage/sources.sha256"
tar -C "$stage/tree" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - . |
  xz -9 -T1 > "$stage/programs.tar.xz"
echo "archive programs.tar.xz $(stat -c %s "$stage/programs.tar.xz")" >> "$stage/manifest"

rm -rf "$out"
mkdir -p "$out"
cp -r "$stage/manifest" "$stage/programs.tar.xz" "$stage/sources.sha256" "$stage/ctest" "$out/"
stripped=$(awk '$1 == "file" {s += $4} END {print s + 0}' "$out/manifest")
echo "pack-binaries.sh: $out: ${#targets[@]} programs and ${#libs[@]} of the build's libraries from" \
     "$build (commit ${git_commit:0:12}$([ "$changed" -gt 0 ] && echo ", $changed source files changed")," \
     "torch ${torch_version:-unknown}, Python ${ext_suffix}):"
awk '$1 == "file" {printf "  %-46s %6.1f MiB stripped\n", $3, $4 / 1048576}' "$out/manifest"
awk -v s="$stripped" -v a="$(stat -c %s "$out/programs.tar.xz")" \
  'BEGIN {printf "pack-binaries.sh: %.1f MiB stripped, %.1f MiB as programs.tar.xz\n", s / 1048576, a / 1048576}'
"$here/carry_size.sh"
