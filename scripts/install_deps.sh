#!/usr/bin/env bash
# Installs everything sextant needs on a fresh Debian/Ubuntu machine:
# the C++ dependencies from Debian packages and the Python ones from PyPI.
# The CUDA toolkit (nvcc, cuBLAS, cuDNN, NCCL) is optional and not installed
# here; with it, cudnn-frontend's headers are fetched (below).
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
# The CUDA build's fused attention uses cuDNN's graph API through
# cudnn-frontend, a header-only library: the pinned release's headers come
# from its PyPI wheel (any wheel holds the same headers) into a cache that
# CMake looks in. cuDNN itself is found at run time.
if command -v nvcc >/dev/null 2>&1; then
  fe_version=1.32.0
  fe_dir="${XDG_CACHE_HOME:-$HOME/.cache}/sextant/cudnn-frontend-$fe_version"
  if [ ! -f "$fe_dir/include/cudnn_frontend.h" ]; then
    fe_tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
      --abi cp311 --platform manylinux_2_28_x86_64 "nvidia-cudnn-frontend==$fe_version" -d "$fe_tmp"
    python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])' "$fe_tmp"/*.whl "$fe_dir"
    rm -rf "$fe_tmp"
  fi
fi
here=$(cd "$(dirname "$0")" && pwd)
python3 -m pip install -q -r "$here/requirements.txt" 2>/dev/null ||
  python3 -m pip install -q --break-system-packages -r "$here/requirements.txt"
echo "sextant dependencies installed"
