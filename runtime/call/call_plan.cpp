// Call planning and validation (see call_plan.h). Every message names the argument, what was
// expected and what was received.
#include "runtime/call/call_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "runtime/data/dtype.h"
#include "base/errors.h"

namespace synk::rt {

std::pair<int64_t, int64_t> split_range(int64_t length, int64_t parts, int64_t part) {
  auto at = [&](int64_t k) { return int64_t((__int128(k) * length) / parts); };
  return {at(part), at(part + 1)};
}

int64_t IndexSource::at(int64_t i) const {
  switch (dtype) {
    case DType::I64: return static_cast<const int64_t*>(data)[i];
    case DType::I32: return static_cast<const int32_t*>(data)[i];
    case DType::U8: return static_cast<const uint8_t*>(data)[i];
    default: throw InternalError("IndexSource: non-integer index dtype");
  }
}

namespace {

const char* role_description(Role r) {
  switch (r) {
    case Role::Scatter: return "scattered";
    case Role::Broadcast: return "broadcast";
    case Role::Minibatch: return "minibatch";
  }
  return "?";
}

std::string input_label(const FunctionSignature& sig, size_t i) {
  return fmt::format("input '{}' (argument {} of {})", sig.inputs[i].name, i + 1, sig.name);
}

std::string data_label(const InputInfo& info) {
  return info.data_name.empty() ? std::string("Data") : fmt::format("Data '{}'", info.data_name);
}

// Bounds-checks every index of a list against `rows` rows of `what`.
void check_list(const IndexSource& list, int64_t rows, const std::string& arg,
                const std::string& what) {
  for (int64_t p = 0; p < list.count; ++p) {
    int64_t idx = list.at(p);
    if (idx < 0)
      throw UsageError(fmt::format("{}: index {} at position {} is negative (indices must be in "
                                   "[0, {}) for {})", arg, idx, p, rows, what));
    if (idx >= rows)
      throw UsageError(fmt::format("{}: index {} at position {} is out of range for {} with {} "
                                   "rows (valid indices are 0..{})", arg, idx, p, what, rows,
                                   rows - 1));
  }
}

void check_list_nonnegative(const IndexSource& list, const std::string& arg) {
  for (int64_t p = 0; p < list.count; ++p)
    if (list.at(p) < 0)
      throw UsageError(fmt::format("{}: index {} at position {} is negative", arg, list.at(p), p));
}

// Count, range or list checked against `rows` rows of `what`; returns the number of rows chosen.
int64_t check_selection(const RowSelection& sel, int64_t rows, const std::string& arg,
                        const std::string& what) {
  switch (sel.kind) {
    case RowSelection::Kind::All: return rows;
    case RowSelection::Kind::Count:
      if (sel.stop < 0)
        throw UsageError(fmt::format("{}: a count must be >= 0, received {}", arg, sel.stop));
      if (sel.stop > rows)
        throw UsageError(fmt::format("{}: count {} is larger than the {} rows of {}", arg,
                                     sel.stop, rows, what));
      return sel.stop;
    case RowSelection::Kind::Range:
      if (sel.start < 0 || sel.stop < sel.start)
        throw UsageError(fmt::format("{}: a range needs 0 <= start <= stop, received [{}, {})",
                                     arg, sel.start, sel.stop));
      if (sel.stop > rows)
        throw UsageError(fmt::format("{}: range [{}, {}) ends past the {} rows of {}", arg,
                                     sel.start, sel.stop, rows, what));
      return sel.stop - sel.start;
    case RowSelection::Kind::List:
      check_list(sel.list, rows, arg, what);
      return sel.list.count;
  }
  return 0;
}

int64_t selection_count(const RowSelection& sel) {
  switch (sel.kind) {
    case RowSelection::Kind::Count: return sel.stop;
    case RowSelection::Kind::Range: return sel.stop - sel.start;
    case RowSelection::Kind::List: return sel.list.count;
    case RowSelection::Kind::All: break;
  }
  return 0;
}

}  // namespace

void validate_signature(const FunctionSignature& sig, const ModuleSpec& module) {
  std::string fn = sig.name.empty() ? std::string("function") : "function '" + sig.name + "'";
  auto check_dims = [&](const TensorSpec& t, const std::string& what) {
    if (t.dims.size() > 16)
      throw UsageError(fmt::format("{}: {} has {} dimensions (at most 16)", fn, what, t.dims.size()));
    for (const DimSpec& d : t.dims) {
      if (d.symbol >= 0 && size_t(d.symbol) >= sig.symbols.size())
        throw UsageError(fmt::format("{}: {} uses symbol #{} but the signature declares {} symbols",
                                     fn, what, d.symbol, sig.symbols.size()));
      if (d.symbol < 0 && d.size < 0)
        throw UsageError(fmt::format("{}: {} has a negative dimension {}", fn, what, d.size));
    }
  };
  std::set<std::string> names;
  std::set<int32_t> row_symbols;
  for (const InputSpec& in : sig.inputs) {
    std::string what = fmt::format("input '{}'", in.name);
    if (!names.insert(in.name).second)
      throw UsageError(fmt::format("{}: two inputs are named '{}'", fn, in.name));
    check_dims(in, what);
    if (in.role != Role::Broadcast) {
      if (in.dims.empty())
        throw UsageError(fmt::format("{}: {} input '{}' is a scalar; scattered inputs need a row "
                                     "axis", fn, role_description(in.role), in.name));
      if (in.dims[0].symbol >= 0) row_symbols.insert(in.dims[0].symbol);
    }
  }
  for (const InputSpec& in : sig.inputs)
    for (size_t k = 0; k < in.dims.size(); ++k) {
      bool row_axis = k == 0 && in.role != Role::Broadcast;
      if (!row_axis && in.dims[k].symbol >= 0 && row_symbols.count(in.dims[k].symbol))
        throw UsageError(fmt::format(
            "{}: symbol '{}' is the row axis of a scattered input and also axis {} of input '{}'; "
            "a row count differs on every rank, so it cannot size another axis", fn,
            sig.symbols[in.dims[k].symbol], k, in.name));
    }
  std::set<int32_t> reads;
  for (int32_t s : sig.shareds_read) {
    if (s < 0 || size_t(s) >= module.shareds.size())
      throw UsageError(fmt::format("{}: reads shared variable #{} but the module has {}", fn, s,
                                   module.shareds.size()));
    if (!reads.insert(s).second)
      throw UsageError(fmt::format("{}: reads shared variable '{}' twice", fn, module.shareds[s].name));
  }
  std::set<std::string> outs;
  for (const OutputSpec& o : sig.outputs) {
    if (!outs.insert(o.name).second)
      throw UsageError(fmt::format("{}: two outputs are named '{}'", fn, o.name));
    check_dims(o, fmt::format("output '{}'", o.name));
    if (o.mode == ReduceMode::Avg && !is_float(o.dtype))
      throw UsageError(fmt::format("{}: output '{}' has dtype {}, which cannot use mode avg; "
                                   "choose sum, prod, max, min, gather or none", fn, o.name,
                                   dtype_name(o.dtype)));
  }
  std::set<int32_t> updated;
  for (const UpdateSpec& u : sig.updates) {
    if (u.shared < 0 || size_t(u.shared) >= module.shareds.size())
      throw UsageError(fmt::format("{}: updates shared variable #{} but the module has {}", fn,
                                   u.shared, module.shareds.size()));
    const SharedSpec& s = module.shareds[u.shared];
    if (!updated.insert(u.shared).second)
      throw UsageError(fmt::format("{}: updates shared variable '{}' twice", fn, s.name));
    if (u.mode == ReduceMode::Gather)
      throw UsageError(fmt::format("{}: the update of '{}' cannot use mode gather (an update keeps "
                                   "the variable's shape)", fn, s.name));
    if (u.mode == ReduceMode::Avg && !is_float(s.dtype))
      throw UsageError(fmt::format("{}: the update of '{}' (dtype {}) cannot use mode avg; choose "
                                   "sum, prod, max, min or none", fn, s.name, dtype_name(s.dtype)));
  }
}

namespace {

// The arguments: their count, dtypes, ranks, fixed sizes and symbols, and how each is read.
void plan_inputs(const PlanRequest& req, CallPlan& plan) {
  const FunctionSignature& sig = *req.signature;
  if (req.inputs.size() != sig.inputs.size()) {
    std::vector<std::string> names;
    for (const InputSpec& in : sig.inputs) names.push_back(in.name);
    throw UsageError(fmt::format("{}: expected {} input{}{}, received {}", sig.name, sig.inputs.size(),
                                 sig.inputs.size() == 1 ? "" : "s",
                                 names.empty() ? std::string() : fmt::format(" ({})", fmt::join(names, ", ")),
                                 req.inputs.size()));
  }
  std::map<int32_t, std::pair<int64_t, std::string>> bound;   // symbol -> size, where bound
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const InputSpec& spec = sig.inputs[i];
    const InputInfo& info = req.inputs[i];
    std::string label = input_label(sig, i);
    if (info.missing)
      throw UsageError(fmt::format("{}: expected a synk::Data, received an empty handle", label));
    if (info.dtype != spec.dtype)
      throw UsageError(fmt::format("{}: expected dtype {}, received {} of dtype {} (create the "
                                   "Data with dtype {}, converting if needed)", label,
                                   dtype_name(spec.dtype), data_label(info), dtype_name(info.dtype),
                                   dtype_name(spec.dtype)));
    if (info.shape.size() != spec.dims.size())
      throw UsageError(fmt::format("{}: expected {} ({}), received {} of shape {}",
                                   label, dimensions_text(spec.dims.size()), spec_string(spec, sig.symbols),
                                   data_label(info), shape_string(info.shape)));
    bool row_axis_free = spec.role != Role::Broadcast;
    for (size_t k = row_axis_free ? 1 : 0; k < spec.dims.size(); ++k) {
      const DimSpec& d = spec.dims[k];
      int64_t got = info.shape[k];
      if (d.symbol < 0) {
        if (d.size != got)
          throw UsageError(fmt::format("{}: expected shape {}, received {} of shape {} (axis {} "
                                       "must be {})", label, spec_string(spec, sig.symbols),
                                       data_label(info), shape_string(info.shape), k, d.size));
        continue;
      }
      auto [it, fresh] = bound.emplace(d.symbol, std::make_pair(got, spec.name));
      if (!fresh && it->second.first != got)
        throw UsageError(fmt::format("{}: symbol '{}' is {} here (axis {}, shape {}) but {} in "
                                     "input '{}'", label, sig.symbols[d.symbol], got, k,
                                     shape_string(info.shape), it->second.first, it->second.second));
    }
    InputUse use = spec.role == Role::Broadcast ? InputUse::Broadcast
                   : (spec.role == Role::Minibatch || info.minibatch) ? InputUse::Positional
                                                                       : InputUse::Full;
    plan.inputs.push_back(use);
    if (use != InputUse::Broadcast) plan.has_scattered = true;
  }
}

// The rows of the scattered inputs: all of them (equal lengths) or the batch's selection.
void plan_rows(const PlanRequest& req, CallPlan& plan) {
  const FunctionSignature& sig = *req.signature;
  const bool batch_given = req.batch.kind != RowSelection::Kind::All;
  if (batch_given && !plan.has_scattered)
    throw UsageError(fmt::format("batch: {} has no scattered inputs to select rows from", sig.name));
  if (req.batch.kind == RowSelection::Kind::List && req.batch.list.count > 0 &&
      req.batch.list.data == nullptr)
    throw InternalError("batch: index list without data");
  if (plan.has_scattered) {
    if (!batch_given) {
      int64_t L = -1;
      size_t first = 0;
      for (size_t i = 0; i < sig.inputs.size(); ++i) {
        if (plan.inputs[i] == InputUse::Broadcast) continue;
        int64_t len = req.inputs[i].shape[0];
        if (L < 0) L = len, first = i;
        else if (len != L)
          throw UsageError(fmt::format("{}: scattered inputs must have equal lengths when no batch "
                                       "is given: '{}' has {} rows, '{}' has {} rows", sig.name,
                                       sig.inputs[first].name, L, sig.inputs[i].name, len));
      }
      plan.positions = L;
      plan.select = RowSelection::Kind::All;
    } else {
      plan.positions = selection_count(req.batch);
      plan.select = req.batch.kind;
      plan.select_start = req.batch.kind == RowSelection::Kind::Range ? req.batch.start : 0;
      plan.select_list = req.batch.list;
      bool any_full = false;
      for (size_t i = 0; i < sig.inputs.size(); ++i) {
        if (plan.inputs[i] != InputUse::Full) continue;
        any_full = true;
        check_selection(req.batch, req.inputs[i].shape[0], "batch",
                        fmt::format("input '{}'", sig.inputs[i].name));
      }
      if (!any_full) {
        // Only positional inputs: the indices are never read, but must still be sensible.
        if (req.batch.kind == RowSelection::Kind::List) check_list_nonnegative(req.batch.list, "batch");
        else check_selection(req.batch, std::numeric_limits<int64_t>::max(), "batch", "");
      }
      for (size_t i = 0; i < sig.inputs.size(); ++i) {
        if (plan.inputs[i] != InputUse::Positional) continue;
        int64_t len = req.inputs[i].shape[0];
        if (len < plan.positions)
          throw UsageError(fmt::format("{}: minibatch input '{}' has {} rows but the batch selects "
                                       "{} positions (a minibatch input is read by position)",
                                       sig.name, sig.inputs[i].name, len, plan.positions));
      }
    }
  }
}

// Which shared variables are sliceable, and the rows batch_s selects of them on every rank.
void plan_shared_rows(const PlanRequest& req, CallPlan& plan) {
  const FunctionSignature& sig = *req.signature;
  const ModuleSpec& module = *req.module;
  const int N = req.nranks;
  for (size_t k = 0; k < sig.shareds_read.size(); ++k)
    if (module.shareds[sig.shareds_read[k]].sliceable) plan.sliceable_slots.push_back(int32_t(k));
  plan.has_sliceable = !plan.sliceable_slots.empty();
  if (!req.batch_s.empty()) {
    if (!plan.has_sliceable)
      throw UsageError(fmt::format("batch_s: {} reads no sliceable shared variable", sig.name));
    if (req.batch_s.size() != 1 && req.batch_s.size() != size_t(N))
      throw UsageError(fmt::format("batch_s: expected one selection for every rank or a list of "
                                   "exactly {} (one per rank), received a list of {}", N,
                                   req.batch_s.size()));
  }
  if (plan.has_sliceable) {
    plan.shared_rows.resize(size_t(N));
    for (int r = 0; r < N; ++r) {
      SharedRows& rows = plan.shared_rows[size_t(r)];
      const RowSelection* sel = req.batch_s.empty() ? nullptr
                                : req.batch_s.size() == 1 ? &req.batch_s[0] : &req.batch_s[size_t(r)];
      std::string arg = req.batch_s.size() > 1 ? fmt::format("batch_s[{}]", r) : "batch_s";
      int64_t common = -1;
      std::string first;
      for (int32_t slot : plan.sliceable_slots) {
        int32_t var = sig.shareds_read[size_t(slot)];
        const std::vector<int64_t>& shape = req.shared_shape(r, var);
        int64_t len = shape.empty() ? 0 : shape[0];
        std::string what = fmt::format("shared variable '{}' on rank {}", module.shareds[var].name, r);
        if (sel) {
          check_selection(*sel, len, arg, what);
        } else if (common >= 0 && len != common) {
          throw UsageError(fmt::format("{}: sliceable shared variables must have equal lengths "
                                       "when no batch_s is given: on rank {}, '{}' has {} rows, "
                                       "'{}' has {}", sig.name, r, first, common,
                                       module.shareds[var].name, len));
        }
        if (common < 0) common = len, first = module.shareds[var].name;
      }
      if (!sel || sel->kind == RowSelection::Kind::All) {
        rows.kind = RowSelection::Kind::Range;
        rows.count = common;
      } else if (sel->kind == RowSelection::Kind::List) {
        rows.kind = RowSelection::Kind::List;
        rows.list = sel->list;
        rows.count = sel->list.count;
      } else {
        rows.kind = RowSelection::Kind::Range;
        rows.start = sel->kind == RowSelection::Kind::Range ? sel->start : 0;
        rows.count = selection_count(*sel);
      }
    }
  }
}

// The outputs computed: all of them, or the output subset in its order.
void plan_outputs(const PlanRequest& req, CallPlan& plan) {
  const FunctionSignature& sig = *req.signature;
  if (req.output_subset.empty()) {
    for (size_t o = 0; o < sig.outputs.size(); ++o) plan.outputs.push_back(int32_t(o));
  } else {
    std::set<std::string> seen;
    for (const std::string& name : req.output_subset) {
      auto it = std::find_if(sig.outputs.begin(), sig.outputs.end(),
                             [&](const OutputSpec& o) { return o.name == name; });
      if (it == sig.outputs.end()) {
        std::vector<std::string> names;
        for (const OutputSpec& o : sig.outputs) names.push_back(o.name);
        throw UsageError(fmt::format("output_subset: {} has no output '{}' (its outputs: {})",
                                     sig.name, name, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
      }
      if (!seen.insert(name).second)
        throw UsageError(fmt::format("output_subset: output '{}' is listed twice", name));
      plan.outputs.push_back(int32_t(it - sig.outputs.begin()));
    }
  }
}

}  // namespace

namespace {
void require_rows_in_step(const PlanRequest& req, const CallPlan& plan);
}  // namespace

CallPlan plan_call(const PlanRequest& req) {
  CallPlan plan;
  plan.nranks = req.nranks;
  plan_inputs(req, plan);
  plan_rows(req, plan);
  plan_shared_rows(req, plan);
  if (req.num_slices < 1)
    throw UsageError(fmt::format("num_slices: must be >= 1, received {}", req.num_slices));
  plan.num_slices = req.num_slices;
  if (req.micro_shard_rows < 0)
    throw UsageError(fmt::format("micro_shard_rows: must be >= 0 (0: off), received {}", req.micro_shard_rows));
  plan.micro_shard_rows = req.micro_shard_rows;
  plan_outputs(req, plan);
  if (plan.has_scattered && plan.has_sliceable) require_rows_in_step(req, plan);

  // Nothing selected anywhere: rank 0 runs the function once on zero rows, as one device would.
  if (plan.has_scattered) {
    plan.empty_call = plan.positions == 0;
  } else if (plan.has_sliceable) {
    int64_t total = 0;
    for (const SharedRows& rows : plan.shared_rows) total += rows.count;
    plan.empty_call = total == 0;
  }
  return plan;
}

namespace {

// The positions rank `rank` owns: split_range of the positions, or, with micro-shards, the
// positions of the whole shards split_range deals it.
std::pair<int64_t, int64_t> rank_positions(const CallPlan& plan, int rank) {
  const int64_t m = plan.micro_shard_rows;
  if (m <= 0) return split_range(plan.positions, plan.nranks, rank);
  auto [first, last] = split_range((plan.positions + m - 1) / m, plan.nranks, rank);
  return {std::min(plan.positions, first * m), std::min(plan.positions, last * m)};
}

// An input split by position and a sliceable shared variable whose axis 0 is the same symbol
// (`minibatch w: f32[rows]` beside `shared d: f32[rows, 4] sliceable`) must give every rank as
// many rows of the one as of the other; otherwise every rank would fail on the symbol.
void require_rows_in_step(const PlanRequest& req, const CallPlan& plan) {
  const FunctionSignature& sig = *req.signature;
  const ModuleSpec& module = *req.module;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const std::vector<DimSpec>& dims = sig.inputs[i].dims;
    if (plan.inputs[i] == InputUse::Broadcast || dims.empty() || dims[0].symbol < 0) continue;
    const std::string& symbol = sig.symbols[size_t(dims[0].symbol)];
    for (int32_t slot : plan.sliceable_slots) {
      const SharedSpec& shared = module.shareds[size_t(sig.shareds_read[size_t(slot)])];
      if (shared.dims.empty() || shared.dims[0].symbol < 0 || module.symbols[size_t(shared.dims[0].symbol)] != symbol)
        continue;
      int64_t total = 0;
      for (int r = 0; r < plan.nranks; ++r) total += plan.shared_rows[size_t(r)].count;
      for (int r = 0; r < plan.nranks; ++r) {
        auto [lo, hi] = rank_positions(plan, r);
        if (hi - lo == plan.shared_rows[size_t(r)].count) continue;
        throw UsageError(fmt::format(
            "{}: input '{}' and sliceable shared variable '{}' share axis 0 ('{}'), so every rank needs as many rows "
            "of '{}' as batch_s gives it of '{}': rank {} would get {} of {} positions of '{}' but {} rows of '{}' "
            "(give '{}' {} rows, the batch_s selections' total, split over the ranks like them)",
            sig.name, sig.inputs[i].name, shared.name, symbol, sig.inputs[i].name, shared.name, r, hi - lo,
            plan.positions, sig.inputs[i].name, plan.shared_rows[size_t(r)].count, shared.name, sig.inputs[i].name,
            total));
      }
    }
  }
}

// Micro-shard mode (CallPlan::micro_shard_rows): one part per shard this rank runs.
std::vector<Part> micro_shard_parts(const CallPlan& plan, int rank) {
  const int64_t m = plan.micro_shard_rows;
  const int64_t sh_count = plan.has_sliceable ? plan.shared_rows[size_t(rank)].count : 0;
  std::vector<Part> parts;
  if (!plan.has_scattered) {
    for (int64_t lo = 0; lo < sh_count; lo += m) {
      const int64_t hi = std::min(sh_count, lo + m);
      parts.push_back(Part{0, 0, lo, hi, hi - lo});
    }
    return parts;
  }
  auto [lo, hi] = rank_positions(plan, rank);
  const int64_t shards = (hi - lo + m - 1) / m;
  for (int64_t k = 0; k < shards; ++k) {
    Part p;
    p.pos_lo = lo + k * m;
    p.pos_hi = std::min(hi, p.pos_lo + m);
    if (plan.has_sliceable) std::tie(p.sh_lo, p.sh_hi) = split_range(sh_count, shards, k);
    p.weight = p.pos_hi - p.pos_lo;
    parts.push_back(p);
  }
  return parts;
}

}  // namespace

std::vector<double> weight_shares(std::span<const double> weights) {
  double total = 0, largest = 0;
  for (double w : weights) {
    total += w;
    largest = std::max(largest, w);
  }
  // Finite weights whose sum overflows (two of 1e308) are scaled by the largest first; weights
  // that sum to a finite number keep the plain quotient, so their shares keep their bits.
  const double unit = std::isfinite(total) ? 1.0 : largest;
  if (unit != 1.0) {
    total = 0;
    for (double w : weights) total += w / unit;
  }
  std::vector<double> shares;
  shares.reserve(weights.size());
  for (double w : weights) shares.push_back((w / unit) / total);
  return shares;
}

std::vector<int64_t> rank_weights(const CallPlan& plan) {
  std::vector<int64_t> weights(size_t(plan.nranks), plan.empty_call ? 0 : 1);
  if (plan.empty_call || (!plan.has_scattered && !plan.has_sliceable)) return weights;
  // The slices (or micro-shards) of a rank split its rows without loss, so its weight is its row
  // count.
  for (int r = 0; r < plan.nranks; ++r) {
    if (plan.has_scattered) {
      auto [lo, hi] = rank_positions(plan, r);
      weights[size_t(r)] = hi - lo;
    } else {
      weights[size_t(r)] = plan.shared_rows[size_t(r)].count;
    }
  }
  return weights;
}

namespace {

// The first slice at or after `s` that holds a row when `n` rows are split into `slices` by
// split_range's rule (`slices` when none does). Parts are found from one to the next, so slices
// far beyond the rows are never visited: num_slices = 10^12 costs what the rows cost (visiting
// every slice took hours, at 14 ns an empty one).
int64_t next_slice_with_rows(int64_t s, int64_t n, int64_t slices) {
  const int64_t row = int64_t(__int128(s) * n / slices);   // slice s's first row, or a later slice's
  if (s >= slices || row >= n) return slices;
  return int64_t(((__int128(row) + 1) * slices + n - 1) / n) - 1;   // the slice holding that row
}

}  // namespace

std::vector<Part> rank_parts(const CallPlan& plan, int rank) {
  std::vector<Part> parts;
  if (!plan.has_scattered && !plan.has_sliceable) {
    parts.push_back(Part{0, 0, 0, 0, 1});
    return parts;
  }
  if (plan.empty_call) {
    if (rank == 0) parts.push_back(Part{0, 0, 0, 0, 1});
    return parts;
  }
  if (plan.micro_shard_rows > 0) return micro_shard_parts(plan, rank);
  auto [in_lo, in_hi] = plan.has_scattered ? split_range(plan.positions, plan.nranks, rank)
                                           : std::pair<int64_t, int64_t>{0, 0};
  int64_t sh_count = plan.has_sliceable ? plan.shared_rows[size_t(rank)].count : 0;
  const int64_t S = plan.num_slices;
  auto next = [&](int64_t s) {
    return std::min(plan.has_scattered ? next_slice_with_rows(s, in_hi - in_lo, S) : S,
                    plan.has_sliceable ? next_slice_with_rows(s, sh_count, S) : S);
  };
  for (int64_t s = next(0); s < S; s = next(s + 1)) {
    Part p;
    if (plan.has_scattered) {
      auto [a, b] = split_range(in_hi - in_lo, plan.num_slices, s);
      p.pos_lo = in_lo + a;
      p.pos_hi = in_lo + b;
    }
    if (plan.has_sliceable) {
      auto [a, b] = split_range(sh_count, plan.num_slices, s);
      p.sh_lo = a;
      p.sh_hi = b;
    }
    p.weight = plan.has_scattered ? p.pos_hi - p.pos_lo : p.sh_hi - p.sh_lo;
    if (p.weight > 0) parts.push_back(p);
  }
  return parts;
}

}  // namespace synk::rt
