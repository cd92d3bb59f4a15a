// The master's watchdog thread (see watchdog.h).
#include "runtime/group/watchdog.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/cancel.h"
#include "runtime/group/futex.h"
#include "runtime/group/shm.h"

namespace synk::rt {

namespace {
// Where the kernel gives no pidfds, how often every worker is checked.
constexpr int kFallbackPollMs = 50;

bool exited(pid_t pid) {
  siginfo_t info;
  info.si_pid = 0;
  if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid != 0;
}
}  // namespace

Watchdog::~Watchdog() { stop(); }

void Watchdog::start(std::vector<pid_t> pids, std::vector<int> pidfds, std::string group_prefix,
                     std::atomic<uint32_t>* wake) {
  stop();
  pids_ = std::move(pids);
  pidfds_ = std::move(pidfds);
  prefix_ = std::move(group_prefix);
  wake_ = wake;
  first_dead_.store(-1);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return;   // no watchdog: deaths are still found by every wait's polling
  // The thread must not take the signals the master handles for cleanup (cleanup.h): they are
  // meant for the master's thread, which may be interrupted safely.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(&thread_, nullptr, &Watchdog::main, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    ::close(stop_fd_);
    stop_fd_ = -1;
    return;
  }
  owner_ = getpid();
}

void Watchdog::stop() {
  if (owner_ == 0) return;
  if (owner_ == getpid()) {
    uint64_t one = 1;
    ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
    (void)ignored;
    pthread_join(thread_, nullptr);
    ::close(stop_fd_);
  }
  owner_ = 0;
  stop_fd_ = -1;
}

void* Watchdog::main(void* self) {
  static_cast<Watchdog*>(self)->watch();
  return nullptr;
}

void Watchdog::watch() {
  const bool have_pidfds = [&] {
    for (size_t r = 1; r < pids_.size(); ++r)
      if (pidfds_[r] < 0) return false;
    return true;
  }();
  std::vector<pollfd> fds;
  fds.push_back({stop_fd_, POLLIN, 0});
  if (have_pidfds)
    for (size_t r = 1; r < pids_.size(); ++r) fds.push_back({pidfds_[r], POLLIN, 0});
  for (;;) {
    for (pollfd& p : fds) p.revents = 0;
    int rc = ::poll(fds.data(), nfds_t(fds.size()), have_pidfds ? -1 : kFallbackPollMs);
    if (rc < 0 && errno != EINTR) return;
    if (fds[0].revents) return;
    for (size_t r = 1; r < pids_.size(); ++r) {
      bool dead = have_pidfds ? (fds[r].revents != 0) : exited(pids_[r]);
      if (dead) {
        on_death(int(r));
        return;   // the group is lost: nothing more to watch
      }
    }
  }
}

void Watchdog::on_death(int rank) {
  first_dead_.store(rank, std::memory_order_release);
  for (size_t r = 1; r < pids_.size(); ++r) {
    if (int(r) == rank) continue;
    if (pidfds_[r] >= 0) syscall(SYS_pidfd_send_signal, pidfds_[r], SIGKILL, nullptr, 0);
    else if (!exited(pids_[r])) ::kill(pids_[r], SIGKILL);   // not reaped yet, so the pid is still its
  }
  shm::remove_all(prefix_);
  request_cancellation();
  if (wake_) futex_wake_all(wake_);
}

}  // namespace synk::rt
