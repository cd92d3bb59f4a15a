// Collectives on shared variables (SEMANTICS section 7), one interface over every transport:
//
//   synk::Var w = m.var("w"), b = m.var("b");
//   synk::all_reduce({w, b}, "avg");                      // every rank holds the mean
//   synk::broadcast(w, new_w);                            // every rank holds new_w
//   synk::scatter(data, rows, synk::Range{0, 1000});      // rank r holds its share of the rows
//   std::vector<synk::Array> parts = synk::gather({w}, /*nd_up=*/1);
//   synk::reduce(w, "sum");                               // the master holds the sum
//
// Every collective runs on every rank at once and leaves no rank out of step. Arguments are
// checked on the master before any worker moves (synk::UsageError naming the argument); a rank
// that fails fails the collective on every rank (synk::RankError) and the group stays usable;
// a worker that dies shuts the group down (RankError with group_lost()).
//
// Transports and algorithms (CollectiveOptions::algorithm, per call or set_collective_defaults):
// reductions between CPU processes use reduce-scatter + all-gather over shared memory (Rsag, the
// default: bandwidth-optimal, same bits on every run) or hierarchical copy (Hierarchical); between
// GPUs, one rank per GPU, NCCL (Nccl). Broadcast, scatter, gather, all_gather, set_value and
// get_value always move data through the shared-memory staging area. Everything travels in
// chunks through one fixed-size staging segment per group (GroupOptions::collective_staging_bytes).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "synk/core.h"

namespace synk {

// Reduction operators; avg is the plain mean over ranks (floating-point variables only), bool
// variables support max (any) and min (all), integers wrap on overflow.
enum class Op : uint8_t { Avg, Sum, Prod, Max, Min };

// An Op, or its name ("avg", "sum", "prod", "max", "min"); an unknown name is reported by the
// collective it is passed to, as a UsageError naming the argument.
class ReduceOp {
 public:
  ReduceOp(Op op) : op_(op) {}
  ReduceOp(const char* name) : ReduceOp(std::string_view(name)) {}
  ReduceOp(const std::string& name) : ReduceOp(std::string_view(name)) {}
  ReduceOp(std::string_view name);
  std::optional<Op> op() const { return op_; }
  const std::string& text() const { return text_; }   // the name given, when it was unknown

 private:
  std::optional<Op> op_;
  std::string text_;
};

enum class Algorithm : uint8_t {
  Auto,           // reduce-scatter + all-gather between CPU processes
  Rsag,           // shared-memory reduce-scatter + all-gather
  Hierarchical,   // shared-memory hierarchical copy (groups of group_size ranks)
  Nccl,           // NCCL, one rank per GPU (a UsageError where NCCL or the GPUs are missing)
};
const char* algorithm_name(Algorithm algorithm);

// Options of one collective; a field left unset takes the global default (set_collective_defaults).
struct CollectiveOptions {
  std::optional<Algorithm> algorithm;   // reductions only (default Auto)
  std::optional<int64_t> num_packs;     // reductions: variables travel in this many flat buffers per
                                        // dtype (default 1); <= 0 is a UsageError
  std::optional<int64_t> chunk_bytes;   // bytes per rank and round through the staging area
                                        // (default 0: 1 MiB, less when the staging area is smaller)
  std::optional<int64_t> group_size;    // Hierarchical: ranks per group (default 0: about sqrt(N))
};
// Changes the defaults of every later collective (validated like per-call options).
void set_collective_defaults(const CollectiveOptions& options);
CollectiveOptions collective_defaults();   // every field set

// One shared variable, or a list of them (each at most once).
class Vars {
 public:
  Vars(const Var& var) : vars_{var} {}
  Vars(std::initializer_list<Var> vars) : vars_(vars) {}
  Vars(std::vector<Var> vars) : vars_(std::move(vars)) {}
  const std::vector<Var>& list() const { return vars_; }

 private:
  std::vector<Var> vars_;
};

// A value to write into a shared variable: a host array (not copied before the collective runs,
// so it must outlive the call) or a Data.
class Value {
 public:
  Value(const ArrayRef& ref) : ref_(ref) {}
  Value(const Array& array) : ref_(array.ref()) {}
  Value(const Data& data);
  const ArrayRef& ref() const { return ref_; }
  const std::string& label() const { return label_; }

 private:
  ArrayRef ref_;
  Data data_;           // keeps a Data alive
  std::string label_;   // the Data's name, for messages
};

// One value per variable, in the order of the variables.
class Values {
 public:
  Values(const ArrayRef& ref) : values_{Value(ref)} {}
  Values(const Array& array) : values_{Value(array)} {}
  Values(const Data& data) : values_{Value(data)} {}
  Values(std::initializer_list<Value> values) : values_(values) {}
  Values(std::vector<Value> values) : values_(std::move(values)) {}
  const std::vector<Value>& list() const { return values_; }

 private:
  std::vector<Value> values_;
};

// Every rank holds the master's value (after setting the master's from `values` when given).
void broadcast(const Vars& vars, const CollectiveOptions& options = {});
void broadcast(const Vars& vars, const Values& values, const CollectiveOptions& options = {});

// Rank r holds its rows of each value (rows [floor(r*L/N), floor((r+1)*L/N)) of the L rows
// `batch` selects; without batch each value's own rows). Shapes may then differ per rank; axis 0
// of each variable must be declared with a symbol unless every rank gets the declared length.
void scatter(const Vars& vars, const Values& values, const Batch& batch = {},
             const CollectiveOptions& options = {});

// All ranks' values, on the master, unchanged everywhere: stacked on a new axis 0 (nd_up = 1, equal
// shapes required) or concatenated along axis 0 (nd_up = 0, any lengths). One Array per variable.
std::vector<Array> gather(const Vars& vars, int nd_up = 1, const CollectiveOptions& options = {});
Array gather(const Var& var, int nd_up = 1, const CollectiveOptions& options = {});

// Every rank's variable becomes the concatenation along axis 0 of all ranks' values (any lengths).
void all_gather(const Vars& vars, const CollectiveOptions& options = {});

// The reduction over ranks of each variable (equal shapes required), on the master: written into
// the master's variables when in_place (and returned), else only returned. Workers are unchanged.
std::vector<Array> reduce(const Vars& vars, ReduceOp op = Op::Avg, bool in_place = true,
                          const CollectiveOptions& options = {});
Array reduce(const Var& var, ReduceOp op = Op::Avg, bool in_place = true,
             const CollectiveOptions& options = {});

// Every rank's variable becomes the reduction over ranks (equal shapes required).
void all_reduce(const Vars& vars, ReduceOp op = Op::Avg, const CollectiveOptions& options = {});

// Every rank's variable becomes the weighted mean sum_r(weights[r] * x_r) / sum_r(weights[r])
// (floating-point variables, equal shapes): one weight per rank, finite and >= 0, not all 0. A rank
// of weight 0 contributes nothing, not even a NaN it holds. Each rank scales its own values before
// the sum, so the result may differ from all_reduce(avg) in the last bit even for equal weights.
// A training step reduces its gradient this way when its ranks held different numbers of rows.
void all_reduce_weighted(const Vars& vars, const std::vector<double>& weights,
                         const CollectiveOptions& options = {});

// Writes / reads one rank's values (rank 0 is the master's own).
void set_value(int rank, const Vars& vars, const Values& values, const CollectiveOptions& options = {});
std::vector<Array> get_value(int rank, const Vars& vars, const CollectiveOptions& options = {});
Array get_value(int rank, const Var& var, const CollectiveOptions& options = {});

// Per variable, per rank in rank order: the length (axis 0) / the shape. No communication: the
// master records every rank's shapes.
std::vector<std::vector<int64_t>> get_lengths(const Vars& vars);
std::vector<int64_t> get_lengths(const Var& var);
std::vector<std::vector<std::vector<int64_t>>> get_shapes(const Vars& vars);
std::vector<std::vector<int64_t>> get_shapes(const Var& var);

namespace detail {
// set_value / get_value of one rank with values already conformed to the variables' dtypes and
// declared shapes (Module::set_value(rank, ...) conforms with its own force_cast rule first).
void set_conformed(int rank, const std::vector<Var>& vars, std::vector<Array> values, const char* what);
std::vector<Array> get_values(int rank, const std::vector<Var>& vars, const char* what);
// A deterministic training step's reduction (TrainStep::set_deterministic): every float `avg`
// update of `fn`, kept per micro-shard by its last call on each rank, becomes on every rank the
// exact weighted average over the `total_rows` rows of all ranks (runtime/coll/exact_sum.h), the
// same bits whatever the rank count. False when `fn` has no such update.
bool all_reduce_exact(const Function& fn, int64_t total_rows, const CollectiveOptions& options = {});
// Across nodes, node 0 could not even read the values of its broadcast or scatter (the Python
// binding's conversion failed): the other leaders, waiting for those values, raise `error` as a
// UsageError too, so that the leaders stay in step. The caller then throws its own error.
enum class ValuesFor : uint8_t { Broadcast, Scatter };
void refuse_values_on_node_zero(ValuesFor collective, const std::string& error);
}  // namespace detail

}  // namespace synk
