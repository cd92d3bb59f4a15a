// A probe of the machine, not of synk: the round trip of one cache line between two CPUs, timed
// with two processes pinned to them that bounce a counter through shared memory (no synk code, no
// system call while timing). collectives_bench takes it before every fresh group, so that a group
// that runs faster or slower than the others can be set beside the machine's own state at that
// moment (on a virtual machine the hypervisor decides where the vCPUs run, and that can change
// between one run and the next: docs/performance/collectives.md, "Fresh groups").
#pragma once

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>

namespace synk::bench {

inline bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// Nanoseconds per round trip (A writes, B answers), median of 5 batches of `trips`; 0 when the
// CPUs cannot be pinned or the child cannot be made.
inline double cache_line_round_trip_ns(int cpu_a, int cpu_b, int trips = 20000) {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 0;
  auto* ball = new (mem) std::atomic<int64_t>(0);
  constexpr int kBatches = 5;
  const pid_t child = ::fork();   // qualified: synk::fork is visible where synk/synk.h came first
  if (child < 0) {
    munmap(mem, 4096);
    return 0;
  }
  if (child == 0) {
    if (!pin_to_cpu(cpu_b)) _exit(1);
    for (int64_t expect = 1; expect < int64_t(2) * trips * kBatches; expect += 2) {
      while (ball->load(std::memory_order_acquire) != expect) {}
      ball->store(expect + 1, std::memory_order_release);
    }
    _exit(0);
  }
  cpu_set_t saved;
  sched_getaffinity(0, sizeof saved, &saved);
  double batches[kBatches] = {};
  if (pin_to_cpu(cpu_a)) {
    int64_t next = 0;
    for (double& ns : batches) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < trips; ++i, next += 2) {
        ball->store(next + 1, std::memory_order_release);
        for (int64_t spins = 0; ball->load(std::memory_order_acquire) != next + 2; ++spins)
          if ((spins & 0xFFFFF) == 0xFFFFF && waitpid(child, nullptr, WNOHANG) != 0) {   // the child is gone
            sched_setaffinity(0, sizeof saved, &saved);
            munmap(mem, 4096);
            return 0;
          }
      }
      ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / trips;
    }
  }
  sched_setaffinity(0, sizeof saved, &saved);
  int status = 0;
  waitpid(child, &status, 0);
  munmap(mem, 4096);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
  std::sort(batches, batches + kBatches);
  return batches[kBatches / 2];
}

}  // namespace synk::bench
