# shellcheck shell=bash
# Sourced by scripts/gpu/check.sh: the dependency prefix, configure and
# build. Functions only; they read check.sh's settings (MODE, DEPS, BUILD,
# ROOT, DEBS_DIR) and print what they do on stdout (check.sh logs it).
#
# The GPU build (MODE=gpu), made only when the prebuilt programs of
# .gpu-bin are absent or do not start there (check_prebuilt.sh), configures
# the `cuda` preset (VAED_WITH_CUDA=ON) into $BUILD against the machine's
# own LibTorch (the PyTorch wheel of its python3: torch.utils.cmake_prefix_path),
# CUDA toolkit and NCCL, and the Debian packages carried in .gpu-debs
# (DEPS=debs), unpacked with `dpkg -x` into $BUILD/deps/root. The CPU build
# (MODE=cpu) configures the `default` preset with the system's packages
# (DEPS=system) through ccache, as scripts/test.sh does.

# Unpacks .gpu-debs into $BUILD/deps/root (again only when the packages
# changed) and rewrites its pkg-config files for that prefix. libgloo-dev
# goes to $BUILD/deps/gloo: its headers are used only when the machine's
# LibTorch ships none (they must match the Gloo compiled into LibTorch).
unpack_debs() {
  local deps="$BUILD/deps" stamp deb
  stamp=$(cd "$DEBS_DIR" && ls -l --time-style=+%s | md5sum | cut -d' ' -f1)
  if [ -f "$deps/.stamp" ] && [ "$(cat "$deps/.stamp")" = "$stamp" ]; then
    echo "deps: $deps/root is up to date"
    return 0
  fi
  rm -rf "$deps"
  mkdir -p "$deps/root" "$deps/gloo"
  for deb in "$DEBS_DIR"/*.deb; do
    case "$(basename "$deb")" in
      libgloo-dev_*) dpkg -x "$deb" "$deps/gloo" ;;
      *) dpkg -x "$deb" "$deps/root" ;;
    esac || { echo "deps: dpkg -x $deb failed"; return 1; }
  done
  tar -C "$deps/root" -xzf "$DEBS_DIR/boost-headers.tar.gz" || return 1
  # pkg-config files name /usr: point them at the prefix. Requires.private
  # (openssl, zlib, brotli, sodium, ...) is dropped: vaed links the shared
  # libraries, and the private ones' .pc files are not carried.
  find "$deps/root" -name '*.pc' -print0 | xargs -0 -r sed -i \
    -e "s#^\([A-Za-z_]*\)=/usr#\1=$deps/root/usr#" -e '/^Requires.private:/d' -e '/^Libs.private:/d'
  echo "$stamp" > "$deps/.stamp"
  echo "deps: unpacked $(ls "$DEBS_DIR"/*.deb | wc -l) packages and the Boost headers into $deps/root"
}

# Prints the LD_LIBRARY_PATH entry that gives programs the carried shared
# libraries this machine lacks: a folder of links to only those (sonames
# `ldconfig -p` does not know). The machine's own copy of a library wins
# where it has one, so its newer system libraries are never shadowed by
# Debian 12's. Empty output with DEPS=system.
runtime_library_path() {
  [ "$DEPS" = debs ] || return 0
  local root="$BUILD/deps/root" run="$BUILD/deps/runtime" known file so
  [ -d "$root" ] || return 0
  rm -rf "$run"
  mkdir -p "$run"
  known=$(ldconfig -p 2>/dev/null | awk '{print $1}' | sort -u)
  # Debian 12 still puts some libraries in /lib (libz, liblzma, libcap, ...).
  for file in "$root"/usr/lib/x86_64-linux-gnu/lib*.so.* "$root"/lib/x86_64-linux-gnu/lib*.so.*; do
    [ -f "$file" ] && [ ! -L "$file" ] || continue
    # Its soname (libspdlog.so.1.10, libzmq.so.5): what programs ask for.
    so=$(readelf -d "$file" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ -n "$so" ] || continue
    grep -qxF "$so" <<<"$known" || ln -sf "$file" "$run/$so"
  done
  echo "$run"
}

# NCCL where the machine has it outside the CUDA toolkit (the nvidia-nccl
# pip wheel torch depends on): prints "-DNCCL_INCLUDE_DIR=... -DNCCL_LIBRARY=..."
# or nothing (then daemon/parallel/CMakeLists.txt searches the toolkit).
nccl_cache_args() {
  local cuda_root=$1 base header lib
  if [ -f "$cuda_root/include/nccl.h" ]; then return 0; fi
  base=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null) ||
    return 0
  header=$(find "$base/nvidia" -name nccl.h -path '*include*' 2>/dev/null | head -n1)
  lib=$(find "$base/nvidia" -name 'libnccl.so*' 2>/dev/null | sort | head -n1)
  if [ -n "$header" ] && [ -n "$lib" ]; then
    echo "-DNCCL_INCLUDE_DIR=$(dirname "$header") -DNCCL_LIBRARY=$lib"
  fi
}

# The cmake arguments that build against the carried packages unpacked
# under $BUILD/deps/root (DEPS=debs), one a line, $1 prepended to
# CMAKE_PREFIX_PATH and $2 appended to the C++ flags. Without the carried
# packages: only the prefix path.
deps_args() {
  local prefix_path=$1 cxx_flags=${2:-} link_flags root="$BUILD/deps/root"
  if [ "$DEPS" = debs ]; then
    prefix_path+="${prefix_path:+;}$root/usr"
    # Headers in the multiarch folder (openssl/configuration.h) and the
    # carried libraries' own dependencies at link time.
    cxx_flags="-isystem $root/usr/include -isystem $root/usr/include/x86_64-linux-gnu${cxx_flags:+ $cxx_flags}"
    link_flags="-Wl,-rpath-link,$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu"
    echo "-DCMAKE_CXX_FLAGS=$cxx_flags"
    echo "-DCMAKE_EXE_LINKER_FLAGS=$link_flags"
    echo "-DCMAKE_SHARED_LINKER_FLAGS=$link_flags"
    echo "-DCMAKE_MODULE_LINKER_FLAGS=$link_flags"
    command -v pkg-config >/dev/null || echo "-DPKG_CONFIG_EXECUTABLE=$root/usr/bin/pkgconf"
  fi
  echo "-DCMAKE_PREFIX_PATH=$prefix_path"
}

# The cmake command line of this build, one argument a line (so paths with
# spaces survive); the build settings are summarised on stderr. $1: full
# (the build of check.sh's mode), or client: the client-only build of the Python extension beside prebuilt programs
# ($BUILD/client-only: -DVAED_CLIENT_ONLY=ON, no LibTorch, no CUDA; the
# client reaches the CUDA driver with dlopen, so it needs neither).
configure_args() {
  local args=(-S "$ROOT") deps=()
  if [ "$MODE" = cpu ]; then
    args+=(-B "$BUILD" --preset default -DVAED_WITH_CUDA=OFF)
  elif [ "${1:-}" = client ]; then
    args+=(-B "$BUILD/client-only" --preset default -DVAED_CLIENT_ONLY=ON -DVAED_WITH_CUDA=OFF
           -DVAED_WERROR=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5
           -DPython_EXECUTABLE="$(command -v python3)")
    mapfile -t deps < <(deps_args "${PYBIND11_CMAKE_DIR:-}")
    args+=("${deps[@]}")
  else
    args+=(-B "$BUILD" --preset cuda -DVAED_WITH_CUDA=ON
           # The device's compiler is not the one -Werror is kept clean for
           # (Debian 12's gcc 12); a new warning there must not stop the
           # check.
           -DVAED_WERROR=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
    local nvcc torch_site torch_prefix prefix_path gloo="" nccl
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    # The site-packages holding the machine's torch; its CMake files are in
    # torch/share/cmake (torch.utils.cmake_prefix_path), its headers in
    # torch/include.
    torch_site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' \
                 2>/dev/null) || torch_site="<no torch importable by $(command -v python3)>"
    torch_prefix="$torch_site/torch/share/cmake"
    prefix_path="$torch_prefix"
    if [ -n "${PYBIND11_CMAKE_DIR:-}" ]; then prefix_path+=";$PYBIND11_CMAKE_DIR"; fi
    # cmake/libtorch.cmake takes LibTorch from VAED_LIBTORCH_PREFIX, a
    # site-packages holding torch 2.11: here the machine's own.
    args+=(-DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90
           -DVAED_LIBTORCH_PREFIX="$torch_site"
           -DPython_EXECUTABLE="$(command -v python3)")
    if [ "$DEPS" = debs ] && [ ! -d "$torch_site/torch/include/gloo" ]; then
      gloo="-isystem $BUILD/deps/gloo/usr/include"
      echo "configure: this LibTorch ships no Gloo headers: using Debian's libgloo-dev" >&2
    fi
    mapfile -t deps < <(deps_args "$prefix_path" "$gloo")
    args+=("${deps[@]}")
    nccl=$(nccl_cache_args "$(dirname "$(dirname "$nvcc")")")
    # shellcheck disable=SC2206  # two -D words without spaces inside
    [ -n "$nccl" ] && args+=($nccl)
  fi
  if [ "$PYTHON_CLIENT" = 0 ]; then args+=(-DVAED_BUILD_PYTHON=OFF); fi
  printf '%s\n' "${args[@]}"
}

# Prints its arguments as one shell line: each word single-quoted where
# the shell would otherwise split or expand it (paths with spaces, the ';'
# of CMAKE_PREFIX_PATH, '<' and '>').
shell_quote() {
  local a line=""
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
      line+=" $a"
    else
      line+=" '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"
    fi
  done
  echo "${line# }"
}

# The environment the configure step sets (NAME=VALUE, one a line).
# DEPS=debs: pkg-config looks only at the carried .pc files, and the
# carried protoc finds its libraries (check.sh's runtime library folder).
configure_env() {
  if [ "$DEPS" = debs ]; then
    local root="$BUILD/deps/root"
    echo "PKG_CONFIG_LIBDIR=$root/usr/lib/x86_64-linux-gnu/pkgconfig:$root/usr/share/pkgconfig"
    echo "LD_LIBRARY_PATH=$BUILD/deps/runtime"
  fi
  # Torch's CMake config picks its CUDA architectures from this (H200: 9.0).
  [ "$MODE" = gpu ] && echo "TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}"
  return 0
}

# The configure command as one line a shell can run as it is (check.sh
# --dry-run prints it; the build step logs it).
configure_command_line() {
  local args=() env=()
  mapfile -t args < <(configure_args full)
  mapfile -t env < <(configure_env)
  if [ ${#env[@]} -gt 0 ]; then
    shell_quote env "${env[@]}" cmake "${args[@]}"
  else
    shell_quote cmake "${args[@]}"
  fi
}

# Configures $BUILD.
configure_build() {
  local args=() e
  if [ "$MODE" = gpu ] && ! python3 -c 'import torch' 2>/dev/null; then
    echo "configure: $(command -v python3) cannot import torch: no LibTorch to build against"
    return 1
  fi
  mapfile -t args < <(configure_args full)
  while IFS= read -r e; do
    case "$e" in LD_LIBRARY_PATH=*) ;; *) export "${e?}" ;; esac  # check.sh sets LD_LIBRARY_PATH
  done < <(configure_env)
  echo "configure: $(configure_command_line 2>/dev/null)"
  cmake "${args[@]}"
}

# The targets the steps need that this build defines: the daemon, vaectl,
# the H3 benchmarks, the Python client and every test program labelled gpu.
build_targets() {
  local defined wanted=(vaed vaectl vaed_bench_h3_video vaed_bench_matrix vaed_python) t tests=()
  mapfile -t tests < <(python3 "$HERE/list_gpu_tests.py" "$ROOT")
  wanted+=("${tests[@]}")
  defined=$(ninja -C "$BUILD" -t targets all 2>/dev/null | sed -n 's/^\([A-Za-z0-9_.-]*\): phony$/\1/p')
  for t in "${wanted[@]}"; do
    grep -qxF "$t" <<<"$defined" && echo "$t"
  done
  return 0
}

# Builds those targets; keeps going past a target that fails (-k 0) so that
# the steps that do not need it still run. Returns non-zero if any failed.
build_all() {
  local targets=()
  mapfile -t targets < <(build_targets)
  echo "build: ${#targets[@]} targets: ${targets[*]}"
  cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}" -- -k 0
}
