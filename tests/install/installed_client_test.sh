#!/usr/bin/env bash
# For C++ integrators: a program from outside the tree builds against
# an installed libvaed_client and runs. Installs the components client and
# client_dev of BUILD_DIR (the packages libvaed-client0 and
# libvaed-client-dev) into a scratch prefix, builds consumer/consumer.cc
#   cmake       with find_package(vaed CONFIG) and vaed::client
#               (consumer/CMakeLists.txt, CMAKE_PREFIX_PATH=<prefix>)
#   pkg-config  with the flags of vaed-client.pc (PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig)
# and runs it with the prefix as the only place to find libvaed_client.
#
# Usage: installed_client_test.sh BUILD_DIR cmake|pkg-config
set -euo pipefail
build=${1:?usage: installed_client_test.sh BUILD_DIR cmake|pkg-config}
mode=${2:?usage: installed_client_test.sh BUILD_DIR cmake|pkg-config}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
version=$(cache_value CMAKE_PROJECT_VERSION)
libdir=$(cache_value CMAKE_INSTALL_LIBDIR)
[[ -n $version && -n $libdir ]] || fail "no project version or CMAKE_INSTALL_LIBDIR in $build/CMakeCache.txt"

scratch=$(mktemp -d /tmp/vaed-consumer-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
for component in client client_dev; do
  cmake --install "$build" --prefix "$prefix" --component "$component" > "$scratch/install.log" 2>&1 ||
    { cat "$scratch/install.log" >&2; fail "cmake --install --component $component failed"; }
done
[[ ! -e $prefix/sbin/vaed && ! -e $prefix/bin/vaectl ]] ||
  fail "the client components installed the daemon or vaectl"

binary=$scratch/consumer
case "$mode" in
  cmake)
    generator=()
    command -v ninja > /dev/null && generator=(-G Ninja)
    if ! cmake -S "$here/consumer" -B "$scratch/build" "${generator[@]}" \
           -DCMAKE_PREFIX_PATH="$prefix" > "$scratch/build.log" 2>&1 ||
       ! cmake --build "$scratch/build" >> "$scratch/build.log" 2>&1; then
      cat "$scratch/build.log" >&2
      fail "the consumer does not build with find_package(vaed CONFIG) against $prefix"
    fi
    binary=$scratch/build/consumer
    # The imported target, not a path that happens to resolve: the link
    # line names the installed library.
    grep -rqs --include=build.ninja --include=link.txt "$prefix/$libdir/libvaed_client.so" \
         "$scratch/build" ||
      fail "the consumer was not linked against $prefix/$libdir/libvaed_client.so"
    ;;
  pkg-config)
    export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
    pc_version=$(pkg-config --modversion vaed-client) || fail "pkg-config finds no vaed-client in $PKG_CONFIG_PATH"
    [[ $pc_version == "$version" ]] || fail "vaed-client.pc says version $pc_version, the build $version"
    [[ $(pkg-config --variable=libdir vaed-client) == "$prefix/$libdir" ]] ||
      fail "vaed-client.pc libdir is $(pkg-config --variable=libdir vaed-client), not $prefix/$libdir"
    read -r -a flags <<< "$(pkg-config --cflags --libs vaed-client)"
    if ! "${CXX:-c++}" -std=c++20 -o "$binary" "$here/consumer/consumer.cc" \
           -DVAED_CONSUMER_VERSION="\"$pc_version\"" "${flags[@]}" > "$scratch/build.log" 2>&1; then
      cat "$scratch/build.log" >&2
      fail "the consumer does not build with \`pkg-config --cflags --libs vaed-client\`: ${flags[*]}"
    fi
    ;;
  *) fail "unknown mode '$mode' (cmake or pkg-config)" ;;
esac

# A clean environment; the library from the prefix only (the pkg-config
# build has no RUNPATH, the CMake one points into the prefix).
if ! out=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$prefix/$libdir" "$binary" 2>&1); then
  echo "$out" >&2
  fail "the consumer built with $mode does not run"
fi
echo "$out"
[[ $out == "vaed $version: "* ]] || fail "unexpected output (wanted 'vaed $version: ...')"
resolved=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$prefix/$libdir" ldd "$binary" | grep libvaed_client || true)
[[ $resolved == *"$prefix/$libdir/libvaed_client.so.0"* ]] ||
  fail "the consumer resolves libvaed_client as: $resolved"
echo "PASS: a consumer built with $mode against $prefix links and runs"
