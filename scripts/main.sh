#!/usr/bin/env bash
# Installs dependencies, builds synk, and runs the main job: data-parallel training of a
# 784-256-256-10 ReLU MLP on Fashion-MNIST (examples/fashion_mnist) with one rank per CPU core,
# 10 epochs of momentum SGD (lr 0.05, global batch 256), then the test accuracy; the trained
# parameters go to BUILD_DIR/fashion_mnist_params/*.npy unless --out says otherwise.
# Usage: scripts/main.sh [BUILD_DIR] [fashion_mnist options: --ranks N --epochs E --batch B --lr L ...]
#        (default BUILD_DIR: build; scripts/main.sh --help lists every option)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [[ $# -gt 0 && $1 != -* ]]; then
  build=$1
  shift
fi
scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSYNK_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target synkc fashion_mnist
args=("$@")
if [[ " ${args[*]-} " != *" --out"* ]]; then
  args+=(--out "$build/fashion_mnist_params")
fi
exec "$build/examples/fashion_mnist/fashion_mnist" "${args[@]}"
