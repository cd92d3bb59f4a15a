// Simplification: algebraic identities that remove work without changing any result (see
// passes.h for the list and the one accepted difference, the sign of -0 + 0).
#include "compiler/passes/passes.h"

namespace synk::compiler {
namespace {

using ir::Node;
using ir::NodeId;
using ir::Op;

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) if (perm[i] != int64_t(i)) return false;
  return true;
}

// Whether transposing `t` by `perm` keeps every axis that is not statically 1 in its order, so
// that the elements stay where they are in memory (NHWC <-> NCHW with C = 1, say).
bool moves_only_unit_axes(const std::vector<int64_t>& perm, const ir::TensorType& t) {
  int64_t last = -1;
  for (int64_t p : perm) {
    const ir::Dim& d = t.shape.at(size_t(p));
    if (!d.is_symbolic() && d.size == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

// `node` is replaced by the value `id`; where `id` is narrower (it was broadcast against a
// constant), broadcast it explicitly so the type stays exactly the node's.
NodeId replace_with(ir::Function& out, const Node& node, NodeId id) {
  const Node& repl = out.node(id);
  if (repl.type == node.type) return id;
  if (repl.type.dtype != node.type.dtype) return out.add(node);   // not an identity after all
  Node b;
  b.op = Op::BroadcastTo;
  b.type = node.type;
  b.operands = {id};
  b.name = node.name;
  b.loc = node.loc;
  return out.add(std::move(b));
}

NodeId simplify_node(ir::Function& out, Node node) {
  auto operand = [&](size_t i) -> const Node& { return out.node(node.operands.at(i)); };
  auto is_const = [&](size_t i, double v) { return constant_equals(operand(i), v); };
  switch (node.op) {
    case Op::Mul:
      if (is_const(1, 1)) return replace_with(out, node, node.operands[0]);
      if (is_const(0, 1)) return replace_with(out, node, node.operands[1]);
      break;
    case Op::Add:
      if (is_const(1, 0)) return replace_with(out, node, node.operands[0]);
      if (is_const(0, 0)) return replace_with(out, node, node.operands[1]);
      break;
    case Op::Sub:
      if (is_const(1, 0)) return replace_with(out, node, node.operands[0]);
      break;
    case Op::Div:
      if (is_const(1, 1)) return replace_with(out, node, node.operands[0]);
      break;
    case Op::Pow:
      if (is_const(1, 1)) return replace_with(out, node, node.operands[0]);
      if (is_const(1, 2) && operand(0).type == node.type) {
        node.op = Op::Mul;
        node.operands = {node.operands[0], node.operands[0]};
      }
      break;
    case Op::Where:
      if (is_scalar_constant(operand(0)))
        return replace_with(out, node, node.operands[operand(0).attrs.ivalue ? 1 : 2]);
      break;
    case Op::Neg:
    case Op::Not:
      if (operand(0).op == node.op) return replace_with(out, node, operand(0).operands[0]);
      break;
    case Op::Cast:
      if (operand(0).type.dtype == node.type.dtype) return replace_with(out, node, node.operands[0]);
      break;
    case Op::Reshape:
    case Op::BroadcastTo:
      if (node.op == Op::Reshape && operand(0).op == Op::Reshape) node.operands = {operand(0).operands[0]};
      if (operand(0).type == node.type) return node.operands[0];
      break;
    case Op::Slice: {
      const ir::Dim& d = operand(0).type.shape.at(size_t(node.attrs.axis));
      if (node.attrs.start == 0 && !d.is_symbolic() && node.attrs.stop == d.size) return node.operands[0];
      break;
    }
    case Op::Transpose:
      if (is_identity_perm(node.attrs.perm)) return node.operands[0];
      if (operand(0).op == Op::Transpose) {
        // result dim i = operand dim p[i] = source dim q[p[i]].
        const std::vector<int64_t>& q = operand(0).attrs.perm;
        std::vector<int64_t> composed;
        for (int64_t p : node.attrs.perm) composed.push_back(q.at(size_t(p)));
        NodeId source = operand(0).operands[0];
        if (is_identity_perm(composed)) return source;
        node.attrs.perm = composed;
        node.operands = {source};
      }
      if (moves_only_unit_axes(node.attrs.perm, operand(0).type)) {   // the same memory: a view
        node.op = Op::Reshape;
        node.attrs.perm.clear();
        return simplify_node(out, std::move(node));   // and the reshape rules above
      }
      break;
    default:
      break;
  }
  return out.add(std::move(node));
}

}  // namespace

ir::Function simplify(const ir::Function& fn) { return rebuild(fn, simplify_node); }

}  // namespace synk::compiler
