// Gradient probes for the fuzzers' helpers (compiler_grad_fd_one_fuzz, compiler_cpu_diff_one_fuzz):
// a copy of a function whose outputs become `loss = sum(o * (o + 1.37))` of one of its values `o`
// and `grad(loss, v)` for a variable `v` that `o` reads (a shared variable or an input). The fd
// helper checks such probes against central differences; the diff helper compiles them and
// compares the generated gradient code with the reference evaluator.
#pragma once

#include <set>
#include <utility>
#include <vector>

#include "ir/ir.h"

namespace synk::compiler::testing {

// `m` in f64: every f32, f16 and bf16 type (of variables, inputs and values) widened.
inline void widen(ir::Module& m) {
  auto widen_type = [](ir::TensorType& t) {
    if (ir::is_float(t.dtype)) t.dtype = ir::DType::F64;
  };
  for (ir::SharedVar& s : m.shareds) widen_type(s.type);
  for (ir::Function& fn : m.functions) {
    for (ir::Param& p : fn.params) widen_type(p.type);
    for (ir::Node& n : fn.nodes) widen_type(n.type);
  }
}

// A variable of a probe: an index into Module::shareds, or into Function::params when `input`.
struct ProbeVariable {
  bool input = false;
  int64_t index = -1;
  friend auto operator<=>(const ProbeVariable&, const ProbeVariable&) = default;
};

// The float shared variables and inputs node `root` reads, directly or through its operands.
inline std::set<ProbeVariable> float_variables_read(const ir::Module& m, const ir::Function& fn, ir::NodeId root) {
  std::set<ProbeVariable> out;
  std::vector<bool> seen(fn.nodes.size());
  std::vector<ir::NodeId> stack{root};
  while (!stack.empty()) {
    const ir::NodeId id = stack.back();
    stack.pop_back();
    if (seen[size_t(id)]) continue;
    seen[size_t(id)] = true;
    const ir::Node& n = fn.node(id);
    if (n.op == ir::Op::SharedRead && ir::is_float(m.shareds.at(size_t(n.attrs.index)).type.dtype))
      out.insert({false, n.attrs.index});
    if (n.op == ir::Op::Input && ir::is_float(n.type.dtype)) out.insert({true, n.attrs.index});
    for (ir::NodeId o : n.operands) stack.push_back(o);
  }
  return out;
}

// `fn`'s outputs and updates as probe roots: the float ones.
inline std::vector<ir::NodeId> float_roots(const ir::Function& fn) {
  std::vector<ir::NodeId> roots;
  for (const ir::Output& o : fn.outputs) roots.push_back(o.node);
  for (const ir::Update& u : fn.updates) roots.push_back(u.node);
  std::erase_if(roots, [&](ir::NodeId r) { return !ir::is_float(fn.node(r).type.dtype); });
  return roots;
}

// `fn` with its outputs replaced by the probe's, `fd_loss` and `fd_grad`, and no updates.
inline ir::Function probe_of(const ir::Module& m, const ir::Function& fn, ir::NodeId o, ProbeVariable v) {
  ir::Function p = fn;
  p.outputs.clear();
  p.updates.clear();
  const ir::TensorType of_o = fn.node(o).type;
  const ir::TensorType scalar{of_o.dtype, {}};
  ir::Node c{.op = ir::Op::Constant, .type = scalar};
  c.attrs.value = 1.37;
  const ir::NodeId ci = p.add(c);
  const ir::NodeId shifted = p.add(ir::Node{.op = ir::Op::Add, .type = of_o, .operands = {o, ci}});
  ir::NodeId loss = p.add(ir::Node{.op = ir::Op::Mul, .type = of_o, .operands = {o, shifted}});
  if (!of_o.shape.empty()) {
    ir::Node sum{.op = ir::Op::ReduceSum, .type = scalar, .operands = {loss}};
    for (int64_t a = 0; a < int64_t(of_o.shape.size()); ++a) sum.attrs.axes.push_back(a);
    loss = p.add(sum);
  }
  const ir::TensorType var_type = v.input ? fn.params.at(size_t(v.index)).type : m.shareds.at(size_t(v.index)).type;
  ir::Node read{.op = v.input ? ir::Op::Input : ir::Op::SharedRead, .type = var_type};
  read.attrs.index = v.index;
  const ir::NodeId ri = p.add(read);
  const ir::NodeId g = p.add(ir::Node{.op = ir::Op::Grad, .type = var_type, .operands = {loss, ri}});
  p.outputs.push_back({.name = "fd_loss", .node = loss});
  p.outputs.push_back({.name = "fd_grad", .node = g});
  return p;
}

}  // namespace synk::compiler::testing
