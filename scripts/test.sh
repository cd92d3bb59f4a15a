#!/usr/bin/env bash
# Installs dependencies, builds synk, and runs every test under CTest (lit suites, GoogleTest
# units, multi-process runtime tests). GPU tests skip with a visible reason where no GPU exists.
# Usage: scripts/test.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$(nproc)"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 1200
