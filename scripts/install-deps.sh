#!/usr/bin/env bash
# Installs the Debian 12 packages vaed needs to build, test and run, then
# vaed's one LibTorch: PyPI's torch 2.11.0 wheel, pinned by SHA-256, cached
# and installed by scripts/fetch-libtorch.sh (Debian's LibTorch 1.13 is not
# used). Idempotent; a second run downloads nothing. Run as root. Set
# VAED_SKIP_APT_UPDATE=1 to skip `apt-get update`.
#
# --test-tools (scripts/test.sh) also puts Prometheus' `promtool` at
# /usr/local/bin/promtool for the metrics tests: extracted from Debian's
# prometheus package without installing it (installing it would also set
# up and start a Prometheus server).
set -euo pipefail
test_tools=0
[ "${1:-}" = "--test-tools" ] && test_tools=1

install_promtool() {
  if command -v promtool >/dev/null; then return 0; fi
  local dir
  dir=$(mktemp -d)
  if (cd "$dir" && apt-get download -q prometheus >/dev/null 2>&1) &&
     dpkg-deb -x "$dir"/prometheus_*.deb "$dir/x" && [ -x "$dir/x/usr/bin/promtool" ]; then
    install -m 0755 "$dir/x/usr/bin/promtool" /usr/local/bin/promtool
    echo "install-deps: promtool from Debian's prometheus package -> /usr/local/bin/promtool"
  else
    echo "install-deps: could not fetch promtool (the metrics tests use their own checker)"
  fi
  rm -rf "$dir"
}
packages=(
  build-essential cmake ninja-build pkg-config
  file                           # cpack -G DEB sorts the packaged files with it (cmake/packaging.cmake)
  debootstrap                    # a fresh Debian 12 root for the packages (tests/install/fresh_debian_decode_test.sh)
  ccache                         # compiler cache (scripts/ccache-env.sh); builds work without it
  python3-pip python3-venv        # scripts/fetch-libtorch.sh: pip download, the torch venv
  libzmq3-dev cppzmq-dev
  libprotobuf-dev protobuf-compiler
  libboost-dev
  libtomlplusplus-dev libspdlog-dev libcli11-dev nlohmann-json3-dev
  libcpp-httplib-dev             # Prometheus endpoint (daemon/server/metrics_http.cc)
  python3-matplotlib             # benchmark charts (PNG)
  libsystemd-dev systemd
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev libacl1-dev
  libgloo-dev
  ffmpeg
  pybind11-dev python3-dev python3-numpy python3-pytest
  clang libclang-rt-14-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  if [ "${VAED_SKIP_APT_UPDATE:-0}" != 1 ]; then apt-get update -q; fi
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [ "$test_tools" = 1 ]; then install_promtool; fi
"$(dirname "$0")/fetch-libtorch.sh"
# Not a Debian package: configuring against the torch wheel (CUDA 13.0
# build) needs NVIDIA's CUDA 13.0 toolkit, the CPU build too.
if ! command -v nvcc > /dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: no CUDA toolkit (nvcc) found: configuring vaed needs NVIDIA's CUDA 13.0" \
       "toolkit in /usr/local/cuda, the CPU build too (running the CPU daemon does not)" >&2
fi
