#!/usr/bin/env bash
# Installs the Debian 12 packages vaed needs to build, test and run.
# Idempotent; run as root. Set VAED_SKIP_APT_UPDATE=1 to skip `apt-get update`.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libopenblas0-pthread
  libzmq3-dev cppzmq-dev
  libprotobuf-dev protobuf-compiler
  libboost-dev
  libtomlplusplus-dev libspdlog-dev libcli11-dev nlohmann-json3-dev
  libsystemd-dev systemd
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev libacl1-dev
  libgloo-dev
  ffmpeg
  pybind11-dev python3-dev python3-numpy python3-pytest python3-venv python3-torch
  clang libclang-rt-14-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if [ "${VAED_SKIP_APT_UPDATE:-0}" != 1 ]; then apt-get update -q; fi
apt-get install -y -q --no-install-recommends "${missing[@]}"
