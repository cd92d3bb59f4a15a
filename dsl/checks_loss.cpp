// The check of a training loss's form (checks.h, loss_not_a_row_mean_warning): a step averages the
// ranks' gradients weighted by their rows, which is exact for a mean over the scattered rows of
// per-row losses, plus terms that do not depend on the rows. The walk follows the loss from its
// top through sums, differences and scalings by row-independent values to its row means (or
// sums over the rows divided by their count), then checks that each mean's values are per row.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dsl/checks.h"

namespace synk::dsl::checks {

namespace {

// The scattered row symbol among `type`'s dimensions, if any.
const std::string* scattered_symbol(const ir::TensorType& type, const ScatteredRows& scattered) {
  for (const ir::Dim& d : type.shape)
    if (d.is_symbolic() && scattered.count(d.symbol)) return &d.symbol;
  return nullptr;
}

// Whether axis `axis` of node `id`'s value is a scattered row dimension.
bool row_axis(const ir::Function& fn, ir::NodeId id, int64_t axis, const ScatteredRows& scattered) {
  const ir::TensorType& t = fn.nodes[size_t(id)].type;
  if (axis < 0) axis += int64_t(t.shape.size());
  return axis >= 0 && size_t(axis) < t.shape.size() && t.shape[size_t(axis)].is_symbolic() &&
         scattered.count(t.shape[size_t(axis)].symbol);
}

bool reduces_a_row_axis(const ir::Function& fn, const ir::Node& n, const ScatteredRows& scattered) {
  return std::any_of(n.attrs.axes.begin(), n.attrs.axes.end(),
                     [&](int64_t a) { return row_axis(fn, n.operands[0], a, scattered); });
}

// The row symbol whose count `id` is (the value of `n` in `sum(l) / cast(n, f32)`: a sum of a 1
// broadcast over [n], sema's dimension_value), through casts; nullptr for anything else.
const std::string* row_count_symbol(const ir::Function& fn, ir::NodeId id, const ScatteredRows& scattered) {
  const ir::Node* n = &fn.nodes[size_t(id)];
  while (n->op == ir::Op::Cast) n = &fn.nodes[size_t(n->operands[0])];
  if (n->op != ir::Op::ReduceSum || n->attrs.axes != std::vector<int64_t>{0}) return nullptr;
  const ir::Node& spread = fn.nodes[size_t(n->operands[0])];
  if (spread.op != ir::Op::BroadcastTo || spread.type.shape.size() != 1) return nullptr;
  const ir::Node& one = fn.nodes[size_t(spread.operands[0])];
  if (one.op != ir::Op::Constant || one.attrs.ivalue != 1) return nullptr;
  const ir::Dim& d = spread.type.shape[0];
  return d.is_symbolic() && scattered.count(d.symbol) ? &d.symbol : nullptr;
}

// The walk over a loss: which nodes depend on the rows, and the first construct that breaks the
// form "mean over the rows of per-row values, plus and times what does not depend on them".
struct LossWalk {
  const ir::Function& fn;
  const ScatteredRows& scattered;
  std::vector<bool> depends;
  ir::NodeId culprit = -1;

  bool dep(ir::NodeId id) const { return depends[size_t(id)]; }

  // `id` is a sum over the rows of `symbol` of per-row values, plus and times what does not depend
  // on the rows (the numerator of `... / cast(n, f32)`).
  bool is_sum_over_rows(ir::NodeId id, const std::string& symbol) const {
    const ir::Node& n = fn.nodes[size_t(id)];
    switch (n.op) {
      case ir::Op::Cast: case ir::Op::Neg: return is_sum_over_rows(n.operands[0], symbol);
      case ir::Op::Add: case ir::Op::Sub:
        return std::all_of(n.operands.begin(), n.operands.end(),
                           [&](ir::NodeId o) { return !dep(o) || is_sum_over_rows(o, symbol); });
      case ir::Op::Mul:
        return (!dep(n.operands[0]) && is_sum_over_rows(n.operands[1], symbol)) ||
               (!dep(n.operands[1]) && is_sum_over_rows(n.operands[0], symbol));
      case ir::Op::Div: return !dep(n.operands[1]) && is_sum_over_rows(n.operands[0], symbol);
      case ir::Op::ReduceSum: {
        const ir::TensorType& in = fn.nodes[size_t(n.operands[0])].type;
        return !in.shape.empty() && in.shape[0].is_symbolic() && in.shape[0].symbol == symbol &&
               std::find(n.attrs.axes.begin(), n.attrs.axes.end(), 0) != n.attrs.axes.end();
      }
      default: return false;
    }
  }

  // What the sums over the rows in such a numerator add up: the per-row values to check.
  void summed_values(ir::NodeId id, std::vector<ir::NodeId>& out) const {
    const ir::Node& n = fn.nodes[size_t(id)];
    if (!dep(id)) return;
    if (n.op == ir::Op::ReduceSum) return out.push_back(n.operands[0]);
    for (ir::NodeId o : n.operands) summed_values(o, out);
  }
  std::optional<std::string> sums_mix_rows(ir::NodeId numerator) {
    std::vector<ir::NodeId> values;
    summed_values(numerator, values);
    for (ir::NodeId v : values)
      if (std::optional<std::string> why = mixes_rows(v)) return why;
    return std::nullopt;
  }

  // 1 / cast(n, f32): the reciprocal of a row count; its symbol, else nullptr.
  const std::string* reciprocal_count(ir::NodeId id) const {
    const ir::Node& n = fn.nodes[size_t(id)];
    if (n.op != ir::Op::Div || dep(n.operands[0])) return nullptr;
    return row_count_symbol(fn, n.operands[1], scattered);
  }

  // The first node under `root` (each once, only those that depend on the rows, depth first)
  // for which `match(id, node)` holds; -1 when none does.
  template <class Match>
  ir::NodeId first_under(ir::NodeId root, Match&& match) const {
    std::vector<ir::NodeId> next = {root};
    std::vector<bool> seen(depends.size(), false);
    while (!next.empty()) {
      const ir::NodeId id = next.back();
      next.pop_back();
      if (seen[size_t(id)] || !dep(id)) continue;
      seen[size_t(id)] = true;
      const ir::Node& n = fn.nodes[size_t(id)];
      if (match(id, n)) return id;
      for (ir::NodeId o : n.operands) next.push_back(o);
    }
    return -1;
  }

  // The first node under `root` that `phrase` describes becomes the culprit; its phrase.
  template <class Phrase>
  std::optional<std::string> blame_under(ir::NodeId root, Phrase&& phrase) {
    std::optional<std::string> why;
    const ir::NodeId at = first_under(root, [&](ir::NodeId id, const ir::Node& n) { return bool(why = phrase(id, n)); });
    if (at >= 0) culprit = at;
    return why;
  }

  // Inside a mean over the rows each row's value must depend on that row alone: a statistic over
  // the rows of a vector (var(l), l - mean(l)), a max, min or prod over them, a scan or softmax
  // along them, or a matmul over them mixes the rank's rows. Means and sums over the rows of a
  // matrix (batch_norm's statistics in training, documented as per rank) are let through.
  std::optional<std::string> mixes_rows(ir::NodeId root) {
    return blame_under(root, [&](ir::NodeId id, const ir::Node& n) -> std::optional<std::string> {
      switch (n.op) {
        case ir::Op::ReduceSum: case ir::Op::ReduceMean:
          if (reduces_a_row_axis(fn, n, scattered) && fn.nodes[size_t(n.operands[0])].type.shape.size() == 1 &&
              !row_count_symbol(fn, id, scattered))
            return fmt::format("a {} over the rows inside the mean (a statistic of the rank's rows)", ir::op_name(n.op));
          return std::nullopt;
        case ir::Op::ReduceMax: case ir::Op::ReduceMin: case ir::Op::ReduceProd: case ir::Op::ArgMax:
          if (reduces_a_row_axis(fn, n, scattered)) return fmt::format("a {} over the rows inside the mean", ir::op_name(n.op));
          return std::nullopt;
        case ir::Op::Cumsum: case ir::Op::Softmax: case ir::Op::LogSoftmax:
          if (row_axis(fn, n.operands[0], n.attrs.axis, scattered))
            return fmt::format("{} along the rows inside the mean", ir::op_name(n.op));
          return std::nullopt;
        case ir::Op::MatMul:
          if (row_axis(fn, n.operands[0], -1, scattered)) return std::string("a matmul over the rows inside the mean");
          return std::nullopt;
        default: return std::nullopt;
      }
    });
  }

  // What keeps `id` from the form (a phrase for the warning), or nullopt where the walk goes on
  // into `next`.
  std::optional<std::string> breaks_form(ir::NodeId id, std::vector<ir::NodeId>& next) {
    const ir::Node& node = fn.nodes[size_t(id)];
    auto go_on = [&](std::initializer_list<size_t> which) -> std::optional<std::string> {
      for (size_t k : which) next.push_back(node.operands[k]);
      return std::nullopt;
    };
    culprit = id;
    const bool over_rows = node.op != ir::Op::Cumsum && is_reduction(node.op) && reduces_a_row_axis(fn, node, scattered);
    switch (node.op) {
      case ir::Op::ReduceMean:
        if (over_rows) return mixes_rows(node.operands[0]);   // what the step averages exactly
        return go_on({0});
      case ir::Op::ReduceSum:
        if (over_rows) return std::string("a sum over each rank's rows");
        return go_on({0});
      case ir::Op::ReduceMax: case ir::Op::ReduceMin: case ir::Op::ReduceProd:
        return fmt::format("a {} {}", ir::op_name(node.op),
                           over_rows ? "over each rank's rows" : "of a value computed from the rows");
      case ir::Op::Add: case ir::Op::Sub: case ir::Op::Concat:
        for (ir::NodeId o : node.operands) next.push_back(o);
        return std::nullopt;
      case ir::Op::Neg: case ir::Op::Cast: case ir::Op::Reshape: case ir::Op::BroadcastTo:
        return go_on({0});
      case ir::Op::Mul:
        if (!dep(node.operands[0])) return go_on({1});
        if (!dep(node.operands[1])) return go_on({0});
        for (int k : {0, 1})   // sum(l) * (1 / cast(n, f32))
          if (const std::string* rows = reciprocal_count(node.operands[size_t(k)]);
              rows && is_sum_over_rows(node.operands[size_t(1 - k)], *rows))
            return sums_mix_rows(node.operands[size_t(1 - k)]);
        return std::string("a product of two values computed from the rows");
      case ir::Op::Div:
        if (!dep(node.operands[1])) return go_on({0});
        if (const std::string* rows = row_count_symbol(fn, node.operands[1], scattered);
            rows && is_sum_over_rows(node.operands[0], *rows))
          return sums_mix_rows(node.operands[0]);   // sum(l) / cast(n, f32): a mean written out
        return std::string("a division by a value computed from the rows");
      case ir::Op::Where:
        if (!dep(node.operands[0])) return go_on({1, 2});
        return hidden_reduction(id).value_or("a where() whose condition is computed from the rows");
      default:
        return hidden_reduction(id).value_or(fmt::format("{} of a value computed from the rows", ir::op_name(node.op)));
    }
  }

  // A max, min, prod or sum over the rows under `id` (what logsumexp's expansion or a helper
  // holds), which the user wrote and which is the first thing to change: that part, when there is
  // one (and it becomes the culprit).
  std::optional<std::string> hidden_reduction(ir::NodeId id) {
    return blame_under(id, [&](ir::NodeId at, const ir::Node& n) -> std::optional<std::string> {
      const bool blamed = n.op == ir::Op::ReduceMax || n.op == ir::Op::ReduceMin || n.op == ir::Op::ReduceProd ||
                          (n.op == ir::Op::ReduceSum && !row_count_symbol(fn, at, scattered));
      if (!blamed || !reduces_a_row_axis(fn, n, scattered)) return std::nullopt;
      return fmt::format("a {} over each rank's rows", ir::op_name(n.op));
    });
  }

  // The first scattered row symbol under `id` (what the culprit reduces or reads).
  const std::string* row_symbol_under(ir::NodeId id) const {
    const ir::NodeId at =
        first_under(id, [&](ir::NodeId, const ir::Node& n) { return scattered_symbol(n.type, scattered) != nullptr; });
    return at < 0 ? nullptr : scattered_symbol(fn.nodes[size_t(at)].type, scattered);
  }
};

}  // namespace

std::optional<LossWarning> loss_not_a_row_mean_warning(const ir::Function& fn, ir::NodeId loss,
                                                       const ScatteredRows& scattered) {
  if (scattered.empty() || loss < 0 || size_t(loss) >= fn.nodes.size()) return std::nullopt;
  LossWalk walk{fn, scattered, std::vector<bool>(size_t(loss) + 1, false)};
  // Nodes are in topological order: one pass finds what depends on the scattered rows.
  for (size_t i = 0; i <= size_t(loss); ++i) {
    const ir::Node& n = fn.nodes[i];
    walk.depends[i] = scattered_symbol(n.type, scattered) != nullptr ||
                      std::any_of(n.operands.begin(), n.operands.end(), [&](ir::NodeId o) { return walk.depends[size_t(o)]; });
  }
  std::vector<ir::NodeId> next = {loss};
  std::vector<bool> seen(size_t(loss) + 1, false);
  while (!next.empty()) {
    const ir::NodeId id = next.back();
    next.pop_back();
    if (seen[size_t(id)] || !walk.dep(id)) continue;
    seen[size_t(id)] = true;
    std::optional<std::string> why = walk.breaks_form(id, next);
    if (!why) continue;
    const std::string* symbol = walk.row_symbol_under(walk.culprit);
    const auto rows = symbol ? scattered.find(*symbol) : scattered.begin();
    return LossWarning{fn.nodes[size_t(walk.culprit)].loc,
                       fmt::format("the loss is not a mean over the scattered rows ('{}', {}): it has {}. A training "
                                   "step averages the ranks' (and slices') gradients weighted by their rows, which is "
                                   "the gradient of a mean over all the step's rows of per-row losses (plus terms that "
                                   "do not depend on them), so this loss trains on a gradient that changes with the "
                                   "number of ranks and slices{}; write "
                                   "mean(...) over the rows (docs/training.md, \"Exact for any split of the step's "
                                   "rows\")", rows->first, rows->second, *why,
                                   why->find("sum") != std::string::npos ? " (a sum over the rows: divided by their count)"
                                                                         : "")};
  }
  return std::nullopt;
}

}  // namespace synk::dsl::checks
