#!/usr/bin/env bash
# Header hygiene of the LibTorch build (cmake/libtorch.cmake): the check
# source cmake/torch_headers_check.cc
#   - fails to compile with the wheel's own include folder first (its
#     bundled fmt 11 and protobuf shadow Debian's): the check can fail;
#   - compiles with the build's include view (BUILD_DIR/libtorch-include,
#     which leaves those two folders out), as every vaed compile line has it.
# Usage: torch_headers_test.sh SOURCE_DIR BUILD_DIR LIBTORCH_PREFIX CXX
set -euo pipefail
source_dir=$1
build=$2
prefix=$3
cxx=$4
check=$source_dir/cmake/torch_headers_check.cc
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -d "$prefix/torch/include/fmt" ] ||
  echo "note: $prefix/torch/include has no fmt folder: the first half checks nothing of it"
if "$cxx" -std=c++20 -fsyntax-only -isystem "$prefix/torch/include" "$check" 2> /dev/null; then
  fail "the check compiles with the wheel's own include folder first: it could not catch shadowing"
fi
echo "the wheel's own include folder: the check fails, as it must"
"$cxx" -std=c++20 -fsyntax-only -isystem "$build/libtorch-include" \
  -isystem "$build/libtorch-include/torch/csrc/api/include" "$check" ||
  fail "with the build's include view, fmt or protobuf is not Debian's"
echo "PASS: the include view leaves Debian's fmt and protobuf visible"
