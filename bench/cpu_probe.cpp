// cpu_probe: the machine's state, for benchmarks written in Python (bench/epoch_bench.py): prints
// the cache-line round trip between CPU 0 and CPU 1 (bench/cpu_probe.h) as `probe_ns N`, or
// `probe_ns 0` where the CPUs cannot be pinned (fewer than two). Exit status 0 either way.
#include <cstdio>

#include "bench/cpu_probe.h"

int main() {
  std::printf("probe_ns %.0f\n", synk::bench::cache_line_round_trip_ns(0, 1));
  return 0;
}
