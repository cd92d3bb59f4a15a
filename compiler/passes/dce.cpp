// Dead-node elimination: keeps only the nodes that some output or update depends on.
#include "compiler/passes/passes.h"

namespace synk::compiler {

ir::Function eliminate_dead_nodes(const ir::Function& fn) {
  std::vector<bool> live(fn.nodes.size(), false);
  for (const ir::Output& o : fn.outputs) live.at(size_t(o.node)) = true;
  for (const ir::Update& u : fn.updates) live.at(size_t(u.node)) = true;
  for (size_t i = fn.nodes.size(); i-- > 0;)
    if (live[i]) for (ir::NodeId operand : fn.nodes[i].operands) live.at(size_t(operand)) = true;
  size_t index = 0;
  return rebuild(fn, [&](ir::Function& out, ir::Node node) -> ir::NodeId {
    // Dead nodes still need an id for the renumbering; nothing live refers to it.
    bool keep = live[index++];
    return keep ? out.add(std::move(node)) : ir::NodeId(-1);
  });
}

}  // namespace synk::compiler
