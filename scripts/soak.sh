#!/usr/bin/env bash
# Soak test of the runtime (not in CI): one million data-parallel calls plus as many collectives on
# 2 ranks, reporting every rank's RSS, open file descriptors and the group's /dev/shm entries at
# intervals; fails if a result is wrong or any of them keeps growing (bench/collectives_soak.cpp).
# Usage: scripts/soak.sh [BUILD_DIR] [ITERATIONS] [RANKS]
#   BUILD_DIR defaults to build; ITERATIONS to 1000000; RANKS to 2.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
iterations="${2:-1000000}"
ranks="${3:-2}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja
fi
cmake --build "$build" --target collectives_soak -j2
exec "$build/bench/collectives_soak" --iterations "$iterations" --ranks "$ranks" --reports 20
