// The user-facing API (see synk.h): the current process group, registration of modules and
// functions (published to workers forked earlier through the group's Store), shared-variable
// access, and calls.
#include "synk/synk.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "base/diagnostics.h"
#include "runtime/call/call_engine.h"
#include "runtime/call/call_nodes.h"
#include "runtime/call/call_plan.h"
#include "runtime/call/registry.h"
#include "runtime/group/cleanup.h"
#include "runtime/group/process_group.h"
#include "runtime/data/shared_vars.h"
#include "runtime/node/cluster.h"
#include "runtime/node/placement.h"
#include "runtime/trace/trace.h"
#include "synk/collectives_internal.h"
#include "base/wire.h"

namespace synk {

namespace {

std::unique_ptr<rt::ProcessGroup> g_group;
pid_t g_master_pid = 0;
std::set<std::string> g_loaders_at_fork;
std::set<std::string> g_handlers_at_fork;

void at_exit() {
  if (getpid() != g_master_pid) return;   // a child forked by the user: not our group
  if (g_group) {
    try { g_group->close(); } catch (...) {}
  }
  try {
    rt::trace::stop();   // a trace_start() never stopped: the file, with the workers' spans close() collected
  } catch (const std::exception& e) {
    std::fprintf(stderr, "synk: %s\n", e.what());
  }
  rt::shm::remove_all(rt::shm::process_prefix());   // Data the program never destroyed
  // Under mpirun a leader that ends without close() most likely ends on an error the other
  // leaders did not see: they would wait for it (in MPI_Finalize, or their next step) forever.
  if (rt::cluster()) rt::abort_job("the program ended without synk::close() (after an error?)");
}

// Under mpirun the group's messages name global ranks, which the user knows there.
std::string global_rank_name(int local) {
  return fmt::format("global rank {} (local rank {} of node {})", rt::cluster_node() * rt::cluster_local_ranks() + local,
                     local, rt::cluster_node());
}

// Under mpirun a leader whose group is lost cannot take part in anything any more, and the
// other leaders would wait for it: the whole job ends (runtime/node/cluster.h).
void end_job_on_lost_group(const std::string& message, const std::vector<int>& ranks) {
  const int local = rt::cluster_local_ranks(), first = rt::cluster_node() * local;
  std::vector<std::string> global;
  for (int r : ranks) global.push_back(fmt::format("global rank {} (local rank {})", first + r, r));
  rt::abort_job(fmt::format("{} lost: {}", global.empty() ? "a rank" : fmt::format("{}", fmt::join(global, ", ")),
                            message));
}

void register_at_exit() {
  static bool registered = false;
  if (!registered) {
    std::atexit(&at_exit);
    registered = true;
  }
}

rt::ProcessGroup& group_or_throw(const char* what) {
  if (!g_group || !g_group->alive()) {
    g_group.reset();
    throw UsageError(fmt::format("{}: no process group is running; call synk::fork() first", what));
  }
  return *g_group;
}

rt::ModuleEntry& module_entry(int32_t id) {
  rt::Registry& reg = rt::Registry::instance();
  if (id < 0 || size_t(id) >= reg.modules.size() || !reg.modules[size_t(id)])
    throw UsageError("use of an empty synk::Module handle (create it with synk::module(spec))");
  return *reg.modules[size_t(id)];
}

void throw_rank_errors(const std::string& what, const std::vector<std::string>& errors) {
  std::vector<int> ranks;
  std::vector<std::string> parts;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) {
      ranks.push_back(int(r));
      parts.push_back(fmt::format("rank {}: {}", r, errors[r]));
    }
  if (!ranks.empty())
    throw RankError(fmt::format("{} failed on {}", what, fmt::join(parts, "; ")), ranks);
}

// `local`: a rank of this node's group (a process of this machine) rather than a global rank.
void check_rank(int rank, const char* what, bool local = false) {
  int n = g_group && g_group->alive() ? g_group->size() * (local ? 1 : rt::cluster_nodes()) : 1;
  if (rank < 0 || rank >= n)
    throw UsageError(fmt::format("{}: rank must be in [0, {}), received {}{}", what, n, rank,
                                 n == 1 && rank > 0 ? " (no process group is running: only the master, rank 0, "
                                                      "exists before synk::fork() and after synk::close())"
                                                    : ""));
}

}  // namespace

int fork(int n, Backend backend, const ForkOptions& options) {
  if (rt::cleanup::is_worker())
    throw UsageError("fork: called on a worker rank (from inside a function's run() or a rank handler): only the "
                     "master forks");
  if (g_group && g_group->alive())
    throw UsageError(fmt::format("fork: a process group of {} ranks is already running; call "
                                 "synk::close() before forking again", g_group->size()));
  g_group.reset();
  rt::release_queued(nullptr);   // the new workers inherit what is left
  register_at_exit();
  g_master_pid = getpid();
  g_loaders_at_fork.clear();
  g_handlers_at_fork.clear();
  for (const auto& [kind, loader] : rt::Registry::instance().loaders) g_loaders_at_fork.insert(kind);
  for (const auto& [name, handler] : rt::rank_handlers()) g_handlers_at_fork.insert(name);
  if (rt::started_by_mpi_launcher() && rt::cluster_finalized())
    throw UsageError("fork: under mpirun a program can fork once (MPI cannot be initialised again after close())");
  if (rt::started_by_mpi_launcher() && rt::cluster())   // MPI runs: workers must not be forked under it
    throw UsageError("fork: under mpirun a program can fork once, and the fork before this one was refused (the "
                     "nodes asked for different rank counts or backends) after it had initialised MPI, which a new "
                     "fork must not inherit; make every node fork alike and start the job again");
  if (rt::started_by_mpi_launcher()) {
    (void)collectives_internal::NodeCheck::enabled();   // SYNK_CHECK_NODES malformed: said now, not later
    // Before the fork: the ranks inherit the leader's CPUs (runtime/node/placement.h).
    const std::string placed = rt::claim_node_cpus();
    const char* verbose = std::getenv("SYNK_VERBOSE");
    if (!placed.empty() && verbose && *verbose && std::string(verbose) != "0")
      std::fprintf(stderr, "synk: fork: %s\n", placed.c_str());
  }
  g_group = rt::ProcessGroup::start(n, backend, options);
  if (rt::started_by_mpi_launcher()) {
    // After the fork: workers must never inherit an initialised MPI (runtime/node/cluster.h).
    try {
      rt::start_cluster(g_group->size(), rt::backend_name(g_group->backend()), [] {
        if (g_group) g_group->check_workers();
      });
      rt::set_group_lost_hook(&end_job_on_lost_group);
      rt::set_rank_namer(&global_rank_name);
      rt::cleanup::set_report_prefix(fmt::format("node {} of {} ({}): ", rt::cluster_node(), rt::cluster_nodes(),
                                                 rt::cluster()->host()));
      rt::trace::set_node(rt::cluster_node(), rt::cluster_node() * g_group->size());
    } catch (...) {
      g_group->close();
      g_group.reset();
      throw;
    }
  }
  rt::ShapeBook::instance().reset(g_group->size());
  return size();
}

void close() {
  if (rt::cleanup::is_worker())
    throw UsageError("close: called on a worker rank (from inside a function's run() or a rank handler): only the "
                     "master closes the group");
  if (g_group && g_group->in_command())
    throw UsageError("close: called while a command was running (from inside a function's run() or a rank "
                     "handler): close the group after the command returns");
  if (g_group) g_group->close();
  g_group.reset();
  rt::release_queued(nullptr);
  rt::set_group_lost_hook(nullptr);
  rt::stop_cluster();
}

bool forked() { return g_group && g_group->alive(); }

Backend backend() { return forked() ? g_group->backend() : Backend::Cpu; }

int size() { return group_or_throw("size").size() * rt::cluster_nodes(); }
int local_size() { return group_or_throw("local_size").size(); }
int node() { return rt::cluster_node(); }

void end_job(const std::string& why) {
  if (rt::cluster()) rt::abort_job(why);
  std::fprintf(stderr, "synk: %s\n", why.c_str());
  close();
  std::exit(1);
}
int nodes() { return rt::cluster_nodes(); }

pid_t worker_pid(int rank) {
  rt::ProcessGroup& g = group_or_throw("worker_pid");
  check_rank(rank, "worker_pid", true);
  return g.pid(rank);
}

rt::ProcessGroup* current_group() { return forked() ? g_group.get() : nullptr; }

void trace_start(const std::string& path) {
  rt::trace::start(path);
  register_at_exit();
  if (g_master_pid == 0) g_master_pid = getpid();
  if (!forked()) return;
  try {
    g_group->trace_workers(true);
  } catch (...) {
    rt::trace::stop();
    throw;
  }
}

void trace_stop() {
  if (!rt::trace::writing()) return;
  if (forked()) {
    try {
      g_group->trace_workers(false);
    } catch (...) {
      rt::trace::stop();   // what was handed over so far, then the error
      throw;
    }
  }
  rt::trace::stop();
}

bool tracing() { return rt::trace::writing(); }

void distribute() {
  rt::ProcessGroup& g = group_or_throw("distribute");
  throw_rank_errors("distribute", g.run(rt::distribute_command(), rt::encode_distribute(rt::Registry::instance()),
                                        nullptr));
}

void register_loader(const std::string& kind, rt::FunctionLoader loader) {
  if (kind.empty()) throw UsageError("register_loader: the kind must not be empty");
  if (!loader) throw UsageError("register_loader: the loader is empty");
  rt::Registry::instance().loaders[kind] = std::move(loader);
}

void register_rank_handler(const std::string& name, rt::RankHandler handler) {
  if (name.empty() || !handler) throw UsageError("register_rank_handler: needs a name and a handler");
  rt::rank_handlers()[name] = std::move(handler);
}

void run_on_all_ranks(const std::string& name, std::string_view payload) {
  rt::ProcessGroup& g = group_or_throw("run_on_all_ranks");
  auto it = rt::rank_handlers().find(name);
  if (it == rt::rank_handlers().end())
    throw UsageError(fmt::format("run_on_all_ranks: no handler named '{}'", name));
  if (g.size() > 1 && !g_handlers_at_fork.count(name))
    throw UsageError(fmt::format("run_on_all_ranks: handler '{}' was registered after fork(), so "
                                 "the workers do not have it", name));
  rt::wire::Writer w;
  w.str(name);
  w.str(payload);
  rt::RankHandler& handler = it->second;
  throw_rank_errors(name, g.run(rt::CommandKind::Handler, w.bytes(),
                                [&] { handler(g.master_context(), payload); }));
}

// --- Module -------------------------------------------------------------------------------------

// Not copyable: a copy's end would release the id while the original lives.
struct detail::ModuleHold {
  explicit ModuleHold(int32_t module_id) : id(module_id) {}
  ModuleHold(const ModuleHold&) = delete;
  ModuleHold& operator=(const ModuleHold&) = delete;
  ~ModuleHold() { rt::queue_release(rt::Released::Module, id); }
  const int32_t id;
};

struct detail::FunctionHold {
  FunctionHold(int32_t function_id, std::shared_ptr<const ModuleHold> its_module)
      : id(function_id), module(std::move(its_module)) {}
  FunctionHold(const FunctionHold&) = delete;
  FunctionHold& operator=(const FunctionHold&) = delete;
  ~FunctionHold() { rt::queue_release(rt::Released::Function, id); }
  const int32_t id;
  const std::shared_ptr<const ModuleHold> module;   // released after the function
};

Module::Module(int32_t id) : id_(id), hold_(std::make_shared<const detail::ModuleHold>(id)) {}
Function::Function(int32_t id, const Module& module)
    : id_(id), hold_(std::make_shared<const detail::FunctionHold>(id, module.hold_)) {}

Module module(rt::ModuleSpec spec) {
  rt::release_queued(current_group());   // a program that makes modules in a loop frees the last first
  auto entry = std::make_unique<rt::ModuleEntry>();
  entry->values = rt::initial_values(spec);   // validates; UsageError on a bad spec or file
  entry->spec = std::move(spec);
  rt::Registry& reg = rt::Registry::instance();
  int32_t id = int32_t(reg.modules.size());
  // After fork(), the workers take what the master loaded from its broadcast instead of reading
  // the files again (which may have changed, or gone, since).
  rt::ModuleSpec for_workers = entry->spec;
  std::vector<std::string> loaded;
  for (size_t v = 0; v < for_workers.shareds.size(); ++v) {
    rt::SharedSpec& s = for_workers.shareds[v];
    if (s.init.kind != rt::InitSpec::Kind::Load) continue;
    s.init.kind = rt::InitSpec::Kind::FromMaster;
    s.init.shape = entry->values[v].shape;
    loaded.push_back(s.name);
  }
  std::string encoded = rt::encode_module(for_workers);
  reg.modules.push_back(std::move(entry));
  Module made(id);
  if (forked()) {
    g_group->store().set(rt::module_key(id), encoded);
    rt::ShapeBook::instance().snapshot(id, g_group->size());
    if (!loaded.empty() && size() > 1) {
      std::vector<Var> vars;
      for (const std::string& name : loaded) vars.push_back(made.var(name));
      broadcast(Vars(vars));
    }
  }
  return made;
}

const rt::ModuleSpec& Module::spec() const { return module_entry(id_).spec; }

int32_t Module::index_of(std::string_view name) const {
  const rt::ModuleSpec& s = spec();
  for (size_t v = 0; v < s.shareds.size(); ++v)
    if (s.shareds[v].name == name) return int32_t(v);
  std::vector<std::string> names;
  for (const rt::SharedSpec& sh : s.shareds) names.push_back(sh.name);
  throw UsageError(fmt::format("no shared variable named '{}'{} (the module has: {})", name,
                               did_you_mean(name, names), names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

Array Module::get_value(std::string_view name) const {
  return module_entry(id_).values[size_t(index_of(name))];
}

void Module::set_value(std::string_view name, const ArrayRef& value, bool force_cast) {
  // The write would stay in this copy, unseen by the group.
  if (g_group) g_group->refuse_forked_copy(fmt::format("set_value('{}')", name));
  rt::ModuleEntry& m = module_entry(id_);
  int32_t v = index_of(name);
  m.values[size_t(v)] = rt::conform_shared_value(m.spec.shareds[size_t(v)], m.spec.symbols, value,
                                                 force_cast, fmt::format("set_value('{}')", name));
}

void Module::set_value_all(std::string_view name, const ArrayRef& value, bool force_cast) {
  set_value(name, value, force_cast);
  if (forked() && size() > 1) broadcast(Vars(var(name)));
}

// By global rank: under mpirun every leader makes the call and gets that rank's value (rank 0's
// too, which lives on node 0).
Array Module::get_value(int rank, std::string_view name) const {
  check_rank(rank, "get_value");
  if (rank == 0 && !rt::cluster()) return get_value(name);
  group_or_throw("get_value");
  const std::string what = fmt::format("get_value('{}')", name);
  // Compared across the leaders like synk::get_value's (SYNK_CHECK_NODES=1).
  return collectives_internal::node_checked(
      what.c_str(), [&] { return std::move(detail::get_values(rank, {var(name)}, what.c_str())[0]); });
}

void Module::set_value(int rank, std::string_view name, const ArrayRef& value, bool force_cast) {
  check_rank(rank, "set_value");
  if (rank == 0 && !rt::cluster()) return set_value(name, value, force_cast);
  group_or_throw("set_value");
  rt::ModuleEntry& m = module_entry(id_);
  int32_t v = index_of(name);
  std::string what = fmt::format("set_value('{}')", name);
  std::vector<Array> conformed;
  conformed.push_back(rt::conform_shared_value(m.spec.shareds[size_t(v)], m.spec.symbols, value,
                                               force_cast, what));
  detail::set_conformed(rank, {var(name)}, std::move(conformed), what.c_str());
}

Var Module::var(std::string_view name) const { return Var(id_, index_of(name), hold_); }

std::vector<Var> Module::vars() const {
  std::vector<Var> out;
  for (size_t v = 0; v < spec().shareds.size(); ++v) out.push_back(Var(id_, int32_t(v), hold_));
  return out;
}

const std::string& Var::name() const {
  rt::Registry& reg = rt::Registry::instance();
  if (!valid() || size_t(module_) >= reg.modules.size() || !reg.modules[size_t(module_)] ||
      size_t(index_) >= reg.modules[size_t(module_)]->spec.shareds.size())
    throw UsageError("use of an empty synk::Var handle (get one with module.var(name))");
  return reg.modules[size_t(module_)]->spec.shareds[size_t(index_)].name;
}

SelectedRows BatchAccess::select(const Batch& batch, int64_t length, const std::string& what) {
  SelectedRows out;
  const rt::RowSelection& sel = batch.sel_;
  switch (sel.kind) {
    case rt::RowSelection::Kind::All: out.count = length; break;
    case rt::RowSelection::Kind::Count:
      if (sel.stop < 0 || sel.stop > length)
        throw UsageError(fmt::format("{}: a count of {} rows is outside [0, {}] (the value has {} rows)", what,
                                     sel.stop, length, length));
      out.count = sel.stop;
      break;
    case rt::RowSelection::Kind::Range:
      if (sel.start < 0 || sel.start > sel.stop || sel.stop > length)
        throw UsageError(fmt::format("{}: range [{}, {}) is not within [0, {}] with start <= stop", what,
                                     sel.start, sel.stop, length));
      out.first = sel.start;
      out.count = sel.stop - sel.start;
      break;
    case rt::RowSelection::Kind::List: {
      out.contiguous = false;
      if (batch.data_.valid()) {
        const Data& d = batch.data_;
        if (d.ndim() != 1 || is_float(d.dtype()) || d.dtype() == DType::Bool)
          throw UsageError(fmt::format("{}: an index Data must be a 1-D integer array, received {} of shape {}",
                                       what, rt::dtype_name(d.dtype()), rt::shape_string(d.shape())));
        rt::IndexSource src{d.raw(), d.dtype(), d.size()};
        for (int64_t i = 0; i < d.size(); ++i) out.list.push_back(src.at(i));
      } else {
        out.list = batch.list_;
      }
      for (size_t i = 0; i < out.list.size(); ++i)
        if (out.list[i] < 0 || out.list[i] >= length)
          throw UsageError(fmt::format("{}: index {} at position {} is out of range for {} rows", what,
                                       out.list[i], i, length));
      out.count = int64_t(out.list.size());
      break;
    }
  }
  return out;
}

// --- Function -----------------------------------------------------------------------------------

Function function(std::shared_ptr<rt::CompiledFunction> fn, const Module& module, std::string kind,
                  std::string payload) {
  if (!fn) throw UsageError("function: the compiled function is null");
  rt::release_queued(current_group());
  rt::ModuleEntry& m = module_entry(module.id());
  rt::validate_signature(fn->signature(), m.spec);
  rt::Registry& reg = rt::Registry::instance();
  bool has_workers = forked() && g_group->size() > 1;
  if (has_workers) {
    if (kind.empty())
      throw UsageError(fmt::format(
          "function '{}': registered after fork() without a kind; workers forked earlier cannot "
          "rebuild it. Register it before synk::fork(), or give a kind and payload with a loader "
          "(synk::register_loader) registered before the fork", fn->signature().name));
    if (!g_loaders_at_fork.count(kind))
      throw UsageError(fmt::format(
          "function '{}': kind '{}' has no loader in the workers (loaders must be registered with "
          "synk::register_loader before synk::fork())", fn->signature().name, kind));
  }
  auto entry = std::make_unique<rt::FunctionEntry>();
  entry->fn = std::move(fn);
  entry->module = module.id();
  entry->kind = std::move(kind);
  entry->payload = std::move(payload);
  int32_t id = int32_t(reg.functions.size());
  entry->id = id;
  if (forked()) g_group->store().set(rt::function_key(id), rt::encode_function_entry(*entry));
  reg.functions.push_back(std::move(entry));
  return Function(id, module);
}

const rt::FunctionSignature& Function::signature() const {
  rt::Registry& reg = rt::Registry::instance();
  if (id_ < 0 || size_t(id_) >= reg.functions.size())
    throw UsageError("use of an empty synk::Function handle (create it with synk::function(...))");
  return reg.functions[size_t(id_)]->fn->signature();
}

namespace {
rt::FunctionEntry& function_entry(int32_t id) {
  rt::Registry& reg = rt::Registry::instance();
  if (id < 0 || size_t(id) >= reg.functions.size() || !reg.functions[size_t(id)])
    throw UsageError("use of an empty synk::Function handle (create it with synk::function(...))");
  return *reg.functions[size_t(id)];
}
}  // namespace

void Function::set_seed(uint64_t seed) const { function_entry(id_).seed = seed; }
void Function::set_step(uint64_t step) const { function_entry(id_).step = step; }
uint64_t Function::seed() const { return function_entry(id_).seed; }
uint64_t Function::step() const { return function_entry(id_).step; }

std::vector<ReduceMode> Function::output_modes() const {
  std::vector<ReduceMode> modes;
  for (const rt::OutputSpec& o : signature().outputs) modes.push_back(o.mode);
  return modes;
}

std::vector<ReduceMode> Function::update_modes() const {
  std::vector<ReduceMode> modes;
  for (const rt::UpdateSpec& u : signature().updates) modes.push_back(u.mode);
  return modes;
}

std::vector<Data> Function::build_inputs(const std::vector<ArrayRef>& values, DataOptions options) const {
  const rt::FunctionSignature& sig = signature();
  if (values.size() != sig.inputs.size())
    throw UsageError(fmt::format("build_inputs: {} has {} inputs, received {} values", sig.name,
                                 sig.inputs.size(), values.size()));
  std::vector<Data> out;
  for (size_t i = 0; i < values.size(); ++i) {
    DataOptions o = options;
    if (o.name.empty()) o.name = sig.inputs[i].name;
    o.minibatch = options.minibatch || sig.inputs[i].role == rt::Role::Minibatch;
    out.push_back(synk::data(values[i], sig.inputs[i].dtype, o));
  }
  return out;
}

Outputs Function::operator()(const std::vector<Data>& inputs, const CallOptions& options) const {
  signature();
  return call(&group_or_throw(signature().name.c_str()), inputs, options);
}

Outputs Function::run_local(const std::vector<Data>& inputs, const CallOptions& options) const {
  return call(nullptr, inputs, options);
}

Outputs Function::call(rt::ProcessGroup* group, const std::vector<Data>& inputs, const CallOptions& options,
                       int64_t micro_shard_rows, const rt::StreamRequest& stream) const {
  const rt::FunctionSignature& sig = signature();
  rt::CallRequest req;
  req.function = id_;
  req.inputs = inputs;
  req.batch = options.batch.sel_;
  req.batch_list = options.batch.list_;
  if (options.batch.sel_.kind == rt::RowSelection::Kind::List && options.batch.data_.valid())
    req.batch_data = options.batch.data_;
  const int nranks = group ? group->size() * rt::cluster_nodes() : 1;   // global ranks across nodes
  if (options.batch_s.per_rank_ && options.batch_s.rows_.size() != size_t(nranks)) {
    const UsageError error(fmt::format("batch_s: expected a list of exactly {} selections (one per rank), "
                                       "received a list of {}", nranks, options.batch_s.rows_.size()));
    detail::refuse_call(error);
    throw error;
  }
  for (const Rows& rows : options.batch_s.rows_) {
    req.batch_s.push_back(rows.sel_);
    if (rows.sel_.kind == rt::RowSelection::Kind::List) req.batch_s_lists.push_back(rows.list_);
  }
  req.num_slices = options.num_slices;
  req.micro_shard_rows = micro_shard_rows;
  req.stream = stream;
  req.output_subset = options.output_subset;
  Outputs out;
  rt::CallResult result = rt::run_call(group, req);
  static_cast<std::vector<Array>&>(out) = std::move(result.outputs);
  out.rank_weights_ = std::move(result.rank_weights);
  out.gradient_reduced_ = result.update_reduced;
  if (options.output_subset.empty()) {
    for (const rt::OutputSpec& o : sig.outputs) out.names_.push_back(o.name);
  } else {
    out.names_ = options.output_subset;
  }
  return out;
}

void detail::refuse_call(const Error& error) {
  if (rt::cluster()) rt::fail_call_before_start(error);
}

const Array& Outputs::get(std::string_view name) const {
  for (size_t k = 0; k < names_.size(); ++k)
    if (names_[k] == name) return (*this)[k];
  throw UsageError(fmt::format("outputs: no output named '{}' in this result (it has: {})", name,
                               fmt::join(names_, ", ")));
}

}  // namespace synk
