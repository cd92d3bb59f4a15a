// The process group: fork() of one worker process per extra rank (CPU ranks pinned to cores),
// the control segment they share with the master, the command protocol, death detection and
// shutdown. The call engine, distribution and collectives are all "commands": the master writes
// a payload, releases every worker at once, runs its own part as rank 0, and waits for all.
//
// Guarantees: no wait is unbounded (waiters sleep in short slices and check that their peers are
// alive); a worker that dies is noticed at once by the master's watchdog thread (watchdog.h),
// which kills the rest and removes the group's segments, and the master raises the error at its
// next cancellation point or wait; workers die with the master (PR_SET_PDEATHSIG, plus a
// getppid() check), and rank 1 removes the master's segments when it does; a signal that ends
// the master ends the workers and removes every segment first (cleanup.h).
#pragma once

#include <sched.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <atomic>
#include <functional>
#include <map>
#include <thread>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "runtime/group/backend.h"
#include "runtime/group/futex.h"
#include "runtime/group/group_options.h"
#include "runtime/group/shm.h"
#include "runtime/group/store.h"
#include "runtime/group/watchdog.h"

namespace synk::rt {

// The collectives' staging segment (ProcessGroup::collective_staging) of a group of `nranks`
// starts with a header of this many bytes: two cache lines and one per rank, in whole pages
// (runtime/coll/staging.h lays it out); fork() checks that the segment has room for it and a
// minimal data area.
inline size_t collective_staging_header_bytes(int nranks) {
  return (size_t(64) * (2 + size_t(nranks > 0 ? nranks : 0)) + 4095) & ~size_t(4095);
}

// A command's payload of at most this many bytes travels in the cache line that announces the
// command; a rank's inline results (RankContext::inline_results) in the line that announces its
// completion. Commands meant to take one cache-line transfer each way fit their data in these.
inline constexpr size_t kInlinePayloadBytes = 44;
inline constexpr size_t kInlineResultBytes = 40;


// What the master asks every rank to do. The group's own commands are named here; the layers
// above (the call engine, the collectives) register theirs with register_command and get a kind
// of their own, so the group runs them without knowing what they are.
enum class CommandKind : uint32_t { Handler = 1, Shutdown, Ping, Trace };

struct ControlBlock;   // layout in process_group.cpp
class ProcessGroup;
class RankContext;

// A worker's entry point for a registered command: runs in every worker (the master runs its own
// part through ProcessGroup::run's master_part) with the payload the master sent.
using CommandHandler = void (*)(RankContext& ctx, std::string_view payload);
// Runs in every worker before each command; `commit_pending` is ProcessGroup::commit_pending()
// of the master (the call engine applies or drops the updates its last call left pending).
using CommandPrologue = void (*)(bool commit_pending);

// Registers a command (`name` for messages) and returns its kind. Must run before fork() in the
// master (workers know the commands registered when they were forked): call it from a
// namespace-scope initialiser of the file that defines the handler.
CommandKind register_command(const char* name, CommandHandler handler);
void register_command_prologue(CommandPrologue prologue);
// Runs in the master at the start of each command it sends, before the command: a layer that has
// work for the workers pending between commands sends it from here as a command of its own (the
// call layer frees on every rank the modules and functions no handle holds any more). The
// commands a preamble sends run without preambles. Register before fork().
using CommandPreamble = void (*)(ProcessGroup& group);
void register_command_preamble(CommandPreamble preamble);

// Called when the master loses its group (a worker died or a command timed out), after the
// group's teardown and before the RankError is thrown: a multi-node run (runtime/node) ends the
// whole job from here, since the other nodes' leaders would otherwise wait for this one.
using GroupLostHook = void (*)(const std::string& message, const std::vector<int>& ranks);
void set_group_lost_hook(GroupLostHook hook);

// How the group's messages name local rank `r`: "rank r" by default; a multi-node run names
// global ranks ("global rank 3 (local rank 1)"), the ranks the user knows there.
using RankNamer = std::string (*)(int local_rank);
void set_rank_namer(RankNamer namer);
std::string rank_name(int local_rank);   // the namer's name, else "rank r"

// Runs first when the master's group is torn down (closed, or lost), before any of its shared
// memory is unmapped: a layer that lets a helper thread use the group's segments during a command
// (the call engine's gradient all-reduce thread) stops and joins it here. Register before fork().
using TeardownPrologue = void (*)();
void register_teardown_prologue(TeardownPrologue prologue);

// The named operations of the Handler command (RankHandler: group_options.h).
std::map<std::string, RankHandler, std::less<>>& rank_handlers();

// What code running on one rank for a command sees: its rank, the group's store, cached mappings
// of segments by name, its results area (read by the master after the command), and a barrier
// over every rank.
class RankContext {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The mapping of segment `name` (kept until the master retires the name).
  const std::byte* map(const std::string& name);
  // The same, writable, with its size.
  std::span<std::byte> map_writable(const std::string& name);
  // The group's store and segment-name prefix (collectives bootstrap NCCL through the store).
  bool has_store() const { return store_ != nullptr; }
  Store& store() const { return *store_; }
  const std::string& group_prefix() const { return group_prefix_; }
  // This rank's results area for the current command, at least `bytes` long.
  std::byte* results(size_t bytes);
  // A worker's small results for the current command (kInlineResultBytes), in the line that
  // carries its completion: the master reads them with ProcessGroup::worker_inline_results after
  // the command. publish_inline() lets the other workers read them during the command too, with
  // peer_inline(rank), which waits until that worker published in this command, or failed or
  // finished the command without publishing: then it returns an empty span.
  std::span<std::byte> inline_results();
  void publish_inline();
  std::span<const std::byte> peer_inline(int rank);
  // Whether `rank` has finished the current command (the master: its own part of it). A rank that
  // waits inside a command for one that finished would wait forever: waits use this to give up.
  bool finished(int rank) const;
  // The group barrier over every rank. A rank that ends the command without reaching it is not
  // waited for: the others throw an Error naming it.
  void barrier();

  // For code that waits on its own words (collectives): the group's wait policy, and the
  // liveness check to call between sleep slices (throws RankError on the master when a worker
  // died or the command timed out; exits a worker whose master is gone).
  const WaitPolicy& policy() const { return policy_; }
  void poll() { poll_(); }
  // Marks this rank as waiting for its peers (not computing) while a scope lives, so that a
  // timeout names the ranks that kept the others waiting; the timeline (runtime/trace) shows the
  // scope as a wait span.
  class Waiting {
   public:
    explicit Waiting(RankContext& ctx);
    ~Waiting();
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    RankContext& ctx_;
    int64_t trace_start_ns_;   // 0: the timeline was off
  };

 private:
  friend class ProcessGroup;
  friend struct WorkerLoop;
  int rank_ = 0, size_ = 1;
  uint32_t seq_ = 0;                      // the current command's sequence number
  uint64_t command_ = 0;                  // the current command's count since the fork (1, 2, ...)
  ControlBlock* ctl_ = nullptr;
  Store* store_ = nullptr;
  ProcessGroup* master_ = nullptr;        // set on rank 0 only
  WaitPolicy policy_;
  std::function<void()> poll_;
  std::map<std::string, shm::Segment, std::less<>> mapped_;
  // Results: a segment of our own on workers, a plain buffer on the master.
  shm::Segment results_segment_;
  uint64_t results_gen_ = 0;
  std::vector<std::byte> local_results_;
  std::string group_prefix_;
};

class ProcessGroup {
 public:
  // Starts N ranks (n = 0: one per allowed CPU core). Returns in the master only: a worker runs
  // its loop and exits inside this call. `backend`: see backend.h (Backend::Gpu without a usable
  // GPU is a UsageError naming the probe's reason; Backend::Auto falls back to the CPU). GPU
  // ranks bind GPU rank % device_count (rt::cuda::CudaDevice::select) before any CUDA call.
  // SYNK_VERBOSE=1 prints the choice on stderr.
  static std::unique_ptr<ProcessGroup> start(int n, Backend backend, const GroupOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  void close();                               // orderly shutdown; idempotent
  // A command is under way (run() has not returned): synk::close() is refused then.
  bool in_command() const { return in_command_; }
  bool alive() const { return alive_; }
  // This process is a copy of the master made by the program's own fork(): the group is not its own.
  bool is_forked_copy() const { return alive_ && ::getpid() != pids_[0]; }
  // Throws UsageError, `what` first, in such a copy: its commands and writes belong to the master.
  void refuse_forked_copy(std::string_view what) const;
  int size() const { return size_; }
  pid_t pid(int rank) const { return pids_.at(size_t(rank)); }
  const std::string& segment_prefix() const { return prefix_; }
  Store& store() { return store_; }
  RankContext& master_context() { return master_ctx_; }
  const GroupOptions& options() const { return options_; }
  // How every rank waits for the others (GroupOptions, SYNK_SPIN_US / SYNK_YIELD_US, defaults).
  const WaitPolicy& wait_policy() const { return policy_; }
  // The backend the ranks compute on (never Auto), and why the CPU when Auto chose it.
  Backend backend() const { return backend_.backend; }
  const GroupBackend& backend_choice() const { return backend_; }

  // One command: `payload` goes to every worker, master_part() runs meanwhile as rank 0, then
  // waits for every rank. Returns one message per rank ("" when it succeeded). A dead worker or
  // a timeout throws RankError with group_lost() after shutting the group down.
  // The messages live until the next command.
  const std::vector<std::string>& run(CommandKind kind, std::string_view payload,
                                      const std::function<void()>& master_part);
  // What worker `rank` wrote to its results area during the last command.
  std::span<const std::byte> worker_results(int rank);
  // Worker `rank`'s inline results of the last command (RankContext::inline_results).
  std::span<const std::byte> worker_inline_results(int rank);

  // Scratch space for the next command's payload to point into: a segment of at least `bytes`,
  // its name via scratch_name(). Valid until the following command.
  std::byte* scratch(size_t bytes);
  const std::string& scratch_name() const { return scratch_.name(); }

  // Whether workers apply (true) or drop (false) the updates pending from the last call; sent
  // with the next command.
  void set_commit_pending(bool commit) { commit_pending_ = commit; }

  // Tells workers to unmap a segment name the master no longer uses.
  void retire(const std::string& name);
  // Runs one empty command when segments were retired since the last, so that the workers unmap
  // them and /dev/shm gets their space back; false when there were none or a command cannot start
  // now (inside one, or not the master).
  bool flush_retired();

  // Checks every worker now; throws like run() if one died.
  void check_workers();

  // The timeline (runtime/trace/trace.h): `start` switches recording on in every worker; else
  // every worker hands its spans over to the master's trace and stops recording. close() does the
  // latter by itself, and writes the file of a trace that SYNK_TRACE started at fork.
  void trace_workers(bool start);

  // The collectives' staging segment (GroupOptions::collective_staging_bytes), created on first
  // use under the group's prefix, so teardown removes it with everything else.
  shm::Segment& collective_staging();

 private:
  ProcessGroup() = default;
  void fork_workers(const std::vector<int>& cpus);
  static void cancel_hook();
  [[noreturn]] void fatal(const std::string& message, std::vector<int> ranks);
  void poll_master(int64_t deadline_ns);
  void warn_of_stopped_workers();
  [[noreturn]] void timed_out();
  void teardown(bool orderly);

  bool alive_ = false;
  bool in_command_ = false;   // run() is under way: a nested command or close() is refused
  bool in_preamble_ = false;  // the command preambles run (their commands run without them)
  bool retired_since_command_ = false;   // retire() was called since the last command began
  std::atomic<std::thread::id> command_thread_{};   // the thread of the run() under way (another thread's is refused)
  int size_ = 1;
  GroupOptions options_;
  GroupBackend backend_;
  WaitPolicy policy_;
  std::string prefix_;
  shm::Segment control_;
  ControlBlock* ctl_ = nullptr;
  Store store_;
  shm::Segment scratch_;
  shm::Segment staging_;
  int64_t command_deadline_ns_ = 0;     // of the command in progress (0: none)
  int64_t command_start_ns_ = 0;        // warn_of_stopped_workers: when it started,
  int64_t next_stop_check_ns_ = 0;      // when to look at /proc next,
  uint32_t stop_warned_seq_ = 0;        // and the command it warned of already
  std::vector<std::string> errors_;     // run()'s answer, reused
  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;             // per rank (-1: none)
  std::vector<bool> reaped_;
  Watchdog watchdog_;
  std::vector<shm::Segment> worker_results_;
  std::vector<uint64_t> worker_results_gen_;
  RankContext master_ctx_;
  bool commit_pending_ = true;
  std::string environment_trace_;          // the file of a trace SYNK_TRACE started at fork: close() writes it
  uint32_t seq_ = 0;
  cpu_set_t saved_affinity_;
  bool affinity_saved_ = false;
};

// Name of a signal with its abbreviation, e.g. "signal 9 (SIGKILL)".
std::string describe_signal(int sig);

// The CPUs of an affinity mask, in increasing order (rank r is pinned to the r-th of the master's).
std::vector<int> allowed_cpus(const cpu_set_t& mask);

}  // namespace synk::rt
