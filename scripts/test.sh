#!/usr/bin/env bash
# Sets up and runs the whole vaed test suite on Debian 12 (as root):
# installs the Debian packages, configures and builds the CPU preset, runs
# every test with ctest, then the sanitizer pass (scripts/sanitize.sh) and a
# 60 s fuzz run (scripts/fuzz.sh). Tests that need ../shared (real weights, golden
# data) read it in place and skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test-tools
cmake --preset default
cmake --build --preset default -j "$(nproc)"
# Integration tests start daemons and decode real video; run them one at a
# time so their timings and CPU use stay predictable on small machines.
ctest --preset default --timeout 900 "$@"

# The reliability passes (issue 6), on a full run only (not with ctest
# filters): the handler, hostile-input and load tests once more under
# AddressSanitizer + UndefinedBehaviorSanitizer (a shorter load, 8 x 25;
# the slow flood and crash cases run in the plain suite above), then a
# bounded libFuzzer run on the protocol decoder and request validator.
if [ $# -eq 0 ]; then
  VAED_LOAD_DECODES=25 scripts/sanitize.sh -E "Flood|ClientKilled"
  scripts/fuzz.sh 60
fi
