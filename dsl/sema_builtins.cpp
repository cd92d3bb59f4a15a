// Semantic analysis of the built-in operations (docs/language.md's table): argument counts and
// keywords, constant arguments (axes, shapes, dtypes, sizes), operand dtypes with messages that
// name the offending argument, and the IR node each call becomes.
#include <algorithm>
#include <fmt/format.h>

#include "dsl/sema.h"
#include "ir/type_infer.h"

namespace synk::dsl::sema {

using ir::DType;
using ir::Op;

namespace {

std::string plural(size_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

}  // namespace

// ---- Arguments ----------------------------------------------------------------------------

bool FunctionAnalyzer::check_arguments(const ast::Expr& call, size_t min_positional, size_t max_positional,
                                       std::initializer_list<const char*> keywords) {
  bool ok = true;
  size_t n = call.args.size();
  if (n < min_positional || n > max_positional) {
    std::string expected = min_positional == max_positional ? plural(min_positional, "argument")
                           : max_positional == SIZE_MAX
                               ? fmt::format("at least {}", plural(min_positional, "argument"))
                               : fmt::format("{} to {} arguments", min_positional, max_positional);
    std::string by_keyword;   // softmax(z, 0): the axis is a keyword argument
    for (const char* k : keywords) by_keyword += fmt::format("{}{}=...", by_keyword.empty() ? "" : ", ", k);
    if (n > max_positional && !by_keyword.empty())
      by_keyword = fmt::format(" (its other arguments are keywords: {})", by_keyword);
    else
      by_keyword.clear();
    error(n > max_positional ? call.args[max_positional]->loc : call.loc,
          fmt::format("{} takes {} but {} {} given{}", call.text, expected, n, n == 1 ? "was" : "were", by_keyword));
    ok = false;
  }
  for (const ast::KwArg& kw : call.kwargs) {
    if (std::find_if(keywords.begin(), keywords.end(), [&](const char* k) { return kw.name == k; }) !=
        keywords.end())
      continue;
    std::string expected;
    for (const char* k : keywords) expected += (expected.empty() ? "" : ", ") + std::string(k);
    error(kw.loc, expected.empty()
                      ? fmt::format("{} takes no keyword arguments, found '{}'", call.text, kw.name)
                      : fmt::format("unknown keyword argument '{}' for {}; expected {}", kw.name, call.text,
                                    expected));
    ok = false;
  }
  return ok;
}

const ast::Expr* FunctionAnalyzer::keyword(const ast::Expr& call, const char* name) {
  for (const ast::KwArg& kw : call.kwargs)
    if (kw.name == name) return kw.value.get();
  return nullptr;
}

std::optional<double> literal_number(const ast::Expr& e) {
  if (e.kind == ast::ExprKind::IntLiteral) return double(e.int_value);
  if (e.kind == ast::ExprKind::FloatLiteral) return e.float_value;
  if (e.kind == ast::ExprKind::Unary && e.text == "-" && e.args.size() == 1)
    if (std::optional<double> v = literal_number(*e.args[0])) return -*v;
  return std::nullopt;
}

bool scalar_literal(const ast::Expr& e) { return e.kind == ast::ExprKind::BoolLiteral || literal_number(e); }

bool literal_only(const ast::Expr& e) {
  if (e.kind == ast::ExprKind::StringLiteral) return true;
  if (e.kind == ast::ExprKind::Name) return ir::dtype_from_name(e.text).has_value();
  if (e.kind != ast::ExprKind::List) return false;
  return std::all_of(e.args.begin(), e.args.end(), [](const ast::ExprPtr& item) {
    return scalar_literal(*item) || (item->kind == ast::ExprKind::List && literal_only(*item));
  });
}

const ast::Expr& FunctionAnalyzer::literal_argument(const ast::Expr& arg) const {
  const ast::Expr* e = &arg;
  const std::map<std::string, Binding>* scope = &scope_;
  while (e->kind == ast::ExprKind::Name) {
    auto it = scope->find(e->text);
    if (it == scope->end() || !it->second.source) break;
    const Binding& b = it->second;
    if (b.source_in_caller) {
      if (b.source_depth >= frames_.size()) break;
      scope = &frames_[b.source_depth].caller_scope;   // where the caller wrote the argument
    }
    e = b.source;
  }
  return *e;
}

std::optional<int64_t> FunctionAnalyzer::int_argument(const ast::Expr& written, const char* what) {
  const ast::Expr& arg = literal_argument(written);
  if (arg.kind == ast::ExprKind::Error) return std::nullopt;
  if (arg.kind != ast::ExprKind::IntLiteral) {
    error(arg.loc, fmt::format("{} must be an integer literal, found '{}'", what, expr_text(arg)));
    return std::nullopt;
  }
  return arg.int_value;
}

std::optional<std::vector<int64_t>> FunctionAnalyzer::int_list_argument(const ast::Expr& written, const char* what,
                                                                        bool allow_scalar) {
  const ast::Expr& arg = literal_argument(written);
  if (allow_scalar && arg.kind != ast::ExprKind::List) {
    auto v = int_argument(arg, what);
    if (!v) return std::nullopt;
    return std::vector<int64_t>{*v};
  }
  if (arg.kind == ast::ExprKind::Error) return std::nullopt;
  if (arg.kind != ast::ExprKind::List) {
    error(arg.loc, fmt::format("{} must be a list of integers such as [1, 0], found '{}'", what, expr_text(arg)));
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (const auto& item : arg.args) {
    auto v = int_argument(*item, what);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<bool> FunctionAnalyzer::bool_argument(const ast::Expr& written, const char* what) {
  const ast::Expr& arg = literal_argument(written);
  if (arg.kind == ast::ExprKind::Error) return std::nullopt;
  if (arg.kind != ast::ExprKind::BoolLiteral) {
    error(arg.loc, fmt::format("{} must be true or false, found '{}'", what, expr_text(arg)));
    return std::nullopt;
  }
  return arg.int_value != 0;
}

std::optional<DType> FunctionAnalyzer::dtype_argument(const ast::Expr& written) {
  const ast::Expr& arg = literal_argument(written);
  if (arg.kind == ast::ExprKind::Error) return std::nullopt;
  auto dtype = arg.kind == ast::ExprKind::Name ? ir::dtype_from_name(arg.text) : std::nullopt;
  if (!dtype) {
    error(arg.loc, fmt::format("expected a dtype (f32, f64, i32, i64, u8 or bool), found '{}'", expr_text(arg)));
    return std::nullopt;
  }
  if (ir::is_reserved(*dtype)) {
    error(arg.loc, fmt::format("dtype '{}' is reserved and not supported yet; use f32 or f64", arg.text));
    return std::nullopt;
  }
  return dtype;
}

std::optional<ir::Shape> FunctionAnalyzer::shape_argument(const ast::Expr& arg, const char* op, bool allow_infer) {
  if (arg.kind == ast::ExprKind::Error) return std::nullopt;
  if (arg.kind != ast::ExprKind::List) {
    error(arg.loc, fmt::format("{} needs a shape such as [n, 10], found '{}'", op, expr_text(arg)));
    return std::nullopt;
  }
  ir::Shape shape;
  for (const auto& item : arg.args) {
    if (item->kind == ast::ExprKind::IntLiteral) {
      if (std::optional<std::string> why = checks::shape_size_error(op, item->int_value, allow_infer)) {
        error(item->loc, std::move(*why));
        return std::nullopt;
      }
      shape.push_back(ir::Dim::fixed(item->int_value));
    } else if (item->kind == ast::ExprKind::Name && !frames_.empty()) {
      std::optional<ir::Dim> dim = helper_dimension(*item, op);
      if (!dim) return std::nullopt;
      shape.push_back(*dim);
    } else if (item->kind == ast::ExprKind::Name) {
      if (std::optional<std::string> why = checks::unknown_dimension_error(item->text, op, symbols_)) {
        error(item->loc, std::move(*why));
        return std::nullopt;
      }
      shape.push_back(ir::Dim::sym(item->text));
    } else {
      if (item->kind != ast::ExprKind::Error)
        error(item->loc, fmt::format("a size in {}'s shape must be an integer or a dimension name, found '{}'",
                                     op, expr_text(*item)));
      return std::nullopt;
    }
  }
  return shape;
}

Value FunctionAnalyzer::operand(const ast::Expr& arg) {
  Value v = expr(arg);
  return v.is_literal() ? materialize_default(v, arg.loc) : v;
}

// ---- Operations ---------------------------------------------------------------------------

Value FunctionAnalyzer::call_unary(const ast::Expr& e, Op op) {
  if (!check_arguments(e, 1, 1, {})) return Value::error();
  Value v = expr(*e.args[0]);
  if (v.failed()) return v;
  bool float_only = op != Op::Abs && op != Op::Neg && op != Op::Relu && op != Op::Floor && op != Op::Ceil &&
                    op != Op::Round && op != Op::Sign;
  if (v.is_literal()) {
    auto c = convert(v, float_only ? weak_dtype(DType::F32, v.literal) : v.type.dtype, e.args[0]->loc);
    if (!c) return Value::error();
    v = *c;
  }
  std::string text = expr_text(*e.args[0]);
  if (float_only && !ir::is_float(v.type.dtype)) {
    error(e.args[0]->loc, fmt::format("{} needs a floating operand but '{}' is {}; use {}(cast({}, f32))",
                                      e.text, text, ir::type_str(v.type), e.text, text));
    return Value::error();
  }
  if (!float_only && v.type.dtype == DType::Bool) {
    error(e.args[0]->loc, fmt::format("{} needs a numeric operand but '{}' is {}", e.text, text,
                                      ir::type_str(v.type)));
    return Value::error();
  }
  return apply(op, {v}, ir::Attrs{}, e.loc);
}

Value FunctionAnalyzer::call_binary(const ast::Expr& e, Op op) {
  if (!check_arguments(e, 2, 2, {})) return Value::error();
  Value a = expr(*e.args[0]);
  Value b = expr(*e.args[1]);
  return pointwise(op, {a, b}, e.loc);
}

Value FunctionAnalyzer::call_where(const ast::Expr& e) {
  if (!check_arguments(e, 3, 3, {})) return Value::error();
  Value c = operand(*e.args[0]);
  Value a = expr(*e.args[1]);
  Value b = expr(*e.args[2]);
  if (c.failed() || a.failed() || b.failed()) return Value::error();
  if (c.type.dtype != DType::Bool) {
    error(e.args[0]->loc, fmt::format("where needs a bool condition but '{}' is {}", expr_text(*e.args[0]),
                                      ir::type_str(c.type)));
    return Value::error();
  }
  auto dtype = common_dtype({a, b});
  auto ca = convert(a, *dtype, e.args[1]->loc);
  auto cb = ca ? convert(b, *dtype, e.args[2]->loc) : std::nullopt;
  if (!ca || !cb) return Value::error();
  return apply(Op::Where, {c, *ca, *cb}, ir::Attrs{}, e.loc);
}

Value FunctionAnalyzer::call_reduction(const ast::Expr& e, Op op) {
  if (!check_arguments(e, 1, 2, {"axis", "keepdims"})) return Value::error();
  const ast::Expr* axis_arg = keyword(e, "axis");
  if (e.args.size() == 2) {
    if (axis_arg) {
      error(axis_arg->loc, fmt::format("{} got its axis twice (as the second argument and as axis=)", e.text));
      return Value::error();
    }
    axis_arg = e.args[1].get();
    // max(x, 0.0) as numpy's np.maximum or torch.max(x, y) mean it: the element-wise op is another.
    const ast::Expr& second = literal_argument(*axis_arg);
    // (The parser folds -1 into one integer literal.)
    const bool axis_like = second.kind == ast::ExprKind::IntLiteral || second.kind == ast::ExprKind::List;
    if ((op == Op::ReduceMax || op == Op::ReduceMin) && !axis_like && second.kind != ast::ExprKind::Error) {
      const char* elementwise = op == Op::ReduceMax ? "maximum" : "minimum";
      error(axis_arg->loc, fmt::format("{}'s second argument is the axis it reduces, an integer literal, found '{}'; "
                                       "for the element-wise {} of two values write {}({}, {})", e.text,
                                       expr_text(second), elementwise, elementwise, expr_text(*e.args[0]),
                                       expr_text(*axis_arg)));
      return Value::error();
    }
  }
  Value x = operand(*e.args[0]);
  ir::Attrs attrs;
  if (const ast::Expr* k = keyword(e, "keepdims")) {
    auto keep = bool_argument(*k, "keepdims");
    if (!keep) return Value::error();
    attrs.keepdims = *keep;
  }
  std::optional<std::vector<int64_t>> axes;
  if (axis_arg) {
    axes = op == Op::ArgMax ? [&]() -> std::optional<std::vector<int64_t>> {
      auto a = int_argument(*axis_arg, "argmax's axis");
      if (!a) return std::nullopt;
      return std::vector<int64_t>{*a};
    }() : int_list_argument(*axis_arg, "axis", true);
    if (!axes) return Value::error();
  }
  if (x.failed()) return x;
  std::string text = expr_text(*e.args[0]);
  if (!axes) axes = op == Op::ArgMax ? std::vector<int64_t>{-1} : all_axes(x.type.rank());
  std::string why;
  auto normalized = normalize_axes(*axes, x.type.rank(), &why);
  if (!normalized) {
    error(axis_arg ? axis_arg->loc : e.loc, fmt::format("{} in {}: '{}' has type {}", why, e.text, text,
                                                        ir::type_str(x.type)));
    return Value::error();
  }
  attrs.axes = *normalized;
  if (op == Op::ReduceMean && !ir::is_float(x.type.dtype)) {
    error(e.args[0]->loc, fmt::format("mean needs a floating operand but '{}' is {}; use mean(cast({}, f32))",
                                      text, ir::type_str(x.type), text));
    return Value::error();
  }
  if ((op == Op::ReduceSum || op == Op::ReduceProd) && x.type.dtype == DType::Bool) {
    error(e.args[0]->loc, fmt::format("{} needs a numeric operand but '{}' is {}; use {}(cast({}, i32))", e.text,
                                      text, ir::type_str(x.type), e.text, text));
    return Value::error();
  }
  return apply(op, {x}, attrs, e.loc);
}

Value FunctionAnalyzer::call_transpose(const ast::Expr& e) {
  if (!check_arguments(e, 1, 2, {})) return Value::error();
  Value x = operand(*e.args[0]);
  std::optional<std::vector<int64_t>> perm;
  if (e.args.size() == 2) {
    perm = int_list_argument(*e.args[1], "transpose's permutation", false);
    if (!perm) return Value::error();
  }
  if (x.failed()) return x;
  ir::Attrs attrs;
  if (perm) {
    attrs.perm = *perm;
  } else {
    attrs.perm = all_axes(x.type.rank());
    std::reverse(attrs.perm.begin(), attrs.perm.end());
  }
  return apply(Op::Transpose, {x}, attrs, perm ? e.args[1]->loc : e.loc);
}

Value FunctionAnalyzer::call_reshape(const ast::Expr& e, bool flatten) {
  if (flatten) return call_flatten(e);   // sema_dnn.cpp: flatten(x, axis=k)
  if (!check_arguments(e, flatten ? 1 : 2, flatten ? 1 : 2, {})) return Value::error();
  Value x = operand(*e.args[0]);
  std::optional<ir::Shape> shape = flatten ? ir::Shape{ir::Dim::fixed(-1)}
                                           : shape_argument(*e.args[1], "reshape", true);
  if (!shape || x.failed()) return Value::error();
  ir::TensorType requested{x.type.dtype, *shape};
  return apply(Op::Reshape, {x}, ir::Attrs{}, flatten ? e.loc : e.args[1]->loc, &requested);
}

Value FunctionAnalyzer::call_broadcast_to(const ast::Expr& e) {
  if (!check_arguments(e, 2, 2, {})) return Value::error();
  Value x = operand(*e.args[0]);
  auto shape = shape_argument(*e.args[1], "broadcast_to", false);
  if (!shape || x.failed()) return Value::error();
  ir::TensorType requested{x.type.dtype, *shape};
  return apply(Op::BroadcastTo, {x}, ir::Attrs{}, e.args[1]->loc, &requested);
}

Value FunctionAnalyzer::call_cast(const ast::Expr& e) {
  if (!check_arguments(e, 2, 2, {})) return Value::error();
  Value x = expr(*e.args[0]);
  auto dtype = dtype_argument(*e.args[1]);
  if (!dtype || x.failed()) return Value::error();
  if (x.is_literal()) {  // cast(1, f64): a literal of that dtype; cast(2.5, i32) truncates.
    if (x.literal == LiteralKind::Float && !ir::is_float(*dtype)) x = materialize_default(x, e.args[0]->loc);
    else return convert(x, *dtype, e.args[0]->loc).value_or(Value::error());
  }
  ir::TensorType requested{*dtype, {}};
  return apply(Op::Cast, {x}, ir::Attrs{}, e.loc, &requested);
}

Value FunctionAnalyzer::call_softmax(const ast::Expr& e, Op op) {
  if (!check_arguments(e, 1, 1, {"axis"})) return Value::error();
  Value x = operand(*e.args[0]);
  std::optional<int64_t> axis = -1;
  const ast::Expr* axis_arg = keyword(e, "axis");
  if (axis_arg) axis = int_argument(*axis_arg, "axis");
  if (!axis || x.failed()) return Value::error();
  std::string text = expr_text(*e.args[0]);
  if (!ir::is_float(x.type.dtype)) {
    error(e.args[0]->loc, fmt::format("{} needs a floating operand but '{}' is {}; use {}(cast({}, f32))", e.text,
                                      text, ir::type_str(x.type), e.text, text));
    return Value::error();
  }
  std::string why;
  auto normalized = normalize_axis(*axis, x.type.rank(), &why);
  if (!normalized) {
    error(axis_arg ? axis_arg->loc : e.loc,
          fmt::format("{} in {}: '{}' has type {}", why, e.text, text, ir::type_str(x.type)));
    return Value::error();
  }
  ir::Attrs attrs;
  attrs.axis = *normalized;
  return apply(op, {x}, attrs, e.loc);
}

// cumsum(x, axis=-1, reverse=false): one axis, also accepted as the second positional argument
// (np.cumsum(x, 1)); numpy's default of no axis flattens, synk's is the last axis, like argmax.
// Numeric operands keep their dtype, as for sum.
Value FunctionAnalyzer::call_cumsum(const ast::Expr& e) {
  auto r = reduction_arguments(e, true, {"axis", "reverse"});
  if (!r) return Value::error();
  ir::Attrs attrs;
  if (const ast::Expr* k = keyword(e, "reverse")) {
    auto reverse = bool_argument(*k, "reverse");
    if (!reverse) return Value::error();
    attrs.reverse = *reverse;
  }
  if (r->x.type.dtype == DType::Bool) {
    const std::string text = expr_text(*e.args[0]);
    error(e.args[0]->loc, fmt::format("cumsum needs a numeric operand but '{}' is {}; use cumsum(cast({}, i32))",
                                      text, ir::type_str(r->x.type), text));
    return Value::error();
  }
  attrs.axis = r->axes.at(0);
  return apply(Op::Cumsum, {r->x}, attrs, e.loc);
}

Value FunctionAnalyzer::call_cross_entropy(const ast::Expr& e) {
  if (!check_arguments(e, 2, 2, {})) return Value::error();
  Value logits = operand(*e.args[0]);
  Value labels = operand(*e.args[1]);
  return apply(Op::CrossEntropy, {logits, labels}, ir::Attrs{}, e.loc);
}

Value FunctionAnalyzer::call_one_hot(const ast::Expr& e) {
  if (!check_arguments(e, 2, 2, {"dtype"})) return Value::error();
  Value labels = operand(*e.args[0]);
  auto k = int_argument(*e.args[1], "one_hot's number of classes");
  std::optional<DType> dtype = DType::F32;
  if (const ast::Expr* d = keyword(e, "dtype")) dtype = dtype_argument(*d);
  if (!k || !dtype || labels.failed()) return Value::error();
  if (*k <= 0) {
    error(e.args[1]->loc, fmt::format("one_hot needs at least one class, found {}", *k));
    return Value::error();
  }
  ir::Attrs attrs;
  attrs.num_classes = *k;
  ir::TensorType requested{*dtype, {}};
  return apply(Op::OneHot, {labels}, attrs, e.loc, &requested);
}

Value FunctionAnalyzer::call_take(const ast::Expr& e) {
  if (!check_arguments(e, 2, 2, {})) return Value::error();
  Value x = operand(*e.args[0]);
  Value idx = operand(*e.args[1]);
  if (x.failed() || idx.failed()) return Value::error();
  if (!ir::is_integer(idx.type.dtype) || idx.type.rank() != 1) {
    error(e.args[1]->loc, fmt::format("take needs an integer vector of row indices but '{}' is {}",
                                      expr_text(*e.args[1]), ir::type_str(idx.type)));
    return Value::error();
  }
  return apply(Op::Take, {x, idx}, ir::Attrs{}, e.loc);
}

std::optional<FunctionAnalyzer::JoinArgs> FunctionAnalyzer::join_arguments(const ast::Expr& e,
                                                                            const std::vector<ast::ExprPtr>& args) {
  JoinArgs r;
  bool failed = false;
  for (const auto& a : args) {
    r.xs.push_back(expr(*a));
    failed |= r.xs.back().failed();
  }
  std::optional<int64_t> axis = 0;
  if (const ast::Expr* axis_arg = keyword(e, "axis")) axis = int_argument(*axis_arg, "axis");
  if (!axis || failed) return std::nullopt;
  r.axis = *axis;
  auto dtype = common_dtype(r.xs);
  for (size_t i = 0; i < r.xs.size(); ++i) {
    auto c = convert(r.xs[i], *dtype, args[i]->loc);
    if (!c) return std::nullopt;
    r.xs[i] = *c;
  }
  return r;
}

Value FunctionAnalyzer::call_concat(const ast::Expr& e) {
  if (!check_arguments(e, 2, SIZE_MAX, {"axis"})) return Value::error();
  std::optional<JoinArgs> joined = join_arguments(e, e.args);
  if (!joined) return Value::error();
  std::vector<Value>& xs = joined->xs;
  std::optional<int64_t> axis = joined->axis;
  std::string why;
  auto normalized = normalize_axis(*axis, xs[0].type.rank(), &why);
  if (!normalized) {
    const ast::Expr* axis_arg = keyword(e, "axis");
    error(axis_arg ? axis_arg->loc : e.loc, fmt::format("{} in concat: '{}' has type {}", why,
                                                        expr_text(*e.args[0]), ir::type_str(xs[0].type)));
    return Value::error();
  }
  ir::Attrs attrs;
  attrs.axis = *normalized;
  return apply(Op::Concat, std::move(xs), attrs, e.loc);
}

Value FunctionAnalyzer::call_slice(const ast::Expr& e) {
  if (!check_arguments(e, 3, 3, {"axis"})) return Value::error();
  Value x = operand(*e.args[0]);
  auto start = int_argument(*e.args[1], "slice's start");
  auto stop = int_argument(*e.args[2], "slice's stop");
  std::optional<int64_t> axis = 0;
  const ast::Expr* axis_arg = keyword(e, "axis");
  if (axis_arg) axis = int_argument(*axis_arg, "axis");
  if (!start || !stop || !axis || x.failed()) return Value::error();
  std::string text = expr_text(*e.args[0]);
  std::string why;
  auto normalized = normalize_axis(*axis, x.type.rank(), &why);
  if (!normalized) {
    error(axis_arg ? axis_arg->loc : e.loc,
          fmt::format("{} in slice: '{}' has type {}", why, text, ir::type_str(x.type)));
    return Value::error();
  }
  const ir::Dim& d = x.type.shape[size_t(*normalized)];
  if (d.is_symbolic()) {
    error(e.loc, fmt::format("slice needs a static size along axis {}, but '{}' has type {}", *normalized,
                             text, ir::type_str(x.type)));
    return Value::error();
  }
  // Negative bounds count from the end, as in Python.
  int64_t lo = *start < 0 ? *start + d.size : *start;
  int64_t hi = *stop < 0 ? *stop + d.size : *stop;
  if (lo < 0 || hi > d.size || lo > hi) {
    error(e.args[1]->loc, fmt::format("slice [{}, {}) is out of range for axis {} of '{}', which has size {}",
                                      *start, *stop, *normalized, text, d.size));
    return Value::error();
  }
  ir::Attrs attrs;
  attrs.axis = *normalized;
  attrs.start = lo;
  attrs.stop = hi;
  return apply(Op::Slice, {x}, attrs, e.loc);
}

Value FunctionAnalyzer::call_grad(const ast::Expr& e) {
  if (!check_arguments(e, 2, SIZE_MAX, {})) return Value::error();
  Value loss = operand(*e.args[0]);
  bool ok = true;
  std::vector<ast::NameRef> variables;
  for (size_t i = 1; i < e.args.size(); ++i) {
    const ast::Expr& arg = *e.args[i];
    if (arg.kind == ast::ExprKind::Error) { ok = false; continue; }
    if (arg.kind != ast::ExprKind::Name) {
      error(arg.loc, fmt::format("grad differentiates with respect to shared variables and inputs, named directly; "
                                 "found '{}'", expr_text(arg)));
      ok = false;
      continue;
    }
    variables.push_back(ast::NameRef{arg.text, arg.loc});
  }
  Value g = gradient_of("grad", loss, *e.args[0], variables, e.loc, /*inputs_allowed=*/true);
  return ok ? g : Value::error();
}

Value FunctionAnalyzer::gradient_of(const char* construct, const Value& loss, const ast::Expr& loss_expr,
                                    const std::vector<ast::NameRef>& variables, SourceLoc loc,
                                    bool inputs_allowed) {
  bool ok = !loss.failed();
  std::string loss_text = expr_text(loss_expr);
  if (ok && loss.is_literal()) {
    error(loss_expr.loc, fmt::format("{} needs a loss that depends on the variables, but '{}' is a constant",
                                     construct, loss_text));
    ok = false;
  } else if (ok && !ir::is_float(loss.type.dtype)) {
    error(loss_expr.loc, fmt::format("{} needs a floating loss but '{}' is {}", construct, loss_text,
                                     ir::type_str(loss.type)));
    ok = false;
  } else if (ok && loss.type.rank() != 0) {
    error(loss_expr.loc, fmt::format("{} needs a scalar loss but '{}' has shape {}; reduce it, e.g. "
                                     "mean({})", construct, loss_text, ir::shape_str(loss.type.shape), loss_text));
    ok = false;
  }
  std::vector<Value> operands{loss};
  std::map<int64_t, SourceLoc> seen;
  for (const ast::NameRef& name : variables) {
    ast::Expr arg;
    arg.kind = ast::ExprKind::Name;
    arg.text = name.name;
    arg.loc = name.loc;
    Value v = expr(arg);
    if (v.failed()) { ok = false; continue; }
    const Op read = v.kind == Value::Kind::Node ? fn_.nodes[size_t(v.node)].op : Op::Constant;
    if (read != Op::SharedRead && !(inputs_allowed && read == Op::Input)) {
      auto local = scope_.find(name.name);
      const bool is_param = local != scope_.end() && local->second.kind == Binding::Kind::Param;
      error(name.loc, fmt::format("{} differentiates with respect to {}, but '{}' is {}", construct,
                                  inputs_allowed ? "shared variables and inputs, named directly" : "shared variables",
                                  name.name, is_param ? "a parameter" : inputs_allowed ? "a local value" :
                                  "not a shared variable"));
      ok = false;
      continue;
    }
    // `seen` keys: a shared variable's index, or -1 - an input's index.
    const int64_t index = fn_.nodes[size_t(v.node)].attrs.index;
    const int64_t key = read == Op::SharedRead ? index : -1 - index;
    // The variable's own name (a helper's parameter may pass it on under another).
    const std::string& var_name = read == Op::SharedRead ? ctx_.module.shareds[size_t(index)].name
                                                         : fn_.params[size_t(index)].name;
    if (!ir::is_float(v.type.dtype)) {
      error(name.loc, fmt::format("{} needs floating variables but '{}' is {}", construct, var_name,
                                  ir::type_str(v.type)));
      ok = false;
      continue;
    }
    if (auto it = seen.find(key); it != seen.end()) {
      error(name.loc, fmt::format("'{}' appears twice in {} (first at {}:{})", var_name, construct, it->second.line,
                                  it->second.col));
      ok = false;
      continue;
    }
    seen.emplace(key, name.loc);
    operands.push_back(v);
  }
  // No variables left: each was reported (grad's non-name arguments).
  if (!ok || operands.size() == 1) return Value::error();
  return apply(Op::Grad, std::move(operands), ir::Attrs{}, loc);
}

}  // namespace synk::dsl::sema
