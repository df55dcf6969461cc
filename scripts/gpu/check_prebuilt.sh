# shellcheck shell=bash
# Sourced by scripts/gpu/check.sh: the prebuilt programs of .gpu-bin
# (made here by scripts/gpu/pack-binaries.sh from build-cuda/) on the GPU
# machine. Functions only; they read check.sh's settings (ROOT, BUILD,
# BIN_DIR, DEBS_DIR, PYTHON_CLIENT, PYBIND11_CMAKE_DIR) and print what they
# do on stdout (check.sh logs it).
#
# The programs were linked on Debian 12 against the torch 2.11 wheel under
# /opt/vaed; their RUNPATH names that folder, which the GPU machine does not
# have. They run there against the machine's own torch 2.11 (its python3's)
# with LD_LIBRARY_PATH holding, for each soname they NEED, the folder that
# provides it, looked up in this order: the prebuilt tree (the build's own
# libvaed_client.so.0), torch/lib, the nvidia/*/lib folders of the CUDA
# wheels beside torch (libcudart, libnccl), the system's loader (ldconfig
# -p; nothing to add), the carried Debian libraries the machine lacks
# (check_build.sh's runtime_library_path: libzmq5, libspdlog1.10, ...) and
# the CUDA toolkit's lib64. The prebuilt tree is laid out as a build folder
# ($BUILD/daemon/vaed, $BUILD/ops/vaectl/vaectl, ...), so the steps find
# the programs where they find built ones; $BUILD/prebuilt/ holds the
# manifest and what this file worked out, and marks the folder as prebuilt
# for the main loop and for a --skip-build rerun.

# The value of record KEY in manifest FILE (the rest of its first line).
manifest_value() {
  awk -v k="$1" '$1 == k {sub(/^[^ ]+ /, ""); print; exit}' "$2"
}

# Whether .gpu-bin holds a complete pack.
prebuilt_present() {
  [ -f "$BIN_DIR/manifest" ] && [ -f "$BIN_DIR/programs.tar.xz" ] && [ -f "$BIN_DIR/sources.sha256" ]
}

# A line describing the pack for --dry-run and the log: commit, age, torch,
# Python, and whether the checkout it runs in is the one it was built from.
prebuilt_summary() {
  local m=$BIN_DIR/manifest commit
  commit=$(manifest_value commit "$m")
  echo "prebuilt programs in $BIN_DIR (commit ${commit:0:12}$(
         [ "$(manifest_value changed_files "$m")" != 0 ] && echo " + $(manifest_value changed_files "$m") changed source files"),"\
       "packed $(manifest_value packed_utc "$m"), torch $(manifest_value torch "$m"),"\
       "Python extension $(manifest_value python_ext_suffix "$m")$(
         [ "$(manifest_value stale "$m")" = 1 ] && echo ", STALE: packed with --force from a build older than its checkout"))"
}

# Prints the source files of this checkout that differ from those the
# prebuilt programs were built from (sources.sha256 of manifest folder $1),
# one a line; nothing when they are the same.
prebuilt_sources_differing() {
  (cd "$ROOT" && sha256sum --quiet -c "$1/sources.sha256" 2>/dev/null |
     sed -n 's/^\(.*\): FAILED.*$/\1/p')
}

# Compares the pack with this checkout: prints one line per difference
# (a commit whose sources differ, changed source files) and returns 1 when
# there is one. Another commit with the same sources (a docs change) is no
# difference; where git cannot compare the two commits (no .git, or the
# packed commit is not in it) the files' SHA-256 decide alone.
prebuilt_matches_checkout() {
  local dir=$1 packed head differing rc=0 paths=()
  packed=$(manifest_value commit "$dir/manifest")
  read -r -a paths <<<"$(manifest_value source_paths "$dir/manifest")"
  head=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null) || head=""
  if [ -n "$head" ] && [ "$head" != "$packed" ]; then
    git -C "$ROOT" diff --quiet "$packed" "$head" -- "${paths[@]}" 2>/dev/null
    case $? in
      0) ;;
      1) echo "the checkout is at commit ${head:0:12}, the prebuilt programs were built at ${packed:0:12}, and their sources differ"
         rc=1 ;;
    esac
  fi
  differing=$(prebuilt_sources_differing "$dir")
  if [ -n "$differing" ]; then
    echo "$(grep -c . <<<"$differing") source files differ from those the prebuilt programs were built from: $(head -n 5 <<<"$differing" | tr '\n' ' ')"
    rc=1
  fi
  return $rc
}

# Unpacks .gpu-bin into $BUILD as a build folder: the programs, the ctest
# files of the gpu test programs (their paths rewritten from the packing
# build folder and checkout to these) under a top-level CTestTestfile.cmake,
# and the Python package (the checkout's vaed_client/*.py beside the carried
# extension). Returns 1 when the archive does not unpack.
unpack_prebuilt() {
  local m=$BIN_DIR/manifest old_build old_root target path
  rm -rf "$BUILD/prebuilt"
  mkdir -p "$BUILD/prebuilt"
  if command -v xz >/dev/null; then
    tar -C "$BUILD" -xJf "$BIN_DIR/programs.tar.xz" || return 1
  else  # Python's tarfile reads xz without the xz program
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$BIN_DIR/programs.tar.xz" "$BUILD" || return 1
  fi
  cp "$m" "$BIN_DIR/sources.sha256" "$BUILD/prebuilt/"
  old_build=$(manifest_value build_dir "$m")
  old_root=$(manifest_value source_dir "$m")
  # The build folder first: it lies inside the old checkout.
  echo "# Written by scripts/gpu/check.sh for the prebuilt test programs of .gpu-bin." \
    > "$BUILD/CTestTestfile.cmake"
  while read -r _ target path; do
    sed -e "s#$old_build#$BUILD#g" -e "s#$old_root#$ROOT#g" "$BIN_DIR/ctest/$path" > "$BUILD/$path"
    echo "include(\"$BUILD/$path\")  # $target" >> "$BUILD/CTestTestfile.cmake"
  done < <(awk '$1 == "ctest"' "$m")
  mkdir -p "$BUILD/python/vaed_client"
  cp "$ROOT"/client/python/vaed_client/*.py "$ROOT"/client/python/vaed_client/*.pyi \
     "$ROOT/client/python/vaed_client/py.typed" "$BUILD/python/vaed_client/"
  echo "prebuilt: unpacked $(awk '$1 == "file"' "$m" | wc -l) files into $BUILD"
}

# The folder that provides soname $1 for the prebuilt programs (see the
# top of this file for the order), "system" when the system's loader finds
# it, or nothing. $2: the candidate folders, one a line, in order.
library_folder() {
  local so=$1 dir
  while IFS= read -r dir; do
    [ -n "$dir" ] && [ -e "$dir/$so" ] && { echo "$dir"; return 0; }
  done <<<"$2"
  grep -qxF "$so" <<<"$KNOWN_SONAMES" && { echo system; return 0; }
  [ -e "$BUILD/deps/runtime/$so" ] && { echo "$BUILD/deps/runtime"; return 0; }
  [ -n "$CUDA_LIB_DIR" ] && [ -e "$CUDA_LIB_DIR/$so" ] && { echo "$CUDA_LIB_DIR"; return 0; }
  return 0
}

# Works out LD_LIBRARY_PATH for the prebuilt programs from the sonames the
# manifest lists for them: writes it to $BUILD/prebuilt/ld-library-path,
# each soname's folder to $BUILD/prebuilt/libraries ("SONAME FOLDER") and
# prints what it found. Returns 1 when python3 imports no torch.
prebuilt_library_path() {
  local m=$BUILD/prebuilt/manifest torch_dir site own candidates so dir path="" nvcc
  torch_dir=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null) || {
    echo "prebuilt: $(command -v python3) imports no torch: no LibTorch for the prebuilt programs"
    return 1
  }
  site=$(dirname "$torch_dir")
  own=$(awk '$1 == "file" && $2 == "-" {print $3}' "$m" | xargs -r -n1 dirname | sed "s#^#$BUILD/#" | sort -u)
  candidates=$(printf '%s\n' "$own" "$torch_dir/lib"; find "$site/nvidia" -mindepth 2 -maxdepth 2 -type d -name lib 2>/dev/null | sort)
  KNOWN_SONAMES=$(ldconfig -p 2>/dev/null | awk 'NR > 1 {print $1}' | sort -u)
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  CUDA_LIB_DIR=$(cd "$(dirname "$nvcc")/../lib64" 2>/dev/null && pwd) || CUDA_LIB_DIR=""
  : > "$BUILD/prebuilt/libraries"
  while read -r so; do
    dir=$(library_folder "$so" "$candidates")
    echo "$so ${dir:-NOT-FOUND}" >> "$BUILD/prebuilt/libraries"
    [ -n "$dir" ] && [ "$dir" != system ] && [[ ":$path:" != *":$dir:"* ]] && path+="${path:+:}$dir"
  done < <(awk '$1 == "needed" {for (i = 3; i <= NF; i++) print $i}' "$m" | sort -u)
  # The carried Debian libraries' own dependencies resolve through the
  # same folder, needed or not by the programs directly.
  [ -d "$BUILD/deps/runtime" ] && [[ ":$path:" != *":$BUILD/deps/runtime:"* ]] && path+="${path:+:}$BUILD/deps/runtime"
  echo "$path" > "$BUILD/prebuilt/ld-library-path"
  echo "prebuilt: torch $torch_dir; LD_LIBRARY_PATH=$path"
  sed 's/^/prebuilt:   /' "$BUILD/prebuilt/libraries"
}

# Prints what the dynamic loader cannot find for the prebuilt files
# ("FILE: SONAME", one a line), the libraries' own dependencies included.
prebuilt_unresolved() {
  local path
  while read -r path; do
    LD_LIBRARY_PATH="$(cat "$BUILD/prebuilt/ld-library-path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      ldd "$BUILD/$path" 2>/dev/null | awk -v f="$path" '/not found/ {print f ": " $1}'
  done < <(awk '$1 == "file" {print $3}' "$BUILD/prebuilt/manifest")
}

# Whether the prebuilt daemon starts here: `vaed --help` (loads every
# library it needs, LibTorch's CUDA side included, and resolves their
# symbols). Prints its error output when it does not.
prebuilt_starts() {
  local out rc
  out=$(LD_LIBRARY_PATH="$(cat "$BUILD/prebuilt/ld-library-path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        timeout 60 "$BUILD/daemon/vaed" --help 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 0 ] && return 0
  echo "vaed --help exited $rc: $(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-400)"
  return 1
}

# The Python client for the prebuilt programs: the carried extension when
# this python3 is the one it was built for (same EXT_SUFFIX, and it
# imports), else built here from the checkout with -DVAED_CLIENT_ONLY=ON
# (no LibTorch: a minute at most) when python3 has its headers and
# pybind11. Writes "prebuilt|built|none DETAIL" to $BUILD/prebuilt/python-client
# and prints it.
prebuilt_python_client() {
  local m=$BUILD/prebuilt/manifest carried here verdict t0 lib_path
  carried=$(manifest_value python_ext_suffix "$m")
  here=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
  lib_path="$(cat "$BUILD/prebuilt/ld-library-path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ "$here" = "$carried" ]; then
    if LD_LIBRARY_PATH="$lib_path" PYTHONPATH="$BUILD/python" python3 -c 'import vaed_client' 2>&1; then
      verdict="prebuilt $carried (this python3 is the one it was built for)"
    else
      echo "prebuilt: the carried extension $carried does not import: building the client here"
    fi
  else
    echo "prebuilt: this python3 wants ${here:-an unknown extension suffix}, the carried extension is $carried: building the client here"
  fi
  if [ -z "${verdict:-}" ]; then
    if [ "$PYTHON_CLIENT" = 0 ]; then
      verdict="none (no Python headers or pybind11 for $(command -v python3): the Python steps end missing)"
    else
      t0=$(date +%s)
      if ! build_client_only; then
        verdict="none (the client-only build failed, see check.log: the Python steps end missing)"
      elif ! LD_LIBRARY_PATH="$lib_path" PYTHONPATH="$BUILD/python" python3 -c 'import vaed_client' 2>&1; then
        verdict="none (the client built here does not import, see check.log: the Python steps end missing)"
      else
        verdict="built ${here} here, client only ($(($(date +%s) - t0)) s)"
      fi
    fi
  fi
  echo "$verdict" > "$BUILD/prebuilt/python-client"
  echo "prebuilt: Python client: $verdict"
  [ "${verdict%% *}" != none ]
}

# Builds only the client (vaed_shm, vaed_client, the Python extension; no
# LibTorch, CUDA or daemon) into $BUILD/client-only for this python3 and
# copies the extension beside the Python package in $BUILD/python.
build_client_only() {
  local args=() e
  mapfile -t args < <(configure_args client)
  while IFS= read -r e; do
    case "$e" in LD_LIBRARY_PATH=*) ;; *) export "${e?}" ;; esac  # the step set LD_LIBRARY_PATH
  done < <(configure_env)
  echo "client: $(shell_quote cmake "${args[@]}")"
  cmake "${args[@]}" || return 1
  cmake --build "$BUILD/client-only" -j "$(nproc)" --target vaed_python || return 1
  cp "$BUILD"/client-only/python/vaed_client/_core*.so "$BUILD/python/vaed_client/"
}

# Drops the prebuilt marker (a build in $BUILD replaces the programs).
forget_prebuilt() { rm -rf "$BUILD/prebuilt"; }
