#!/usr/bin/env bash
# The client library's installed headers are its public surface: each one
# compiles on its own (C++17, what docs/cpp-client.md builds with; the C ABI
# header as C11 too) from the installed include directory alone, and none
# reaches a CUDA header. No
# header outside PROTOBUF_PENDING reaches a protobuf header, and each one
# listed there still does: the list is what remains of the generated
# protocol in the public API, and it only shrinks.
#
# Installs the component client_dev of BUILD_DIR into a scratch prefix.
# Usage: installed_headers_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: installed_headers_test.sh BUILD_DIR}
fail() { echo "FAIL: $*" >&2; exit 1; }

# client.h returns the generated reply classes (vaed/v1/vaed.pb.h).
PROTOBUF_PENDING=(vaed/client.h vaed/v1/vaed.pb.h)

scratch=$(mktemp -d /tmp/vaed-headers-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
cmake --install "$build" --prefix "$prefix" --component client_dev > "$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; fail "cmake --install --component client_dev failed"; }
include=$prefix/include
mapfile -t headers < <(cd "$include" && find . -name '*.h' | sed 's|^\./||' | sort)
(( ${#headers[@]} > 0 )) || fail "no header installed under $include"

pending() {
  local h
  for h in "${PROTOBUF_PENDING[@]}"; do [[ $h == "$1" ]] && return 0; done
  return 1
}

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
  if grep -qE '^\.+ .*google/protobuf/' "$scratch/trace"; then
    if ! pending "$header"; then
      echo "FAIL: $header reaches a protobuf header; the public API is vaed's own types" >&2
      failures=$((failures + 1))
    fi
  elif pending "$header"; then
    echo "FAIL: $header no longer reaches protobuf: take it off PROTOBUF_PENDING" >&2
    failures=$((failures + 1))
  fi
done
for header in "${PROTOBUF_PENDING[@]}"; do
  [[ -f $include/$header ]] || { echo "FAIL: $header is listed but not installed" >&2; failures=$((failures + 1)); }
done
# The C ABI is C: it compiles as C11 too.
if ! "${CC:-cc}" -std=c11 -fsyntax-only -I "$include" -x c - <<< "#include <vaed/vaed_c.h>"; then
  echo "FAIL: vaed/vaed_c.h does not compile as C11" >&2
  failures=$((failures + 1))
fi
(( failures == 0 )) || fail "$failures problem(s) in the installed headers"
echo "PASS: ${#headers[@]} installed headers compile alone, none reaches CUDA;" \
     "protobuf only through ${PROTOBUF_PENDING[*]}"
printf '  %s\n' "${headers[@]}"
