// A thread of the master that watches the workers of its process group while the master does
// anything else, in particular while it computes its own share of a long call, when it polls
// nothing. A worker's death makes its pidfd readable (waitid on each worker every 50 ms where
// the kernel has no pidfds); the watchdog then, at once: records the first rank that died, kills
// the other workers (so that nothing keeps computing for a lost group), removes the group's
// segment names (mappings stay valid until the master unmaps them), wakes the master if it
// sleeps on the `done` word, and requests cancellation (base/cancel.h), so that the master's
// computation stops at its next cancellation point and raises the RankError there.
//
// The watchdog never reaps a worker (waitid with WNOWAIT): the master's check_workers() reaps and
// describes it, exactly as without the watchdog.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <string>
#include <vector>

namespace synk::rt {

class Watchdog {
 public:
  Watchdog() = default;
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // pids[r] and pidfds[r] for ranks r = 1..N-1 (index 0 unused; pidfd -1 when none).
  // `wake` is a futex word the master may sleep on. Starts the thread.
  void start(std::vector<pid_t> pids, std::vector<int> pidfds, std::string group_prefix,
             std::atomic<uint32_t>* wake);
  // Stops and joins the thread (in the process that started it; a copy in a forked child only
  // forgets it). Idempotent.
  void stop();
  // The first rank the watchdog saw die, or -1.
  int first_dead() const { return first_dead_.load(std::memory_order_acquire); }

 private:
  static void* main(void* self);
  void watch();
  void on_death(int rank);

  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;
  std::string prefix_;
  std::atomic<uint32_t>* wake_ = nullptr;
  int stop_fd_ = -1;                    // eventfd: readable when stop() asks the thread to end
  pthread_t thread_{};
  pid_t owner_ = 0;                     // the process whose thread this is; 0: not running
  std::atomic<int> first_dead_{-1};
};

}  // namespace synk::rt
