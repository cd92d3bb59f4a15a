// The passes over the Graph IR that run before fusion, one per file (pass_*.cpp). Each takes a
// function and returns a rewritten one that computes the same outputs and updates; none changes
// params, outputs' names or modes, or the module. lower.cpp runs them in order.
#pragma once

#include <functional>
#include <vector>

#include "compiler/passes/kernel_plan.h"
#include "ir/ir.h"

namespace synk::compiler {

// Algebraic identities that hold for every input, NaN and infinity included unless noted:
// x*1, 1*x, x/1, x+0, 0+x, x-0 (float: turns -0+0 into -0; accepted), x**1 -> x; x**2 -> x*x;
// neg(neg(x)), not(not(x)) -> x; where with a constant condition -> that branch; cast to the
// same dtype, reshape/broadcast to the same shape, a full slice, an identity transpose -> x;
// transpose(transpose(x)) and reshape(reshape(x)) compose; a transpose that moves only axes of
// size 1 is a reshape. Where the identity's result is wider
// than x (x broadcast by the constant), x is broadcast explicitly.
ir::Function simplify(const ir::Function& fn);

// The CPU backend's layout pass (channels_last.cpp): f32 convolutions of one group run on NHWC
// activations (ir::Window2d::channels_last), with the Transposes this needs pushed through the
// pointwise ops, reductions and broadcasts between them; simplify then cancels the pairs that meet.
// Functions where no convolution feeds another through such ops alone are returned unchanged.
ir::Function convert_to_channels_last(const ir::Function& fn);

// Evaluates pointwise nodes whose operands are all scalar constants, with the rounding of the
// result's dtype (f32 results are rounded to float, integers wrap).
ir::Function fold_constants(const ir::Function& fn);

// Merges nodes with the same op, type, operands and attributes (constants by bit pattern).
ir::Function eliminate_common_subexpressions(const ir::Function& fn);

// Reassociation (distribute_sums.cpp): a float sum whose operand is a tree of add, sub, neg and
// products with factors constant along the summed axes becomes the same tree over the sums of its
// leaves, when a node of the tree is read elsewhere (so the operand need no longer be written for
// the sum) and at most one leaf's sum is not already computed. Batch norm's backward loses three
// passes over the activation. The sum's last bits change (a different order of additions).
ir::Function distribute_sums(const ir::Function& fn);
// Drops nodes that no output or update depends on.
ir::Function eliminate_dead_nodes(const ir::Function& fn);

// Fusion: groups the nodes into kernels (see kernel_plan.h and docs/compiler.md for the rules)
// and assigns every value that must exist in memory a buffer. Throws synk::UserError for ops the
// CPU code generator does not handle (grad before the gradient pass exists).
struct FusionOptions {
  bool fuse = true;   // false: every pointwise op and view is its own kernel (benchmarks, debugging)
  // Sums over the same rows into a short static row (batch norm's per-channel sums), independent
  // of each other and reading a common buffer, become one loop with several outputs. Only the
  // CPU code generator emits such kernels.
  bool sibling_column_sums = false;
};
KernelPlan fuse_kernels(const ir::Module& module, const ir::Function& fn, const FusionOptions& options = {});

// Shared by the passes: rebuilds a function node by node. `rewrite` sees each old node with its
// operands already renumbered and returns the id of the node (in `out`) that replaces it: a fresh
// add() or an existing id.
ir::Function rebuild(const ir::Function& fn,
                     const std::function<ir::NodeId(ir::Function& out, ir::Node node)>& rewrite);

// How fusion sees a node (fusion.cpp, rule 1): arguments and shared values (Leaf) and every
// non-pointwise op (Opaque: reductions, matmul, library calls, ...) are always in memory; views
// are index arithmetic on their operand; a reshape aliases its operand's buffer.
enum class NodeClass { Leaf, Const, Pointwise, View, Alias, Opaque };
NodeClass classify(ir::Op op);
// Per-channel statistics and other static values of at most this many elements stay in cache
// when broadcast over an activation: fusion recomputes arithmetic that reads one activation and
// such values (rule 3), and distribute_sums adds a sum only of such arithmetic.
inline constexpr int64_t kCachedBroadcastElements = 4096;
bool small_static(const ir::Shape& shape);   // static, at most kCachedBroadcastElements elements
// Scalar constant helpers used by several passes.
bool is_scalar_constant(const ir::Node& n);
double constant_as_double(const ir::Node& n);   // value, or ivalue for integer/bool dtypes
bool constant_equals(const ir::Node& n, double v);

}  // namespace synk::compiler
