// The runtime's side of multi-node runs (cluster.h): noticing mpirun, loading the MPI plugin,
// the start-up agreement between leaders, and the rule that a failed cross-node step aborts the
// job instead of leaving the other leaders waiting.
#include "runtime/node/cluster.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <fmt/format.h>

#include "base/cancel.h"
#include "base/errors.h"
#include "runtime/group/shm.h"

#ifndef SYNK_MPI_PLUGIN_PATH
#define SYNK_MPI_PLUGIN_PATH "libsynk_mpi.so"
#endif

namespace synk::rt {
namespace {

std::unique_ptr<Cluster> g_cluster;
bool g_finalized = false;
int g_local_ranks = 1;
std::function<void()> g_check_local;
std::atomic<int64_t> g_deadline_ns{0};
// Set on a thread in cross_node_off_main: its poll, and whether that poll threw.
thread_local void (*t_off_main_poll)() = nullptr;
thread_local bool t_poll_threw = false;
double g_node_timeout_s = 300;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// SYNK_NODE_TIMEOUT_S: how long a leader waits for the others in one cross-node step (default
// 300 s; 0: forever). Read once, by start_cluster: under mpirun the environment holds a hundred
// variables, and every cross-node step needs the value.
double read_node_timeout_s() {
  const char* s = std::getenv("SYNK_NODE_TIMEOUT_S");
  if (!s || !*s) return 300;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  // NaN passed `v < 0` and waited forever; past 1e9 s (31 years) the deadline overflows.
  if (*end || !(v >= 0) || v > 1e9)
    throw UsageError(fmt::format("SYNK_NODE_TIMEOUT_S: expected a number of seconds from 0 (wait forever) to 1e9, "
                                 "received '{}'", s));
  return v;
}

// A blocking transfer past the deadline (the MPI plugin's watchdog thread): no MPI call is safe
// from this thread, so the process ends through the signal path (runtime/group/cleanup.h: workers
// stopped, segments removed) and mpirun ends the rest of the job.
void end_stuck_transfer() {
  std::fprintf(stderr, "synk: node %d of %d: no answer from the other nodes within SYNK_NODE_TIMEOUT_S=%g s "
               "during a transfer (a node stopped, or the leaders called different things: SYNK_CHECK_NODES=1 "
               "compares their collectives); ending the whole job\n", cluster_node(), cluster_nodes(), g_node_timeout_s);
  std::fflush(stderr);
  ::kill(::getpid(), SIGTERM);
}

void poll_peers() {
  if (t_off_main_poll) {
    try {
      t_off_main_poll();
    } catch (...) {
      t_poll_threw = true;
      throw;
    }
  } else {
    cancellation_point();
    if (g_check_local) g_check_local();
  }
  const int64_t deadline = g_deadline_ns.load(std::memory_order_relaxed);
  if (deadline > 0 && now_ns() > deadline)
    throw Error(fmt::format("no answer from the other nodes within SYNK_NODE_TIMEOUT_S={} s (a node stopped, or "
                            "the leaders called different things: SYNK_CHECK_NODES=1 compares their collectives)",
                            g_node_timeout_s));
}

using CreateFn = Cluster* (*)(std::string*);

CreateFn load_plugin() {
  const char* env = std::getenv("SYNK_MPI_PLUGIN");
  std::string path = env && *env ? env : SYNK_MPI_PLUGIN_PATH;
  // RTLD_GLOBAL: OpenMPI's own components, which it dlopens, resolve libmpi's symbols through
  // the global scope.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  std::string why = handle ? "" : dlerror();
  if (!handle && !(env && *env)) handle = dlopen("libsynk_mpi.so", RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    throw UsageError(fmt::format("this program was started by mpirun, but synk's MPI plugin could not be loaded "
                                 "({}): build synk with MPI (Debian libopenmpi-dev), set SYNK_MPI_PLUGIN to the "
                                 "path of libsynk_mpi.so, or set SYNK_MPI=0 to run each process as its own job",
                                 why));
  auto create = reinterpret_cast<CreateFn>(dlsym(handle, "synk_mpi_cluster_create"));
  if (!create) throw UsageError(fmt::format("{} is not synk's MPI plugin (no synk_mpi_cluster_create)", path));
  return create;
}

}  // namespace

bool started_by_mpi_launcher() {
  const char* off = std::getenv("SYNK_MPI");
  if (off && std::string(off) == "0") return false;
  if (off && *off && std::string(off) != "1")
    throw UsageError(fmt::format("SYNK_MPI: expected 0 (ignore mpirun: every process is a job of its own) or 1 "
                                 "(the default), received '{}'", off));
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

void start_cluster(int local_ranks, const std::string& backend_name, std::function<void()> check_local) {
  if (g_finalized)
    throw UsageError("fork: under mpirun a program can fork once (MPI cannot be initialised again after close())");
  if (g_cluster) throw InternalError("start_cluster: a cluster is running already");
  g_node_timeout_s = read_node_timeout_s();   // a malformed value is reported now, not in a step
  CreateFn create = load_plugin();
  std::string error;
  Cluster* made = create(&error);
  if (!made) throw Error(fmt::format("MPI could not be initialised: {}", error));
  g_cluster.reset(made);
  g_local_ranks = local_ranks;
  g_check_local = std::move(check_local);
  g_cluster->poll = poll_peers;
  g_cluster->on_stuck = end_stuck_transfer;
  std::vector<std::string> all;
  // SYNK_CHECK_NODES too: set on one leader only, it would compare collectives with leaders that
  // do not (docs/multinode.md), so every leader must run with the same value.
  const char* check = std::getenv("SYNK_CHECK_NODES");
  const std::string checking = check && *check && std::string(check) != "0" ? check : "0";
  const std::string mine = fmt::format("{} {} SYNK_CHECK_NODES={} {}", local_ranks, backend_name, checking,
                                       g_cluster->host());
  cross_node("start-up", [&] { all = g_cluster->all_gather(mine); });
  std::string differ;
  for (size_t n = 0; n < all.size(); ++n)
    if (all[n].substr(0, all[n].rfind(' ')) != all[0].substr(0, all[0].rfind(' ')))
      differ += fmt::format("{}node {} ({}): {}", differ.empty() ? "" : "; ", n, all[n].substr(all[n].rfind(' ') + 1),
                            all[n].substr(0, all[n].rfind(' ')));
  if (!differ.empty())
    throw UsageError(fmt::format("fork: every node must start the same number of ranks on the same backend, with the "
                                 "same SYNK_CHECK_NODES (mpirun -x SYNK_CHECK_NODES=1 sets it on every node); node 0 "
                                 "({}) has {}, but {}", all[0].substr(all[0].rfind(' ') + 1),
                                 all[0].substr(0, all[0].rfind(' ')), differ));
}

void stop_cluster() {
  if (!g_cluster) return;
  cross_node("closing", [] { g_cluster->agree_to_close(); });
  g_cluster->finalize();
  g_cluster.reset();
  g_check_local = nullptr;
  g_finalized = true;
}

bool cluster_finalized() { return g_finalized; }
Cluster* cluster() { return g_cluster.get(); }
int cluster_node() { return g_cluster ? g_cluster->node() : 0; }
int cluster_nodes() { return g_cluster ? g_cluster->nodes() : 1; }
int cluster_local_ranks() { return g_local_ranks; }

void abort_job(const std::string& message) {
  // Two threads may get here at once (the main one and the overlapped all-reduce's helper): the
  // first ends the process; the second waits for that.
  static std::atomic<bool> ending{false};
  if (ending.exchange(true))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::fprintf(stderr, "synk: node %d of %d (%s): %s; ending the whole job\n", cluster_node(), cluster_nodes(),
               g_cluster ? g_cluster->host().c_str() : "?", message.c_str());
  std::fflush(stderr);
  // MPI_Abort ends this process without exit handlers: its Data segments go first (its workers
  // die with it, PR_SET_PDEATHSIG, and rank 1 removes the group's segments).
  if (g_cluster) {
    try {
      g_cluster->announce_abort(message, 2.0);
    } catch (const std::exception&) {   // best effort: the job ends either way
    }
  }
  shm::remove_all(shm::process_prefix());
  if (g_cluster) g_cluster->abort(1);
  std::_Exit(1);
}

namespace {
void set_deadline(int64_t deadline) {
  g_deadline_ns.store(deadline, std::memory_order_relaxed);
  if (g_cluster) g_cluster->deadline_ns.store(deadline);
}
void arm_deadline() {
  const double timeout = g_node_timeout_s;
  set_deadline(timeout > 0 ? now_ns() + int64_t(timeout * 1e9) : 0);
}
}  // namespace

void cross_node(const char* what, const std::function<void()>& step) {
  arm_deadline();
  try {
    step();
    set_deadline(0);
  } catch (const std::exception& e) {
    abort_job(fmt::format("{} across nodes: {}", what, e.what()));
  }
}

void cross_node_off_main(const char* what, const std::function<void()>& step, void (*poll)()) {
  t_off_main_poll = poll;
  t_poll_threw = false;
  struct Restore {
    ~Restore() { t_off_main_poll = nullptr; }
  } restore;
  arm_deadline();
  try {
    step();
    set_deadline(0);
  } catch (const std::exception& e) {
    if (t_poll_threw) {
      set_deadline(0);
      throw;
    }
    abort_job(fmt::format("{} across nodes: {}", what, e.what()));
  }
}

}  // namespace synk::rt
