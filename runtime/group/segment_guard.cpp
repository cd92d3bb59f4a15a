// The segment guard (see segment_guard.h). posix_spawn (glibc: clone with CLONE_VM | CLONE_VFORK,
// then exec) rather than fork: no copy of a large parent's page tables, and no private copy of
// its memory kept alive by a long-lived child.
#include "runtime/group/segment_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace synk::rt::segment_guard {

namespace {

std::atomic<pid_t> g_guard{0};   // the running guard, 0 when none
std::atomic<pid_t> g_owner{0};   // the process that started it
int g_write_fd = -1;             // the pipe's write end, held by the owner

// `$0` is the pattern's fixed part: /dev/shm/<prefix>. The leading `:` comment names the process
// in `ps`. `read` returns at end of file, i.e. once every holder of the write end has ended.
constexpr const char* kScript =
    ": synk segment guard: removes the shared memory of its program once that has ended; "
    "read -r _; exec rm -f -- \"$0\"*";

bool enabled() {
  const char* v = std::getenv("SYNK_SEGMENT_GUARD");
  return !(v && std::strcmp(v, "0") == 0);
}

}  // namespace

void start(const char* prefix) {
  const pid_t me = getpid();
  if (g_owner.load() == me && g_guard.load() != 0) return;
  // A process forked from an owner: its parent's guard is not ours to stop; its pipe not ours to hold.
  forget();
  if (!enabled() || !prefix[0]) return;
  char pattern[512];
  if (std::snprintf(pattern, sizeof pattern, "/dev/shm/%s", prefix) >= int(sizeof pattern)) return;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // Holding none of the program's descriptors: a pipe to a shell, ctest or mpirun would
  // otherwise stay open, and whoever reads it would wait for the guard.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, const_cast<char*>(kScript), pattern, nullptr};
  pid_t guard = 0;
  const int rc = posix_spawn(&guard, sh, &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    return;
  }
  g_write_fd = fds[1];
  g_owner.store(me);
  g_guard.store(guard);
}

void stop() {
  if (getpid() != g_owner.load()) return;
  const pid_t guard = g_guard.exchange(0);
  if (guard <= 0) return;
  // Ours and not yet reaped, so the pid cannot have been reused.
  kill(guard, SIGKILL);
  while (waitpid(guard, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (g_write_fd >= 0) close(g_write_fd);
  g_write_fd = -1;
}

void forget() {
  if (getpid() == g_owner.load()) return;
  if (g_write_fd >= 0) close(g_write_fd);
  g_write_fd = -1;
  g_guard.store(0);
  g_owner.store(0);
}

}  // namespace synk::rt::segment_guard
