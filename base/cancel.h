// Cancellation of a computation whose result nobody will use any more: in practice, a rank's
// share of a call whose process group was lost (a worker died) while the master computed its
// own share. Long computations call cancellation_point() at safe points (between the steps of a
// compiled function, between the parts of a call), where throwing leaves nothing half done.
// After request_cancellation() (from any thread), the next point on a thread that armed a hook
// with a CancelScope runs the hook, which throws the error to report; elsewhere points do nothing.
// A point costs one relaxed atomic load.
#pragma once

#include <atomic>

namespace synk {

namespace detail {
extern std::atomic<bool> g_cancel_requested;
void cancelled();
}  // namespace detail

inline void cancellation_point() {
  if (detail::g_cancel_requested.load(std::memory_order_relaxed)) detail::cancelled();
}

// Arms `hook` on this thread for the scope's lifetime (scopes nest; the innermost wins).
class CancelScope {
 public:
  explicit CancelScope(void (*hook)());
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  void (*previous_)();
};

void request_cancellation();
void clear_cancellation();
inline bool cancellation_requested() { return detail::g_cancel_requested.load(std::memory_order_acquire); }

}  // namespace synk
