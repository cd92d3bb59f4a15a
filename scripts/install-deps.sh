#!/usr/bin/env bash
# Installs every Debian package synk needs to build, test and benchmark, the Python package
# included (pybind11-dev and python3-dev build it; python3-numpy and python3-pytest run it and its
# tests). Idempotent: packages already present are left alone, so running it twice costs one
# `apt-get update`.
# CUDA is not installed here (Debian has none): the build finds the machine image's toolkit at
# /usr/local/cuda when present and builds CPU-only otherwise.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds python3-torch, the PyTorch baseline of
# bench/train_bench.py; neither the build nor the tests need it)
set -euo pipefail

packages=(
  cmake ninja-build g++ python3 python3-matplotlib
  clang-14 llvm-14-dev llvm-14-tools libclang-14-dev libclang-cpp14-dev libclang-common-14-dev
  libclang-rt-14-dev
  libboost-dev libopenblas-serial-dev libdnnl-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev libxxhash-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist
  pybind11-dev python3-dev python3-numpy python3-pytest
)
if [[ "${1-}" == "--bench" ]]; then
  packages+=(python3-torch)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
