// The gradient pass (grad.h). expand_gradients() copies each function node by node; at a Grad
// node it marks which earlier nodes depend on the variables through differentiable edges, then
// walks from the loss back to the variables in reverse topological order, asking the per-op
// rules (grad_rules.cpp) for each operand's adjoint and summing the adjoints of values used
// several times (fan-out). Only nodes that depend on a variable get adjoints, so inputs such as
// the data `x` in `x @ w` cost nothing.
#include "compiler/grad/grad.h"

#include <fmt/format.h>

#include "compiler/grad/grad_internal.h"
#include "compiler/grad/node_writer.h"
#include "ir/type_infer.h"

namespace synk::compiler {

using grad_detail::Backprop;
using grad_detail::NodeWriter;
using ir::NodeId;
using ir::Op;

namespace grad_detail {

bool is_differentiable_edge(const ir::Node& node, size_t operand) {
  switch (node.op) {
    case Op::Where: return operand != 0;   // the condition selects, it is not a value
    case Op::Take: return operand == 0;    // indices
    case Op::MaxPool2dBackward: return operand == 1;   // which cell a window chose is constant in x
    case Op::OneHot: case Op::ArgMax: case Op::Grad:
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::And: case Op::Or: case Op::Not:
    // Piecewise constant: derivative 0 wherever it exists, so no adjoint flows (like argmax).
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Sign: case Op::FloorDiv:
      return false;
    default: return true;
  }
}

}  // namespace grad_detail

namespace {

// Nodes 0..loss that are floats and depend on a target through differentiable edges.
std::vector<bool> depends_on_targets(const ir::Function& fn, NodeId loss,
                                     const std::vector<bool>& is_target) {
  std::vector<bool> active(size_t(loss) + 1, false);
  for (NodeId id = 0; id <= loss; ++id) {
    const ir::Node& n = fn.node(id);
    if (!ir::is_float(n.type.dtype)) continue;
    bool a = is_target[size_t(id)];
    for (size_t k = 0; !a && k < n.operands.size(); ++k)
      a = active[size_t(n.operands[k])] && grad_detail::is_differentiable_edge(n, k);
    active[size_t(id)] = a;
  }
  return active;
}

// Builds the gradient graph for one Grad node whose operands are already remapped into `fn`,
// appending it to `fn`; returns the node holding the result.
NodeId expand_one(const ir::Module& module, ir::Function& fn, const ir::Node& grad) {
  NodeWriter w(fn, grad.loc);
  const NodeId first_new = NodeId(fn.nodes.size());
  const NodeId loss = grad.operands.at(0);
  const size_t var_count = grad.operands.size() - 1;

  // Variable k's targets: every read of the same shared variable (the value at the start of the
  // call, however many times the program reads it) or input, or the node itself for any other operand.
  std::vector<std::vector<NodeId>> targets(var_count);
  std::vector<bool> is_target(size_t(loss) + 1, false);
  for (size_t k = 0; k < var_count; ++k) {
    const NodeId v = grad.operands[k + 1];
    const ir::Node& vn = fn.node(v);
    for (NodeId id = 0; id <= loss; ++id) {
      const ir::Node& n = fn.node(id);
      const bool same = id == v || ((vn.op == Op::SharedRead || vn.op == Op::Input) && n.op == vn.op &&
                                    n.attrs.index == vn.attrs.index);
      if (same) {
        targets[k].push_back(id);
        is_target[size_t(id)] = true;
      }
    }
  }

  const std::vector<bool> active = depends_on_targets(fn, loss, is_target);
  Backprop backprop(w, active);
  if (active[size_t(loss)]) backprop.run(loss, w.constant(1, fn.node(loss).type.dtype));

  std::vector<NodeId> grads;
  for (size_t k = 0; k < var_count; ++k) {
    const ir::TensorType var_type = fn.node(grad.operands[k + 1]).type;
    std::vector<NodeId> terms;
    for (NodeId t : targets[k])
      if (auto adj = backprop.adjoint(t)) terms.push_back(*adj);
    grads.push_back(terms.empty() ? w.zeros(var_type) : w.sum_all(terms));
  }
  // Readable --emit=ir-grad: each variable's gradient is `d_<variable>`, the result takes the
  // name of the user's `let` (the printer makes names unique).
  auto name = [&](NodeId id, const std::string& hint) {
    if (id >= first_new && fn.nodes[size_t(id)].name.empty()) fn.nodes[size_t(id)].name = hint;
  };
  name(grads.size() == 1 ? grads[0] : -1, grad.name);
  for (size_t k = 0; k < var_count; ++k) {
    const ir::Node& v = fn.node(grad.operands[k + 1]);
    if (v.op == Op::SharedRead) name(grads[k], "d_" + module.shareds.at(size_t(v.attrs.index)).name);
    if (v.op == Op::Input) name(grads[k], "d_" + fn.params.at(size_t(v.attrs.index)).name);
  }

  NodeId result;
  if (var_count == 1) {
    result = grads[0];
  } else {
    const ir::DType dtype = fn.node(loss).type.dtype;
    std::vector<NodeId> flat;
    for (NodeId g : grads) {
      const dsl::ElementCount count = dsl::element_count(w.type(g).shape);
      if (!count.symbols.empty())
        throw synk::LocatedUserError(grad.loc, fmt::format(
            "grad with several variables returns one flat vector and needs static shapes, found {}",
            ir::type_str(w.type(g))));
      flat.push_back(w.reshape(w.cast(g, dtype), {ir::Dim::fixed(count.fixed)}));
    }
    result = w.concat(flat, 0);
  }
  if (!(w.type(result) == grad.type))
    synk::internal_error(fmt::format("function '{}': the expanded gradient has type {} but grad(...) has {}",
                                    fn.name, ir::type_str(w.type(result)), ir::type_str(grad.type)));
  name(result, grad.name);
  return result;
}

ir::Function expand_function(const ir::Module& module, const ir::Function& in) {
  ir::Function out;
  out.name = in.name;
  out.params = in.params;
  out.loc = in.loc;
  std::vector<NodeId> remap(in.nodes.size(), -1);
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    ir::Node n = in.nodes[i];
    for (NodeId& o : n.operands) {
      SYNK_CHECK(o >= 0 && size_t(o) < i, fmt::format("function '{}' node {} uses {}", in.name, i, o));
      o = remap[size_t(o)];
    }
    if (n.op == Op::Grad) {
      SYNK_CHECK(n.operands.size() >= 2, "grad without variables");
      remap[i] = expand_one(module, out, n);
    } else {
      remap[i] = out.add(std::move(n));
    }
  }
  out.outputs = in.outputs;
  for (ir::Output& o : out.outputs) o.node = remap.at(size_t(o.node));
  out.updates = in.updates;
  for (ir::Update& u : out.updates) u.node = remap.at(size_t(u.node));
  return out;
}

bool function_has_gradients(const ir::Function& fn) {
  for (const ir::Node& n : fn.nodes)
    if (n.op == Op::Grad) return true;
  return false;
}

}  // namespace

bool has_gradients(const ir::Module& module) {
  for (const ir::Function& fn : module.functions)
    if (function_has_gradients(fn)) return true;
  return false;
}

ir::Function expand_gradients(const ir::Module& module, const ir::Function& fn) {
  return function_has_gradients(fn) ? expand_function(module, fn) : fn;
}

ir::Module expand_gradients(const ir::Module& module) {
  ir::Module out = module;
  for (ir::Function& fn : out.functions)
    if (function_has_gradients(fn)) fn = expand_function(module, fn);
  return out;
}

}  // namespace synk::compiler
