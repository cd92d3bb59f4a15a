// Helpers shared by the IR passes (passes.h): rebuilding a function node by node with operands
// renumbered, and reading scalar constants.
#include <cstring>

#include "compiler/passes/passes.h"

namespace synk::compiler {

ir::Function rebuild(const ir::Function& fn,
                     const std::function<ir::NodeId(ir::Function& out, ir::Node node)>& rewrite) {
  ir::Function out;
  out.name = fn.name;
  out.params = fn.params;
  out.loc = fn.loc;
  std::vector<ir::NodeId> new_id(fn.nodes.size(), -1);
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    ir::Node node = fn.nodes[i];
    for (ir::NodeId& operand : node.operands) operand = new_id.at(size_t(operand));
    new_id[i] = rewrite(out, std::move(node));
  }
  out.outputs = fn.outputs;
  for (ir::Output& o : out.outputs) o.node = new_id.at(size_t(o.node));
  out.updates = fn.updates;
  for (ir::Update& u : out.updates) u.node = new_id.at(size_t(u.node));
  return out;
}

bool is_scalar_constant(const ir::Node& n) { return n.op == ir::Op::Constant && n.type.rank() == 0; }

double constant_as_double(const ir::Node& n) {
  return ir::is_float(n.type.dtype) ? n.attrs.value : double(n.attrs.ivalue);
}

bool constant_equals(const ir::Node& n, double v) {
  return is_scalar_constant(n) && constant_as_double(n) == v;
}

NodeClass classify(ir::Op op) {
  using ir::Op;
  switch (op) {
    case Op::Input: case Op::SharedRead: return NodeClass::Leaf;
    case Op::Constant: return NodeClass::Const;
    case Op::Transpose: case Op::Slice: case Op::BroadcastTo: return NodeClass::View;
    case Op::Reshape: return NodeClass::Alias;
    default: return ir::is_pointwise(op) ? NodeClass::Pointwise : NodeClass::Opaque;
  }
}

bool small_static(const ir::Shape& shape) {
  int64_t elements = 1;
  for (const ir::Dim& d : shape) {
    if (d.is_symbolic()) return false;
    elements *= d.size;
  }
  return elements <= kCachedBroadcastElements;
}

}  // namespace synk::compiler
