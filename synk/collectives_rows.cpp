// The collectives that move rows between the master and the ranks (scatter, gather, all_gather)
// and the per-rank shapes (get_shapes, get_lengths), on one node and across nodes
// (docs/multinode.md); the helpers they share with collectives.cpp are in collectives_internal.h.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/call/call_plan.h"
#include "runtime/coll/across_nodes.h"
#include "runtime/data/dtype.h"
#include "runtime/data/shared_vars.h"
#include "runtime/node/cluster.h"
#include "synk/collectives_internal.h"

namespace synk {

using rt::CollDescriptor;
using rt::CollKind;
using namespace collectives_internal;

namespace {

std::vector<Array> gather_checked(const Vars& vars, int nd_up, const CollectiveOptions& options);
void all_gather_checked(const Vars& vars, const CollectiveOptions& options);
std::vector<std::vector<std::vector<int64_t>>> shapes_checked(const Vars& vars);

// scatter's checks of values[v] for the variable `t`; the rows `batch` selects of it.
SelectedRows checked_scatter_rows(const char* what, const Target& t, const ArrayRef& value, const Batch& batch, size_t v) {
  const std::string label = fmt::format("{}: values[{}] for shared variable '{}'", what, v, t.name());
  if (t.spec->dims.empty())
    throw UsageError(fmt::format("{}: shared variable '{}' is a scalar; scatter splits axis 0", what, t.name()));
  if (value.shape.size() != t.spec->dims.size())
    throw UsageError(fmt::format("{}: expected {} ({}), received shape {}", label, rt::dimensions_text(t.spec->dims.size()),
                                 rt::spec_string(*t.spec, t.module->spec.symbols), rt::shape_string(value.shape)));
  for (size_t k = 1; k < value.shape.size(); ++k)
    if (t.spec->dims[k].symbol < 0 && t.spec->dims[k].size != value.shape[k])
      throw UsageError(fmt::format("{}: expected shape {}, received {} (axis {} must be {})", label,
                                   rt::spec_string(*t.spec, t.module->spec.symbols),
                                   rt::shape_string(value.shape), k, t.spec->dims[k].size));
  if (!rt::can_cast_safely(value.dtype, t.spec->dtype))
    throw UsageError(fmt::format("{}: expected dtype {} (or one that converts safely to it), received {}",
                                 label, rt::dtype_name(t.spec->dtype), rt::dtype_name(value.dtype)));
  return BatchAccess::select(batch, value.shape[0], fmt::format("{}: batch (for values[{}])", what, v));
}

// Rows [a, b) of `selection` of `value`, in `dtype` (row_elems elements a row), into `dst`.
void copy_selected_rows(const ArrayRef& value, const SelectedRows& selection, int64_t a, int64_t b, rt::DType dtype,
                        int64_t row_elems, std::byte* dst) {
  const size_t src_row = size_t(row_elems) * rt::dtype_size(value.dtype), dst_row = size_t(row_elems) * rt::dtype_size(dtype);
  for (int64_t i = a; i < b; ++i) {
    const auto* src = static_cast<const std::byte*>(value.data) + size_t(selection.row(i)) * src_row;
    std::byte* out = dst + size_t(i - a) * dst_row;
    if (value.dtype == dtype) std::memcpy(out, src, dst_row);
    else rt::convert_elements(src, value.dtype, out, dtype, row_elems);
  }
}

// Scatter within this node. Across nodes (every leader's part of a multi-node scatter) `values`
// are this node's rows of selections of global_rows[v] rows, which split over the global ranks.
void scatter_on_node(const char* what, const Vars& vars, const Values& values, const Batch& batch,
                     const CollectiveOptions& o, const std::vector<int64_t>* global_rows = nullptr) {
  rt::ProcessGroup& g = group_for(what);
  const int n = g.size();
  // Rank r's rows [a, b) of the selection of value v.
  auto rank_rows = [&](const SelectedRows& selection, size_t v, int r) -> std::pair<int64_t, int64_t> {
    if (!global_rows) return rt::split_range(selection.count, n, r);
    const int64_t total = (*global_rows)[v], ranks = int64_t(n) * rt::cluster_nodes(), first = rt::cluster_node() * n;
    const int64_t base = rt::split_range(total, ranks, first).first;
    auto [a, b] = rt::split_range(total, ranks, first + r);
    return {a - base, b - base};
  };
  std::vector<Target> ts = targets(what, vars.list());
  check_value_count(what, ts, values);
  CollDescriptor& d = descriptor();
  d.kind = CollKind::Scatter;
  fill_descriptor(d, ts, o);
  d.scatter_rows.assign(ts.size() * size_t(n), 0);
  rt::MasterIO io;
  io.scatter_own.resize(ts.size());
  std::vector<SelectedRows> selected(ts.size());
  std::vector<size_t> row_bytes(ts.size());
  std::vector<bool> direct(ts.size());
  // Checks, before anything moves.
  for (size_t v = 0; v < ts.size(); ++v) {
    const Target& t = ts[v];
    const ArrayRef& value = values.list()[v].ref();
    selected[v] = checked_scatter_rows(what, t, value, batch, v);
    for (int r = 0; r < n; ++r) {
      auto [a, b] = rank_rows(selected[v], v, r);
      d.scatter_rows[v * size_t(n) + size_t(r)] = b - a;
      require_length_allowed(what, t, b - a, r);
    }
    std::vector<int64_t> row_shape(value.shape.begin() + 1, value.shape.end());
    d.add_shape(row_shape);
    row_bytes[v] = size_t(rt::shape_size(row_shape)) * rt::dtype_size(t.spec->dtype);
    direct[v] = selected[v].contiguous && value.dtype == t.spec->dtype;
  }
  // Rank r's rows of value v, in the variable's dtype, into `dst`.
  auto copy_rows = [&](size_t v, int r, std::byte* dst) {
    auto [a, b] = rank_rows(selected[v], v, r);
    copy_selected_rows(values.list()[v].ref(), selected[v], a, b, ts[v].spec->dtype,
                       int64_t(row_bytes[v] / rt::dtype_size(ts[v].spec->dtype)), dst);
  };
  for (size_t v = 0; v < ts.size(); ++v) {
    std::span<const int64_t> row_shape = d.shape_at(v);
    std::vector<int64_t> shape(row_shape.begin(), row_shape.end());
    shape.insert(shape.begin(), d.scatter_rows[v * size_t(n)]);
    io.scatter_own[v].resize(ts[v].spec->dtype, shape);
    copy_rows(v, 0, io.scatter_own[v].bytes.data());
  }
  // The stream for ranks 1..N-1: straight from the values where the rows are contiguous and the
  // dtype already right, else gathered and converted here first.
  for (int r = 1; r < n; ++r)
    for (size_t v = 0; v < ts.size(); ++v) {
      const size_t bytes = size_t(d.scatter_rows[v * size_t(n) + size_t(r)]) * row_bytes[v];
      if (bytes == 0) continue;
      if (direct[v]) {
        auto [a, b] = rank_rows(selected[v], v, r);
        io.scatter_stream.add(static_cast<const std::byte*>(values.list()[v].ref().data) +
                                  size_t(selected[v].first + a) * row_bytes[v], bytes);
      } else {
        std::vector<std::byte>& buf = io.scatter_buffers.emplace_back(bytes);
        copy_rows(v, r, buf.data());
        io.scatter_stream.add(buf.data(), bytes);
      }
    }
  run(what, g, d, ts, io);
}


// Node 0 checks the values and cuts its selection by global rank; each leader gets its node's rows
// and the selections' global lengths (one message per node) and scatters the rows over its ranks
// by the global split. An error on node 0 travels in place of the rows: every leader raises it.
void scatter_across_nodes(const char* what, const Vars& vars, const Values& values, const Batch& batch,
                          const CollectiveOptions& o) {
  std::vector<Target> ts = targets(what, vars.list());
  if (rt::cluster_node() == 0) check_value_count(what, ts, values);   // the others' values are ignored
  NodeCheck::agree([&] { return " of " + describe_targets(nullptr, ts, false); });
  const int nodes = rt::cluster_nodes(), local = rt::cluster_local_ranks(), n = nodes * local;
  std::vector<std::vector<rt::Array>> per_node(static_cast<size_t>(nodes));
  if (rt::cluster_node() == 0) {
    std::string error;
    try {
      rt::Array lengths;   // every selection's length, last in every node's message
      lengths.resize(rt::DType::I64, {int64_t(ts.size())});
      for (size_t v = 0; v < ts.size(); ++v) {
        const ArrayRef& value = values.list()[v].ref();
        const SelectedRows rows = checked_scatter_rows(what, ts[v], value, batch, v);
        lengths.data<int64_t>()[v] = rows.count;
        for (int r = 0; r < n; ++r) {
          auto [a, b] = rt::split_range(rows.count, n, r);
          require_length_allowed(what, ts[v], b - a, r);
        }
        const int64_t row_elems = rt::shape_size(std::vector<int64_t>(value.shape.begin() + 1, value.shape.end()));
        for (int k = 0; k < nodes; ++k) {
          const int64_t first = rt::split_range(rows.count, n, k * local).first;
          const int64_t end = rt::split_range(rows.count, n, (k + 1) * local - 1).second;
          std::vector<int64_t> shape = value.shape;
          shape[0] = end - first;
          rt::Array& part = per_node[size_t(k)].emplace_back();
          part.resize(ts[v].spec->dtype, shape);
          copy_selected_rows(value, rows, first, end, ts[v].spec->dtype, row_elems, part.bytes.data());
        }
      }
      for (std::vector<rt::Array>& arrays : per_node) arrays.push_back(lengths);
    } catch (const UsageError& e) {
      error = e.what();
    }
    // Each node's message starts with node 0's error (empty: none), then its rows.
    for (std::vector<rt::Array>& arrays : per_node) {
      if (!error.empty()) arrays.clear();
      arrays.insert(arrays.begin(), status_array(error));
    }
  }
  std::vector<rt::Array> mine = rt::scatter_across_nodes(per_node, 0, what);
  throw_node_zero_error(mine);
  if (mine.size() != ts.size() + 2)
    throw InternalError(fmt::format("scatter: node 0 sent {} arrays for {} variables", mine.size(), ts.size()));
  const std::vector<int64_t> global_rows(mine.back().data<int64_t>(), mine.back().data<int64_t>() + ts.size());
  std::vector<Value> node_values;
  for (size_t v = 0; v < ts.size(); ++v) {
    const rt::Array& a = mine[v + 1];
    node_values.emplace_back(ArrayRef{a.bytes.data(), a.dtype, a.shape});
  }
  scatter_on_node(what, vars, Values(std::move(node_values)), Batch{}, o, &global_rows);
}

}  // namespace

void scatter(const Vars& vars, const Values& values, const Batch& batch, const CollectiveOptions& options) {
  const char* what = "scatter";
  node_checked(what, [&] {
    CollectiveOptions o = merged(what, options);
    group_for(what);
    if (across_nodes(what)) scatter_across_nodes(what, vars, values, batch, o);
    else scatter_on_node(what, vars, values, batch, o);
  });
}

std::vector<Array> gather(const Vars& vars, int nd_up, const CollectiveOptions& options) {
  return node_checked("gather", [&] { return gather_checked(vars, nd_up, options); });
}

namespace {

std::vector<Array> gather_checked(const Vars& vars, int nd_up, const CollectiveOptions& options) {
  const char* what = "gather";
  CollectiveOptions o = merged(what, options);
  if (nd_up != 0 && nd_up != 1)
    throw UsageError(fmt::format("gather: nd_up must be 0 (concatenate along axis 0) or 1 (stack on a "
                                 "new axis), received {}", nd_up));
  rt::ProcessGroup& g = group_for(what);
  std::vector<Target> ts = targets(what, vars.list());
  for (const Target& t : ts) {
    if (nd_up == 1) require_equal_shapes("gather", g, t, " with nd_up=1 (nd_up=0 concatenates any lengths)");
    else require_rows("gather with nd_up=0", g, t);
  }
  CollDescriptor& d = descriptor();
  d.kind = CollKind::Gather;
  d.nd_up = uint8_t(nd_up);
  fill_descriptor(d, ts, o);
  d.per_rank_shapes = 1;
  for (const Target& t : ts)
    for (int r = 0; r < g.size(); ++r) d.add_shape(shape_on(&g, t, r));
  if (across_nodes(what))
    NodeCheck::agree([&] { return fmt::format("(nd_up {}) of {}", nd_up, describe_targets(nullptr, ts, false)); });
  rt::MasterIO io;
  run(what, g, d, ts, io);
  if (!across_nodes(what)) return std::move(io.outputs);
  // Each node gathered its own ranks; the leaders join the nodes' results in node order.
  std::vector<std::string> names;
  for (const Target& t : ts) names.push_back(t.name());
  return rt::concat_across_nodes(io.outputs, names, what);
}

}  // namespace

Array gather(const Var& var, int nd_up, const CollectiveOptions& options) {
  return std::move(gather(Vars(var), nd_up, options)[0]);
}

void all_gather(const Vars& vars, const CollectiveOptions& options) {
  node_checked("all_gather", [&] { all_gather_checked(vars, options); });
}

namespace {

void all_gather_checked(const Vars& vars, const CollectiveOptions& options) {
  const char* what = "all_gather";
  if (across_nodes(what)) {
    // Every rank's values in global rank order on every leader, then on the leaders' ranks.
    std::vector<Array> joined = gather(vars, 0, options);
    std::vector<Target> ts = targets(what, vars.list());
    for (size_t v = 0; v < ts.size(); ++v) {
      require_length_allowed(what, ts[v], joined[v].shape[0], 0);
      ts[v].module->values[size_t(ts[v].cv.var)] = std::move(joined[v]);
    }
    broadcast_local(what, vars, options);
    return;
  }
  auto [o, g, ts, d] = setup(what, CollKind::AllGather, vars, options);
  d.per_rank_shapes = 1;
  for (const Target& t : ts) {
    require_rows(what, g, t);
    int64_t rows = 0;
    for (int r = 0; r < g.size(); ++r) {
      d.add_shape(shape_on(&g, t, r));
      rows += shape_on(&g, t, r)[0];
    }
    for (int r = 0; r < g.size(); ++r) require_length_allowed(what, t, rows, r);
  }
  rt::MasterIO io;
  run(what, g, d, ts, io);
}

}  // namespace

// --- Shapes -------------------------------------------------------------------------------------

std::vector<std::vector<std::vector<int64_t>>> get_shapes(const Vars& vars) {
  return node_checked("get_shapes", [&] { return shapes_checked(vars); });
}

namespace {

std::vector<std::vector<std::vector<int64_t>>> shapes_checked(const Vars& vars) {
  std::vector<Target> ts = targets("get_shapes", vars.list());
  rt::ProcessGroup* g = current_group();
  std::vector<std::vector<std::vector<int64_t>>> out;
  if (!across_nodes("get_shapes")) {
    for (const Target& t : ts) {
      auto& per_rank = out.emplace_back();
      for (int r = 0; r < ranks_now(); ++r) per_rank.push_back(shape_on(g, t, r));
    }
    return out;
  }
  // Across nodes: each leader's ranks' shapes as rows of an i64 array, joined in node order.
  NodeCheck::agree([&] { return " of " + describe_targets(nullptr, ts, false); });
  const int local = rt::cluster_local_ranks();
  std::vector<rt::Array> mine(ts.size());
  std::vector<std::string> names;
  for (size_t v = 0; v < ts.size(); ++v) {
    const int64_t ndim = int64_t(ts[v].spec->dims.size());
    mine[v].resize(rt::DType::I64, {local, std::max<int64_t>(ndim, 1)});
    auto* row = reinterpret_cast<int64_t*>(mine[v].bytes.data());
    for (int r = 0; r < local; ++r, row += std::max<int64_t>(ndim, 1))
      std::copy_n(shape_on(g, ts[v], r).begin(), ndim, row);
    names.push_back(ts[v].name());
  }
  for (const rt::Array& all : rt::concat_across_nodes(mine, names, "get_shapes")) {
    auto& per_rank = out.emplace_back();
    const int64_t width = all.shape[1];
    const auto* row = reinterpret_cast<const int64_t*>(all.bytes.data());
    const size_t ndim = ts[out.size() - 1].spec->dims.size();
    for (int64_t r = 0; r < all.shape[0]; ++r, row += width) per_rank.emplace_back(row, row + ndim);
  }
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> get_shapes(const Var& var) { return get_shapes(Vars(var))[0]; }

std::vector<std::vector<int64_t>> get_lengths(const Vars& vars) {
  return node_checked("get_lengths", [&] {
    std::vector<Target> ts = targets("get_lengths", vars.list());
    for (const Target& t : ts)
      if (t.spec->dims.empty())
        throw UsageError(fmt::format("get_lengths: shared variable '{}' is a scalar (it has no axis 0); "
                                     "use get_shapes", t.name()));
    std::vector<std::vector<int64_t>> out;
    for (const auto& per_rank : get_shapes(vars)) {
      auto& lengths = out.emplace_back();
      for (const auto& shape : per_rank) lengths.push_back(shape[0]);
    }
    return out;
  });
}

std::vector<int64_t> get_lengths(const Var& var) { return get_lengths(Vars(var))[0]; }

}  // namespace synk
