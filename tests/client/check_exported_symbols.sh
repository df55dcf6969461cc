#!/usr/bin/env bash
# Checks the dynamic symbol table of libvaed_client.so: the
# library exports its public API and nothing else.
#   - every function vaed/vaed_c.h declares (VAED_C_API) is exported, and no
#     other C symbol;
#   - C++: members of vaed::client::Client, SharedRegion and CudaBuffer
#     (not of their internal Impl / Segment) and the vaed/status.h and
#     vaed/tensor_ref.h functions that API exposes (its replies,
#     vaed/replies.h, are plain structs with no symbols);
#   - anything else (the generated vaed::v1 protocol classes and their
#     descriptor table, vaed::client::ClientProtocol, vaed::wire,
#     host_region, the test seam vaed::client::internal, cppzmq, Boost,
#     protobuf, standard-library instantiations) fails the check, listed;
#   - every exported symbol, each C ABI function included, is defined at
#     the version VAED_0 (client/src/libvaed_client.map), the library's only
#     version node.
# Usage: check_exported_symbols.sh <path of libvaed_client.so> <path of vaed_c.h>
set -euo pipefail
lib=$1
header=$2

# nm prints a versioned symbol as name@@VERSION (@@: the default version,
# the one new programs link to) and each version node as an absolute
# symbol (type A) of its own name.
dynsyms=$(nm -D --defined-only "$lib" | awk '{print $2, $3}')
versioned=$(awk '$1 != "A" {print $2}' <<< "$dynsyms")
exported=$(sed 's/@.*//' <<< "$versioned" | c++filt | sort -u)
if [ -z "$exported" ]; then
  echo "FAIL: $lib exports nothing (or nm failed)" >&2
  exit 1
fi

declared=$(tr '\n' ' ' < "$header" | grep -oE 'VAED_C_API [^;(]*\bvaed_[a-z_]+\(' |
           grep -oE 'vaed_[a-z_]+\($' | tr -d '(' | sort -u)
if [ -z "$declared" ]; then
  echo "FAIL: found no VAED_C_API declarations in $header" >&2
  exit 1
fi

status=0
missing=$(comm -23 <(echo "$declared") <(echo "$exported" | grep -E '^vaed_[a-z_]+$' || true))
if [ -n "$missing" ]; then
  echo "FAIL: C ABI functions declared in $(basename "$header") but not exported:" >&2
  echo "$missing" | sed 's/^/  /' >&2
  status=1
fi
extra_c=$(comm -13 <(echo "$declared") <(echo "$exported" | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' || true))
if [ -n "$extra_c" ]; then
  echo "FAIL: C symbols exported but not declared in $(basename "$header"):" >&2
  echo "$extra_c" | sed 's/^/  /' >&2
  status=1
fi

nodes=$(awk '$1 == "A" {print $2}' <<< "$dynsyms" | sort -u | tr '\n' ' ')
if [ "$nodes" != "VAED_0 " ]; then
  echo "FAIL: expected the one version node VAED_0, found: ${nodes:-none}" >&2
  status=1
fi
unversioned_c=$(comm -23 <(echo "$declared") <(grep -E '^vaed_[a-z_]+@@VAED_0$' <<< "$versioned" |
                sed 's/@.*//' | sort -u))
if [ -n "$unversioned_c" ]; then
  echo "FAIL: C ABI functions not exported at version VAED_0:" >&2
  echo "$unversioned_c" | sed 's/^/  /' >&2
  status=1
fi
unversioned=$(grep -vE '@@VAED_0$' <<< "$versioned" || true)
if [ -n "$unversioned" ]; then
  echo "FAIL: symbols exported without the default version VAED_0:" >&2
  echo "$unversioned" | sed 's/^/  /' | head -20 >&2
  status=1
fi

public_cxx='^(vaed::client::(Client|SharedRegion|CudaBuffer)::'
public_cxx+='|vaed::Status::'
public_cxx+='|vaed::(StatusCodeName|ErrorReasonName|ErrnoStatus|DTypeSize|DTypeName|ParseDType|ShapeToString'
public_cxx+='|NumElements|ContiguousBytes|CheckByteRange)(\[abi:cxx11\])?\()'
internal_cxx='^vaed::client::(Client::Impl|SharedRegion::Segment)::'
outside=$(echo "$exported" | grep -vE '^[A-Za-z_][A-Za-z0-9_]*$' |
          { grep -vE "$public_cxx" || true; })
internal=$(echo "$exported" | { grep -E "$internal_cxx" || true; })
if [ -n "$outside$internal" ]; then
  echo "FAIL: $(basename "$lib") exports symbols outside the public API:" >&2
  printf '%s\n%s\n' "$outside" "$internal" | sed '/^$/d; s/^/  /' | head -50 >&2
  status=1
fi

if [ "$status" -eq 0 ]; then
  echo "OK: $(basename "$lib") exports $(echo "$declared" | wc -l) C ABI functions and" \
       "$(echo "$exported" | grep -cvE '^[A-Za-z_][A-Za-z0-9_]*$') C++ symbols of the public API," \
       "all at version VAED_0"
fi
exit "$status"
