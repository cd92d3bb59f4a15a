// Constant folding: a pointwise node whose operands are all scalar constants becomes a scalar
// constant, computed by the same scalar semantics the generated code follows.
#include "compiler/passes/passes.h"
#include "compiler/codegen/scalar_semantics.h"

namespace synk::compiler {

ir::Function fold_constants(const ir::Function& fn) {
  return rebuild(fn, [](ir::Function& out, ir::Node node) -> ir::NodeId {
    if (!ir::is_pointwise(node.op) || node.type.rank() != 0 || node.operands.empty()) return out.add(std::move(node));
    std::vector<Scalar> args;
    for (ir::NodeId id : node.operands) {
      const ir::Node& operand = out.node(id);
      if (!is_scalar_constant(operand)) return out.add(std::move(node));
      args.push_back(make_scalar(operand.type.dtype, operand.attrs.value, operand.attrs.ivalue));
    }
    std::optional<Scalar> value = eval_pointwise(node.op, node.type.dtype, args);
    if (!value) return out.add(std::move(node));
    ir::Node folded;
    folded.op = ir::Op::Constant;
    folded.type = node.type;
    folded.attrs.value = ir::is_float(node.type.dtype) ? value->f : 0.0;
    folded.attrs.ivalue = ir::is_float(node.type.dtype) ? 0 : value->i;
    folded.name = node.name;
    folded.loc = node.loc;
    return out.add(std::move(folded));
  });
}

}  // namespace synk::compiler
