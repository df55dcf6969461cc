#!/usr/bin/env bash
# Regression: `cmake --install` put vaectl in
# <prefix>/bin and libvaed_client.so.0 in <prefix>/lib, but vaectl's
# install RPATH was empty, so the installed vaectl failed with "cannot open
# shared object file: libvaed_client.so.0". Installs the build into a
# scratch prefix and runs the installed vaectl with a clean environment.
#
# Usage: installed_vaectl_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: installed_vaectl_test.sh BUILD_DIR}
# The library directory of the install (GNUInstallDirs: lib, or
# lib/x86_64-linux-gnu for a build configured for the prefix /usr).
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -n $libdir ]] || { echo "FAIL: no CMAKE_INSTALL_LIBDIR in $build/CMakeCache.txt" >&2; exit 1; }
prefix=$(mktemp -d /tmp/vaed-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || {
  cat "$prefix.log" >&2
  echo "FAIL: cmake --install failed" >&2
  exit 1
}
rm -f "$prefix.log"
for f in bin/vaectl sbin/vaed "$libdir/libvaed_client.so.0" include/vaed/client.h; do
  [[ -e $prefix/$f ]] || { echo "FAIL: $f was not installed under $prefix" >&2; exit 1; }
done
# A clean environment: no LD_LIBRARY_PATH pointing into the build tree.
if ! out=$(env -i PATH=/usr/bin:/bin "$prefix/bin/vaectl" --help 2>&1); then
  echo "FAIL: the installed vaectl does not start:" >&2
  echo "$out" >&2
  exit 1
fi
grep -q "vaectl" <<< "$out" || { echo "FAIL: unexpected --help output: $out" >&2; exit 1; }
resolved=$(env -i PATH=/usr/bin:/bin ldd "$prefix/bin/vaectl" | grep libvaed_client || true)
path=$(awk '{print $3}' <<< "$resolved")
if [[ -z $path || $(realpath "$path") != $(realpath "$prefix/$libdir/libvaed_client.so.0") ]]; then
  echo "FAIL: the installed vaectl resolves libvaed_client as: $resolved" >&2
  exit 1
fi
echo "PASS: the installed vaectl starts and loads $prefix/$libdir/libvaed_client.so.0"
