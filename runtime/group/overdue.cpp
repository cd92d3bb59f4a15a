// What the master does about workers that do not finish a command (see process_group.h): a
// warning naming a stopped worker, and the timeout that names the ranks that kept the others
// waiting.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/group/control_block.h"
#include "runtime/group/process_group.h"

namespace synk::rt {

namespace {
// The state letter of /proc/<pid>/stat ('R', 'S', 'T' for stopped, ...), or 0.
char process_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* paren = std::strrchr(buf, ')');
  return paren && paren[1] == ' ' ? paren[2] : 0;
}
}  // namespace

void ProcessGroup::poll_master(int64_t deadline_ns) {
  check_workers();
  if (deadline_ns > 0 && now_ns() > deadline_ns) timed_out();
  warn_of_stopped_workers();
}

// Without call_timeout_s a stopped worker (SIGSTOP, Ctrl-Z in its terminal, a debugger) holds the
// command forever and the master has nothing to say: after 10 s it says which rank, once per
// command (a look at /proc each second from then on).
void ProcessGroup::warn_of_stopped_workers() {
  const int64_t now = now_ns();
  if (stop_warned_seq_ == seq_ || now - command_start_ns_ < 10'000'000'000 || now < next_stop_check_ns_) return;
  next_stop_check_ns_ = now + 1'000'000'000;
  for (int r = 1; r < size_; ++r) {
    if (ctl_->slot(r).done_seq.load() == seq_) continue;
    const char state = process_state(pids_[size_t(r)]);
    if (state != 'T' && state != 't') continue;
    std::fprintf(stderr, "synk: %s (pid %d) is stopped (SIGSTOP, Ctrl-Z or a debugger) and the command waits "
                 "for it: `kill -CONT %d` resumes it (fork's call_timeout_s bounds such waits)\n", rank_name(r).c_str(),
                 int(pids_[size_t(r)]), int(pids_[size_t(r)]));
    stop_warned_seq_ = seq_;
  }
}

void ProcessGroup::timed_out() {
  // Which ranks kept the others waiting: stopped processes first (SIGSTOP, a debugger), else
  // ranks that had not finished and were not themselves waiting for peers.
  std::vector<int> late, stopped, busy;
  for (int r = 1; r < size_; ++r) {
    if (ctl_->slot(r).done_seq.load() == seq_) continue;
    late.push_back(r);
    char state = process_state(pids_[size_t(r)]);
    if (state == 'T' || state == 't') stopped.push_back(r);
    else if (ctl_->slot(r).waiting.load() == 0) busy.push_back(r);
  }
  std::vector<int> culprits = !stopped.empty() ? stopped : !busy.empty() ? busy : late;
  std::vector<std::string> parts;
  for (int r : culprits) {
    bool is_stopped = std::find(stopped.begin(), stopped.end(), r) != stopped.end();
    parts.push_back(fmt::format("{} (pid {}{})", rank_name(r), pids_[size_t(r)],
                                is_stopped ? ", stopped: SIGSTOP or a debugger" : ""));
  }
  fatal(fmt::format("{} did not finish the command within {} s (the call_timeout_s of synk::fork's ForkOptions)",
                    fmt::join(parts, ", "), options_.call_timeout_s),
        culprits);
}

}  // namespace synk::rt
