// Cancellation points (see cancel.h).
#include "base/cancel.h"

namespace synk {

namespace detail {
std::atomic<bool> g_cancel_requested{false};

namespace {
thread_local void (*t_hook)() = nullptr;
thread_local bool t_running = false;
}  // namespace

void cancelled() {
  // The hook may throw; it must not run again from a point reached while it runs.
  if (!t_hook || t_running) return;
  t_running = true;
  struct Reset {
    ~Reset() { t_running = false; }
  } reset;
  t_hook();
}
}  // namespace detail

CancelScope::CancelScope(void (*hook)()) : previous_(detail::t_hook) { detail::t_hook = hook; }
CancelScope::~CancelScope() { detail::t_hook = previous_; }

void request_cancellation() { detail::g_cancel_requested.store(true, std::memory_order_release); }
void clear_cancellation() { detail::g_cancel_requested.store(false, std::memory_order_release); }

}  // namespace synk
