// Cleanup when a program ends by a signal (see cleanup.h). Everything the handlers touch is
// prepared beforehand in plain globals; the handlers themselves make raw system calls only
// (kill, pidfd_send_signal, poll, waitid, getdents64, unlinkat, write, sigaction, raise).
#include "runtime/group/cleanup.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/group/segment_guard.h"
#include "runtime/group/shm.h"

namespace synk::rt::cleanup {

namespace {

constexpr int kTermSignals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGXCPU, SIGXFSZ};
constexpr int kFaultSignals[] = {SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS};
constexpr int kMaxWorkers = 1024;
constexpr size_t kPrefixMax = 160;

std::atomic<pid_t> g_owner{0};        // the process whose segments the handler removes
bool g_is_worker = false;
char g_prefix[kPrefixMax];            // its session prefix
int g_dir_fd = -1;                    // /dev/shm
struct sigaction g_old[NSIG];         // dispositions before synk took the signal
bool g_taken[NSIG];
std::atomic<int> g_nworkers{0};
std::atomic<pid_t> g_worker_pid[kMaxWorkers];
std::atomic<int> g_worker_fd[kMaxWorkers];
std::atomic<int> g_cleaning{0};
std::mutex g_prepare_mutex;
// An alternate stack for the thread that prepared the process, so that a stack overflow's
// SIGSEGV still runs the handler.
alignas(16) char g_altstack[64 * 1024];

// Rank 1's janitor.
char g_janitor_prefix[kPrefixMax];

// set_scratch_directory: its parent (an open directory) and its name.
std::atomic<int> g_scratch_parent_fd{-1};
char g_scratch_name[256];

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

bool starts_with(const char* s, const char* prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return false;
  return true;
}

// Unlinks every file of the open directory `dir` whose name starts with `prefix` ("": every
// one); returns how many. Two passes: entries removed while a directory is read may hide others
// from the same pass.
int unlink_entries(int dir, const char* prefix) {
  alignas(8) char buf[4096];
  int removed = 0;
  for (int pass = 0; pass < 2; ++pass) {
    lseek(dir, 0, SEEK_SET);
    for (;;) {
      long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
        const bool dots = d->d_name[0] == '.' && (!d->d_name[1] || (d->d_name[1] == '.' && !d->d_name[2]));
        if (!dots && starts_with(d->d_name, prefix) && unlinkat(dir, d->d_name, 0) == 0) ++removed;
        off += d->d_reclen;
      }
    }
  }
  return removed;
}

// Unlinks every entry of /dev/shm starting with `prefix`; returns how many.
int remove_with_prefix(const char* prefix) {
  if (g_dir_fd < 0 || !prefix[0]) return 0;
  return unlink_entries(g_dir_fd, prefix);
}

// Removes the scratch directory's files (it is flat), then the directory.
void remove_scratch_directory() {
  const int parent = g_scratch_parent_fd.load();
  if (parent < 0) return;
  const int dir = openat(parent, g_scratch_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    unlink_entries(dir, "");
    close(dir);
  }
  unlinkat(parent, g_scratch_name, AT_REMOVEDIR);
}

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// SIGKILLs every registered worker and waits (at most 2 s) until each has exited, so that none
// creates a segment after the removal. Returns how many were signalled.
int stop_workers() {
  const int n = std::min(g_nworkers.load(), kMaxWorkers);
  int stopped = 0;
  for (int i = 0; i < n; ++i) {
    pid_t pid = g_worker_pid[i].load();
    if (pid <= 0) continue;
    int fd = g_worker_fd[i].load();
    if (fd >= 0 ? syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0) == 0 : kill(pid, SIGKILL) == 0) ++stopped;
  }
  const int64_t deadline = monotonic_ms() + 2000;
  for (int i = 0; i < n; ++i) {
    pid_t pid = g_worker_pid[i].load();
    if (pid <= 0) continue;
    int fd = g_worker_fd[i].load();
    for (;;) {
      int64_t left = deadline - monotonic_ms();
      if (left <= 0) break;
      if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        int rc = poll(&p, 1, int(left));
        if (rc != 0 && !(rc < 0 && errno == EINTR)) break;
      } else {
        siginfo_t info;
        info.si_pid = 0;
        if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0) break;
        timespec ms{0, 1'000'000};
        nanosleep(&ms, nullptr);
      }
    }
  }
  return stopped;
}

// Appends to a fixed buffer (snprintf is not async-signal-safe).
struct Line {
  char text[256];
  size_t len = 0;
  Line& add(const char* s) {
    while (*s && len < sizeof text - 1) text[len++] = *s++;
    return *this;
  }
  Line& add(long v) {
    char digits[24];
    int k = 0;
    bool negative = v < 0;
    unsigned long u = negative ? 0UL - (unsigned long)v : (unsigned long)v;
    do digits[k++] = char('0' + u % 10); while ((u /= 10) && k < 23);
    if (negative) add("-");
    while (k > 0 && len < sizeof text - 1) text[len++] = digits[--k];
    return *this;
  }
};

bool is_fault(int sig) {
  for (int s : kFaultSignals)
    if (s == sig) return true;
  return false;
}

char g_report_prefix[128] = "";

void report(int sig, int stopped) {
  if (sig == SIGPIPE) return;   // a closed pipe ends programs silently
  Line line;
  const char* abbrev = sigabbrev_np(sig);
  line.add("synk: ").add(g_report_prefix);
  if (sig == SIGINT) line.add("interrupted (SIGINT)");
  else line.add(is_fault(sig) ? "crashed with signal " : "terminated by signal ").add(long(sig)).add(" (SIG").add(abbrev ? abbrev : "?").add(")");
  if (stopped > 0) line.add(": stopped ").add(long(stopped)).add(stopped == 1 ? " worker process and" : " worker processes and");
  else line.add(":");
  line.add(" removed the program's shared memory\n");
  ssize_t ignored = write(STDERR_FILENO, line.text, line.len);
  (void)ignored;
}

void on_signal(int sig, siginfo_t*, void*) {
  const int saved_errno = errno;
  if (getpid() == g_owner.load() && g_cleaning.exchange(1) == 0) {
    int stopped = stop_workers();
    remove_with_prefix(g_prefix);
    remove_scratch_directory();
    segment_guard::stop();   // its work is done
    report(sig, stopped);
  }
  // Die of the signal as without synk: the previous disposition, the signal raised again (it is
  // blocked until this handler returns, then delivered; a fault also recurs at its instruction).
  sigaction(sig, &g_old[sig], nullptr);
  raise(sig);
  errno = saved_errno;
}

bool is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == &on_signal;
}

void take_signals() {
  struct sigaction sa {};
  sa.sa_sigaction = &on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : kTermSignals) sigaddset(&sa.sa_mask, s);
  for (int s : kFaultSignals) sigaddset(&sa.sa_mask, s);
  auto take = [&](int sig) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0 || is_ours(current)) return;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) return;   // the program's own
    g_old[sig] = current;
    if (sigaction(sig, &sa, nullptr) == 0) g_taken[sig] = true;
  };
  for (int s : kTermSignals) take(s);
  for (int s : kFaultSignals) take(s);
  stack_t current;
  if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
    stack_t ss{};
    ss.ss_sp = g_altstack;
    ss.ss_size = sizeof g_altstack;
    sigaltstack(&ss, nullptr);
  }
}

// Only the kernel sends it (rank 1's parent-death signal, a real-time signal nothing else uses),
// so it always means that the master's thread that forked us has ended: the master is dying.
// getppid() could not tell: while the master's other threads (its watchdog) are still exiting,
// the kernel reparents us to one of them, and getppid() still reads the master's pid.
void on_parent_death_signal(int) {
  janitor_clean();
  _exit(0);
}

}  // namespace

void prepare_process() {
  if (g_is_worker) return;
  const pid_t me = getpid();
  if (g_owner.load(std::memory_order_acquire) == me) return;
  std::lock_guard<std::mutex> lock(g_prepare_mutex);
  if (g_owner.load() == me) return;
  const std::string& prefix = shm::session_prefix();
  std::snprintf(g_prefix, sizeof g_prefix, "%s", prefix.c_str());
  if (g_dir_fd < 0) g_dir_fd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  g_nworkers.store(0);   // a process forked from an owner has none of its workers
  g_cleaning.store(0);
  take_signals();
  segment_guard::start(g_prefix);
  static bool stop_at_exit = std::atexit([] { segment_guard::stop(); }) == 0;
  (void)stop_at_exit;
  g_owner.store(me, std::memory_order_release);
}

void set_workers(std::span<const pid_t> pids, std::span<const int> pidfds) {
  const int n = int(std::min<size_t>(pids.size(), kMaxWorkers));
  for (int i = 0; i < n; ++i) {
    g_worker_fd[i].store(i < int(pidfds.size()) ? pidfds[size_t(i)] : -1);
    g_worker_pid[i].store(pids[size_t(i)]);
  }
  g_nworkers.store(n);
}

void clear_workers() {
  const int n = std::min(g_nworkers.exchange(0), kMaxWorkers);
  for (int i = 0; i < n; ++i) {
    g_worker_pid[i].store(0);
    g_worker_fd[i].store(-1);
  }
}

void block_signals(bool block) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kTermSignals) sigaddset(&set, s);
  pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, nullptr);
}

bool is_worker() { return g_is_worker; }

void become_worker() {
  g_is_worker = true;
  segment_guard::forget();
  g_owner.store(0);
  g_nworkers.store(0);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!g_taken[sig]) continue;
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && is_ours(current)) sigaction(sig, &g_old[sig], nullptr);
  }
  // The Ctrl-C a terminal sends to the whole process group is the master's to act on (its own
  // handler, or synk's, which stops the workers): a worker that died of it first would take the
  // group down under a program that handles SIGINT itself.
  signal(SIGINT, SIG_IGN);
}

void install_janitor(const std::string& master_prefix) {
  std::snprintf(g_janitor_prefix, sizeof g_janitor_prefix, "%s", master_prefix.c_str());
  if (g_dir_fd < 0) g_dir_fd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct sigaction sa {};
  sa.sa_handler = on_parent_death_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(janitor_signal(), &sa, nullptr);
}

void set_report_prefix(const std::string& prefix) {
  // Written before any signal it serves can come (at fork), so the handler reads a settled buffer.
  const size_t n = std::min(prefix.size(), sizeof g_report_prefix - 1);
  std::memcpy(g_report_prefix, prefix.data(), n);
  g_report_prefix[n] = '\0';
}

void set_scratch_directory(const std::string& path) {
  if (path.empty()) {
    const int fd = g_scratch_parent_fd.exchange(-1);
    if (fd >= 0) close(fd);
    return;
  }
  prepare_process();
  const size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() >= sizeof g_scratch_name) return;   // not covered: the next save's sweep removes it
  const int fd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  sigset_t handled, before;   // the handler never sees a half-written name
  sigemptyset(&handled);
  for (int sig : kTermSignals) sigaddset(&handled, sig);
  pthread_sigmask(SIG_BLOCK, &handled, &before);
  const int old = g_scratch_parent_fd.exchange(-1);
  std::memcpy(g_scratch_name, name.c_str(), name.size() + 1);
  g_scratch_parent_fd.store(fd);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (old >= 0) close(old);
}

void janitor_clean() { remove_with_prefix(g_janitor_prefix); }

int janitor_signal() { return SIGRTMIN + 5; }

}  // namespace synk::rt::cleanup
