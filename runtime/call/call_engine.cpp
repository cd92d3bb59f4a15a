// The call engine (call_engine.h): descriptors, the per-rank execution of master and workers, results, reduction.
#include "runtime/call/call_engine.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "runtime/data/dtype.h"
#include "base/cancel.h"
#include "base/errors.h"
#include "runtime/group/process_group.h"
#include "runtime/call/call_message.h"
#include "runtime/call/call_nodes.h"
#include "runtime/node/cluster.h"
#include "runtime/call/reduce.h"
#include "runtime/call/registry.h"
#include "runtime/call/step_profile.h"
#include "runtime/trace/trace.h"
#include "base/wire.h"

namespace synk::rt {

// Registered when the program starts, so every worker forked later runs the same code for these.
const CommandKind kCallCommand = register_command("call", worker_execute_call);
[[maybe_unused]] const bool kSettleRegistered = (register_command_prologue(settle_pending_updates), true);

namespace {

struct ResolvedInput {
  const std::byte* base = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

// Everything one rank needs to run its share, with pointers valid in this process.
struct ResolvedCall {
  FunctionEntry* entry = nullptr;
  ModuleEntry* module = nullptr;
  int32_t module_id = -1;
  CallPlan plan;
  std::vector<ResolvedInput> inputs;
  uint64_t seed = 0, step = 0;   // the call's random state (the master's FunctionEntry)
  StreamPlan stream;              // the gradient all-reduce overlapped with the run, if any
  RankContext* ctx = nullptr;     // this rank's, when the call streams
};

struct PendingUpdate { ModuleEntry* module; int32_t var; Array value; };

struct RankOutcome {
  std::vector<Accumulator> outputs;      // per plan.outputs
  std::vector<PendingUpdate> updates;
};

// Per-process buffers reused across calls (gathered rows), and the updates a worker holds until
// the master says whether the call succeeded everywhere.
std::vector<Array> g_input_buffers, g_shared_buffers;
std::vector<Array> g_outputs, g_updates;
std::vector<PendingUpdate> g_pending;

// Makes `value` the variable's value and keeps the old storage as its spare (ModuleEntry::
// spares): the next call that updates the variable writes into memory that is already allocated
// and mapped, instead of allocating, zeroing and page-faulting a fresh buffer per update and call
// (~1 MB per step of the Fashion-MNIST gradient, 2 MB of its update). At most one spare per
// variable: memory stays within one extra copy of what is updated.
void commit_update(PendingUpdate& p) {
  std::swap(p.module->values[size_t(p.var)], p.value);
  if (p.value.bytes.capacity() == 0) return;
  std::vector<Array>& spares = p.module->spares;
  if (spares.size() <= size_t(p.var)) spares.resize(p.module->values.size());
  spares[size_t(p.var)] = std::move(p.value);
}

// Gives `slot` (an update buffer of the compiled function) the variable's spare when it cannot
// hold the variable's value without reallocating.
void reuse_spare(Array& slot, ModuleEntry* module, int32_t var, size_t bytes) {
  if (slot.bytes.capacity() >= bytes || size_t(var) >= module->spares.size()) return;
  Array& spare = module->spares[size_t(var)];
  if (spare.bytes.capacity() >= bytes) slot = std::move(spare);
}

// The updates a micro-sharded call keeps per shard instead of folding (CallRequest::
// micro_shard_rows; kept_per_shard in registry.h), each with its variable's MicroShardParts
// emptied for this call (a rank that runs no shard then offers none); null where the update folds
// as usual. Empty (no allocation) for an ordinary call.
std::vector<MicroShardParts*> kept_apart_updates(const CallPlan& plan, const FunctionSignature& sig,
                                                 ModuleEntry& module) {
  std::vector<MicroShardParts*> kept;
  if (plan.micro_shard_rows <= 0) return kept;
  kept.resize(sig.updates.size(), nullptr);
  for (size_t u = 0; u < sig.updates.size(); ++u) {
    const int32_t var = sig.updates[u].shared;
    if (!kept_per_shard(sig.updates[u].mode, module.spec.shareds[size_t(var)].dtype)) continue;
    kept[u] = &module.micro_parts[var];
    kept[u]->used = 0;
  }
  return kept;
}

// Keeps a shard's value (swapping buffers: `slot` gets back storage of an earlier call).
void keep_shard_value(MicroShardParts& parts, Array& slot, int64_t weight) {
  if (parts.values.size() <= parts.used) {
    parts.values.resize(parts.used + 1);
    parts.weights.resize(parts.used + 1);
  }
  std::swap(parts.values[parts.used], slot);
  parts.weights[parts.used] = weight;
  ++parts.used;
}

// SYNK_PROFILE tables of the engine's own work, per function and per kind ("rank", "master",
// "worker"); rows are the phases below.
// By function id: an entry's address is reused once its function is released.
profile::Table& profile_table(const FunctionEntry* fn, const char* kind) {
  static std::map<std::pair<int32_t, std::string>, profile::Table> tables;
  auto key = std::make_pair(fn->id, std::string(kind));
  auto it = tables.find(key);
  if (it == tables.end())
    it = tables.emplace(key, profile::Table(fmt::format("call engine, {} '{}'", kind, fn->fn->signature().name))).first;
  return it->second;
}

// The timing sites of the engine's phases, shared by the two opt-in views: each mark adds the
// time since the previous mark to a row of a SYNK_PROFILE table, and records it as a span of the
// timeline (runtime/trace). With `call_span`, end_call() also records a span of the whole call
// (the master's and each worker's; not the per-rank share, which those hold). Both off: one
// branch per mark, no clock read.
class PhaseClock {
 public:
  PhaseClock(const FunctionEntry* fn, const char* kind, bool call_span = false, int64_t start_ns = 0)
      : fn_(fn),
        table_(profile::enabled() ? &profile_table(fn, kind) : nullptr),
        tracing_(trace::on()),
        call_span_(call_span),
        first_(table_ || tracing_ ? (start_ns ? start_ns : trace::now_ns()) : 0),
        last_(first_) {}
  void mark(size_t row, const char* label, trace::Category category) {
    if (!table_ && !tracing_) return;
    int64_t t = trace::now_ns();
    if (table_) table_->add(row, t - last_, table_->has_label(row) ? std::string() : std::string(label));
    if (tracing_) trace::record(category, label, last_, t);
    last_ = t;
  }
  bool tracing() const { return tracing_; }
  int64_t last() const { return last_; }
  void end_call(std::string_view detail = {}) {
    if (table_) table_->end_call();
    if (tracing_ && call_span_) trace::record(trace::Category::Call, fn_->fn->signature().name, first_, last_, detail);
  }

 private:
  const FunctionEntry* fn_;
  profile::Table* table_;
  bool tracing_, call_span_;
  int64_t first_, last_;
};

using trace::Category;

int64_t row_bytes(const std::vector<int64_t>& shape, DType dtype) {
  int64_t n = int64_t(dtype_size(dtype));
  for (size_t k = 1; k < shape.size(); ++k) n *= shape[k];
  return n;
}

std::vector<int64_t> with_rows(std::vector<int64_t> shape, int64_t rows) {
  shape[0] = rows;
  return shape;
}

// Copies rows list[lo..hi) of `base` into `buffer`, in order.
ArrayRef gather_rows(Array& buffer, const std::byte* base, DType dtype, const std::vector<int64_t>& shape,
                     const IndexSource& list, int64_t lo, int64_t hi) {
  int64_t rb = row_bytes(shape, dtype);
  buffer.resize(dtype, with_rows(shape, hi - lo));
  std::byte* out = buffer.bytes.data();
  // Rows picked at random from a data set larger than the caches each start with a miss: asking
  // for the rows kPrefetchRows ahead overlaps those misses (a 784-byte image row: 13 lines).
  // Longer rows are left to the hardware prefetcher, which follows a row once it has started.
  constexpr int64_t kPrefetchRows = 8, kPrefetchRowBytes = 4096;
  auto prefetch = [&](int64_t p) {
    const std::byte* row = base + list.at(p) * rb;
    for (int64_t o = 0; o < rb; o += 64) __builtin_prefetch(row + o);
  };
  const bool prefetching = rb <= kPrefetchRowBytes;
  if (prefetching)
    for (int64_t p = lo; p < std::min(hi, lo + kPrefetchRows); ++p) prefetch(p);
  for (int64_t p = lo; p < hi; ++p, out += rb) {
    if (prefetching && p + kPrefetchRows < hi) prefetch(p + kPrefetchRows);
    std::memcpy(out, base + list.at(p) * rb, size_t(rb));
  }
  return buffer.ref();
}

ArrayRef row_view(const std::byte* base, DType dtype, const std::vector<int64_t>& shape, int64_t lo, int64_t hi) {
  return ArrayRef{base + lo * row_bytes(shape, dtype), dtype, with_rows(shape, hi - lo)};
}

std::string output_label(const FunctionSignature& sig, int32_t o) {
  return fmt::format("output '{}' of {}", sig.outputs[size_t(o)].name, sig.name);
}

// Position `p` of the call's scattered rows in the caller's terms, for error messages.
std::string call_row_description(const CallPlan& plan, int64_t p) {
  std::string row = fmt::format("row {} of the call's {} scattered rows", p, plan.positions);
  if (plan.select == RowSelection::Kind::List) return fmt::format("{} (batch[{}] = {})", row, p, plan.select_list.at(p));
  if (plan.select_start != 0) return fmt::format("{} (input row {} of the batch range)", row, plan.select_start + p);
  return row;
}

// Accumulators of the updates that fold several parts (none for one part or a kept-apart update).
std::vector<Accumulator> update_accumulators(const FunctionSignature& sig, const ModuleSpec& mspec,
                                             const std::vector<MicroShardParts*>& kept, bool single_part) {
  std::vector<Accumulator> update_acc(sig.updates.size());
  if (single_part) return update_acc;
  for (size_t u = 0; u < sig.updates.size(); ++u) {
    if (!kept.empty() && kept[u]) continue;
    const SharedSpec& var = mspec.shareds[size_t(sig.updates[u].shared)];
    update_acc[u] = Accumulator(sig.updates[u].mode, var.dtype, fmt::format("update of '{}' in {}", var.name, sig.name));
  }
  return update_acc;
}

// After the rank's parts: the folded updates; on a rank without rows (`no_rows`), the streamed
// update becomes the ranks' average, committed like any update.
void finish_updates(const ResolvedCall& call, const FunctionSignature& sig, std::vector<Accumulator>& update_acc,
                    bool no_rows, StreamScope& stream, RankOutcome& outcome) {
  for (size_t u = 0; u < sig.updates.size(); ++u)
    if (!update_acc[u].empty())
      outcome.updates.push_back(PendingUpdate{call.module, sig.updates[u].shared, update_acc[u].finish()});
  if (!no_rows || !stream.active()) return;
  const int32_t var = sig.updates[size_t(call.stream.update)].shared;
  Array average = call.module->values[size_t(var)];
  stream.finish_without_rows(average);
  outcome.updates.push_back(PendingUpdate{call.module, var, std::move(average)});
}

RankOutcome execute_rank(const ResolvedCall& call, int rank) {
  StreamScope stream(call.ctx, call.stream);   // first: every way out must end it on this rank
  PhaseClock clock(call.entry, "rank");
  profile::set_rank(rank);
  const CallPlan& plan = call.plan;
  CompiledFunction& fn = *call.entry->fn;
  const FunctionSignature& sig = fn.signature();
  const ModuleSpec& mspec = call.module->spec;
  RankOutcome outcome;
  for (int32_t o : plan.outputs)
    outcome.outputs.emplace_back(sig.outputs[size_t(o)].mode, sig.outputs[size_t(o)].dtype, output_label(sig, o));
  std::vector<Part> parts = rank_parts(plan, rank);
  const std::vector<MicroShardParts*> kept = kept_apart_updates(plan, sig, *call.module);
  const bool single_part = parts.size() == 1 && parts[0].weight > 0;
  std::vector<Accumulator> update_acc = update_accumulators(sig, mspec, kept, single_part);
  if (g_input_buffers.size() < sig.inputs.size()) g_input_buffers.resize(sig.inputs.size());
  if (g_shared_buffers.size() < sig.shareds_read.size()) g_shared_buffers.resize(sig.shareds_read.size());
  g_outputs.resize(sig.outputs.size());
  g_updates.resize(sig.updates.size());
  for (size_t u = 0; u < sig.updates.size(); ++u) {
    int32_t var = sig.updates[u].shared;
    reuse_spare(g_updates[u], call.module, var, call.module->values[size_t(var)].bytes.size());
  }
  std::vector<ArrayRef> inputs(sig.inputs.size()), shareds(sig.shareds_read.size());
  std::vector<bool> sliced(sig.shareds_read.size(), false);
  if (plan.has_sliceable)
    for (int32_t slot : plan.sliceable_slots) sliced[size_t(slot)] = true;

  clock.mark(0, "set-up: accumulators, parts, argument lists", Category::Plan);
  for (size_t part_index = 0; part_index < parts.size(); ++part_index) {
    const Part& part = parts[part_index];
    const int64_t part_start = clock.last();
    cancellation_point();   // a lost group stops the master's share between parts (base/cancel.h)
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      const ResolvedInput& in = call.inputs[i];
      switch (plan.inputs[i]) {
        case InputUse::Broadcast: inputs[i] = ArrayRef{in.base, in.dtype, in.shape}; break;
        case InputUse::Positional: inputs[i] = row_view(in.base, in.dtype, in.shape, part.pos_lo, part.pos_hi); break;
        case InputUse::Full:
          if (plan.select == RowSelection::Kind::List)
            inputs[i] = gather_rows(g_input_buffers[i], in.base, in.dtype, in.shape, plan.select_list,
                                    part.pos_lo, part.pos_hi);
          else
            inputs[i] = row_view(in.base, in.dtype, in.shape, plan.select_start + part.pos_lo,
                                 plan.select_start + part.pos_hi);
          break;
      }
    }
    clock.mark(1, "inputs: row views and gathers", Category::Gather);
    for (size_t k = 0; k < sig.shareds_read.size(); ++k) {
      const Array& value = call.module->values[size_t(sig.shareds_read[k])];
      if (!sliced[k]) {
        shareds[k] = value.ref();
        continue;
      }
      const SharedRows& rows = plan.shared_rows[size_t(rank)];
      if (rows.kind == RowSelection::Kind::List)
        shareds[k] = gather_rows(g_shared_buffers[k], value.bytes.data(), value.dtype, value.shape,
                                 rows.list, part.sh_lo, part.sh_hi);
      else
        shareds[k] = row_view(value.bytes.data(), value.dtype, value.shape, rows.start + part.sh_lo,
                              rows.start + part.sh_hi);
    }
    clock.mark(2, "shared variables: values and row gathers", Category::Gather);
    // Random ops draw at the call's rows: a part's first position (or, with no scattered input,
    // its first row of this rank's sliceable selection).
    fn.set_random_state(RngState{call.seed, call.step, plan.has_scattered ? part.pos_lo : part.sh_lo});
    try {
      stream.attach(fn);
      fn.run(inputs, shareds, g_outputs, g_updates);
      stream.finish(fn, g_updates);
    } catch (const ScatteredRowError& e) {
      throw UsageError(e.before() + call_row_description(plan, part.pos_lo + e.row()) + e.after());
    }
    clock.mark(3, "compiled function run()", Category::Run);
    for (size_t k = 0; k < plan.outputs.size(); ++k) {
      const OutputSpec& spec = sig.outputs[size_t(plan.outputs[k])];
      const Array& out = g_outputs[size_t(plan.outputs[k])];
      if (out.dtype != spec.dtype)
        throw Error(fmt::format("{} produced dtype {} but declares {}", output_label(sig, plan.outputs[k]),
                                dtype_name(out.dtype), dtype_name(spec.dtype)));
      outcome.outputs[k].add(out.ref(), part.weight);
    }
    clock.mark(4, "outputs into accumulators", Category::Reduce);
    for (size_t u = 0; u < sig.updates.size(); ++u) {
      int32_t var = sig.updates[u].shared;
      const Array& current = call.module->values[size_t(var)];
      const Array& next = g_updates[u];
      if (next.dtype != current.dtype || next.shape != current.shape)
        throw Error(fmt::format("{} produced {}{} but '{}' is {}{} on rank {}", fmt::format("the update of '{}' in {}", mspec.shareds[size_t(var)].name, sig.name),
                                dtype_name(next.dtype), shape_string(next.shape), mspec.shareds[size_t(var)].name,
                                dtype_name(current.dtype), shape_string(current.shape), rank));
      if (!kept.empty() && kept[u]) {
        keep_shard_value(*kept[u], g_updates[u], part.weight);
        continue;
      }
      if (single_part) {
        // One part folds to itself in every mode: skip the float64 accumulator, whose
        // element-wise conversions dominated small training steps (measured: ~6 ms of a 6.1 ms
        // update call on the Fashion-MNIST MLP).
        outcome.updates.push_back(PendingUpdate{call.module, var, std::move(g_updates[u])});
        continue;
      }
      update_acc[u].add(next.ref(), part.weight);
    }
    clock.mark(5, "updates: checks, fold or hand over", Category::Update);
    if (clock.tracing() && parts.size() > 1)   // slices (num_slices) or micro-shards of this rank
      trace::record(Category::Slice, fmt::format("part {} of {}", part_index + 1, parts.size()), part_start,
                    clock.last(), fmt::format("positions [{}, {}), weight {}", part.pos_lo, part.pos_hi, part.weight));
  }
  finish_updates(call, sig, update_acc, parts.empty(), stream, outcome);
  clock.mark(6, "updates: finish folded parts", Category::Update);
  clock.end_call();
  return outcome;
}

// --- Results area: per output {present u8, dtype u8, ndim u8, pad, weight i64, shape i64[ndim],
// nbytes u64} headers, then the partials, each 8-byte aligned.
// Whether an output's partial travels: a `none` output only from the rank whose value is the
// result (global rank 0, `keep_none`).
bool travels(const Accumulator& acc, bool keep_none) {
  return !acc.empty() && (acc.mode() != ReduceMode::None || keep_none);
}

// The results area's header (returned) and the bytes of the partials that follow it.
wire::Writer results_header(const RankOutcome& outcome, bool keep_none, size_t* data_bytes) {
  wire::Writer head;
  head.pod<uint32_t>(uint32_t(outcome.outputs.size()));
  *data_bytes = 0;
  for (const Accumulator& acc : outcome.outputs) {
    bool present = travels(acc, keep_none);
    head.pod<uint8_t>(present);
    head.pod<uint8_t>(uint8_t(acc.partial_dtype()));
    head.pod<int64_t>(acc.weight());
    head.vec(present ? acc.shape() : std::vector<int64_t>{});
    uint64_t nbytes = present ? acc.partial_bytes() : 0;
    head.pod<uint64_t>(nbytes);
    *data_bytes += (nbytes + 7) & ~uint64_t(7);
  }
  return head;
}

// Writes the results area (header, then the partials, each 8-byte aligned) into `out`.
void fill_results(const RankOutcome& outcome, bool keep_none, const wire::Writer& head, std::byte* out) {
  size_t head_bytes = (head.bytes().size() + 7) & ~size_t(7);
  std::memcpy(out, head.bytes().data(), head.bytes().size());
  std::byte* at = out + head_bytes;
  for (const Accumulator& acc : outcome.outputs) {
    if (!travels(acc, keep_none)) continue;
    acc.write_partial(at);
    at += (acc.partial_bytes() + 7) & ~size_t(7);
  }
}

void write_results(RankContext& ctx, const RankOutcome& outcome) {
  size_t data_bytes = 0;
  wire::Writer head = results_header(outcome, false, &data_bytes);
  fill_results(outcome, false, head, ctx.results(((head.bytes().size() + 7) & ~size_t(7)) + data_bytes));
}

// The master's own results as a results area (for the other nodes' leaders).
std::string encode_results(const RankOutcome& outcome, bool keep_none) {
  size_t data_bytes = 0;
  wire::Writer head = results_header(outcome, keep_none, &data_bytes);
  std::string bytes(((head.bytes().size() + 7) & ~size_t(7)) + data_bytes, '\0');
  fill_results(outcome, keep_none, head, reinterpret_cast<std::byte*>(bytes.data()));
  return bytes;
}

// Adds the partials in a worker's results area to the master's accumulators.
void add_results(std::span<const std::byte> bytes, std::vector<Accumulator>& acc) {
  if (bytes.empty()) throw InternalError("a worker left no results");
  std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  wire::Reader r(view);
  uint32_t n = r.pod<uint32_t>();
  if (n != acc.size()) throw InternalError("results area: output count mismatch");
  struct Entry { bool present; DType dtype; int64_t weight; std::vector<int64_t> shape; uint64_t nbytes; };
  std::vector<Entry> entries;
  size_t head_bytes = 4;
  for (uint32_t k = 0; k < n; ++k) {
    Entry e;
    e.present = r.pod<uint8_t>() != 0;
    e.dtype = DType(r.pod<uint8_t>());
    e.weight = r.pod<int64_t>();
    e.shape = r.vec<int64_t>();
    e.nbytes = r.pod<uint64_t>();
    head_bytes += 1 + 1 + 8 + 8 + 8 * e.shape.size() + 8;
    entries.push_back(std::move(e));
  }
  size_t at = (head_bytes + 7) & ~size_t(7);
  for (uint32_t k = 0; k < n; ++k) {
    const Entry& e = entries[k];
    if (!e.present) continue;
    if (at + e.nbytes > bytes.size()) throw InternalError("results area: truncated");
    acc[k].add(ArrayRef{bytes.data() + at, e.dtype, e.shape}, e.weight);
    at += (e.nbytes + 7) & ~uint64_t(7);
  }
}

std::string format_rank_errors(const std::string& fn, const std::vector<std::string>& errors,
                               std::vector<int>* ranks) {
  std::vector<std::string> parts;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) {
      ranks->push_back(int(r));
      parts.push_back(fmt::format("rank {}: {}", r, errors[r]));
    }
  if (parts.size() == 1) return fmt::format("{} failed on {}", fn, parts[0]);
  return fmt::format("{} failed on {} ranks: {}", fn, parts.size(), fmt::join(parts, "; "));
}

// What plan_call needs to know of the request: the inputs as they are, the batch (an index
// Data is read in place), batch_s, and the shared variables' shapes as every rank holds them.
PlanRequest plan_request(ProcessGroup* group, const CallRequest& req, const ResolvedCall& call,
                         const FunctionSignature& sig, int N) {
  PlanRequest pr;
  pr.signature = &sig;
  pr.module = &call.module->spec;
  pr.nranks = N;
  for (const Data& d : req.inputs) {
    InputInfo info;
    if (!d.valid()) {
      info.missing = true;
    } else {
      info.dtype = d.dtype();
      info.shape = d.shape();
      info.minibatch = d.minibatch();
      info.data_name = d.name();
    }
    pr.inputs.push_back(std::move(info));
  }
  pr.batch = req.batch;
  if (req.batch.kind == RowSelection::Kind::List) {
    if (req.batch_data.valid()) {
      const Data& b = req.batch_data;
      if (b.ndim() != 1 || !(b.dtype() == DType::I64 || b.dtype() == DType::I32 || b.dtype() == DType::U8))
        throw UsageError(fmt::format("batch: an index array must be a 1-D integer Data (i64, i32 or u8), "
                                     "received {} of dtype {} and shape {}",
                                     b.name().empty() ? "a Data" : "Data '" + b.name() + "'",
                                     dtype_name(b.dtype()), shape_string(b.shape())));
      pr.batch.list = IndexSource{b.raw(), b.dtype(), b.length()};
    } else {
      pr.batch.list = IndexSource{req.batch_list.data(), DType::I64, int64_t(req.batch_list.size())};
    }
  }
  pr.batch_s = req.batch_s;
  for (size_t k = 0, list = 0; k < pr.batch_s.size(); ++k)
    if (pr.batch_s[k].kind == RowSelection::Kind::List) {
      const std::vector<int64_t>& l = req.batch_s_lists.at(list++);
      pr.batch_s[k].list = IndexSource{l.data(), DType::I64, int64_t(l.size())};
    }
  pr.num_slices = req.num_slices;
  pr.micro_shard_rows = req.micro_shard_rows;
  pr.output_subset = req.output_subset;
  pr.shared_shape = [group, &call](int rank, int var) -> const std::vector<int64_t>& {
    if (group) return ShapeBook::instance().shape(rank, call.module_id, var);
    return call.module->values.at(size_t(var)).shape;
  };
  return pr;
}

// The Call command's message for the workers (call_message.h): the plan, the inputs' segments and
// every rank's shared-row selection.
CallMessage call_message(ProcessGroup* group, const CallRequest& req, const FunctionSignature& sig,
                         const CallPlan& plan, int N) {
  // Index lists the workers read go to the scratch segment (a Data's list is read in place).
  size_t scratch_bytes = 0;
  bool batch_in_scratch = plan.select == RowSelection::Kind::List && !req.batch_data.valid();
  if (batch_in_scratch) scratch_bytes += req.batch_list.size() * 8;
  for (const auto& l : req.batch_s_lists) scratch_bytes += l.size() * 8;
  std::byte* scratch = scratch_bytes ? group->scratch(scratch_bytes) : nullptr;
  size_t used = 0;
  auto to_scratch = [&](const std::vector<int64_t>& list) {
    IndexListRef ref{group->scratch_name(), used, DType::I64, int64_t(list.size())};
    if (!list.empty()) std::memcpy(scratch + used, list.data(), list.size() * 8);
    used += list.size() * 8;
    return ref;
  };
  auto with_source = [](IndexListRef ref, const IndexSource& src) {
    ref.dtype = src.dtype;
    ref.count = src.count;
    return ref;
  };
  CallMessage m;
  m.function = req.function;
  m.num_slices = plan.num_slices;
  m.micro_shard_rows = plan.micro_shard_rows;
  m.has_scattered = plan.has_scattered;
  m.has_sliceable = plan.has_sliceable;
  m.empty_call = plan.empty_call;
  m.positions = plan.positions;
  m.select = plan.select;
  m.select_start = plan.select_start;
  if (plan.select == RowSelection::Kind::List)
    m.select_list = with_source(batch_in_scratch ? to_scratch(req.batch_list)
                                                 : IndexListRef{req.batch_data.segment_name(), 0},
                                plan.select_list);
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    m.inputs.push_back(InputRef{plan.inputs[i], req.inputs[i].dtype(), req.inputs[i].shape(),
                                req.inputs[i].size() > 0 ? req.inputs[i].segment_name() : std::string()});
  m.sliceable_slots = plan.sliceable_slots;
  if (plan.has_sliceable) {
    std::vector<IndexListRef> list_refs;
    for (const auto& l : req.batch_s_lists) list_refs.push_back(to_scratch(l));
    for (int rk = 0; rk < N; ++rk) {
      const SharedRows& rows = plan.shared_rows[size_t(rk)];
      SharedRowsRef ref{rows.kind, rows.start, rows.count, {}};
      if (rows.kind == RowSelection::Kind::List) {
        // batch_s lists were stored in order; find the one this rank uses.
        size_t which = req.batch_s.size() == 1 ? 0 : size_t(rk), list_index = 0;
        for (size_t k = 0; k < which; ++k) list_index += req.batch_s[k].kind == RowSelection::Kind::List;
        ref.list = list_refs.at(list_index);
      }
      ref.list = with_source(ref.list, rows.list);
      m.shared_rows.push_back(std::move(ref));
    }
  }
  m.outputs = plan.outputs;
  return m;
}

// The outputs over all ranks, rank 0 (`mine`) first, then every worker in rank order. On a
// failure the workers are told not to commit their updates.
std::vector<Array> reduce_outputs(ProcessGroup* group, const FunctionSignature& sig, const CallPlan& plan,
                                  const RankOutcome& mine, int N) {
  std::vector<Array> results;
  try {
    std::vector<Accumulator> total;
    for (int32_t o : plan.outputs)
      total.emplace_back(sig.outputs[size_t(o)].mode, sig.outputs[size_t(o)].dtype, output_label(sig, o));
    for (size_t k = 0; k < total.size(); ++k)
      if (!mine.outputs[k].empty()) total[k].add(mine.outputs[k].partial().ref(), mine.outputs[k].weight());
    for (int r = 1; r < N; ++r) {
      try {
        add_results(group->worker_results(r), total);
      } catch (const RankError&) {
        throw;   // the group was lost meanwhile: reported as it is
      } catch (const Error& e) {
        throw RankError(fmt::format("{} failed on rank {}: {}", sig.name, r, e.what()), {r});
      }
    }
    for (const Accumulator& acc : total) results.push_back(acc.finish());
  } catch (...) {
    if (group) group->set_commit_pending(false);
    throw;
  }
  return results;
}

}  // namespace

void settle_pending_updates(bool commit) {
  if (g_pending.empty()) return;
  trace::Span span(Category::Update, "commit the last call's updates");
  if (commit)
    for (PendingUpdate& p : g_pending) commit_update(p);
  g_pending.clear();
}

void worker_execute_call(RankContext& ctx, std::string_view payload) {
  const int64_t start_ns = trace::on() || profile::enabled() ? trace::now_ns() : 0;
  CallMessage m = decode_call_message(payload);   // its vectors move into the plan below
  auto resolve = [&ctx](const IndexListRef& ref) {
    return IndexSource{ref.segment.empty() ? nullptr : ctx.map(ref.segment) + ref.offset, ref.dtype, ref.count};
  };
  ResolvedCall call;
  call.entry = &function_on_rank(ctx, m.function);
  call.module_id = call.entry->module;
  call.module = &module_on_rank(ctx, call.module_id);
  CallPlan& plan = call.plan;
  plan.nranks = m.world_ranks > 0 ? m.world_ranks : ctx.size();
  const int my_rank = m.rank_offset + ctx.rank();   // global (call_nodes.h)
  plan.num_slices = m.num_slices;
  plan.micro_shard_rows = m.micro_shard_rows;
  plan.has_scattered = m.has_scattered;
  plan.has_sliceable = m.has_sliceable;
  plan.empty_call = m.empty_call;
  plan.positions = m.positions;
  plan.select = m.select;
  plan.select_start = m.select_start;
  plan.select_list = resolve(m.select_list);
  for (InputRef& in : m.inputs) {
    plan.inputs.push_back(in.use);
    call.inputs.push_back(
        ResolvedInput{in.segment.empty() ? nullptr : ctx.map(in.segment), in.dtype, std::move(in.shape)});
  }
  plan.sliceable_slots = std::move(m.sliceable_slots);
  if (plan.has_sliceable) {
    if (m.shared_rows.size() != size_t(plan.nranks))
      throw InternalError(fmt::format("call message: {} shared-row selections for {} ranks",
                                      m.shared_rows.size(), plan.nranks));
    for (int rk = 0; rk < plan.nranks; ++rk) {
      const SharedRowsRef& ref = m.shared_rows[size_t(rk)];
      SharedRows rows{ref.kind, ref.start, ref.count, {}};
      rows.list = rk == my_rank ? resolve(ref.list) : IndexSource{nullptr, ref.list.dtype, ref.list.count};
      plan.shared_rows.push_back(rows);
    }
  }
  plan.outputs = std::move(m.outputs);
  call.seed = m.seed;
  call.step = m.step;
  call.stream = std::move(m.stream);
  call.ctx = &ctx;
  PhaseClock clock(call.entry, "worker", true, start_ns);
  clock.mark(0, "decode the call", Category::Plan);
  RankOutcome outcome = execute_rank(call, my_rank);
  clock.mark(1, "run this rank's share", Category::Run);
  write_results(ctx, outcome);
  g_pending = std::move(outcome.updates);
  clock.mark(2, "write results, hold updates", Category::Reduce);
  clock.end_call(clock.tracing() ? fmt::format("rank {} of {}", my_rank, plan.nranks) : std::string());
}

namespace {

// The partials of every rank, in global rank order, from the exchange between nodes; the
// errors of every rank come back in `errors`.
std::vector<Array> reduce_global_outputs(const FunctionSignature& sig, const CallPlan& plan,
                                         const GlobalOutcome& all) {
  std::vector<Accumulator> total;
  for (int32_t o : plan.outputs)
    total.emplace_back(sig.outputs[size_t(o)].mode, sig.outputs[size_t(o)].dtype, output_label(sig, o));
  for (size_t g = 0; g < all.results.size(); ++g) {
    std::string_view bytes = all.results[g];
    add_results({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, total);
  }
  std::vector<Array> results;
  for (const Accumulator& acc : total) results.push_back(acc.finish());
  return results;
}

// This node's share of the call's outcome for the other leaders: each local rank's error or
// results area (the master's own encoded).
GlobalOutcome share_outcome(ProcessGroup* group, const FunctionSignature& sig, const std::string& described,
                            const RankOutcome& mine, const std::vector<std::string>& errors) {
  const int n_local = group ? group->size() : 1;
  std::vector<std::string> results(static_cast<size_t>(n_local));
  if (errors[0].empty()) results[0] = encode_results(mine, cluster_node() == 0);
  for (int r = 1; r < n_local; ++r)
    if (errors[size_t(r)].empty()) {
      std::span<const std::byte> b = group->worker_results(r);
      results[size_t(r)].assign(reinterpret_cast<const char*>(b.data()), b.size());
    }
  try {
    return exchange_outcomes(sig.name, described, errors, std::move(results));
  } catch (...) {
    if (group) group->set_commit_pending(false);   // the calls differed: nothing of it is kept
    throw;
  }
}

}  // namespace

CallResult run_call(ProcessGroup* group, const CallRequest& request) {
  Registry& reg = Registry::instance();
  if (request.function < 0 || size_t(request.function) >= reg.functions.size() || !reg.functions[size_t(request.function)])
    throw UsageError(fmt::format("call: no function #{} is registered", request.function));
  ResolvedCall call;
  call.entry = reg.functions[size_t(request.function)].get();
  call.module_id = call.entry->module;
  call.module = reg.modules.at(size_t(call.module_id)).get();
  const FunctionSignature& sig = call.entry->fn->signature();
  const int n_local = group ? group->size() : 1;
  // Without a group (run_local, Python's as_local) the call is this process's alone, under mpirun too.
  const bool nodes = group && cluster();
  const int N = n_local * (nodes ? cluster_nodes() : 1);   // global ranks
  const int offset = nodes ? cluster_node() * n_local : 0;  // this node's first global rank
  call.seed = call.entry->seed;
  call.step = call.entry->step;
  PhaseClock clock(call.entry, "master", true);

  // Across nodes every leader must be making this same call; the index lists are node 0's.
  CallRequest agreed;
  RemoteShapes remote;
  std::string described;   // compared with the results when not agreed on first
  if (nodes) {
    agreed = request;
    if (needs_agreement_first(agreed, sig, call.module->spec))
      agree_on_call(agreed, sig, call.module->spec, [&](int local, int32_t var) -> const std::vector<int64_t>& {
        return ShapeBook::instance().shape(local, call.module_id, var);   // `nodes`: there is a group
      }, &remote);
    else
      described = describe_call(agreed, sig);
  }
  const CallRequest& req = nodes ? agreed : request;

  // Plan and validate: nothing has moved yet (a failure across nodes: fail_call_on_every_node).
  try {
    PlanRequest pr = plan_request(group, req, call, sig, N);
    if (nodes)
      pr.shared_shape = [&](int rank, int var) -> const std::vector<int64_t>& {
        if (rank >= offset && rank < offset + n_local) return ShapeBook::instance().shape(rank - offset, call.module_id, var);
        return remote.at({rank, var});
      };
    call.plan = plan_call(pr);
    call.stream = plan_stream(group, req.stream, sig, *call.module, call.plan);
  } catch (const UsageError& e) {
    if (nodes) fail_call_on_every_node(sig.name, described, n_local, req.stream.update >= 0, e);
    throw;
  }
  if (nodes && req.stream.update >= 0) agree_call_is_ready(sig.name, described, "");
  const CallPlan& plan = call.plan;
  if (call.stream.update >= 0) call.ctx = &group->master_context();
  for (const Data& d : req.inputs) call.inputs.push_back(ResolvedInput{static_cast<const std::byte*>(d.raw()), d.dtype(), d.shape()});
  clock.mark(0, "plan and validate the call", Category::Plan);

  // Run: the master's share as this node's first rank, the workers' through a Call command.
  RankOutcome mine;
  std::vector<std::string> errors;
  auto master_part = [&] { mine = execute_rank(call, offset); };
  if (n_local == 1) {
    errors.resize(1);
    try {
      master_part();
    } catch (const std::exception& e) {
      errors[0] = e.what();
    }
  } else {
    CallMessage message = call_message(group, req, sig, plan, N);
    message.seed = call.seed;
    message.step = call.step;
    message.world_ranks = nodes ? N : 0;
    message.rank_offset = offset;
    message.stream = call.stream;
    std::string payload = encode_call_message(message);
    clock.mark(1, "encode the call for the workers", Category::Plan);
    errors = group->run(kCallCommand, payload, master_part);
  }
  clock.mark(2, "run every rank (master's share, then waiting)", Category::Run);

  GlobalOutcome all;
  if (nodes) {
    all = share_outcome(group, sig, described, mine, errors);
    errors = all.errors;
  }
  if (std::any_of(errors.begin(), errors.end(), [](const std::string& e) { return !e.empty(); })) {
    if (group) group->set_commit_pending(false);
    std::vector<int> ranks;
    std::string message = format_rank_errors(sig.name, errors, &ranks);
    throw RankError(message, ranks);
  }

  // Reduce: rank 0 first, then every other rank in rank order.
  CallResult result{nodes ? reduce_global_outputs(sig, plan, all) : reduce_outputs(group, sig, plan, mine, N),
                    rank_weights(plan), call.stream.update >= 0};
  clock.mark(3, "reduce outputs over ranks", Category::Reduce);
  // Nothing selected: rank 0 ran on zero rows for the outputs only; like any rank without rows it
  // keeps its variables (an avg over no rows would be NaN).
  if (!plan.empty_call) for (PendingUpdate& p : mine.updates) commit_update(p);
  if (!sig.updates.empty()) ++call.entry->step;   // a training step: its next call draws anew
  clock.mark(4, "commit this rank's updates", Category::Update);
  clock.end_call(clock.tracing() ? fmt::format("{} positions on {} ranks, {} slices", plan.positions, N, plan.num_slices)
                                 : std::string());
  return result;
}

CommandKind call_command() { return kCallCommand; }

}  // namespace synk::rt
