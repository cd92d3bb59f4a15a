// Pieces of the gradient pass shared by its driver (grad.cpp) and its per-op rules
// (grad_rules.cpp). Not part of the compiler's API.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/grad/node_writer.h"
#include "ir/ir.h"

namespace synk::compiler::grad_detail {

// False for operands no derivative flows through: where's condition, take's indices, and the
// operands of comparisons, logic, argmax and one_hot (whose results are not floats anyway).
bool is_differentiable_edge(const ir::Node& node, size_t operand);

// The reverse sweep over one function. `active[id]` says whether node `id` depends on a
// variable; only active nodes receive adjoints. Each adjoint has exactly its node's type.
class Backprop {
 public:
  Backprop(NodeWriter& writer, std::vector<bool> active)
      : w_(writer), active_(std::move(active)), contributions_(active_.size()), summed_(active_.size()) {}

  // Seeds the adjoint of `loss` with `seed` and propagates to every active node before it.
  void run(ir::NodeId loss, ir::NodeId seed);

  // The summed adjoint of `id`, or nullopt when nothing flowed into it.
  std::optional<ir::NodeId> adjoint(ir::NodeId id);

 private:
  // Applies the rule of node `id`'s op, given the adjoint `g` of its result.
  void propagate(ir::NodeId id, ir::NodeId g);
  void propagate_reduction(const ir::Node& n, ir::NodeId id, ir::NodeId g);
  void propagate_matmul(const ir::Node& n, ir::NodeId g);
  // Transpose, reshape, broadcast_to, concat, slice, take, and cumsum (linear along an axis like
  // them: its adjoint is another cumsum).
  void propagate_structure(const ir::Node& n, ir::NodeId id, ir::NodeId g);
  void propagate_cross_entropy(const ir::Node& n, ir::NodeId g);
  void propagate_pow(const ir::Node& n, ir::NodeId id, ir::NodeId g);
  void propagate_window(const ir::Node& n, ir::NodeId g);
  // log1p, expm1, softplus, sin, cos, %, binary_cross_entropy_with_logits.
  void propagate_math(const ir::Node& n, ir::NodeId id, ir::NodeId g);

  bool wants(const ir::Node& n, size_t operand) const;
  void give(const ir::Node& n, size_t operand, ir::NodeId value);
  // Sums `g` over the axes that numpy broadcasting added to `target`, then reshapes it.
  ir::NodeId unbroadcast(ir::NodeId g, const ir::TensorType& target);

  NodeWriter& w_;
  std::vector<bool> active_;
  std::vector<std::vector<ir::NodeId>> contributions_;
  std::vector<std::optional<ir::NodeId>> summed_;
};

}  // namespace synk::compiler::grad_detail
