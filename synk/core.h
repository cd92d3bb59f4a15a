// The core of synk's user-facing C++ API (the process group, modules, data, functions and calls),
// in the spirit of Synkhronos' Python API (docs/api.md); synk/synk.h adds the rest:
//
//   synk::fork(2);                                        // one process per rank
//   synk::Module m = synk::module(spec);                  // shared variables, one copy per rank
//   synk::Function f = synk::function(compiled, m);       // any rt::CompiledFunction
//   synk::Data x = synk::data(x_array), y = synk::data(y_array);
//   synk::Outputs r = f({x, y}, {.batch = synk::Range{0, 64}, .num_slices = 2});
//   synk::close();
//
// A function is called as in a serial program: its scattered inputs are split over the ranks,
// every rank runs at once, and the results are reduced to what one device would return. Usage
// errors are synk::UsageError (raised before any worker moves), failures inside ranks are
// synk::RankError, bugs in synk are synk::InternalError.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/call/call_plan.h"
#include "runtime/data/data.h"
#include "runtime/call/descriptor.h"
#include "runtime/call/gradient_stream.h"
#include "base/errors.h"
#include "runtime/group/backend.h"
#include "runtime/group/group_options.h"

namespace synk::rt {
class ProcessGroup;
}

namespace synk {

using rt::Array;
using rt::ArrayRef;
using rt::Backend;
using rt::ReduceMode;
using ForkOptions = rt::GroupOptions;

// --- The process group ------------------------------------------------------------------------

// Starts n ranks (n = 0: one per CPU core this process may run on). Returns n. Rank 0 is this
// process; ranks 1..n-1 are forked workers that never return from this call. A UsageError if a
// group is running already (close() it first).
// backend: Backend::Cpu; Backend::Gpu (rank r computes on GPU r % device_count; a UsageError
// naming the reason when no GPU is usable); Backend::Auto (the GPU when one is usable, else the
// CPU). SYNK_VERBOSE=1 prints the choice on stderr. docs/gpu.md.
int fork(int n = 0, Backend backend = Backend::Cpu, const ForkOptions& options = {});
// The backend the running group computes on (what Backend::Auto chose); Backend::Cpu when no
// group runs.
Backend backend();
// Ends the workers and removes every shared-memory segment of the group. Idempotent.
void close();
// Makes every worker load every function and module registered so far (they otherwise load on
// first use). Any number of calls; a RankError names the ranks where loading failed.
void distribute();
bool forked();
int size();                           // ranks in the running group (a UsageError when none);
                                      // under mpirun, every node's: nodes() * local_size()
// Several machines (docs/multinode.md): `mpirun -np K app` makes each process the leader of one
// node; its fork(n) starts the node's n ranks, and global rank = node() * local_size() + local
// rank. Without mpirun: node() == 0, nodes() == 1, local_size() == size().
int node();
int nodes();
int local_size();
// Ends the program after printing `why`: under mpirun every node's processes at once (for an
// error only this leader saw, which would leave the others waiting for it); otherwise closes the
// group and exits with status 1.
[[noreturn]] void end_job(const std::string& why);
pid_t worker_pid(int rank);           // the process of a rank (0: this one)

// Rebuilds functions of `kind` from their payload in workers forked before the function was
// registered. Register before fork(): workers only know the loaders they inherited.
void register_loader(const std::string& kind, rt::FunctionLoader loader);
// A named operation every rank can be asked to run (ProcessGroup::run_handler); before fork().
void register_rank_handler(const std::string& name, rt::RankHandler handler);
// Runs handler `name` on every rank at once with `payload`; a RankError if any rank failed.
void run_on_all_ranks(const std::string& name, std::string_view payload);
rt::ProcessGroup* current_group();    // null when not forked (for runtime extensions)

// --- The timeline (docs/trace.md) ---------------------------------------------------------------

// Records what every rank does (calls and their phases, kernels, collectives, waits) until
// trace_stop(), which writes one Chrome trace-event file to `path` (Perfetto, chrome://tracing):
// one track per rank. Before or after fork(); workers forked meanwhile are traced too, and a group
// closed meanwhile hands its workers' spans over first. A UsageError now when `path` cannot be
// written or a trace runs already. SYNK_TRACE=<path> in the environment traces each fork() to
// its close() without a call. A program that exits while tracing writes the file at exit.
void trace_start(const std::string& path);
void trace_stop();                    // writes the file; nothing when no trace runs
bool tracing();

// --- Shared variables -------------------------------------------------------------------------

class Var;

namespace detail {
// What keeps a module or a function in memory: every handle of it (Module, Var, Function, and a
// Function's hold keeps its module's) shares one; when the last goes, the id is queued for
// release on every rank (runtime/call/registry.h: rt::release_queued).
struct ModuleHold;
struct FunctionHold;
}  // namespace detail

// A module's handles share its shared variables and compiled code: when the last handle of a
// module (its Module copies, its Vars, its Functions) is gone, they are freed on every rank, at
// the next synk call (docs/runtime.md, "Freeing modules").
class Module {
 public:
  Module() = default;
  int32_t id() const { return id_; }
  const rt::ModuleSpec& spec() const;
  int32_t index_of(std::string_view shared_name) const;   // UsageError for an unknown name
  // A handle on one shared variable (what collectives take), or on all of them in order.
  Var var(std::string_view shared_name) const;
  std::vector<Var> vars() const;

  // The master's own copy. After synk::fork() set_value changes the master's copy ONLY (the
  // workers keep theirs): use set_value_all to change every rank's.
  Array get_value(std::string_view name) const;
  void set_value(std::string_view name, const ArrayRef& value, bool force_cast = false);
  // Every rank's copy: the master's, then a broadcast to the workers when forked.
  void set_value_all(std::string_view name, const ArrayRef& value, bool force_cast = false);
  template <class T>
  void set_value(std::string_view name, const std::vector<T>& values, std::vector<int64_t> shape,
                 bool force_cast = false) {
    set_value(name, ArrayRef{values.data(), rt::dtype_v<T>, std::move(shape)}, force_cast);
  }
  // One rank's copy (rank 0 is the master's).
  Array get_value(int rank, std::string_view name) const;
  void set_value(int rank, std::string_view name, const ArrayRef& value, bool force_cast = false);
  template <class T>
  void set_value(int rank, std::string_view name, const std::vector<T>& values,
                 std::vector<int64_t> shape, bool force_cast = false) {
    set_value(rank, name, ArrayRef{values.data(), rt::dtype_v<T>, std::move(shape)}, force_cast);
  }

 private:
  friend Module module(rt::ModuleSpec spec);
  friend class Function;   // its hold keeps the module's
  explicit Module(int32_t id);
  int32_t id_ = -1;
  std::shared_ptr<const detail::ModuleHold> hold_;
};

// Registers a module: every shared variable is initialised (InitSpec) in this process now, and in
// every worker (forked now or later) as its own private copy.
Module module(rt::ModuleSpec spec);

// One shared variable of a module: module.var("w"). A small value; compare with ==.
class Var {
 public:
  Var() = default;
  Var(const Module& module, std::string_view name) : Var(module.var(name)) {}
  int32_t module() const { return module_; }
  int32_t index() const { return index_; }
  bool valid() const { return module_ >= 0 && index_ >= 0; }
  const std::string& name() const;            // UsageError on an empty handle
  bool operator==(const Var& other) const { return module_ == other.module_ && index_ == other.index_; }

 private:
  friend class Module;
  Var(int32_t module, int32_t index, std::shared_ptr<const detail::ModuleHold> hold)
      : module_(module), index_(index), hold_(std::move(hold)) {}
  int32_t module_ = -1;
  int32_t index_ = -1;
  std::shared_ptr<const detail::ModuleHold> hold_;
};

// --- Functions ----------------------------------------------------------------------------------

struct Range {
  int64_t start = 0;
  int64_t stop = 0;
};

// `batch`: which rows of the scattered inputs a call uses (before splitting over ranks).
class Batch {
 public:
  Batch() = default;
  Batch(int64_t count) : sel_{rt::RowSelection::Kind::Count, 0, count, {}} {}
  Batch(int count) : Batch(int64_t(count)) {}
  Batch(Range range) : sel_{rt::RowSelection::Kind::Range, range.start, range.stop, {}} {}
  Batch(std::vector<int64_t> indices) : sel_{rt::RowSelection::Kind::List, 0, 0, {}}, list_(std::move(indices)) {}
  Batch(std::initializer_list<int64_t> indices) : Batch(std::vector<int64_t>(indices)) {}
  Batch(Data indices) : sel_{rt::RowSelection::Kind::List, 0, 0, {}}, data_(std::move(indices)) {}
  bool given() const { return sel_.kind != rt::RowSelection::Kind::All; }

 private:
  friend class Function;
  friend struct BatchAccess;
  rt::RowSelection sel_;
  std::vector<int64_t> list_;
  Data data_;
};

// The rows a Batch selects from an array of `length` rows (for the collectives' scatter):
// rows [first, first + count) when contiguous, else list[0..count).
struct SelectedRows {
  bool contiguous = true;
  int64_t first = 0;
  int64_t count = 0;
  std::vector<int64_t> list;
  int64_t row(int64_t i) const { return contiguous ? first + i : list[size_t(i)]; }
};
struct BatchAccess {
  // Throws UsageError (starting with `what`) for an index outside [0, length) or a bad range.
  static SelectedRows select(const Batch& batch, int64_t length, const std::string& what);
};

// One selection of rows of the sliceable shared variables on a rank.
class Rows {
 public:
  Rows(Range range) : sel_{rt::RowSelection::Kind::Range, range.start, range.stop, {}} {}
  Rows(std::vector<int64_t> indices) : sel_{rt::RowSelection::Kind::List, 0, 0, {}}, list_(std::move(indices)) {}
  Rows(std::initializer_list<int64_t> indices) : Rows(std::vector<int64_t>(indices)) {}

 private:
  friend class Function;
  rt::RowSelection sel_;
  std::vector<int64_t> list_;
};

// `batch_s`: one selection used by every rank, or exactly one per rank.
class BatchS {
 public:
  BatchS() = default;
  BatchS(Range range) : rows_{Rows(range)} {}
  BatchS(std::vector<int64_t> indices) : rows_{Rows(std::move(indices))} {}
  BatchS(std::initializer_list<int64_t> indices) : rows_{Rows(std::vector<int64_t>(indices))} {}
  BatchS(Rows rows) : rows_{std::move(rows)} {}
  static BatchS per_rank(std::vector<Rows> rows) {
    BatchS b;
    b.rows_ = std::move(rows);
    b.per_rank_ = true;
    return b;
  }
  bool given() const { return !rows_.empty() || per_rank_; }

 private:
  friend class Function;
  std::vector<Rows> rows_;
  bool per_rank_ = false;
};

struct CallOptions {
  Batch batch;
  BatchS batch_s;
  int64_t num_slices = 1;
  std::vector<std::string> output_subset;   // empty: every output, in declaration order
};

// A call's results, in output order (or output_subset order), also reachable by name.
class Outputs : public std::vector<Array> {
 public:
  const Array& get(std::string_view name) const;
  const std::vector<std::string>& names() const { return names_; }
  // Each rank's weight in the call's `avg` reductions, in rank order: its row count over all its
  // slices (1 per rank when nothing is scattered; 0 everywhere when the call selected no rows).
  const std::vector<int64_t>& rank_weights() const { return rank_weights_; }

 private:
  friend class Function;
  friend class TrainStep;   // reads gradient_reduced_
  std::vector<std::string> names_;
  std::vector<int64_t> rank_weights_;
  bool gradient_reduced_ = false;   // a training step's gradient was averaged during the call
};

class Function {
 public:
  Function() = default;
  // Runs on every rank of the group and reduces the outputs.
  Outputs operator()(const std::vector<Data>& inputs, const CallOptions& options = {}) const;
  // Runs on the master alone, as one device (updates change the master's copies only); under
  // mpirun on this leader alone, with no exchange with the others.
  Outputs run_local(const std::vector<Data>& inputs, const CallOptions& options = {}) const;

  // One Data per input, from host arrays, with each input's declared dtype (safe casts only,
  // unless options.force_cast) and, for minibatch inputs, the minibatch flag (seeds:
  // Function.build_inputs).
  std::vector<Data> build_inputs(const std::vector<ArrayRef>& values, DataOptions options = {}) const;

  int32_t id() const { return id_; }
  const rt::FunctionSignature& signature() const;
  const std::string& name() const { return signature().name; }

  // The random state of its random ops (docs/language.md, "Random numbers"): a draw depends on
  // (seed, step, the op, the call's row, the element). Both start at 0; every call of a function
  // with updates (a training step) that succeeds advances the step by one.
  void set_seed(uint64_t seed) const;
  void set_step(uint64_t step) const;
  uint64_t seed() const;
  uint64_t step() const;
  std::vector<ReduceMode> output_modes() const;
  std::vector<ReduceMode> update_modes() const;

 private:
  friend Function function(std::shared_ptr<rt::CompiledFunction>, const Module&, std::string, std::string);
  friend class TrainStep;   // its deterministic mode calls with micro-shards
  Outputs call(rt::ProcessGroup* group, const std::vector<Data>& inputs, const CallOptions& options,
               int64_t micro_shard_rows = 0, const rt::StreamRequest& stream = {}) const;
  Function(int32_t id, const Module& module);
  int32_t id_ = -1;
  std::shared_ptr<const detail::FunctionHold> hold_;
};

// Registers a compiled function over `module`'s shared variables. Before fork() any function
// works (workers inherit it); after fork() it needs a kind whose loader workers have, and the
// payload that loader understands.
Function function(std::shared_ptr<rt::CompiledFunction> fn, const Module& module,
                  std::string kind = "", std::string payload = "");

namespace detail {
// A call this leader refused before it reached the engine (what a binding checks first: a Python
// value that cannot become an input, an unknown keyword). In a multi-node job the other leaders
// are in the call's first exchange: this leader takes part with `error`, so each of them fails
// the call with a RankError naming this node, and every leader's next call pairs with the next
// call on the others (docs/multinode.md). Does nothing without other nodes; the caller throws.
void refuse_call(const Error& error);
}  // namespace detail

// Copies an Array's elements out as T (T must be the Array's dtype).
template <class T>
std::vector<T> to_vector(const Array& a) {
  if (a.dtype != rt::dtype_v<T>)
    throw UsageError(std::string("to_vector: the array has dtype ") + rt::dtype_name(a.dtype) +
                     ", not " + rt::dtype_name(rt::dtype_v<T>));
  return std::vector<T>(a.data<T>(), a.data<T>() + a.size());
}

}  // namespace synk
