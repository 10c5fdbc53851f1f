#!/usr/bin/env bash
# Installs everything sextant needs on a fresh Debian/Ubuntu machine:
# the C++ dependencies from Debian packages and the Python ones from PyPI.
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is optional and not installed here.
set -euo pipefail
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin        # launcher everywhere and the host communicator
  libopenblas-dev                   # host gemm
  nlohmann-json3-dev libcli11-dev   # results JSON, command line
  libtomlplusplus-dev               # --config files (TOML)
  libssl-dev                        # SHA-256 of training data (OpenSSL's libcrypto)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format git                  # scripts/check_format.sh: the style of changed files
  python3 python3-pip
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo_cmd apt-get update -q
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
here=$(cd "$(dirname "$0")" && pwd)
python3 -m pip install -q -r "$here/requirements.txt" 2>/dev/null ||
  python3 -m pip install -q --break-system-packages -r "$here/requirements.txt"
echo "sextant dependencies installed"
