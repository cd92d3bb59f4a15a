// The extension module synk._synk: the process group (fork, close, distribute, size, backend,
// forked, worker_pid) and the registration of every other part (errors, Data, modules and
// functions, collectives). python/synk/__init__.py re-exports all of it as the package `synk`.
//
// Forking from Python is safe because a worker never returns into the interpreter: synk::fork()
// runs the worker loop inside the forked child and ends it with _exit(), so no Python code,
// thread, atexit handler or buffered output of the parent ever runs or flushes in a worker. The
// child inherits only the forking thread. Workers ignore SIGINT (the runtime sets it in every
// worker), so that Ctrl-C in a terminal, which signals the whole foreground process group,
// interrupts the Python program (KeyboardInterrupt on the master after the current call) instead
// of killing the workers and losing the group.
// A child the user forks from the master (os.fork) gets a fresh API lock from a pthread_atfork
// handler (not armed during synk.fork, whose children are workers),
// may close its copy of the group (the runtime leaves the master's segments alone), and is
// refused any command on it (check_group_process).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <new>

#include <atomic>

#include "python/src/common.h"
#include "synk/machine_info.h"

namespace synkpy {

namespace {

std::atomic<bool> g_forking{false};
// Set in a child the user forked: only there can a group belong to another process, so only there
// does check_group_process() pay for getpid().
bool g_forked_by_user = false;

void child_after_fork() {
  if (!g_forking.load()) {
    // A child the user forked (os.fork, multiprocessing): another thread may have held the API
    // lock at the fork, and that thread does not exist here; start with a fresh lock.
    new (&api_mutex()) std::recursive_mutex();
    g_forked_by_user = true;
  }
}

synk::Backend parse_backend(const std::string& name) {
  if (name == "cpu") return synk::Backend::Cpu;
  if (name == "gpu") return synk::Backend::Gpu;
  if (name == "auto") return synk::Backend::Auto;
  throw synk::UsageError("fork: backend must be 'cpu', 'gpu' or 'auto', received '" + name + "'");
}

void set_if_given(int64_t& field, py::handle value, const char* name) {
  if (!value.is_none()) field = int_arg(value, std::string("fork: ") + name);
}
void set_if_given(double& field, py::handle value, const char* name) {
  if (!value.is_none()) field = float_arg(value, std::string("fork: ") + name);
}
void set_if_given(bool& field, py::handle value, const char* name) {
  if (!value.is_none()) field = bool_arg(value, std::string("fork: ") + name);
}
void set_if_given(size_t& field, py::handle value, const char* name) {
  if (value.is_none()) return;
  const int64_t v = int_arg(value, std::string("fork: ") + name);
  if (v < 0) throw synk::UsageError(std::string("fork: ") + name + " must be >= 0, received " + std::to_string(v));
  field = size_t(v);
}

int fork(py::handle n, const std::string& backend, py::handle spin_ns, py::handle yield_ns, py::handle poll_ns,
         py::handle call_timeout_s, py::handle pin, py::handle staging_bytes) {
  int ranks = 0;
  if (!n.is_none()) {
    if (PyBool_Check(n.ptr()) || !PyIndex_Check(n.ptr()))
      throw synk::UsageError("fork: n must be an integer >= 0 or None (one rank per CPU core), received " +
                             py::repr(n).cast<std::string>());
    const int64_t v = int_arg(n, "fork: n");
    if (v < INT32_MIN || v > INT32_MAX) throw synk::UsageError("fork: n must be in [0, 1024], received " + std::to_string(v));
    ranks = int(v);
  }
  synk::ForkOptions o;
  set_if_given(o.spin_ns, spin_ns, "spin_ns");
  set_if_given(o.yield_ns, yield_ns, "yield_ns");
  set_if_given(o.poll_ns, poll_ns, "poll_ns");
  set_if_given(o.call_timeout_s, call_timeout_s, "call_timeout_s");
  set_if_given(o.pin, pin, "pin");
  set_if_given(o.collective_staging_bytes, staging_bytes, "collective_staging_bytes");
  synk::Backend b = parse_backend(backend);
  // The GIL stays held: nothing Python runs in the children anyway, and no other Python thread
  // may be half-way through the API when the process is copied.
  ApiLock lock;
  g_forking.store(true);
  struct Disarm {
    ~Disarm() { g_forking.store(false); }
  } disarm;
  const int n_ranks = synk::fork(ranks, b, o);
  group_pid() = getpid();
  return n_ranks;
}

}  // namespace

pid_t& group_pid() {
  static pid_t pid = 0;
  return pid;
}

void check_group_process() {
  if (!g_forked_by_user) return;
  const pid_t owner = group_pid();
  if (owner == 0 || getpid() == owner || !synk::forked()) return;
  throw synk::UsageError("this process (pid " + std::to_string(getpid()) + ") was forked from synk's master (pid " +
                         std::to_string(owner) + ") with os.fork(): the process group belongs to the master; "
                         "call synk.close() here first to start a group of this process's own");
}

}  // namespace synkpy

PYBIND11_MODULE(_synk, m) {
  namespace py = pybind11;
  using namespace synkpy;
  m.doc() = "synk's C++ API (synk/synk.h, synk/jit.h) for Python; use it through the package `synk`";
  static bool atfork_registered = false;
  if (!atfork_registered) {
    pthread_atfork(nullptr, nullptr, &child_after_fork);
    atfork_registered = true;
  }
  synk::jit::register_loader();   // workers forked from now on rebuild JIT functions made later

  init_errors(m);
  init_data(m);
  init_calls(m);
  init_collectives(m);

  m.def("fork", &synkpy::fork, py::arg("n") = py::none(), py::arg("backend") = "cpu", py::kw_only(),
        py::arg("spin_ns") = py::none(), py::arg("yield_ns") = py::none(), py::arg("poll_ns") = py::none(),
        py::arg("call_timeout_s") = py::none(), py::arg("pin") = py::none(),
        py::arg("collective_staging_bytes") = py::none(),
        "Start n ranks (None or 0: one per CPU core); this process is rank 0. backend: 'cpu', 'gpu' or 'auto'. "
        "Returns n.");
  m.def("close", [] {
          {
            // Not without_gil: close() is what a child forked from the master may still do (it
            // ends only the child's copy of the group; the runtime leaves the master's alone).
            py::gil_scoped_release release;
            std::lock_guard<std::recursive_mutex> lock(api_mutex());
            synk::close();
          }
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        },
        "End the workers and remove every shared-memory segment of the group (idempotent; also at exit)");
  m.def("distribute", [] { without_gil([] { synk::distribute(); }); },
        "Make every worker load every function registered so far now (they otherwise load on first use)");
  m.def("forked", [] { ApiLock l; return synk::forked(); });
  m.def("size", [] { ApiLock l; return synk::size(); }, "Ranks in the running group (UsageError when none)");
  m.def("node", [] { ApiLock l; return synk::node(); }, "This leader's node under mpirun (docs/multinode.md); else 0");
  m.def("nodes", [] { ApiLock l; return synk::nodes(); }, "Nodes under mpirun; else 1");
  m.def("local_size", [] { ApiLock l; return synk::local_size(); }, "Ranks of each node (UsageError when none)");
  m.def("_end_job", [](const std::string& why) { synk::end_job(why); }, "Ends every node's processes (excepthook)");
  m.def("backend", [] { ApiLock l; return std::string(synk::backend() == synk::Backend::Gpu ? "gpu" : "cpu"); },
        "'gpu' or 'cpu': what the running group computes on ('cpu' when none runs)");
  m.def("worker_pid", [](int rank) { ApiLock l; return int(synk::worker_pid(rank)); }, py::arg("rank"));
  m.def("trace_start", [](const std::string& path) { without_gil([&] { synk::trace_start(path); }); }, py::arg("path"),
        "Record a timeline of every rank until trace_stop(), written as a Chrome trace-event file to path "
        "(docs/trace.md); UsageError now when path cannot be written");
  m.def("trace_stop", [] { without_gil([] { synk::trace_stop(); }); },
        "Write the trace file of trace_start() (nothing when no trace runs; also at exit)");
  m.def("tracing", [] { ApiLock l; return synk::tracing(); }, "Whether a trace_start() trace runs");
  m.def(
      "info",
      [] {
        py::dict info;   // insertion-ordered
        for (const auto& [key, text] : synk::machine_info()) info[py::str(key)] = text;
        return info;
      },
      "What synk finds on this machine, as synkc info prints it: CPU and usable CPUs, JIT target, BLAS kernels, "
      "oneDNN's instruction set, GPUs, /dev/shm, kernel cache (docs/python.md)");
}
