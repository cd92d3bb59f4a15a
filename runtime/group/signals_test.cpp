// Signals that end a whole program (SEMANTICS section 9): a synk program of 1, 2 or 4 ranks
// (test/integration/signal_victim.cpp) is started in a session of its own (setsid) and killed the
// way a terminal, `timeout`, `kill -- -PGID` or a batch system kills it: SIGINT, SIGTERM, SIGHUP,
// SIGQUIT or SIGPIPE to the whole process group, a real SIGPIPE from a closed stdout, `timeout`,
// and a crash of every rank at once. Afterwards no process of the group may be left and no
// segment carrying the victim's pid may be in /dev/shm; it dies of the signal itself (a shell
// shows 130 for Ctrl-C) and prints one line saying what it cleaned up (not for SIGPIPE). Each
// case runs SYNK_SIGNAL_ITERATIONS times (21 by default: 7 per rank count), the signal landing at
// a random moment: during start-up (fork, the first segments) or while calls run. A last test
// SIGKILLs a group, which no handler can see, and checks that the next fork() removes what it
// left (the names carry the dead master's pid).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/group/shm.h"
#include "runtime/testing.h"
#include "synk/synk.h"

using namespace synk;

namespace {

constexpr int kRanks[] = {1, 2, 4};

const char* victim_path() { return SYNK_BINARY_DIR "/test/integration/synk_signal_victim"; }

int iterations() { return synk::testing::iterations_from_env("SYNK_SIGNAL_ITERATIONS", 21); }

// The command line of `pid` (NULs between the arguments), or "" when it ended meanwhile: reading
// /proc/PID/cmdline of a process that exits fails with ESRCH, which istreambuf_iterator passes on
// as an exception (a CI run saw "basic_filebuf::underflow error reading the file: No such process").
std::string cmdline_of(pid_t pid) {
  try {
    std::ifstream in(fmt::format("/proc/{}/cmdline", pid));
    return std::string(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception&) {
    return "";
  }
}

// Calls visit(pid, state, ppid, process group) for every process in /proc.
template <class Visit>
void for_each_process(Visit visit) {
  DIR* proc = opendir("/proc");
  if (!proc) return;
  while (dirent* e = readdir(proc)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(line.c_str() + paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
    visit(pid, state, pid_t(ppid), pid_t(pgrp));
  }
  closedir(proc);
}

// The processes that are not zombies and for which keep(pid, process group) holds.
template <class Keep>
std::vector<pid_t> live_processes(Keep keep) {
  std::vector<pid_t> out;
  for_each_process([&](pid_t pid, char state, pid_t, pid_t pgrp) {
    if (state != 'Z' && keep(pid, pgrp)) out.push_back(pid);
  });
  return out;
}

// Processes whose process group is `pgid`.
std::vector<pid_t> live_members(pid_t pgid) {
  return live_processes([pgid](pid_t, pid_t pgrp) { return pgrp == pgid; });
}

// Segment guards (runtime/group/segment_guard.h) of `master`: their command line names the
// master's segments.
std::vector<pid_t> live_guards_of(pid_t master) {
  const std::string needle = fmt::format("/dev/shm/synk-{}-", master);
  return live_processes([&](pid_t pid, pid_t) {
    const std::string cmdline = cmdline_of(pid);
    return cmdline.find("synk segment guard") != std::string::npos && cmdline.find(needle) != std::string::npos;
  });
}

std::vector<std::string> segments_of(pid_t master) {
  std::vector<std::string> out;
  for (const std::string& name : rt::shm::list("synk-"))
    if (auto owner = rt::shm::owner_of(name); owner && owner->pid == master) out.push_back(name);
  return out;
}

// Reads one line from `fd` within `timeout_ms`; "" on timeout or end of file.
std::string read_line(int fd, int timeout_ms) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char c;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
    if (read(fd, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line.push_back(c);
  }
  return "";
}

struct Victim {
  pid_t session = 0;    // the process setsid() made: the victim, or `timeout`
  pid_t master = 0;     // the synk master
  int report_fd = -1;   // "pid N", then "ready"
  int stdout_fd = -1;   // the read end of its stdout
  std::string stderr_path;
};

// Starts `signal_victim MODE RANKS` (under `timeout -s TERM SECONDS` when timeout_s > 0) in a new
// session, stdout into a pipe, stderr into a file. No core files: SIGQUIT and crashes dump none.
Victim start(const std::string& mode, int ranks, double timeout_s = 0, bool guard = true) {
  int report[2], out[2];
  EXPECT_EQ(pipe(report), 0);
  EXPECT_EQ(pipe(out), 0);
  Victim v;
  v.stderr_path = fmt::format("{}/synk-signal-{}-{}.err", ::testing::TempDir(), getpid(), std::random_device{}());
  const std::string fd_arg = std::to_string(report[1]);
  const std::string ranks_arg = std::to_string(ranks);
  const std::string seconds = fmt::format("{:.3f}", timeout_s);
  pid_t pid = ::fork();
  if (pid == 0) {
    setsid();
    rlimit none{0, 0};
    setrlimit(RLIMIT_CORE, &none);
    dup2(out[1], STDOUT_FILENO);
    int err = open(v.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(err, STDERR_FILENO);
    close(report[0]);
    close(out[0]);
    if (!guard) setenv("SYNK_SEGMENT_GUARD", "0", 1);
    if (timeout_s > 0)
      execlp("timeout", "timeout", "-s", "TERM", seconds.c_str(), victim_path(), mode.c_str(), ranks_arg.c_str(),
             fd_arg.c_str(), (char*)nullptr);
    else
      execl(victim_path(), victim_path(), mode.c_str(), ranks_arg.c_str(), fd_arg.c_str(), (char*)nullptr);
    _exit(127);
  }
  close(report[1]);
  close(out[1]);
  v.session = pid;
  v.report_fd = report[0];
  v.stdout_fd = out[0];
  std::string line = read_line(v.report_fd, 20'000);
  EXPECT_EQ(line.rfind("pid ", 0), 0u) << "the victim did not start: '" << line << "'";
  if (line.rfind("pid ", 0) == 0) v.master = std::atoi(line.c_str() + 4);
  return v;
}

// Waits for the session leader; returns its wait status (or -1 after `seconds`, having killed
// the whole group).
int wait_for(const Victim& v, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    pid_t got = waitpid(v.session, &status, WNOHANG);
    if (got == v.session) return status;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-v.session, SIGKILL);
      waitpid(v.session, &status, 0);
      return -1;
    }
    usleep(1000);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What `list()` returns once it is empty, or after `ms` milliseconds (what is still there).
template <class List>
auto empty_within(int ms, List list) {
  auto left = list();
  for (int i = 0; i < ms && !left.empty(); ++i) {
    usleep(1000);
    left = list();
  }
  return left;
}

// Whether `list()` returns something within `ms` milliseconds.
template <class List>
bool nonempty_within(int ms, List list) {
  for (int i = 0; i < ms; ++i) {
    if (!list().empty()) return true;
    usleep(1000);
  }
  return !list().empty();
}

// "[pid state 'command line']" for each child of `parent`, zombies included, for failure messages.
std::string children_of(pid_t parent) {
  std::string out;
  for_each_process([&](pid_t pid, char state, pid_t ppid, pid_t) {
    if (ppid != parent) return;
    std::string cmdline = cmdline_of(pid);
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    out += fmt::format("[{} {} '{}'] ", pid, state, cmdline.substr(0, 160));
  });
  return out.empty() ? "none" : out;
}

// After the victim ended: nothing of its group runs and nothing of its master is in /dev/shm.
// Its workers may take a moment to be reaped by init after the master died.
void expect_nothing_left(const Victim& v, const std::string& what) {
  const std::vector<pid_t> left = empty_within(2000, [&] { return live_members(v.session); });
  EXPECT_TRUE(left.empty()) << what << ": " << left.size() << " process(es) of the group still run";
  const std::vector<pid_t> guards = empty_within(2000, [&] { return live_guards_of(v.master); });
  EXPECT_TRUE(guards.empty()) << what << ": the master's segment guard (pid " << guards.front() << ") still runs";
  std::vector<std::string> segments = segments_of(v.master);
  EXPECT_TRUE(segments.empty()) << what << ": " << segments.size() << " segment(s) left, e.g. " << segments.front();
  for (const std::string& s : segments) rt::shm::remove(s);
}

// Kills a victim that an ASSERT left running when the test returns early, and removes its segments.
struct KillOnReturn {
  const Victim& v;
  ~KillOnReturn() {
    if (v.session <= 0 || waitpid(v.session, nullptr, WNOHANG) != 0) return;   // reaped, or ended just now
    kill(-v.session, SIGKILL);
    waitpid(v.session, nullptr, 0);
    usleep(100'000);   // its workers, reparented, end too
    for (const std::string& s : segments_of(v.master)) rt::shm::remove(s);
  }
};

void finish(Victim& v) {
  close(v.report_fd);
  close(v.stdout_fd);
  std::remove(v.stderr_path.c_str());
}

// One signal to the whole group, `iterations()` times over 1, 2 and 4 ranks. Half the time the
// signal lands while calls run, half the time at a random moment of the start-up.
void group_signal(int sig, const char* message) {
  for (int it = 0; it < iterations(); ++it) {
    const int ranks = kRanks[it % 3];
    const std::string what = fmt::format("{} to a {}-rank group, iteration {}", sigabbrev_np(sig), ranks, it);
    Victim v = start("loop", ranks);
    const bool ready = it % 2 == 0 && read_line(v.report_fd, 20'000) == "ready";
    const int delay_us = std::uniform_int_distribution<int>(0, ready ? 20'000 : 40'000)(synk::testing::timing_rng());
    usleep(useconds_t(delay_us));
    kill(-v.session, sig);
    int status = wait_for(v, 20);
    ASSERT_NE(status, -1) << what << ": still running 20 s after the signal";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << what << ": wait status " << status;
    const std::string err = slurp(v.stderr_path);
    if (ready && message) {
      EXPECT_EQ(err.rfind(message, 0), 0u) << what << ": stderr was '" << err << "'";
      EXPECT_TRUE(err.ends_with(" removed the program's shared memory\n") && std::count(err.begin(), err.end(), '\n') == 1)
          << what << ": one line, stderr was '" << err << "'";
    }
    if (sig == SIGPIPE) {
      EXPECT_EQ(err, "") << what << ": a closed pipe ends a program silently";
    }
    expect_nothing_left(v, what);
    finish(v);
  }
}

}  // namespace

TEST(Signals, CtrlCToTheGroup) { group_signal(SIGINT, "synk: interrupted (SIGINT): "); }
TEST(Signals, SigtermToTheGroup) { group_signal(SIGTERM, "synk: terminated by signal 15 (SIGTERM): "); }
TEST(Signals, SighupToTheGroup) { group_signal(SIGHUP, "synk: terminated by signal 1 (SIGHUP): "); }
TEST(Signals, SigquitToTheGroup) { group_signal(SIGQUIT, "synk: terminated by signal 3 (SIGQUIT): "); }
TEST(Signals, SigpipeToTheGroup) { group_signal(SIGPIPE, nullptr); }

TEST(Signals, ClosedStdoutPipe) {
  // `prog | head -1`: only the master gets SIGPIPE, from its own write.
  for (int it = 0; it < iterations(); ++it) {
    const int ranks = kRanks[it % 3];
    const std::string what = fmt::format("closed stdout of a {}-rank group, iteration {}", ranks, it);
    Victim v = start("print", ranks);
    EXPECT_EQ(read_line(v.stdout_fd, 20'000), "call 0") << what;
    close(v.stdout_fd);
    v.stdout_fd = -1;
    int status = wait_for(v, 20);
    ASSERT_NE(status, -1) << what;
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE) << what << ": wait status " << status;
    expect_nothing_left(v, what);
    finish(v);
  }
}

TEST(Signals, Timeout) {
  // `timeout 0.2 prog`: timeout sends SIGTERM to the program and then to its own group.
  for (int it = 0; it < iterations(); ++it) {
    const int ranks = kRanks[it % 3];
    const std::string what = fmt::format("timeout on a {}-rank group, iteration {}", ranks, it);
    Victim v = start("loop", ranks, 0.15 + 0.01 * (it % 10));
    int status = wait_for(v, 30);
    ASSERT_NE(status, -1) << what;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 124) << what << ": timeout's status " << status;
    expect_nothing_left(v, what);
    finish(v);
  }
}

TEST(Signals, EveryRankCrashesAtOnce) {
  for (int it = 0; it < iterations(); ++it) {
    const int ranks = kRanks[it % 3];
    const std::string what = fmt::format("every rank of {} crashing, iteration {}", ranks, it);
    Victim v = start("crash", ranks);
    int status = wait_for(v, 20);
    ASSERT_NE(status, -1) << what;
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) << what << ": wait status " << status;
    EXPECT_NE(slurp(v.stderr_path).find("synk: crashed with signal 11 (SIGSEGV): "), std::string::npos) << what;
    expect_nothing_left(v, what);
    finish(v);
  }
}

TEST(Signals, SigkillOfTheMasterAloneLeavesNothing) {
  // The OOM killer or `kill -9 PID`: no handler runs. With one rank the segment guard removes the
  // segments; with more, rank 1's janitor and the guard both try (either may win).
  for (int ranks : kRanks) {
    const std::string what = fmt::format("SIGKILL to the master of a {}-rank group", ranks);
    Victim v = start("loop", ranks);
    KillOnReturn on_failure{v};
    ASSERT_EQ(read_line(v.report_fd, 20'000), "ready") << what;
    ASSERT_FALSE(segments_of(v.master).empty()) << what;
    // Polled: one CI run in hundreds saw no guard in a single look at /proc (never reproduced here).
    ASSERT_TRUE(nonempty_within(2000, [&] { return live_guards_of(v.master); }))
        << what << ": no segment guard runs; the master's children: " << children_of(v.master);
    kill(v.master, SIGKILL);
    ASSERT_NE(wait_for(v, 20), -1) << what;
    empty_within(5000, [&] { return segments_of(v.master); });   // the guard may take a moment
    expect_nothing_left(v, what);
    finish(v);
  }
}

TEST(Signals, WithoutTheGuardASigkilledLoneMasterLeavesItsSegments) {
  // The control for the test above: SYNK_SEGMENT_GUARD=0 and one rank, so nobody removes them.
  Victim v = start("leak", 1, 0, /*guard=*/false);
  KillOnReturn on_failure{v};
  ASSERT_EQ(read_line(v.report_fd, 20'000), "ready");
  EXPECT_TRUE(live_guards_of(v.master).empty());
  kill(v.master, SIGKILL);
  ASSERT_NE(wait_for(v, 20), -1);
  usleep(200'000);
  std::vector<std::string> left = segments_of(v.master);
  for (const std::string& s : left) rt::shm::remove(s);
  finish(v);
  if (left.empty())   // as in ForkRemovesWhatAKilledGroupLeft: CTest runs tests side by side
    GTEST_SKIP() << "a concurrent fork() removed the killed master's segments (the stale sweep) before this "
                    "test looked: it cannot tell whether anything else did";
}

TEST(Signals, ForkRemovesWhatAKilledGroupLeft) {
  // SIGKILL to every process at once, the guard turned off: nothing can clean up, and the segments stay...
  Victim v = start("leak", 3, 0, /*guard=*/false);
  KillOnReturn on_failure{v};
  ASSERT_EQ(read_line(v.report_fd, 20'000), "ready");
  kill(-v.session, SIGKILL);
  ASSERT_NE(wait_for(v, 20), -1);
  for (int i = 0; i < 2000 && !live_members(v.session).empty(); ++i) usleep(1000);
  ASSERT_TRUE(live_members(v.session).empty());
  if (segments_of(v.master).empty()) {
    // Another program's fork() (CTest runs tests side by side) swept them first: the sweep works,
    // but this test cannot show that its own fork() does. StaleSweepKeepsLiveProcessesAndForeignNames
    // checks the sweep itself without the race.
    finish(v);
    GTEST_SKIP() << "a concurrent fork() removed the killed group's segments before this test's fork()";
  }
  // ...until the next fork() anywhere (of this user, in this pid namespace) removes them: their
  // master's pid no longer exists.
  ASSERT_EQ(synk::fork(2), 2);
  EXPECT_TRUE(segments_of(v.master).empty()) << "fork() left the dead group's segments";
  synk::close();
  finish(v);
}

TEST(Signals, StaleSweepKeepsLiveProcessesAndForeignNames) {
  // A name of a live process (this one's parent), a name of another scheme, and a name whose pid
  // is dead: only the last goes.
  const std::string ns = std::to_string(rt::shm::pid_namespace());
  const std::string live = fmt::format("synk-{}-{}-0123456789abcdef-p-d-test", getppid(), ns);
  const std::string foreign = fmt::format("synk-notours-{}", getpid());
  pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string stale = fmt::format("synk-{}-{}-0123456789abcdef-p-d-test", dead, ns);
  for (const std::string& n : {live, foreign, stale}) {
    rt::shm::Segment s = rt::shm::Segment::create(n, 64);
    s.release_name();
  }
  rt::shm::remove_stale();
  EXPECT_EQ(rt::shm::list(live).size(), 1u);
  EXPECT_EQ(rt::shm::list(foreign).size(), 1u);
  EXPECT_EQ(rt::shm::list(stale).size(), 0u);
  rt::shm::remove(live);
  rt::shm::remove(foreign);
}
