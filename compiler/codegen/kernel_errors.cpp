// A failed kernel's user error (see kernel_errors.h).
#include "compiler/codegen/kernel_errors.h"

#include <fmt/format.h>

#include "compiler/codegen/kernel_abi.h"
#include "base/diagnostics.h"
#include "base/errors.h"

namespace synk::compiler {

std::string source_position(const ir::Node& node) {
  return node.loc.valid() ? fmt::format(" (line {}, column {})", node.loc.line, node.loc.col) : "";
}

namespace {

// Whether `node` is a vector along the scattered axis (so an element's position is its row): its
// size is the symbol that leads a scattered parameter's shape. A bad value there is reported with
// ScatteredRowError, numbered within this run's rows, which the call engine renumbers.
bool along_scattered_rows(const ir::Function& graph, const ir::Node& node) {
  if (node.type.shape.size() != 1 || !node.type.shape[0].is_symbolic()) return false;
  for (const ir::Param& p : graph.params)
    if (p.role == ir::Role::Scatter && !p.type.shape.empty() && p.type.shape[0] == node.type.shape[0]) return true;
  return false;
}

}  // namespace

void throw_kernel_failure(const KernelPlan& plan, const Kernel& kernel, int64_t code, int64_t position, int64_t limit,
                          const std::function<int64_t(ir::NodeId)>& value_of, const std::string& symbol) {
  const ir::Function& graph = plan.function;
  const ir::Node& root = graph.node(kernel.roots.at(0));
  const std::string op = root.op == ir::Op::OneHot && root.attrs.of_cross_entropy ? "cross_entropy"
                                                                                  : ir::op_name(root.op);
  const std::string prefix = fmt::format("function '{}': {}{}", graph.name, op, source_position(root));
  switch (KernelError(code)) {
    case KernelError::IndexOutOfRange: {
      ir::NodeId index = root.operands.at(1);
      std::string before = fmt::format("{}: index {} at ", prefix, value_of(index));
      std::string after = fmt::format(" is out of range for an axis of size {}", limit);
      if (along_scattered_rows(graph, graph.node(index))) throw ScatteredRowError(before, position, after);
      throw synk::UserError(fmt::format("{}position {}{}", before, position, after));
    }
    case KernelError::LabelOutOfRange: {
      ir::NodeId labels = root.op == ir::Op::OneHot ? root.operands.at(0) : root.operands.at(1);
      std::string before = fmt::format("{}: label {} in ", prefix, value_of(labels));
      std::string after = fmt::format(" is out of range [0, {})", limit);
      if (along_scattered_rows(graph, graph.node(labels))) throw ScatteredRowError(before, position, after);
      throw synk::UserError(fmt::format("{}row {}{}", before, position, after));
    }
    case KernelError::EmptyReduction:
      throw synk::UserError(fmt::format("{}: cannot reduce over an empty axis; {} has no identity", prefix, op));
    case KernelError::CastOutOfRange:
      // Name the cast rather than the kernel's root: the first float-to-integer cast in it.
      for (ir::NodeId id : kernel.nodes) {
        const ir::Node& n = graph.node(id);
        if (n.op != ir::Op::Cast || !ir::is_integer(n.type.dtype)) continue;
        if (!ir::is_float(graph.node(n.operands[0]).type.dtype)) continue;
        throw synk::UserError(fmt::format("function '{}': cast{}: a value (NaN, infinite or out of range) cannot be "
                                         "converted to {}", graph.name, source_position(n), ir::dtype_name(n.type.dtype)));
      }
      throw synk::UserError(fmt::format("{}: a value (NaN, infinite or out of range) cannot be converted to an integer",
                                       prefix));
    case KernelError::DivisionByZero:
      // Name the division rather than the kernel's root: the first integer one in the kernel.
      for (ir::NodeId id : kernel.nodes) {
        const ir::Node& n = graph.node(id);
        if ((n.op != ir::Op::Mod && n.op != ir::Op::FloorDiv) || ir::is_float(n.type.dtype)) continue;
        throw synk::UserError(fmt::format("function '{}': {}{}: integer division by zero", graph.name,
                                         n.op == ir::Op::Mod ? "'%'" : "floor_divide", source_position(n)));
      }
      throw synk::UserError(fmt::format("{}: integer division by zero", prefix));
    case KernelError::Ok:
      break;
  }
  synk::internal_error(fmt::format("{}: kernel {} reported unknown failure code {}", prefix, symbol, code));
}

}  // namespace synk::compiler
