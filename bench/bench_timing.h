// How the benchmarks time a piece of work (header-only, bench use only): the best of N runs after
// a warm-up (CPU code generators), and the median of N runs after two warm-ups (CUDA, where each
// run ends with a device synchronisation).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace synk::bench {

// Best of `reps` timed runs after one warm-up (page faults, first touch of outputs); reps == 0
// times a single run with no warm-up.
inline double best_seconds(int reps, const std::function<void()>& fn) {
  if (reps == 0) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median wall time of `reps` runs of `f` (each ends with a device synchronisation), after two
// warm-up runs.
template <class F>
double median_ms(int reps, F&& f) {
  f();
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double start = now_ms();
    f();
    t.push_back(now_ms() - start);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace synk::bench
