// Waiting between processes on 32-bit words in shared memory: spin briefly (cheap when every rank
// has its own core), then poll while yielding the CPU (cheap when ranks share cores: the peer we
// wait for gets the core at once, without a futex wake-up's latency), then sleep on a futex in
// bounded slices so that the waiter regularly checks for dead peers and aborts (no wait is ever
// unbounded). Also an N-party barrier built on it.
//
// The wake side only makes the futex system call when someone is asleep: a waiter announces
// itself in `waiters` before it re-checks the value and sleeps (sequentially consistent on both
// sides, so no wake-up is ever lost).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include <immintrin.h>
#include <sched.h>

namespace synk::rt {

// FUTEX_WAIT on `word` while it holds `expected`, at most `timeout_ns` (shared, not private:
// the word lives in memory mapped by several processes). Returns on wake, timeout, or change.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
void futex_wake_all(std::atomic<uint32_t>* word);

struct WaitPolicy {
  int64_t spin_ns = 50'000;          // busy-wait this long
  int64_t yield_ns = 0;              // then poll with sched_yield() this long, then sleep
  int64_t sleep_slice_ns = 20'000'000;   // each futex sleep lasts at most this long
};

// A word others wait on, in shared memory, with the count of waiters asleep on it. Embed it where
// other fields should share its cache line (the group's command line); else use WaitWord.
struct FutexWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> waiters{0};

  void store(uint32_t v) {
    value.store(v, std::memory_order_seq_cst);
    wake_if_waiting();
  }
  uint32_t add(uint32_t delta) {
    uint32_t old = value.fetch_add(delta, std::memory_order_seq_cst);
    wake_if_waiting();
    return old + delta;
  }
  void wake_if_waiting() {
    if (waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&value);
  }
  // For a word that only wakes sleepers of wait_for (whose condition lies elsewhere): call it after
  // a sequentially consistent store of what the condition reads; it touches the word only when
  // someone sleeps, so the common case costs no write to a line the waiters read.
  void bump_if_waiting() {
    if (waiters.load(std::memory_order_seq_cst) != 0) {
      value.fetch_add(1, std::memory_order_seq_cst);
      futex_wake_all(&value);
    }
  }
};

// 64-byte aligned so waiters of different words do not share cache lines.
struct alignas(64) WaitWord : FutexWord {};

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One busy phase of a wait, for up to `budget_ns`: `pause()` between tests of `ready()`. The clock,
// dearer than a load, is read when the iteration count has none of the bits of `clock_mask` set.
// Whether `ready()` held before the budget ran out.
template <class Ready, class Pause>
bool busy_wait(Ready& ready, int64_t budget_ns, uint32_t clock_mask, Pause pause) {
  if (budget_ns <= 0) return false;
  int64_t deadline = now_ns() + budget_ns;
  for (uint32_t i = 1;; ++i) {
    pause();
    if (ready()) return true;
    if ((i & clock_mask) == 0 && now_ns() > deadline) return false;
  }
}

// Waits until `ready()` holds; ready() may read any shared memory. A sleeper sleeps on `word`, so
// whoever makes ready() hold must then bump or store `word` (FutexWord::bump_if_waiting, store,
// add), after a sequentially consistent store of what ready() reads. After the spin phase, calls
// `poll()` after every sleep slice; poll() throws (or exits) to abandon the wait, e.g. when a peer
// died.
template <class Ready, class Poll>
void wait_for(FutexWord& word, Ready ready, const WaitPolicy& policy, Poll poll) {
  if (ready()) return;
  if (busy_wait(ready, policy.spin_ns, 63, [] { _mm_pause(); })) return;
  if (busy_wait(ready, policy.yield_ns, 7, [] { sched_yield(); })) return;
  for (;;) {
    word.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = word.value.load(std::memory_order_seq_cst);
    if (!ready()) futex_wait(&word.value, v, policy.sleep_slice_ns);
    word.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (ready()) return;
    poll();
  }
}

// Waits until `ready(word.value)` holds, and returns the value that made it hold.
template <class Ready, class Poll>
uint32_t wait_until(FutexWord& word, Ready ready, const WaitPolicy& policy, Poll poll) {
  uint32_t v = 0;
  wait_for(word, [&word, &ready, &v] {
    v = word.value.load(std::memory_order_acquire);
    return ready(v);
  }, policy, poll);
  return v;
}

// A reusable N-party barrier in shared memory (sense by generation count).
struct alignas(64) SharedBarrier {
  WaitWord generation;
  alignas(64) std::atomic<uint32_t> arrived{0};
  uint32_t parties = 0;

  template <class Poll>
  void arrive_and_wait(const WaitPolicy& policy, Poll poll) {
    uint32_t gen = generation.value.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == parties) {
      arrived.store(0, std::memory_order_relaxed);
      generation.add(1);
      return;
    }
    wait_until(generation, [gen](uint32_t v) { return v != gen; }, policy, poll);
  }
};

}  // namespace synk::rt
