#!/usr/bin/env bash
# The client library's installed headers are its public surface: each one
# compiles on its own (C++17, what docs/cpp-client.md builds with; the C ABI
# header as C11 too) from the installed include directory alone, and none
# reaches a CUDA header or a protobuf header: the C++ API returns the
# library's own reply types (vaed/replies.h), and a program built against
# it needs neither CUDA nor protobuf.
#
# Installs the component client_dev of BUILD_DIR into a scratch prefix.
# Usage: installed_headers_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: installed_headers_test.sh BUILD_DIR}
fail() { echo "FAIL: $*" >&2; exit 1; }

scratch=$(mktemp -d /tmp/vaed-headers-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
cmake --install "$build" --prefix "$prefix" --component client_dev > "$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; fail "cmake --install --component client_dev failed"; }
include=$prefix/include
mapfile -t headers < <(cd "$include" && find . -name '*.h' | sed 's|^\./||' | sort)
(( ${#headers[@]} > 0 )) || fail "no header installed under $include"

failures=0
for header in "${headers[@]}"; do
  # -H lists every header the compiler opens, one per line on stderr.
  if ! "${CXX:-c++}" -std=c++17 -fsyntax-only -H -I "$include" -x c++ - \
         <<< "#include <$header>" 2> "$scratch/trace"; then
    grep -v '^\.' "$scratch/trace" >&2 || true
    echo "FAIL: $header does not compile on its own from $include" >&2
    failures=$((failures + 1))
    continue
  fi
  if grep -E '^\.+ .*(cuda_runtime|cuda\.h|/cuda/|/targets/.*-linux/include/)' "$scratch/trace" >&2; then
    echo "FAIL: $header reaches a CUDA header (above)" >&2
    failures=$((failures + 1))
  fi
  if grep -E '^\.+ .*google/protobuf/' "$scratch/trace" >&2; then
    echo "FAIL: $header reaches a protobuf header (above); the public API is vaed's own types" >&2
    failures=$((failures + 1))
  fi
done
[[ -f $include/vaed/replies.h ]] || { echo "FAIL: vaed/replies.h is not installed" >&2; failures=$((failures + 1)); }
if [[ -e $include/vaed/v1 ]]; then
  echo "FAIL: generated protocol headers are installed: $(ls "$include/vaed/v1")" >&2
  failures=$((failures + 1))
fi
# The C ABI is C: it compiles as C11 too.
if ! "${CC:-cc}" -std=c11 -fsyntax-only -I "$include" -x c - <<< "#include <vaed/vaed_c.h>"; then
  echo "FAIL: vaed/vaed_c.h does not compile as C11" >&2
  failures=$((failures + 1))
fi
(( failures == 0 )) || fail "$failures problem(s) in the installed headers"
echo "PASS: ${#headers[@]} installed headers compile alone, none reaches CUDA or protobuf"
printf '  %s\n' "${headers[@]}"
