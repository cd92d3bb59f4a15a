// The gradient pass: reverse-mode differentiation on the Graph IR. Every `grad(loss, v1, ..., vk)`
// node (Op::Grad) is replaced by the adjoint graph of `loss` built from ordinary IR ops, so that
// every later stage (simplification, fusion, code generation, the reference evaluator) treats
// gradient code exactly like forward code. It is the first pass of the compiler's pipeline
// (`lower()`), and `synkc --emit=ir-grad` prints its result. The rules for every op, the tie rule
// for max/min and the layout of the flat gradient vector are documented in docs/training.md.
#pragma once

#include "ir/ir.h"

namespace synk::compiler {

// Returns `module` with every Op::Grad node expanded; nothing else changes (node ids shift, and
// forward nodes the gradient no longer needs are left for dead-code elimination).
//
// - One variable: the result has the variable's type. Several: one flat rank-1 vector of the
//   loss's dtype holding each variable's gradient flattened row-major, concatenated in the
//   order the variables are listed.
// - The gradient with respect to a shared variable sums the adjoints of every read of it.
// - A variable the loss does not depend on (or depends on only through non-differentiable
//   paths: comparisons, argmax, integer casts, one_hot, where's condition, take's indices)
//   gets zeros.
// - A grad inside the loss of another grad is expanded first, so second derivatives work.
//
// Throws synk::UserError for a program whose gradient cannot be expressed in the IR (take from
// a table with a symbolic number of rows, cross_entropy with class-index labels and a symbolic
// number of classes), naming the construct and its source line.
ir::Module expand_gradients(const ir::Module& module);

// The same for one function of `module` (what lower() runs first); `fn` itself when it has no
// grad.
ir::Function expand_gradients(const ir::Module& module, const ir::Function& fn);

// True when some function of `module` still contains an Op::Grad node.
bool has_gradients(const ir::Module& module);

}  // namespace synk::compiler
