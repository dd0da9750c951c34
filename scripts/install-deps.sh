#!/usr/bin/env bash
# Installs what building and testing gpualloc needs on a Debian 12 machine
# that already has the CUDA 13.0 toolkit: Clang/LLVM 22 (compiler, pass
# plugin headers, FileCheck), CMake, Ninja, and lit from PyPI.
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(clang-22 llvm-22-dev llvm-22-tools libclang-22-dev cmake ninja-build)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

python3 -c "import lit, psutil" 2>/dev/null || python3 -m pip install -q lit psutil  # psutil: per-test time limits

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda_home/bin/nvcc" ]; then
  echo "install-deps: no CUDA toolkit at $cuda_home (set CUDA_HOME); gpualloc needs CUDA 13.0 with cuRAND headers" >&2
  exit 1
fi
echo "install-deps: ok (clang-22, llvm-22, lit, CUDA at $cuda_home)"
