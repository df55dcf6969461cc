#!/usr/bin/env bash
# Sets up and runs the whole vaed test suite on Debian 12 (as root):
# installs the Debian packages, configures and builds the CPU preset, runs
# every test with ctest. Tests that need ../shared (real weights, golden
# data) read it in place and skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
# Integration tests start daemons and decode real video; run them one at a
# time so their timings and CPU use stay predictable on small machines.
ctest --preset default --timeout 900 "$@"
