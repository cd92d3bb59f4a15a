// The built-in operations that sema lowers to compositions of existing IR ops instead of new IR
// ops (docs/language.md, "Ops by task"): clip, logsumexp, argmin, var, std, norm, stack,
// expand_dims and squeeze. Each composition is chosen to be numerically stable and to give the
// documented gradient through the existing ops' gradient rules: the kernels, the reference
// evaluator and the gradient pass need nothing new for them. The C++ builder composes the same
// way (builder_composite.cpp); the differential and finite-difference tests cover both.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "dsl/sema.h"
#include "ir/type_infer.h"

namespace synk::dsl::sema {

using ir::DType;
using ir::Op;

namespace {

// `shape` without the axes in `axes` (what a reduction with keepdims=false gives).
ir::Shape drop_axes(const ir::Shape& shape, const std::vector<int64_t>& axes) {
  ir::Shape out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end()) out.push_back(shape[d]);
  return out;
}

}  // namespace

// (x, axis=..., keepdims=...) as for sum: the operand, its normalized axes and keepdims. The axis
// may also be the second positional argument; `single_axis` takes one integer (argmin).
std::optional<FunctionAnalyzer::ReductionArgs> FunctionAnalyzer::reduction_arguments(
    const ast::Expr& e, bool single_axis, std::initializer_list<const char*> keywords) {
  if (!check_arguments(e, 1, 2, keywords)) return std::nullopt;
  const ast::Expr* axis_arg = keyword(e, "axis");
  if (e.args.size() == 2) {
    if (axis_arg) {
      error(axis_arg->loc, fmt::format("{} got its axis twice (as the second argument and as axis=)", e.text));
      return std::nullopt;
    }
    axis_arg = e.args[1].get();
  }
  ReductionArgs r;
  r.x = operand(*e.args[0]);
  if (const ast::Expr* k = keyword(e, "keepdims")) {
    auto keep = bool_argument(*k, "keepdims");
    if (!keep) return std::nullopt;
    r.keepdims = *keep;
  }
  std::optional<std::vector<int64_t>> axes;
  if (axis_arg) {
    axes = single_axis ? [&]() -> std::optional<std::vector<int64_t>> {
      auto a = int_argument(*axis_arg, fmt::format("{}'s axis", e.text).c_str());
      if (!a) return std::nullopt;
      return std::vector<int64_t>{*a};
    }() : int_list_argument(*axis_arg, "axis", true);
    if (!axes) return std::nullopt;
  }
  if (r.x.failed()) return std::nullopt;
  if (!axes) axes = single_axis ? std::vector<int64_t>{-1} : all_axes(r.x.type.rank());
  std::string why;
  auto normalized = normalize_axes(*axes, r.x.type.rank(), &why);
  if (!normalized) {
    error(axis_arg ? axis_arg->loc : e.loc, fmt::format("{} in {}: '{}' has type {}", why, e.text,
                                                        expr_text(*e.args[0]), ir::type_str(r.x.type)));
    return std::nullopt;
  }
  r.axes = *normalized;
  return r;
}

bool FunctionAnalyzer::require_float(const ast::Expr& e, const Value& x) {
  if (ir::is_float(x.type.dtype)) return true;
  const std::string text = expr_text(*e.args[0]);
  error(e.args[0]->loc, fmt::format("{} needs a floating operand but '{}' is {}; use {}(cast({}, f32))", e.text,
                                    text, ir::type_str(x.type), e.text, text));
  return false;
}

Value FunctionAnalyzer::constant(double v, DType dtype, SourceLoc loc) {
  return convert(float_literal(v), dtype, loc).value_or(Value::error());
}

Value FunctionAnalyzer::reduce(Op op, const Value& x, const std::vector<int64_t>& axes, bool keepdims,
                               SourceLoc loc) {
  ir::Attrs attrs;
  attrs.axes = axes;
  attrs.keepdims = keepdims;
  return apply(op, {x}, attrs, loc);
}

Value FunctionAnalyzer::drop_kept_axes(const Value& kept, const Value& x, const std::vector<int64_t>& axes,
                                       bool keepdims, SourceLoc loc) {
  if (keepdims || kept.failed()) return kept;
  ir::TensorType requested{kept.type.dtype, drop_axes(x.type.shape, axes)};
  return apply(Op::Reshape, {kept}, ir::Attrs{}, loc, &requested);
}

// clip(x, lo, hi): where(t > hi, hi, t) with t = where(x < lo, lo, x). numpy's value (hi wins when
// lo > hi, NaN in x stays NaN), and the adjoint reaches x exactly where lo <= x <= hi (where's
// rule), unlike minimum(maximum(x, lo), hi), whose tie rule would halve it at the bounds.
Value FunctionAnalyzer::call_clip(const ast::Expr& e) {
  if (!check_arguments(e, 3, 3, {})) return Value::error();
  std::vector<Value> v = {expr(*e.args[0]), expr(*e.args[1]), expr(*e.args[2])};
  for (const Value& x : v)
    if (x.failed()) return Value::error();
  auto dtype = common_dtype(v);
  if (!dtype) return Value::error();
  if (*dtype == DType::Bool) {
    error(e.loc, "clip needs numeric operands but all three are bool");
    return Value::error();
  }
  for (size_t i = 0; i < 3; ++i) {
    auto c = convert(v[i], *dtype, e.args[i]->loc);
    if (!c) return Value::error();
    v[i] = *c;
  }
  Value t = apply(Op::Where, {apply(Op::Lt, {v[0], v[1]}, {}, e.loc), v[1], v[0]}, {}, e.loc);
  if (t.failed()) return t;
  return apply(Op::Where, {apply(Op::Gt, {t, v[2]}, {}, e.loc), v[2], t}, {}, e.loc);
}

// logsumexp(x, axis, keepdims): m + log(sum(exp(x - m))) with m the maximum, taken as 0 where it
// is infinite (all -inf gives -inf, an inf gives inf, no inf - inf). The adjoint is softmax(x):
// the paths through m cancel.
Value FunctionAnalyzer::call_logsumexp(const ast::Expr& e) {
  auto r = reduction_arguments(e, false, {"axis", "keepdims"});
  if (!r || !require_float(e, r->x)) return Value::error();
  const SourceLoc loc = e.loc;
  Value m = reduce(Op::ReduceMax, r->x, r->axes, true, loc);
  const DType t = r->x.type.dtype;
  Value infinite = pointwise(Op::Eq, {apply(Op::Abs, {m}, {}, loc), float_literal(std::numeric_limits<double>::infinity())}, loc);
  Value safe = apply(Op::Where, {infinite, constant(0, t, loc), m}, {}, loc);
  Value shifted = pointwise(Op::Sub, {r->x, safe}, loc);
  Value s = reduce(Op::ReduceSum, apply(Op::Exp, {shifted}, {}, loc), r->axes, true, loc);
  Value kept = pointwise(Op::Add, {apply(Op::Log, {s}, {}, loc), safe}, loc);
  return drop_kept_axes(kept, r->x, r->axes, r->keepdims, loc);
}

// argmin(x, axis): argmax of an order-reversing map with no overflow: -x for floats (a NaN stays
// a NaN, so the first NaN still wins, as in numpy), -1 - x for signed integers, 255 - x for u8,
// !x for bool. The first minimum wins on ties, like argmax's first maximum.
Value FunctionAnalyzer::call_argmin(const ast::Expr& e) {
  auto r = reduction_arguments(e, true, {"axis", "keepdims"});
  if (!r) return Value::error();
  const Value& x = r->x;
  Value flipped;
  if (ir::is_float(x.type.dtype)) flipped = apply(Op::Neg, {x}, {}, e.loc);
  else if (x.type.dtype == DType::Bool) flipped = apply(Op::Not, {x}, {}, e.loc);
  else if (x.type.dtype == DType::U8) flipped = pointwise(Op::Sub, {int_literal(255), x}, e.loc);
  else flipped = pointwise(Op::Sub, {int_literal(-1), x}, e.loc);
  if (flipped.failed()) return flipped;
  return reduce(Op::ArgMax, flipped, r->axes, r->keepdims, e.loc);
}

// var / std(x, axis, keepdims, ddof=0): mean((x - mean(x))^2), scaled by n / (n - ddof); std is
// its square root (whose adjoint is infinite where var is 0, as in numpy and PyTorch).
Value FunctionAnalyzer::call_variance(const ast::Expr& e, bool take_sqrt) {
  auto r = reduction_arguments(e, false, {"axis", "keepdims", "ddof"});
  if (!r || !require_float(e, r->x)) return Value::error();
  int64_t ddof = 0;
  if (const ast::Expr* d = keyword(e, "ddof")) {
    auto v = int_argument(*d, "ddof");
    if (!v) return Value::error();
    if (*v < 0) {
      error(d->loc, fmt::format("ddof must be 0 or more, found {}", *v));
      return Value::error();
    }
    ddof = *v;
  }
  const SourceLoc loc = e.loc;
  Value mu = reduce(Op::ReduceMean, r->x, r->axes, true, loc);
  Value d = pointwise(Op::Sub, {r->x, mu}, loc);
  Value sq = pointwise(Op::Mul, {d, d}, loc);
  Value v = reduce(Op::ReduceMean, sq, r->axes, r->keepdims, loc);
  if (ddof != 0 && !v.failed()) {
    // n / (n - ddof), with n counted at run time when a reduced dimension is symbolic.
    const Value one = constant(1, r->x.type.dtype, loc);
    Value ones = apply(Op::Where, {apply(Op::Eq, {r->x, r->x}, {}, loc), one, one}, {}, loc);
    Value n = reduce(Op::ReduceSum, ones, r->axes, r->keepdims, loc);
    Value scale = pointwise(Op::Div, {n, pointwise(Op::Sub, {n, int_literal(ddof)}, loc)}, loc);
    v = pointwise(Op::Mul, {v, scale}, loc);
  }
  return take_sqrt ? apply(Op::Sqrt, {v}, {}, loc) : v;
}

// norm(x, axis, keepdims): the L2 norm sqrt(sum(x * x)), with the square root taken of 1 where
// the sum is 0 and the result set to 0 there, so the adjoint x / norm is 0 (not NaN) at norm 0.
// A NaN sum is not 0, so NaN propagates.
Value FunctionAnalyzer::call_norm(const ast::Expr& e) {
  auto r = reduction_arguments(e, false, {"axis", "keepdims"});
  if (!r || !require_float(e, r->x)) return Value::error();
  const SourceLoc loc = e.loc;
  Value ss = reduce(Op::ReduceSum, pointwise(Op::Mul, {r->x, r->x}, loc), r->axes, r->keepdims, loc);
  Value nonzero = pointwise(Op::Ne, {ss, float_literal(0)}, loc);
  const DType t = r->x.type.dtype;
  Value safe = apply(Op::Where, {nonzero, ss, constant(1, t, loc)}, {}, loc);
  return apply(Op::Where, {nonzero, apply(Op::Sqrt, {safe}, {}, loc), constant(0, t, loc)}, {}, loc);
}

Value FunctionAnalyzer::insert_axis(const Value& x, int64_t axis, SourceLoc loc) {
  ir::TensorType requested{x.type.dtype, x.type.shape};
  requested.shape.insert(requested.shape.begin() + axis, ir::Dim::fixed(1));
  return apply(Op::Reshape, {x}, ir::Attrs{}, loc, &requested);
}

// expand_dims(x, axis): a reshape with a size-1 axis at `axis` (-1 appends).
Value FunctionAnalyzer::call_expand_dims(const ast::Expr& e) {
  if (!check_arguments(e, 2, 2, {})) return Value::error();
  Value x = operand(*e.args[0]);
  auto axis = int_argument(*e.args[1], "expand_dims's axis");
  if (!axis || x.failed()) return Value::error();
  std::string why;
  auto a = normalize_axis(*axis, x.type.rank() + 1, &why);
  if (!a) {
    error(e.args[1]->loc, fmt::format("{} in expand_dims (the result's rank is {}): '{}' has type {}", why,
                                      x.type.rank() + 1, expr_text(*e.args[0]), ir::type_str(x.type)));
    return Value::error();
  }
  return insert_axis(x, *a, e.loc);
}

// squeeze(x, axis): a reshape without that axis, which must have size 1; without an axis, every
// axis of static size 1 goes.
Value FunctionAnalyzer::call_squeeze(const ast::Expr& e) {
  if (!check_arguments(e, 1, 2, {"axis"})) return Value::error();
  Value x = operand(*e.args[0]);
  const ast::Expr* axis_arg = e.args.size() == 2 ? e.args[1].get() : keyword(e, "axis");
  std::optional<int64_t> axis;
  if (axis_arg && !(axis = int_argument(*axis_arg, "squeeze's axis"))) return Value::error();
  if (x.failed()) return x;
  const std::string text = expr_text(*e.args[0]);
  ir::TensorType requested{x.type.dtype, {}};
  if (axis) {
    std::string why;
    auto a = normalize_axis(*axis, x.type.rank(), &why);
    if (!a) {
      error(axis_arg->loc, fmt::format("{} in squeeze: '{}' has type {}", why, text, ir::type_str(x.type)));
      return Value::error();
    }
    const ir::Dim& d = x.type.shape[size_t(*a)];
    if (d.is_symbolic() || d.size != 1) {
      error(axis_arg->loc, fmt::format("squeeze: axis {} of '{}' has size {}, not 1 ('{}' has type {})", *axis, text,
                                       d.is_symbolic() ? d.symbol : std::to_string(d.size), text,
                                       ir::type_str(x.type)));
      return Value::error();
    }
    requested.shape = drop_axes(x.type.shape, {*a});
  } else {
    for (const ir::Dim& d : x.type.shape)
      if (d.is_symbolic() || d.size != 1) requested.shape.push_back(d);
  }
  return apply(Op::Reshape, {x}, ir::Attrs{}, e.loc, &requested);
}

// stack([a, b, ...], axis=0): each operand with a size-1 axis inserted, concatenated along it.
Value FunctionAnalyzer::call_stack(const ast::Expr& e) {
  if (!check_arguments(e, 1, 1, {"axis"})) return Value::error();
  const ast::Expr& list = *e.args[0];
  if (list.kind != ast::ExprKind::List || list.args.empty()) {
    if (list.kind != ast::ExprKind::Error)
      error(list.loc, fmt::format("stack takes a list of tensors such as [a, b], found '{}'", expr_text(list)));
    return Value::error();
  }
  std::optional<JoinArgs> joined = join_arguments(e, list.args);
  if (!joined) return Value::error();
  std::vector<Value>& xs = joined->xs;
  std::optional<int64_t> axis = joined->axis;
  const ast::Expr* axis_arg = keyword(e, "axis");
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!(xs[i].type.shape == xs[0].type.shape)) {
      error(list.args[i]->loc, fmt::format("stack needs operands of one shape but '{}' is {} and '{}' is {}",
                                           expr_text(*list.args[0]), ir::type_str(xs[0].type),
                                           expr_text(*list.args[i]), ir::type_str(xs[i].type)));
      return Value::error();
    }
  }
  std::string why;
  auto a = normalize_axis(*axis, xs[0].type.rank() + 1, &why);
  if (!a) {
    error(axis_arg ? axis_arg->loc : e.loc, fmt::format("{} in stack (the result's rank is {})", why,
                                                        xs[0].type.rank() + 1));
    return Value::error();
  }
  for (Value& x : xs) x = insert_axis(x, *a, e.loc);
  if (xs.size() == 1) return xs[0];
  ir::Attrs attrs;
  attrs.axis = *a;
  return apply(Op::Concat, std::move(xs), attrs, e.loc);
}

}  // namespace synk::dsl::sema
