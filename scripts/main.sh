#!/usr/bin/env bash
# Installs dependencies, builds synk, and runs the main job: data-parallel training of a
# 784-256-256-10 ReLU MLP on Fashion-MNIST (examples/fashion_mnist) with one rank per CPU core,
# 10 epochs of momentum SGD (lr 0.05, global batch 256), then the test accuracy; the trained
# parameters go to BUILD_DIR/fashion_mnist_params/*.npy unless --out says otherwise.
# `--model cnn` trains the CNN of examples/fashion_cnn instead (two conv-BN-ReLU-pool blocks and a
# dense head; parameters in BUILD_DIR/fashion_cnn_params); `--model resnet20` trains ResNet-20 of
# examples/resnet (parameters in BUILD_DIR/fashion_resnet20_params); `--model mlp` is the default.
# Usage: scripts/main.sh [BUILD_DIR] [--model mlp|cnn|resnet20] [options: --ranks N --epochs E --batch B --lr L ...]
#        (default BUILD_DIR: build; scripts/main.sh --help lists every option)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [[ $# -gt 0 && $1 != -* ]]; then
  build=$1
  shift
fi
# --model mlp|cnn|resnet20 picks the program (any other --model, a .synk path, goes to the program).
program=fashion_mnist
args=()
pick() {
  case $1 in
    cnn) program=fashion_cnn ;;
    resnet20) program=fashion_resnet20 ;;
    *) program=fashion_mnist ;;
  esac
}
while [[ $# -gt 0 ]]; do
  if [[ $1 == --model && ( ${2-} == mlp || ${2-} == cnn || ${2-} == resnet20 ) ]]; then
    pick "$2"
    shift 2
  elif [[ $1 == --model=mlp || $1 == --model=cnn || $1 == --model=resnet20 ]]; then
    pick "${1#--model=}"
    shift
  else
    args+=("$1")
    shift
  fi
done
scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSYNK_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target synkc "$program"
if [[ " ${args[*]-} " != *" --out"* ]]; then
  args+=(--out "$build/${program}_params")
fi
dir=$program
[[ $program == fashion_resnet20 ]] && dir=resnet
exec "$build/examples/$dir/$program" "${args[@]}"
