// The process group (see process_group.h): control-segment layout, fork and worker loop, the
// command protocol, liveness checks, shutdown and cleanup.
#include "runtime/group/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/cancel.h"
#include "gpu/driver.h"
#include "base/errors.h"
#include "base/wire.h"
#include "runtime/group/cleanup.h"
#include "runtime/group/control_block.h"
#include "runtime/trace/trace.h"

namespace synk::rt {

namespace {

RankNamer g_rank_namer = nullptr;
constexpr uint64_t kControlMagic = 0x53594e4b4354524cull;   // "SYNKCTRL"

// Registered commands get kinds from here up, clear of the group's own.
constexpr uint32_t kFirstRegisteredKind = 64;

struct RegisteredCommand {
  const char* name;
  CommandHandler handler;
};

struct CommandTable {
  std::vector<RegisteredCommand> commands;   // kind kFirstRegisteredKind + i
  std::vector<CommandPrologue> prologues;
  std::vector<CommandPreamble> preambles;
  std::vector<TeardownPrologue> teardown_prologues;
};

// Function-local so that registrations from other files' static initialisers find it built.
CommandTable& command_table() {
  static CommandTable table;
  return table;
}

const RegisteredCommand& registered_command(CommandKind kind) {
  const std::vector<RegisteredCommand>& commands = command_table().commands;
  uint32_t k = uint32_t(kind);
  if (k < kFirstRegisteredKind || k - kFirstRegisteredKind >= commands.size())
    internal_error(fmt::format("command kind {} is not registered in this process (commands must be registered "
                               "before synk::fork())", k));
  return commands[k - kFirstRegisteredKind];
}
}  // namespace

CommandKind register_command(const char* name, CommandHandler handler) {
  std::vector<RegisteredCommand>& commands = command_table().commands;
  commands.push_back({name, handler});
  return CommandKind(kFirstRegisteredKind + uint32_t(commands.size() - 1));
}

void register_command_prologue(CommandPrologue prologue) { command_table().prologues.push_back(prologue); }
void register_command_preamble(CommandPreamble preamble) { command_table().preambles.push_back(preamble); }
void register_teardown_prologue(TeardownPrologue prologue) {
  command_table().teardown_prologues.push_back(prologue);
}

std::map<std::string, RankHandler, std::less<>>& rank_handlers() {
  static auto* handlers = new std::map<std::string, RankHandler, std::less<>>();   // workers exit without unwinding
  return *handlers;
}

std::vector<int> allowed_cpus(const cpu_set_t& mask) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

std::string describe_signal(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("signal {} (SIG{})", sig, abbrev) : fmt::format("signal {}", sig);
}

namespace {

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "was killed by " + describe_signal(WTERMSIG(status));
  // A worker ends with status 0 of its own accord only when its parent thread is gone: the kernel's
  // parent-death signal follows the thread that forked it, not the process.
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return "exited with status 0 (a worker ends by itself when the thread that called synk::fork() has ended: "
           "fork from a thread that lives as long as the group, such as the main thread)";
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return fmt::format("stopped (wait status {:#x})", status);
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);   // best effort: pinning is a performance hint
}

[[noreturn]] void worker_exit_master_gone(int rank) {
  if (rank == 1) cleanup::janitor_clean();
  _exit(0);
}

// A wait phase from the environment (SYNK_SPIN_US, SYNK_YIELD_US: microseconds), else `fallback`.
int64_t wait_phase_ns(const char* variable, int64_t fallback) {
  const char* text = std::getenv(variable);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  long long us = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno != 0 || us < 0 || us > 10'000'000)
    throw UsageError(fmt::format("fork: {} must be a whole number of microseconds from 0 to 10000000, got '{}'",
                                 variable, text));
  return int64_t(us) * 1000;
}

// What a rank's failure says: std::bad_alloc's own text ("std::bad_alloc") names no cause.
std::string failure_text(const std::exception& e) {
  if (!dynamic_cast<const std::bad_alloc*>(&e)) return e.what();
  std::string text = "out of memory (std::bad_alloc): this rank could not allocate a buffer of the command; it needs a "
                     "smaller batch or model, or more memory (a limit such as ulimit -v or the container's)";
  if (rlimit limit{}; ::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    text += fmt::format("; ulimit -v is {} here ({} MiB)", uint64_t(limit.rlim_cur) >> 10, uint64_t(limit.rlim_cur) >> 20);
  return text;
}

ProcessGroup* g_listening_group = nullptr;
void forward_retired(const std::string& name) {
  if (g_listening_group && g_listening_group->alive()) g_listening_group->retire(name);
}

// /dev/shm is short: segments retired since the last command are still mapped by the workers
// (they unmap them at the start of the next one), so one empty command gives their space back.
bool reclaim_retired_space() {
  ProcessGroup* g = g_listening_group;
  return g && g->alive() && g->flush_retired();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Worker side

struct WorkerLoop {
  RankContext ctx;
  ControlBlock* ctl;
  pid_t master;
  uint64_t retired_seen = 0;

  void init(Store* store, const std::string& prefix, int rank, int size, const WaitPolicy& policy) {
    ctx.rank_ = rank;
    ctx.size_ = size;
    ctx.ctl_ = ctl;
    ctx.store_ = store;
    ctx.policy_ = policy;
    ctx.group_prefix_ = prefix;
    ctx.poll_ = [this] { poll(); };
  }

  void poll() {
    if (getppid() != master) worker_exit_master_gone(ctx.rank());
    if (ctl->abort.load(std::memory_order_acquire)) _exit(0);
  }

  void drop_retired() {
    uint64_t count = ctl->retired_count.load(std::memory_order_acquire);
    if (count - retired_seen > kRetireSlots) {
      ctx.mapped_.clear();   // fell behind the ring: forget every mapping, re-map on demand
    } else {
      for (uint64_t i = retired_seen; i < count; ++i) ctx.mapped_.erase(std::string(ctl->retired[i % kRetireSlots]));
    }
    retired_seen = count;
  }

  void dispatch(CommandKind kind, std::string_view payload) {
    wire::Reader r(payload);
    switch (kind) {
      case CommandKind::Handler: {
        std::string name = r.str();
        std::string body = r.str();
        auto it = rank_handlers().find(name);
        if (it == rank_handlers().end())
          throw Error(fmt::format("no rank handler named '{}' in this process (handlers must be "
                                  "registered before synk::fork())", name));
        it->second(ctx, body);
        break;
      }
      case CommandKind::Trace: {
        if (r.pod<uint8_t>() != 0) {
          trace::start_recording();
        } else {
          std::span<const std::byte> spans = trace::take_spans();
          std::memcpy(ctx.results(spans.size()), spans.data(), spans.size());
        }
        break;
      }
      case CommandKind::Shutdown:
      case CommandKind::Ping: break;
      default: registered_command(kind).handler(ctx, payload); break;
    }
  }

  [[noreturn]] void run() {
    uint32_t seen = 0;
    RankSlot& slot = ctl->slot(ctx.rank());
    for (;;) {
      // Idle time on the timeline: what the worker waits while the master runs the program between
      // commands (its own share's tail, data preparation, host code).
      const int64_t idle_start = trace::on() ? trace::now_ns() : 0;
      uint32_t seq = wait_until(ctl->command.word, [seen](uint32_t v) { return v != seen; }, ctx.policy_,
                                [this] { poll(); });
      if (idle_start != 0) trace::record(trace::Category::Wait, "wait for the next command", idle_start, trace::now_ns());
      seen = seq;
      if (ctl->abort.load(std::memory_order_acquire)) _exit(0);
      auto kind = CommandKind(ctl->command.kind);
      ++ctx.command_;   // every command wakes every worker once (the master waits for all before the next)
      ctx.seq_ = seq;
      try {
        drop_retired();
        for (CommandPrologue prologue : command_table().prologues) prologue(ctl->command.commit_pending != 0);
        dispatch(kind, std::string_view(ctl->payload_of_command(), ctl->command.payload_len));
      } catch (const std::exception& e) {
        const std::string text = failure_text(e);
        size_t n = std::min(text.size(), kErrorCapacity - 1);
        std::memcpy(slot.error, text.data(), n);
        slot.error_len = uint32_t(n);
        slot.error_command.store(ctx.command_, std::memory_order_seq_cst);
      }
      slot.done_seq.store(seq, std::memory_order_seq_cst);
      ctl->done.bump_if_waiting();
      ctl->exchange.bump_if_waiting();   // peers in peer_inline wait for us to publish or finish
      if (kind == CommandKind::Shutdown) _exit(0);
    }
  }
};

[[noreturn]] static void worker_main(ControlBlock* ctl, Store* store, const std::string& prefix,
                                     const std::string& master_prefix, int rank, int size, pid_t master,
                                     int cpu, const WaitPolicy& policy, int gpu) {
  shm::set_retire_listener(nullptr);
  shm::set_space_reclaimer(nullptr);
  trace::become_worker();
  // The master forked us with the termination signals blocked: first the program's own
  // dispositions back, then (rank 1) the janitor that removes the master's segments, everything of
  // the master's session, if the master dies (before prctl: it may die already).
  cleanup::become_worker();
  if (rank == 1) cleanup::install_janitor(master_prefix);
  cleanup::block_signals(false);
  prctl(PR_SET_PDEATHSIG, rank == 1 ? cleanup::janitor_signal() : SIGKILL);
  if (getppid() != master) worker_exit_master_gone(rank);
  if (cpu >= 0) pin_to(cpu);
  ctl->slot(rank).pid.store(getpid());
  try {
    // Only records the ordinal: the driver is initialised by the first CUDA use in this rank.
    if (gpu >= 0) cuda::CudaDevice::select(gpu);
    WorkerLoop loop{RankContext{}, ctl, master};
    loop.init(store, prefix, rank, size, policy);
    loop.run();
  } catch (...) {
  }
  _exit(70);
}

// ---------------------------------------------------------------------------------------------
// Master side

std::unique_ptr<ProcessGroup> ProcessGroup::start(int n, Backend backend, const GroupOptions& options) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) CPU_SET(0, &mask);
  std::vector<int> cpus = allowed_cpus(mask);
  if (n < 0)
    throw UsageError(fmt::format("fork: n must be >= 0 (0 means one rank per CPU core), received {}", n));
  if (n == 0) n = int(cpus.size());
  if (n > 1024) throw UsageError(fmt::format("fork: n must be at most 1024, received {}", n));
  if (options.poll_ns <= 0 || options.poll_ns > 1'000'000'000)
    throw UsageError(fmt::format("fork: poll_ns must be in (0, 1e9], received {}", options.poll_ns));
  if (!(options.call_timeout_s >= 0) || !std::isfinite(options.call_timeout_s))   // NaN fails every comparison
    throw UsageError(fmt::format("fork: call_timeout_s must be a finite number >= 0 (0: no limit), received {}",
                                 options.call_timeout_s));
  constexpr int64_t kLongestWaitPhase = 60'000'000'000;   // a minute of spinning is never meant
  for (const auto& [name, value] : {std::pair{"spin_ns", options.spin_ns}, std::pair{"yield_ns", options.yield_ns}})
    if (value < -1 || value > kLongestWaitPhase)
      throw UsageError(fmt::format("fork: {} must be -1 (the default) or in [0, {}] ns, received {}", name,
                                   kLongestWaitPhase, value));
  // The staging segment is created at the first collective: a size that cannot be mapped fails here.
  constexpr size_t kLargestStaging = size_t(16) << 30;
  if (options.collective_staging_bytes > kLargestStaging)
    throw UsageError(fmt::format("fork: collective_staging_bytes must be at most {} (16 GiB), received {}",
                                 kLargestStaging, options.collective_staging_bytes));
  // The collectives need two buffers of N+1 slots of at least 256 bytes after the header.
  const size_t least_staging = std::max(size_t(64) << 10, collective_staging_header_bytes(n) + 2 * (size_t(n) + 1) * 256);
  if (options.collective_staging_bytes < least_staging)
    throw UsageError(fmt::format("fork: collective_staging_bytes must be at least {} for {} ranks, received {}",
                                 least_staging, n, options.collective_staging_bytes));

  // With a core per rank, a rank that waits longer than the spin keeps polling (yielding) for 2 ms
  // before it sleeps: a futex sleep idles the core, and waking it up again costs a training step
  // more than the wait itself (docs/performance/training.md, "Waiting for a peer"). Ranks that share cores
  // yield only briefly. Explicit options win over the environment, which wins over these.
  WaitPolicy policy;
  const bool core_per_rank = size_t(n) <= cpus.size();
  policy.spin_ns = options.spin_ns >= 0 ? options.spin_ns : wait_phase_ns("SYNK_SPIN_US", core_per_rank ? 50'000 : 0);
  policy.yield_ns =
      options.yield_ns >= 0 ? options.yield_ns : wait_phase_ns("SYNK_YIELD_US", core_per_rank ? 2'000'000 : 50'000);
  policy.sleep_slice_ns = options.poll_ns;

  GroupBackend chosen = choose_group_backend(backend, n);
  if (chosen.backend == Backend::Gpu) {
    try {
      cuda::CudaDevice::select(gpu_for_rank(0, chosen.device_count));   // records only; no CUDA call
    } catch (const cuda::CudaError& e) {
      throw UsageError(fmt::format("fork: Backend::Gpu: rank 0 cannot use GPU 0: {}", e.what()));
    }
  }
  if (const char* v = std::getenv("SYNK_VERBOSE"); v && *v && std::strcmp(v, "0") != 0) {
    if (chosen.backend == Backend::Gpu)
      std::fprintf(stderr, "synk: fork: %d rank%s on the GPU (%d device%s; rank r uses GPU r %% %d)\n", n,
                   n == 1 ? "" : "s", chosen.device_count, chosen.device_count == 1 ? "" : "s", chosen.device_count);
    else
      std::fprintf(stderr, "synk: fork: %d rank%s on the CPU%s\n", n, n == 1 ? "" : "s",
                   chosen.reason.empty() ? "" : fmt::format(" (backend auto: {})", chosen.reason).c_str());
    if (!core_per_rank)
      std::fprintf(stderr, "synk: fork: %d ranks share the %zu CPU%s this process may use (%s): each runs at "
                   "a fraction of a core%s\n", n, cpus.size(), cpus.size() == 1 ? "" : "s",
                   fmt::format("{}", fmt::join(cpus, ",")).c_str(),
                   policy.spin_ns == 0 ? ", and they wait without spinning" : "");
  }

  // Before anything exists to clean up: an unwritable path is a UsageError of fork().
  const bool trace_from_environment = trace::start_from_environment();
  std::unique_ptr<ProcessGroup> g(new ProcessGroup());
  if (trace_from_environment) g->environment_trace_ = trace::path();
  g->size_ = n;
  g->backend_ = chosen;
  g->options_ = options;
  g->policy_ = policy;
  // What a master that no longer exists left behind (SIGKILL, a crash of every rank at once).
  shm::remove_stale();
  g->prefix_ = shm::session_prefix() + "g" + shm::random_hex(8) + "-";
  try {
    g->control_ = shm::Segment::create(shm::unique_name(g->prefix_, "control"), ControlBlock::bytes(n),
                                       "the control block of the process group");
    g->ctl_ = new (g->control_.data()) ControlBlock();
    g->ctl_->nranks = uint32_t(n);
    g->ctl_->master_pid = getpid();
    g->ctl_->barrier.parties = uint32_t(n);
    for (int r = 0; r < n; ++r) new (&g->ctl_->slot(r)) RankSlot();
    g->ctl_->magic = kControlMagic;
    g->store_ = Store::create(shm::unique_name(g->prefix_, "store"));
  } catch (...) {
    shm::remove_all(g->prefix_);
    throw;
  }

  g->pids_.assign(size_t(n), 0);
  g->reaped_.assign(size_t(n), false);
  g->pids_[0] = getpid();
  g->ctl_->slot(0).pid.store(getpid());
  g->worker_results_.resize(size_t(n));
  g->worker_results_gen_.assign(size_t(n), 0);
  g->pidfds_.assign(size_t(n), -1);
  set_active_backend(chosen.backend);   // before the fork: workers inherit it
  g->fork_workers(cpus);
  if (options.pin) {
    g->saved_affinity_ = mask;
    g->affinity_saved_ = true;
    pin_to(cpus[0]);
  }
  RankContext& ctx = g->master_ctx_;
  ctx.rank_ = 0;
  ctx.size_ = n;
  ctx.ctl_ = g->ctl_;
  ctx.store_ = &g->store_;
  ctx.master_ = g.get();
  ctx.policy_ = g->policy_;
  ctx.group_prefix_ = g->prefix_;
  ProcessGroup* self = g.get();
  ctx.poll_ = [self] { self->poll_master(self->command_deadline_ns_); };
  g->alive_ = true;
  g_listening_group = self;
  shm::set_retire_listener(&forward_retired);
  shm::set_space_reclaimer(&reclaim_retired_space);
  if (n > 1) g->watchdog_.start(g->pids_, g->pidfds_, g->prefix_, &g->ctl_->done.value);
  return g;
}

void ProcessGroup::fork_workers(const std::vector<int>& cpus) {
  std::fflush(nullptr);   // buffered output would otherwise be written once per process
  const pid_t master = getpid();
  const std::string master_prefix = shm::session_prefix();
  const bool gpu = backend_.backend == Backend::Gpu;
  // With the termination signals blocked, a signal cannot find a worker that the cleanup
  // handler does not know yet (it is delivered once every worker is registered below).
  cleanup::block_signals(true);
  for (int r = 1; r < size_; ++r) {
    pid_t pid = ::fork();
    if (pid == 0)
      worker_main(ctl_, &store_, prefix_, master_prefix, r, size_, master,
                  options_.pin ? cpus[size_t(r) % cpus.size()] : -1, policy_,
                  gpu ? gpu_for_rank(r, backend_.device_count) : -1);
    if (pid < 0) {
      int err = errno;
      alive_ = true;
      size_ = r;   // only ranks that exist
      cleanup::set_workers(std::span(pids_).subspan(1, size_t(r - 1)), std::span(pidfds_).subspan(1, size_t(r - 1)));
      cleanup::block_signals(false);
      teardown(false);
      struct rlimit nproc {};
      const bool limited = err == EAGAIN && ::getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY;
      throw Error(fmt::format("fork: could not start rank {}: {}{}", r, std::strerror(err),
                              limited ? fmt::format(" (this user may run {} processes, ulimit -u: fewer ranks, or "
                                                    "a higher limit)", uint64_t(nproc.rlim_cur))
                                      : err == ENOMEM ? std::string(" (out of memory: ulimit -v or the container's "
                                                                    "limit may be reached)")
                                                      : std::string()));
    }
    pids_[size_t(r)] = pid;
    // A pidfd names this process even after it is reaped, so the cleanup handler and the
    // watchdog can never signal a recycled pid (-1 on kernels before 5.3: pids are used).
    pidfds_[size_t(r)] = int(syscall(SYS_pidfd_open, pid, 0));   // close-on-exec by default
  }
  cleanup::set_workers(std::span(pids_).subspan(1), std::span(pidfds_).subspan(1));
  cleanup::block_signals(false);
}

ProcessGroup::~ProcessGroup() {
  try {
    close();
  } catch (...) {
  }
  if (g_listening_group == this) g_listening_group = nullptr;
}

void ProcessGroup::close() {
  if (alive_ && getpid() == pids_[0] && trace::writing()) {
    try {
      trace_workers(false);
    } catch (const std::exception& e) {   // a lost worker: the file keeps what is left
      std::fprintf(stderr, "synk: trace: the workers' spans are missing from '%s': %s\n", trace::path().c_str(),
                   e.what());
    }
  }
  teardown(true);
  // Only the trace this group started: one the program started by trace_start() after a
  // trace_stop() of ours runs on.
  const std::string mine = std::exchange(environment_trace_, std::string());
  if (!mine.empty() && trace::writing() && trace::path() == mine) {
    try {
      trace::stop();
    } catch (const std::exception& e) {   // the work is done: a lost trace must not end the program
      std::fprintf(stderr, "synk: SYNK_TRACE: %s\n", e.what());
    }
  }
}

void ProcessGroup::trace_workers(bool start) {
  if (!alive_ || size_ == 1) return;
  const uint8_t payload = start ? 1 : 0;
  const std::vector<std::string>& errors =
      run(CommandKind::Trace, std::string_view(reinterpret_cast<const char*>(&payload), 1), nullptr);
  for (int r = 1; r < size_; ++r) {
    if (!errors[size_t(r)].empty())
      throw RankError(fmt::format("trace: rank {} failed: {}", r, errors[size_t(r)]), {r});
    if (!start) trace::add_rank_spans(r, worker_results(r));
  }
}

void ProcessGroup::check_workers() {
  // The rank the watchdog saw die first comes first: it killed the others since.
  const int first = watchdog_.first_dead();
  for (int k = 0; k < size_ - 1; ++k) {
    const int r = first > 0 ? 1 + (first - 1 + k) % (size_ - 1) : 1 + k;
    if (reaped_[size_t(r)]) continue;
    int status = 0;
    pid_t got = waitpid(pids_[size_t(r)], &status, WNOHANG);
    if (got == 0) continue;
    reaped_[size_t(r)] = true;
    std::string cause = got > 0 ? describe_status(status)
                                : fmt::format("disappeared (waitpid: {})", std::strerror(errno));
    fatal(fmt::format("rank {} (pid {}) {}", r, pids_[size_t(r)], cause), {r});
  }
}

void ProcessGroup::cancel_hook() {
  if (g_listening_group) g_listening_group->check_workers();
}

namespace {
GroupLostHook g_lost_hook = nullptr;
}  // namespace

void set_group_lost_hook(GroupLostHook hook) { g_lost_hook = hook; }

void set_rank_namer(RankNamer namer) { g_rank_namer = namer; }
std::string rank_name(int r) { return g_rank_namer ? g_rank_namer(r) : fmt::format("rank {}", r); }

void ProcessGroup::fatal(const std::string& message, std::vector<int> ranks) {
  teardown(false);
  if (g_lost_hook) g_lost_hook(message, ranks);
  throw RankError(message + "; the process group was shut down and its shared memory removed "
                            "(call synk::fork() to start a new one)",
                  std::move(ranks), true);
}

const std::vector<std::string>& ProcessGroup::run(CommandKind kind, std::string_view payload,
                                                  const std::function<void()>& master_part) {
  if (!alive_) throw UsageError("the process group is closed: call synk::fork() first");
  if (cleanup::is_worker())
    throw UsageError("a worker rank started a synk command (a call or a collective, from inside a function's "
                     "run() or a rank handler): only the master, rank 0, starts commands");
  refuse_forked_copy("");
  if (in_command_) {
    if (command_thread_.load() != std::this_thread::get_id())
      throw UsageError("a synk command (a call or a collective) was started from one thread while another thread's "
                       "was running: synk's calls are not thread-safe; make them from one thread, or serialize them "
                       "with a mutex");
    throw UsageError("a synk command (a call or a collective) was started while another was running, from inside a "
                     "function's run() or a rank handler: a command cannot start another");
  }
  if (!in_preamble_) {   // the preambles' own commands run without them
    in_preamble_ = true;
    struct Reset { bool& flag; ~Reset() { flag = false; } } reset{in_preamble_};
    for (CommandPreamble preamble : command_table().preambles) preamble(*this);
  }
  in_command_ = true;
  command_thread_.store(std::this_thread::get_id());
  retired_since_command_ = false;   // the workers unmap what was retired before they run it
  struct InCommand {
    bool& flag;
    ~InCommand() { flag = false; }
  } in_command{in_command_};
  if (cancellation_requested()) check_workers();   // the watchdog saw a worker die since
  if (payload.size() > kPayloadCapacity)
    throw InternalError(fmt::format("command payload of {} bytes exceeds {}", payload.size(), kPayloadCapacity));
  if (ctl_->barrier_broken.load(std::memory_order_relaxed) != 0) {   // no rank is in the barrier now
    ctl_->barrier.arrived.store(0, std::memory_order_relaxed);
    ctl_->barrier_broken.store(0, std::memory_order_relaxed);
  }
  ctl_->command.kind = uint32_t(kind);
  ctl_->command.commit_pending = commit_pending_ ? 1 : 0;
  ctl_->command.payload_len = uint32_t(payload.size());
  if (!payload.empty()) std::memcpy(ctl_->payload_of_command(), payload.data(), payload.size());
  commit_pending_ = true;
  ++seq_;
  if (seq_ == 0) ++seq_;   // 0 means "no command yet" to the workers
  ++master_ctx_.command_;
  master_ctx_.seq_ = seq_;
  const int64_t deadline = options_.call_timeout_s > 0 ? now_ns() + int64_t(options_.call_timeout_s * 1e9) : 0;
  command_deadline_ns_ = deadline;
  command_start_ns_ = now_ns();
  next_stop_check_ns_ = 0;
  ctl_->command.word.store(seq_);

  std::vector<std::string>& errors = errors_;
  errors.resize(size_t(size_));
  for (std::string& e : errors) e.clear();
  try {
    // A worker's death stops the master's share at its next cancellation point (watchdog.h).
    CancelScope cancel(&ProcessGroup::cancel_hook);
    if (master_part) master_part();
  } catch (const RankError& e) {
    if (e.group_lost()) throw;   // a worker died while rank 0 waited on it (e.g. in a barrier)
    errors[0] = e.what();
  } catch (const std::exception& e) {
    errors[0] = failure_text(e);
    if (errors[0].empty()) errors[0] = "unknown error";
  }
  ctl_->slot(0).done_seq.store(seq_, std::memory_order_seq_cst);   // for workers that wait for rank 0 (finished)
  if (size_ > 1) {
    trace::Span waiting(trace::Category::Wait, "wait for workers");
    int next = 1;   // the first rank not seen done
    wait_for(ctl_->done, [this, &next] {
      while (next < size_ && ctl_->slot(next).done_seq.load(std::memory_order_acquire) == seq_) ++next;
      return next == size_;
    }, policy_, [this, deadline] { poll_master(deadline); });
  }
  // Every worker may have counted itself done and one died since: its segments are gone.
  if (cancellation_requested()) check_workers();
  for (int r = 1; r < size_; ++r) {
    RankSlot& slot = ctl_->slot(r);
    if (slot.error_command.load(std::memory_order_acquire) == master_ctx_.command_) {
      errors[size_t(r)] = std::string(slot.error, slot.error_len);
      if (errors[size_t(r)].empty()) errors[size_t(r)] = "unknown error";
    }
  }
  return errors;
}

std::span<const std::byte> ProcessGroup::worker_inline_results(int rank) {
  RankSlot& slot = ctl_->slot(rank);
  if (slot.done_seq.load(std::memory_order_acquire) != seq_)
    throw InternalError(fmt::format("rank {} has not finished the last command", rank));
  return {slot.inline_results, kInlineResultBytes};
}

std::span<const std::byte> ProcessGroup::worker_results(int rank) {
  RankSlot& slot = ctl_->slot(rank);
  uint64_t gen = slot.results_gen.load(std::memory_order_acquire);
  if (gen == 0) return {};
  if (worker_results_gen_[size_t(rank)] != gen) {
    try {
      worker_results_[size_t(rank)] = shm::Segment::open(std::string(slot.results_name));
    } catch (const InternalError&) {
      check_workers();   // the watchdog removed the names of a group it found dead
      throw;
    }
    worker_results_gen_[size_t(rank)] = gen;
  }
  return {worker_results_[size_t(rank)].bytes(), size_t(slot.results_size)};
}

shm::Segment& ProcessGroup::collective_staging() {
  if (!staging_.valid())
    staging_ = shm::Segment::create(shm::unique_name(prefix_, "coll"), options_.collective_staging_bytes,
                                    "the collectives' staging area (GroupOptions::collective_staging_bytes)");
  return staging_;
}

std::byte* ProcessGroup::scratch(size_t bytes) {
  if (!scratch_.valid() || scratch_.size() < bytes) {
    if (scratch_.valid()) retire(scratch_.name());
    size_t want = std::max({bytes, scratch_.size() * 2, size_t(1) << 16});
    scratch_ = shm::Segment::create(shm::unique_name(prefix_, "s"), want, "the scratch area of the process group");
  }
  return scratch_.bytes();
}

void ProcessGroup::refuse_forked_copy(std::string_view what) const {
  if (!is_forked_copy()) return;
  throw UsageError(fmt::format("{}{}this process (pid {}) is a copy of synk's master (pid {}) made by the program's "
                               "own fork(): the process group and its variables belong to the master; call "
                               "synk::close() here first to start a group of this process's own",
                               what, what.empty() ? "" : ": ", getpid(), pids_[0]));
}

bool ProcessGroup::flush_retired() {
  // A worker is a forked copy too (its pids_[0] is the master's).
  if (!alive_ || is_forked_copy() || in_command_ || !retired_since_command_) return false;
  run(CommandKind::Ping, {}, {});
  return true;
}

void ProcessGroup::retire(const std::string& name) {
  // Only the master talks to the workers: a copy of the group in a process the user forked from
  // the master (whose Data may be destroyed at its exit) must not write into the control block.
  if (!alive_ || getpid() != pids_[0]) return;
  retired_since_command_ = true;
  master_ctx_.mapped_.erase(name);
  if (name.size() >= kRetireNameMax) {
    ctl_->retired_count.fetch_add(kRetireSlots + 1, std::memory_order_release);   // forces a flush
    return;
  }
  uint64_t i = ctl_->retired_count.load(std::memory_order_relaxed);
  std::memcpy(ctl_->retired[i % kRetireSlots], name.c_str(), name.size() + 1);
  ctl_->retired_count.store(i + 1, std::memory_order_release);
}

void ProcessGroup::teardown(bool orderly) {
  if (!alive_) return;
  alive_ = false;
  if (getpid() != pids_[0]) return;   // a copy in a process the user forked: not ours to end
  for (TeardownPrologue prologue : command_table().teardown_prologues) prologue();
  if (g_listening_group == this) g_listening_group = nullptr;
  watchdog_.stop();
  set_active_backend(Backend::Cpu);
  bool any_left = false;
  for (int r = 1; r < size_; ++r) any_left |= !reaped_[size_t(r)];
  if (orderly && any_left) {
    ctl_->command.kind = uint32_t(CommandKind::Shutdown);
    ctl_->command.commit_pending = commit_pending_ ? 1 : 0;
    ctl_->command.payload_len = 0;
    if (++seq_ == 0) ++seq_;
    ctl_->command.word.store(seq_);
    // Workers exit right after acknowledging; allow them a few seconds, then stop waiting.
    int64_t deadline = now_ns() + 5'000'000'000;
    for (int r = 1; r < size_; ++r) {
      while (!reaped_[size_t(r)]) {
        int status;
        pid_t got = waitpid(pids_[size_t(r)], &status, WNOHANG);
        if (got != 0) { reaped_[size_t(r)] = true; break; }
        if (now_ns() > deadline) break;
        usleep(200);
      }
    }
  }
  if (ctl_) {
    ctl_->abort.store(1, std::memory_order_release);
    ctl_->command.word.add(1);
    ctl_->barrier.generation.add(1);
    ctl_->exchange.add(1);
  }
  for (int r = 1; r < size_; ++r)
    if (!reaped_[size_t(r)] && pids_[size_t(r)] > 0) kill(pids_[size_t(r)], SIGKILL);
  cleanup::clear_workers();   // before they are reaped: the signal handler must not see their pids
  for (int r = 1; r < size_; ++r) {
    if (reaped_[size_t(r)] || pids_[size_t(r)] <= 0) continue;
    int status;
    while (waitpid(pids_[size_t(r)], &status, 0) < 0 && errno == EINTR) {}
    reaped_[size_t(r)] = true;
  }
  for (int& fd : pidfds_)
    if (fd >= 0) ::close(std::exchange(fd, -1));
  clear_cancellation();
  master_ctx_.mapped_.clear();
  master_ctx_.ctl_ = nullptr;
  worker_results_.clear();
  worker_results_gen_.clear();
  scratch_.reset();
  staging_.reset();
  store_ = Store();
  ctl_ = nullptr;
  control_.reset();
  shm::remove_all(prefix_);
  if (affinity_saved_) sched_setaffinity(0, sizeof saved_affinity_, &saved_affinity_);
  affinity_saved_ = false;
}

}  // namespace synk::rt
