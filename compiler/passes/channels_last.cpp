// The channels-last pass (CPU): convolutions run on NHWC activations, and the layout changes
// this needs are pushed through the layers between convolutions until they meet and cancel.
//
// Only functions where one convolution feeds another through pointwise ops, reductions and
// broadcasts are rewritten (has_chained_convolutions, below).
//
// Why: oneDNN's direct convolutions read and write NHWC as it is, but NCHW only through a reorder
// to their blocked layout and back, and those reorders were ~20% of a ResNet-20 training step
// (docs/performance/models.md, "Channels last"). The approach is TVM's ConvertLayout: each f32
// Conv2d* becomes its channels_last form between two explicit Transposes, NCHW -> NHWC before and
// NHWC -> NCHW after; then, in the same walk over the nodes (operands before users), a node whose
// operand is such an NHWC -> NCHW Transpose is rebuilt on the NHWC value with the Transpose moved
// after it:
//   - pointwise ops (every other operand is transposed to NHWC too: a scalar stays, a smaller
//     rank is first reshaped to rank 4, as numpy broadcasting aligns it, and a BroadcastTo
//     broadcasts the NHWC form of its source);
//   - reductions (the axes are renumbered; keepdims results stay rank 4, others get the
//     Transpose, if any, that restores their axis order);
//   - BroadcastTo to rank 4.
// A Transpose that meets its inverse (the next convolution's input) composes to nothing in
// simplify; one that has no user left is dropped by dead-code elimination. What remains is a
// Transpose where an NHWC value meets an op that needs NCHW (a pool, a matmul, an output), where
// it is one copy of that value. The values, and so every result, are the same as without the pass
// up to the rounding of oneDNN's kernels (different kernels, the same sums in another order).
#include <algorithm>
#include <numeric>

#include "compiler/passes/passes.h"
#include "ir/window.h"

namespace synk::compiler {
namespace {

using ir::Node;
using ir::NodeId;
using ir::Op;
using Perm = std::vector<int64_t>;

const Perm& kToNchw = ir::kNhwcToNchw;
const Perm& kToNhwc = ir::kNchwToNhwc;

bool is_to_nchw(const Node& n) { return n.op == Op::Transpose && n.attrs.perm == kToNchw; }

NodeId add_like(ir::Function& out, const Node& like, Op op, ir::TensorType type, std::vector<NodeId> operands,
                ir::Attrs attrs = {}) {
  Node n;
  n.op = op;
  n.type = std::move(type);
  n.operands = std::move(operands);
  n.attrs = std::move(attrs);
  n.name = like.name;
  n.loc = like.loc;
  return out.add(std::move(n));
}

// x transposed by perm (a Transpose of a Transpose is left for simplify to compose).
NodeId transpose(ir::Function& out, NodeId x, const Perm& perm, const Node& like) {
  ir::Attrs attrs;
  attrs.perm = perm;
  return add_like(out, like, Op::Transpose, ir::transposed_type(out.node(x).type, perm), {x}, attrs);
}

// The operand of a pointwise op with an NHWC result: its NHWC form (scalars as they are).
NodeId to_nhwc_operand(ir::Function& out, NodeId x, const Node& like) {
  const ir::TensorType t = out.node(x).type;
  if (t.rank() == 0) return x;
  if (t.rank() == 4 && out.node(x).op == Op::BroadcastTo) {   // broadcast the NHWC form of its source
    const NodeId source = to_nhwc_operand(out, out.node(x).operands[0], like);
    return add_like(out, like, Op::BroadcastTo, ir::transposed_type(t, kToNhwc), {source});
  }
  if (t.rank() < 4) {
    ir::TensorType four{t.dtype, std::vector<ir::Dim>(4 - t.rank(), ir::Dim::fixed(1))};
    four.shape.insert(four.shape.end(), t.shape.begin(), t.shape.end());
    x = add_like(out, like, Op::Reshape, four, {x});
  }
  return transpose(out, x, kToNhwc, like);
}

bool convertible(const Node& node) {
  if (!ir::is_window_op(node.op) || node.op > Op::Conv2dBackwardWeights) return false;
  return node.type.dtype == ir::DType::F32 && !node.attrs.window.channels_last && node.attrs.window.groups == 1;
}

NodeId convert_convolution(ir::Function& out, Node node) {
  node.attrs.window.channels_last = true;
  const bool weights = node.op == Op::Conv2dBackwardWeights;
  node.operands[0] = transpose(out, node.operands[0], kToNhwc, node);
  if (weights) node.operands[1] = transpose(out, node.operands[1], kToNhwc, node);
  if (weights) return out.add(std::move(node));
  const Node like = node;
  node.type = ir::transposed_type(node.type, kToNhwc);
  NodeId nhwc = out.add(std::move(node));
  return transpose(out, nhwc, kToNchw, like);
}

bool any_operand_to_nchw(const ir::Function& out, const Node& node) {
  return std::any_of(node.operands.begin(), node.operands.end(),
                     [&](NodeId o) { return is_to_nchw(out.node(o)); });
}

NodeId sink_through_pointwise(ir::Function& out, Node node) {
  for (NodeId& o : node.operands) o = to_nhwc_operand(out, o, node);
  const Node like = node;
  node.type = ir::transposed_type(node.type, kToNhwc);
  NodeId nhwc = out.add(std::move(node));
  return transpose(out, nhwc, kToNchw, like);
}

NodeId sink_through_reduction(ir::Function& out, Node node) {
  const NodeId source = out.node(node.operands[0]).operands[0];
  std::vector<bool> reduced(4, false);
  for (int64_t a : node.attrs.axes) reduced[size_t(a)] = true;
  Perm axes, kept_sources;
  for (size_t i = 0; i < 4; ++i) {
    if (reduced[i]) axes.push_back(kToNchw[i]);
    else kept_sources.push_back(kToNchw[i]);
  }
  std::sort(axes.begin(), axes.end());
  const Node like = node;
  ir::TensorType nhwc_type = out.node(source).type;
  if (node.attrs.keepdims) {
    for (int64_t a : axes) nhwc_type.shape[size_t(a)] = ir::Dim::fixed(1);
  } else {
    nhwc_type.shape.clear();
    for (size_t a = 0; a < 4; ++a)
      if (!std::binary_search(axes.begin(), axes.end(), int64_t(a)))
        nhwc_type.shape.push_back(out.node(source).type.shape[a]);
  }
  node.operands = {source};
  node.attrs.axes = axes;
  node.type = nhwc_type;
  const bool keepdims = node.attrs.keepdims;
  NodeId result = out.add(std::move(node));
  if (keepdims) return transpose(out, result, kToNchw, like);
  // Kept axis j of the original result is source axis kept_sources[j], at its rank among them.
  Perm sorted = kept_sources, restore;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t s : kept_sources) restore.push_back(std::find(sorted.begin(), sorted.end(), s) - sorted.begin());
  Perm identity(restore.size());
  std::iota(identity.begin(), identity.end(), 0);
  return restore == identity ? result : transpose(out, result, restore, like);
}

NodeId channels_last_node(ir::Function& out, Node node) {
  if (convertible(node)) return convert_convolution(out, std::move(node));
  if (node.type.rank() == 4 && ir::is_pointwise(node.op) && any_operand_to_nchw(out, node))
    return sink_through_pointwise(out, std::move(node));
  const bool reduction = node.op >= Op::ReduceSum && node.op <= Op::ReduceProd;
  if (reduction && is_to_nchw(out.node(node.operands.at(0)))) return sink_through_reduction(out, std::move(node));
  if (node.op == Op::BroadcastTo && node.type.rank() == 4 && is_to_nchw(out.node(node.operands.at(0)))) {
    const Node like = node;
    node.operands = {out.node(node.operands[0]).operands[0]};
    node.type = ir::transposed_type(node.type, kToNhwc);
    NodeId nhwc = out.add(std::move(node));
    return transpose(out, nhwc, kToNchw, like);
  }
  return out.add(std::move(node));
}

// Whether some convolution's input is computed from another convolution's output by pointwise
// ops, reductions and broadcasts alone (ResNet's blocks). Where pools or other NCHW ops stand
// between every two convolutions (the Fashion-MNIST CNN), the transposes at each of them cost more
// than the reorders they save (1.10-1.18x the epoch time measured), so the pass leaves such
// functions as they are.
bool has_chained_convolutions(const ir::Function& fn) {
  std::vector<NodeId> stack;
  for (const Node& n : fn.nodes)
    if (n.op == Op::Conv2d && convertible(n)) stack.push_back(n.operands[0]);
  std::vector<bool> seen(fn.nodes.size(), false);
  while (!stack.empty()) {
    const NodeId id = stack.back();
    stack.pop_back();
    if (seen[size_t(id)]) continue;
    seen[size_t(id)] = true;
    const Node& n = fn.node(id);
    if (n.op == Op::Conv2d) return true;
    const bool reduction = n.op >= Op::ReduceSum && n.op <= Op::ReduceProd;
    const bool passes = ir::is_pointwise(n.op) || n.op == Op::BroadcastTo || reduction;
    if (passes) stack.insert(stack.end(), n.operands.begin(), n.operands.end());
  }
  return false;
}

}  // namespace

ir::Function convert_to_channels_last(const ir::Function& fn) {
  if (!has_chained_convolutions(fn)) return fn;
  return rebuild(fn, channels_last_node);
}

}  // namespace synk::compiler
