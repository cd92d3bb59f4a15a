// The C++ expression builder's operations: one constructor per operation of the language, each
// the counterpart of sema's handler for the same call (dsl/sema_expr.cpp, dsl/sema_builtins.cpp):
// the same literal rules, the same implicit casts, the same normalized attributes and the same
// checks, with messages that name the operation and the operand types. Type inference itself
// is infer_type's (ir/type_infer.h), reached through make_op.
#include <algorithm>

#include <fmt/format.h>

#include "dsl/builder.h"
#include "dsl/builder_internal.h"
#include "dsl/checks.h"
#include "ir/type_infer.h"

namespace synk::dsl {

using builder_detail::common_dtype;
using builder_detail::describe;
using builder_detail::immediate;
using builder_detail::ExprNode;
using builder_detail::LiteralKind;
using builder_detail::make_op;
using builder_detail::Operand;
using builder_detail::require;
using builder_detail::target_shape;
using ir::DType;
using ir::Op;

namespace {

using NodePtr = std::shared_ptr<const ExprNode>;

bool is_literal(const NodePtr& n) { return n->kind == ExprNode::Kind::Literal; }

// Converted to `dtype` after every operand of the op has been evaluated.
Operand deferred(const NodePtr& n, DType dtype) { return Operand{n, false, dtype}; }

std::string operand_types(const std::vector<NodePtr>& xs) {
  std::vector<std::string> parts;
  for (const NodePtr& x : xs) parts.push_back(describe(*x));
  return fmt::format("{}", fmt::join(parts, " and "));
}

void require_supported(DType dtype, const char* op) {
  if (std::optional<std::string> why = checks::reserved_dtype_error(dtype))
    throw UserError(fmt::format("{}: {}", op, *why));
}

// A call such as exp(x) (sema's call_unary).
Expr call_unary(Op op, const Expr& x_expr) {
  const char* name = ir::op_name(op);
  const NodePtr& x = require(x_expr, name);
  const bool float_only = op != Op::Abs && op != Op::Neg && op != Op::Relu && op != Op::Floor && op != Op::Ceil &&
                          op != Op::Round && op != Op::Sign;
  DType dtype = x->type.dtype;
  if (is_literal(x) && float_only) dtype = builder_detail::weak_dtype(DType::F32, x->literal);
  if (is_literal(x)) builder_detail::check_literal_fits(*x, dtype);
  if (float_only && !ir::is_float(dtype))
    throw UserError(fmt::format("{} needs a floating operand but the operand is {}; use {}(cast(x, f32))", name,
                                describe(*x), name));
  if (!float_only && dtype == DType::Bool)
    throw UserError(fmt::format("{} needs a numeric operand but the operand is {}", name, describe(*x)));
  return make_op(op, {deferred(x, dtype)}, {});
}

// A binary operator or call with promotion (sema's binary / call_binary / pointwise).
Expr pointwise(Op op, const char* spelling, const Expr& a_expr, const Expr& b_expr) {
  const NodePtr& a = require(a_expr, spelling);
  const NodePtr& b = require(b_expr, spelling);
  if (op == Op::And || op == Op::Or) {
    for (const NodePtr& v : {a, b})
      if (v->type.dtype != DType::Bool)
        throw UserError(fmt::format("'{}' needs bool operands but the {} operand is {}", spelling,
                                    v == a ? "left" : "right", describe(*v)));
  }
  const DType dtype = common_dtype({a.get(), b.get()});
  if (op == Op::Div && !ir::is_float(dtype))
    throw UserError(fmt::format("'/' needs floating operands but they are {}; use cast(x, f32)",
                                operand_types({a, b})));
  return make_op(op, {deferred(a, dtype), deferred(b, dtype)}, {});
}

std::vector<int64_t> normalized_axes(const std::vector<int64_t>& axes, const NodePtr& x, const char* op) {
  std::string why;
  auto normalized = normalize_axes(axes, x->type.rank(), &why);
  if (!normalized) throw UserError(fmt::format("{} in {}: the operand has type {}", why, op, describe(*x)));
  return *normalized;
}

int64_t normalized_axis(int64_t axis, const NodePtr& x, const char* op) {
  std::string why;
  auto normalized = normalize_axis(axis, x->type.rank(), &why);
  if (!normalized) throw UserError(fmt::format("{} in {}: the operand has type {}", why, op, describe(*x)));
  return *normalized;
}

// sema's call_reduction.
Expr reduction(Op op, const Expr& x_expr, const std::optional<std::vector<int64_t>>& axes, bool keepdims) {
  const char* name = ir::op_name(op);
  const NodePtr& x = require(x_expr, name);
  const ir::TensorType& t = x->type;   // a literal reduces as its default-typed Constant
  ir::Attrs attrs;
  attrs.keepdims = keepdims;
  std::vector<int64_t> wanted = axes ? *axes : op == Op::ArgMax ? std::vector<int64_t>{-1} : all_axes(t.rank());
  attrs.axes = normalized_axes(wanted, x, name);
  if (op == Op::ReduceMean && !ir::is_float(t.dtype))
    throw UserError(fmt::format("mean needs a floating operand but the operand is {}; use mean(cast(x, f32))",
                                describe(*x)));
  if ((op == Op::ReduceSum || op == Op::ReduceProd) && t.dtype == DType::Bool)
    throw UserError(fmt::format("{} needs a numeric operand but the operand is {}; use {}(cast(x, i32))", name,
                                describe(*x), name));
  return make_op(op, {immediate(x)}, std::move(attrs));
}

}  // namespace

namespace builder_detail {

Operand immediate(const std::shared_ptr<const ExprNode>& n) { return Operand{n, true, n->type.dtype}; }

ir::Shape target_shape(const ShapeArg& shape, const char* op, bool allow_infer, std::vector<std::string>& symbols) {
  ir::Shape out;
  for (const DimArg& d : shape) {
    if (d.dim.is_symbolic()) {
      symbols.push_back(d.dim.symbol);
    } else if (std::optional<std::string> why = checks::shape_size_error(op, d.dim.size, allow_infer)) {
      throw UserError(std::move(*why));
    }
    out.push_back(d.dim);
  }
  return out;
}

ShapeArg shape_arg(const ir::Shape& shape) {
  ShapeArg out;
  for (const ir::Dim& d : shape) out.push_back(d.is_symbolic() ? DimArg(d.symbol) : DimArg(d.size));
  return out;
}

}  // namespace builder_detail

// ---- Pointwise ------------------------------------------------------------------------------

Expr neg(const Expr& x) { return call_unary(Op::Neg, x); }
Expr abs(const Expr& x) { return call_unary(Op::Abs, x); }
Expr exp(const Expr& x) { return call_unary(Op::Exp, x); }
Expr log(const Expr& x) { return call_unary(Op::Log, x); }
Expr sqrt(const Expr& x) { return call_unary(Op::Sqrt, x); }
Expr tanh(const Expr& x) { return call_unary(Op::Tanh, x); }
Expr sigmoid(const Expr& x) { return call_unary(Op::Sigmoid, x); }
Expr relu(const Expr& x) { return call_unary(Op::Relu, x); }
Expr log1p(const Expr& x) { return call_unary(Op::Log1p, x); }
Expr expm1(const Expr& x) { return call_unary(Op::Expm1, x); }
Expr softplus(const Expr& x) { return call_unary(Op::Softplus, x); }
Expr sin(const Expr& x) { return call_unary(Op::Sin, x); }
Expr cos(const Expr& x) { return call_unary(Op::Cos, x); }
Expr floor(const Expr& x) { return call_unary(Op::Floor, x); }
Expr ceil(const Expr& x) { return call_unary(Op::Ceil, x); }
Expr round(const Expr& x) { return call_unary(Op::Round, x); }
Expr sign(const Expr& x) { return call_unary(Op::Sign, x); }

// sema's unary '-': a literal folds into a literal.
Expr unary_minus(const Expr& x_expr) {
  const NodePtr& x = require(x_expr, "-");
  if (is_literal(x) && x->literal == LiteralKind::Float)
    return builder_detail::make_literal(LiteralKind::Float, 0, -x->fvalue);
  if (is_literal(x) && x->literal == LiteralKind::Int && x->ivalue != INT64_MIN)
    return builder_detail::make_literal(LiteralKind::Int, -x->ivalue, 0);
  if (x->type.dtype == DType::Bool)
    throw UserError(fmt::format("'-' needs a numeric operand but the operand is {}; use '!' for logical not",
                                describe(*x)));
  return make_op(Op::Neg, {immediate(x)}, {});
}

// sema's unary '!': a literal folds into a literal.
Expr logical_not(const Expr& x_expr) {
  const NodePtr& x = require(x_expr, "!");
  if (x->type.dtype != DType::Bool)
    throw UserError(fmt::format("'!' needs a bool operand but the operand is {}", describe(*x)));
  if (is_literal(x)) return builder_detail::make_literal(LiteralKind::Bool, x->ivalue == 0 ? 1 : 0, 0);
  return make_op(Op::Not, {immediate(x)}, {});
}

Expr add(const Expr& a, const Expr& b) { return pointwise(Op::Add, "+", a, b); }
Expr sub(const Expr& a, const Expr& b) { return pointwise(Op::Sub, "-", a, b); }
Expr mul(const Expr& a, const Expr& b) { return pointwise(Op::Mul, "*", a, b); }
Expr div(const Expr& a, const Expr& b) { return pointwise(Op::Div, "/", a, b); }
Expr pow(const Expr& a, const Expr& b) { return pointwise(Op::Pow, "**", a, b); }
Expr maximum(const Expr& a, const Expr& b) { return pointwise(Op::Maximum, "maximum", a, b); }
Expr minimum(const Expr& a, const Expr& b) { return pointwise(Op::Minimum, "minimum", a, b); }
Expr equal(const Expr& a, const Expr& b) { return pointwise(Op::Eq, "==", a, b); }
Expr not_equal(const Expr& a, const Expr& b) { return pointwise(Op::Ne, "!=", a, b); }
Expr less(const Expr& a, const Expr& b) { return pointwise(Op::Lt, "<", a, b); }
Expr less_equal(const Expr& a, const Expr& b) { return pointwise(Op::Le, "<=", a, b); }
Expr greater(const Expr& a, const Expr& b) { return pointwise(Op::Gt, ">", a, b); }
Expr greater_equal(const Expr& a, const Expr& b) { return pointwise(Op::Ge, ">=", a, b); }
Expr logical_and(const Expr& a, const Expr& b) { return pointwise(Op::And, "&&", a, b); }
Expr logical_or(const Expr& a, const Expr& b) { return pointwise(Op::Or, "||", a, b); }
Expr matmul(const Expr& a, const Expr& b) { return pointwise(Op::MatMul, "@", a, b); }
Expr mod(const Expr& a, const Expr& b) { return pointwise(Op::Mod, "%", a, b); }
Expr floor_divide(const Expr& a, const Expr& b) { return pointwise(Op::FloorDiv, "floor_divide", a, b); }
Expr binary_cross_entropy_with_logits(const Expr& z, const Expr& y) {
  return pointwise(Op::BceWithLogits, "binary_cross_entropy_with_logits", z, y);
}

Expr where(const Expr& c_expr, const Expr& a_expr, const Expr& b_expr) {
  const NodePtr& c = require(c_expr, "where");
  const NodePtr& a = require(a_expr, "where");
  const NodePtr& b = require(b_expr, "where");
  if (c->type.dtype != DType::Bool)
    throw UserError(fmt::format("where needs a bool condition but the condition is {}", describe(*c)));
  const DType dtype = common_dtype({a.get(), b.get()});
  return make_op(Op::Where, {immediate(c), deferred(a, dtype), deferred(b, dtype)}, {});
}

// ---- Reductions -------------------------------------------------------------------------------

Expr sum(const Expr& x, Axes axes, bool keepdims) { return reduction(Op::ReduceSum, x, axes.get(), keepdims); }
Expr mean(const Expr& x, Axes axes, bool keepdims) { return reduction(Op::ReduceMean, x, axes.get(), keepdims); }
Expr max(const Expr& x, Axes axes, bool keepdims) { return reduction(Op::ReduceMax, x, axes.get(), keepdims); }
Expr min(const Expr& x, Axes axes, bool keepdims) { return reduction(Op::ReduceMin, x, axes.get(), keepdims); }
Expr prod(const Expr& x, Axes axes, bool keepdims) { return reduction(Op::ReduceProd, x, axes.get(), keepdims); }
Expr argmax(const Expr& x, int64_t axis, bool keepdims) {
  return reduction(Op::ArgMax, x, std::vector<int64_t>{axis}, keepdims);
}

// ---- Structure --------------------------------------------------------------------------------

Expr transpose(const Expr& x_expr) {
  const NodePtr& x = require(x_expr, "transpose");
  ir::Attrs attrs;
  attrs.perm = all_axes(x->type.rank());
  std::reverse(attrs.perm.begin(), attrs.perm.end());
  return make_op(Op::Transpose, {immediate(x)}, std::move(attrs));
}

Expr transpose(const Expr& x_expr, std::vector<int64_t> perm) {
  const NodePtr& x = require(x_expr, "transpose");
  ir::Attrs attrs;
  attrs.perm = std::move(perm);
  return make_op(Op::Transpose, {immediate(x)}, std::move(attrs));
}

Expr reshape(const Expr& x_expr, ShapeArg shape) {
  const NodePtr& x = require(x_expr, "reshape");
  std::vector<std::string> symbols;
  ir::TensorType requested{x->type.dtype, target_shape(shape, "reshape", true, symbols)};
  return make_op(Op::Reshape, {immediate(x)}, {}, &requested, std::move(symbols));
}

Expr flatten(const Expr& x) { return reshape(x, {-1}); }

Expr broadcast_to(const Expr& x_expr, ShapeArg shape) {
  const NodePtr& x = require(x_expr, "broadcast_to");
  std::vector<std::string> symbols;
  ir::TensorType requested{x->type.dtype, target_shape(shape, "broadcast_to", false, symbols)};
  return make_op(Op::BroadcastTo, {immediate(x)}, {}, &requested, std::move(symbols));
}

Expr dimension(const std::string& symbol) {
  return sum(broadcast_to(cast(Expr(int64_t(1)), DType::I64), ShapeArg{symbol}), {0});
}

// sema's call_cast: cast(1, f64) is a Constant of that dtype; cast(2.5, i32) casts an f32 Constant.
Expr cast(const Expr& x_expr, DType dtype) {
  const NodePtr& x = require(x_expr, "cast");
  require_supported(dtype, "cast");
  if (is_literal(x) && !(x->literal == LiteralKind::Float && !ir::is_float(dtype)))
    return builder_detail::make_typed_constant(*x, dtype);
  ir::TensorType requested{dtype, {}};
  return make_op(Op::Cast, {immediate(x)}, {}, &requested);
}

static Expr softmax_family(Op op, const Expr& x_expr, int64_t axis) {
  const char* name = ir::op_name(op);
  const NodePtr& x = require(x_expr, name);
  if (!ir::is_float(x->type.dtype))
    throw UserError(fmt::format("{} needs a floating operand but the operand is {}; use {}(cast(x, f32))", name,
                                describe(*x), name));
  ir::Attrs attrs;
  attrs.axis = normalized_axis(axis, x, name);
  return make_op(op, {immediate(x)}, std::move(attrs));
}

Expr softmax(const Expr& x, int64_t axis) { return softmax_family(Op::Softmax, x, axis); }
Expr log_softmax(const Expr& x, int64_t axis) { return softmax_family(Op::LogSoftmax, x, axis); }

// sema's call_cumsum.
Expr cumsum(const Expr& x_expr, int64_t axis, bool reverse) {
  const NodePtr& x = require(x_expr, "cumsum");
  if (x->type.dtype == DType::Bool)
    throw UserError(fmt::format("cumsum needs a numeric operand but the operand is {}; use cumsum(cast(x, i32))",
                                describe(*x)));
  ir::Attrs attrs;
  attrs.axis = normalized_axis(axis, x, "cumsum");
  attrs.reverse = reverse;
  return make_op(Op::Cumsum, {immediate(x)}, std::move(attrs));
}

Expr cross_entropy(const Expr& logits, const Expr& labels) {
  return make_op(Op::CrossEntropy, {immediate(require(logits, "cross_entropy")),
                                    immediate(require(labels, "cross_entropy"))}, {});
}

Expr one_hot(const Expr& labels_expr, int64_t num_classes, DType dtype) {
  const NodePtr& labels = require(labels_expr, "one_hot");
  require_supported(dtype, "one_hot");
  if (num_classes <= 0) throw UserError(fmt::format("one_hot needs at least one class, found {}", num_classes));
  ir::Attrs attrs;
  attrs.num_classes = num_classes;
  ir::TensorType requested{dtype, {}};
  return make_op(Op::OneHot, {immediate(labels)}, std::move(attrs), &requested);
}

Expr take(const Expr& x_expr, const Expr& indices_expr) {
  const NodePtr& x = require(x_expr, "take");
  const NodePtr& idx = require(indices_expr, "take");
  if (!ir::is_integer(idx->type.dtype) || idx->type.rank() != 1)
    throw UserError(fmt::format("take needs an integer vector of row indices but the indices are {}", describe(*idx)));
  return make_op(Op::Take, {immediate(x), immediate(idx)}, {});
}

Expr concat(std::vector<Expr> parts, int64_t axis) {
  if (parts.size() < 2)
    throw UserError(fmt::format("concat takes at least 2 arguments but {} {} given", parts.size(),
                                parts.size() == 1 ? "was" : "were"));
  std::vector<NodePtr> xs;
  std::vector<const ExprNode*> raw;
  for (const Expr& p : parts) {
    xs.push_back(require(p, "concat"));
    raw.push_back(xs.back().get());
  }
  const DType dtype = common_dtype(raw);
  std::vector<Operand> operands;
  for (const NodePtr& x : xs) operands.push_back(deferred(x, dtype));
  ir::Attrs attrs;
  attrs.axis = normalized_axis(axis, xs[0], "concat");
  return make_op(Op::Concat, std::move(operands), std::move(attrs));
}

Expr slice(const Expr& x_expr, int64_t start, int64_t stop, int64_t axis) {
  const NodePtr& x = require(x_expr, "slice");
  const int64_t a = normalized_axis(axis, x, "slice");
  const ir::Dim& d = x->type.shape[size_t(a)];
  if (d.is_symbolic())
    throw UserError(fmt::format("slice needs a static size along axis {}, but the operand has type {}", a,
                                describe(*x)));
  // Negative bounds count from the end, as in Python.
  const int64_t lo = start < 0 ? start + d.size : start;
  const int64_t hi = stop < 0 ? stop + d.size : stop;
  if (lo < 0 || hi > d.size || lo > hi)
    throw UserError(fmt::format("slice [{}, {}) is out of range for axis {} of {}, which has size {}", start, stop,
                                a, describe(*x), d.size));
  ir::Attrs attrs;
  attrs.axis = a;
  attrs.start = lo;
  attrs.stop = hi;
  return make_op(Op::Slice, {immediate(x)}, std::move(attrs));
}

Expr grad(const Expr& loss_expr, std::vector<Expr> variables) {
  const NodePtr& loss = require(loss_expr, "grad");
  if (variables.empty()) throw UserError("grad takes at least 2 arguments (a loss and a shared variable) but 1 was given");
  if (!ir::is_float(loss->type.dtype))
    throw UserError(fmt::format("grad needs a floating loss but the loss is {}", describe(*loss)));
  if (loss->type.rank() != 0)
    throw UserError(fmt::format("grad needs a scalar loss but the loss has shape {}; reduce it, e.g. mean(loss)",
                                ir::shape_str(loss->type.shape)));
  std::vector<Operand> operands{immediate(loss)};
  std::vector<std::pair<ExprNode::Kind, int64_t>> seen;
  for (const Expr& v_expr : variables) {
    const NodePtr& v = require(v_expr, "grad");
    if (v->kind != ExprNode::Kind::Shared && v->kind != ExprNode::Kind::Param)
      throw UserError(fmt::format("grad differentiates with respect to shared variables and inputs, but {} is "
                                  "neither", describe(*v)));
    if (!ir::is_float(v->type.dtype))
      throw UserError(fmt::format("grad needs floating variables but '{}' is {}", v->name, ir::type_str(v->type)));
    if (std::find(seen.begin(), seen.end(), std::pair{v->kind, v->index}) != seen.end())
      throw UserError(fmt::format("'{}' appears twice in grad", v->name));
    seen.emplace_back(v->kind, v->index);
    operands.push_back(immediate(v));
  }
  return make_op(Op::Grad, std::move(operands), {});
}

// ---- Method forms -----------------------------------------------------------------------------

Expr Expr::matmul(const Expr& other) const { return dsl::matmul(*this, other); }
Expr Expr::transpose() const { return dsl::transpose(*this); }
Expr Expr::transpose(std::vector<int64_t> perm) const { return dsl::transpose(*this, std::move(perm)); }
Expr Expr::reshape(ShapeArg shape) const { return dsl::reshape(*this, std::move(shape)); }
Expr Expr::flatten() const { return dsl::flatten(*this); }
Expr Expr::cast(DType dtype) const { return dsl::cast(*this, dtype); }
Expr Expr::sum(Axes axes, bool keepdims) const { return dsl::sum(*this, std::move(axes), keepdims); }
Expr Expr::mean(Axes axes, bool keepdims) const { return dsl::mean(*this, std::move(axes), keepdims); }
Expr Expr::max(Axes axes, bool keepdims) const { return dsl::max(*this, std::move(axes), keepdims); }
Expr Expr::min(Axes axes, bool keepdims) const { return dsl::min(*this, std::move(axes), keepdims); }
Expr Expr::prod(Axes axes, bool keepdims) const { return dsl::prod(*this, std::move(axes), keepdims); }
Expr Expr::argmax(int64_t axis, bool keepdims) const { return dsl::argmax(*this, axis, keepdims); }

}  // namespace synk::dsl
