// Raw futex system calls for futex.h (glibc has no wrapper).
#include "runtime/group/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace synk::rt {

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  timespec ts{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  // EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again": the caller re-checks.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace synk::rt
