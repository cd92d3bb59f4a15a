// How the benchmarks time a piece of work (header-only, bench use only): the best of N runs after
// a warm-up (CPU code generators), the median of N runs after two warm-ups (CUDA, where each run
// ends with a device synchronisation), and the median per call over batches of calls (collectives,
// synk's and MPI's timed alike).
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

// The median of `v` (the upper one of an even count).
inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  return median_of(std::move(t));
}

// Seconds per call: the median over batches of back-to-back calls, batches of about 2 ms, at least
// `reps` of them and as many as fit in about 0.3 s (the median shrugs off batches hit by
// preemption on a loaded machine). `run_batch(calls)` makes `calls` calls and returns the seconds
// they took.
template <class RunBatch>
double median_seconds_per_call(int reps, RunBatch&& run_batch) {
  int batch = 1;
  std::vector<double> per_call;
  double spent = 0;
  for (int b = 0; b < 1000 && (b <= reps || spent < 0.3); ++b) {
    const double seconds = run_batch(batch);
    spent += seconds;
    if (b == 0) {   // the first batch warms up and sizes the rest
      batch = int(std::clamp(2e-3 / std::max(seconds, 1e-9), 1.0, 100000.0));
      continue;
    }
    per_call.push_back(seconds / batch);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

// median_seconds_per_call of `call()` timed on this process's clock.
template <class Call>
double seconds_per_call(int reps, Call&& call) {
  return median_seconds_per_call(reps, [&](int calls) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

}  // namespace synk::bench
