#!/usr/bin/env bash
# Installs dependencies, builds synk, and runs the main job. Until the training example lands,
# the main job compiles every seed example through the whole front end and prints its typed IR.
# Usage: scripts/main.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSYNK_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target synkc
for f in examples/*.synk; do
  echo "== $f"
  "$build/compiler/synkc" "$f" --emit=ir
done
