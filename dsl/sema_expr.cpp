// Semantic analysis of expressions: names, literals (weak until they meet a typed value),
// unary and binary operators with promotion and broadcasting, and the plumbing every built-in
// operation shares (implicit casts, node creation, reporting infer_type's messages). The
// built-in operations themselves are in sema_builtins.cpp.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "dsl/frontend.h"
#include "dsl/sema.h"
#include "ir/type_infer.h"

namespace synk::dsl::sema {

using ir::DType;
using ir::Op;

namespace {

constexpr const char* kInitializers[] = {"zeros", "ones", "const", "normal", "uniform", "load"};

Op binary_op(const std::string& spelling) {
  static const std::map<std::string, Op> ops = {
      {"+", Op::Add}, {"-", Op::Sub}, {"*", Op::Mul}, {"/", Op::Div}, {"%", Op::Mod}, {"**", Op::Pow},
      {"@", Op::MatMul}, {"==", Op::Eq}, {"!=", Op::Ne}, {"<", Op::Lt}, {"<=", Op::Le},
      {">", Op::Gt}, {">=", Op::Ge}, {"&&", Op::And}, {"||", Op::Or}};
  auto it = ops.find(spelling);
  if (it == ops.end()) internal_error("unknown binary operator '" + spelling + "'");
  return it->second;
}

// "'x' is i32[n, 10]", or "'2' is an integer literal".
std::string what_is(const Value& v, const ast::Expr& e) {
  if (!v.is_literal()) return fmt::format("'{}' is {}", expr_text(e), ir::type_str(v.type));
  const char* kind = v.literal == LiteralKind::Int ? "an integer" : v.literal == LiteralKind::Float ? "a float" : "a bool";
  return fmt::format("'{}' is {} literal", expr_text(e), kind);
}

}  // namespace

// ---- Small shared pieces -----------------------------------------------------------------

Value int_literal(int64_t v) {
  Value out;
  out.kind = Value::Kind::Literal;
  out.literal = LiteralKind::Int;
  out.ivalue = v;
  out.type = ir::TensorType{v >= INT32_MIN && v <= INT32_MAX ? DType::I32 : DType::I64, {}};
  return out;
}

Value float_literal(double v) {
  Value out;
  out.kind = Value::Kind::Literal;
  out.literal = LiteralKind::Float;
  out.fvalue = v;
  out.type = ir::TensorType{DType::F32, {}};
  return out;
}

Value bool_literal(bool v) {
  Value out;
  out.kind = Value::Kind::Literal;
  out.literal = LiteralKind::Bool;
  out.ivalue = v ? 1 : 0;
  out.type = ir::TensorType{DType::Bool, {}};
  return out;
}

DType weak_dtype(DType strong, LiteralKind kind) {
  switch (kind) {
    case LiteralKind::Float: return ir::is_float(strong) ? strong : DType::F32;
    case LiteralKind::Int: return strong == DType::Bool ? DType::I32 : strong;
    case LiteralKind::Bool: return strong;
  }
  return strong;
}

// The window ops' gradient forms (conv2d_backward_data, ...) are not in the user's table but
// parse, so that printed IR reads back.
bool is_builtin_op(std::string_view name) { return checks::is_builtin_operation(name) || is_window_builtin(name); }

std::string expr_text(const ast::Expr& e) {
  auto inner = [](const ast::Expr& x) {
    std::string t = expr_text(x);
    return x.kind == ast::ExprKind::Binary ? "(" + t + ")" : t;
  };
  std::string out;
  switch (e.kind) {
    case ast::ExprKind::IntLiteral: out = std::to_string(e.int_value); break;
    case ast::ExprKind::FloatLiteral: out = float_text(e.float_value); break;   // 0.0, not 0
    case ast::ExprKind::BoolLiteral: out = e.int_value ? "true" : "false"; break;
    case ast::ExprKind::StringLiteral: out = "\"" + e.text + "\""; break;
    case ast::ExprKind::Name: out = e.text; break;
    case ast::ExprKind::Unary: out = e.text + (e.args.empty() ? "?" : inner(*e.args[0])); break;
    case ast::ExprKind::Binary:
      out = e.args.size() == 2 ? inner(*e.args[0]) + " " + e.text + " " + inner(*e.args[1]) : "?";
      break;
    case ast::ExprKind::Call:
    case ast::ExprKind::List: {
      std::string items;
      for (const auto& a : e.args) items += (items.empty() ? "" : ", ") + expr_text(*a);
      for (const auto& k : e.kwargs) items += (items.empty() ? "" : ", ") + k.name + "=" + expr_text(*k.value);
      out = e.kind == ast::ExprKind::Call ? e.text + "(" + items + ")" : "[" + items + "]";
      break;
    }
    case ast::ExprKind::Error: out = "?"; break;
  }
  if (out.size() > 60) out = out.substr(0, 57) + "...";
  return out;
}

// ---- Nodes, conversions, promotion --------------------------------------------------------

ir::NodeId FunctionAnalyzer::add_node(Op op, std::vector<ir::NodeId> operands, ir::Attrs attrs,
                                      ir::TensorType type, SourceLoc loc) {
  ir::Node n;
  n.op = op;
  n.type = std::move(type);
  n.operands = std::move(operands);
  n.attrs = std::move(attrs);
  n.loc = loc;
  return fn_.add(std::move(n));
}

std::optional<Value> FunctionAnalyzer::convert(const Value& v, DType dtype, SourceLoc loc) {
  if (v.kind == Value::Kind::Node) {
    if (v.type.dtype == dtype) return v;
    ir::TensorType t{dtype, v.type.shape};
    ir::Attrs none;
    return Value::of_node(add_node(Op::Cast, {v.node}, none, t, loc), t);
  }
  if (v.kind != Value::Kind::Literal) return std::nullopt;
  Binding* binding = nullptr;
  if (!v.let_name.empty()) {
    auto it = scope_.find(v.let_name);
    if (it != scope_.end()) binding = &it->second;
    if (binding) {
      auto cached = binding->materialized.find(dtype);
      if (cached != binding->materialized.end())
        return Value::of_node(cached->second, ir::TensorType{dtype, {}});
    }
  }
  if (std::optional<std::string> why = checks::literal_error(v.literal, v.ivalue, v.fvalue, dtype)) {
    error(loc, std::move(*why));
    return std::nullopt;
  }
  ir::TensorType t{dtype, {}};
  ir::NodeId id = add_node(Op::Constant, {}, checks::constant_attrs(v.literal, v.ivalue, v.fvalue, dtype), t, loc);
  if (binding) {
    fn_.nodes[size_t(id)].name = v.let_name;
    binding->materialized.emplace(dtype, id);
  }
  return Value::of_node(id, t);
}

Value FunctionAnalyzer::materialize_default(const Value& v, SourceLoc loc) {
  if (!v.is_literal()) return v;
  auto converted = convert(v, v.type.dtype, loc);
  return converted ? *converted : Value::error();
}

std::optional<DType> FunctionAnalyzer::common_dtype(const std::vector<Value>& operands) {
  std::optional<DType> strong;
  for (const Value& v : operands)
    if (v.kind == Value::Kind::Node) strong = strong ? promote(*strong, v.type.dtype) : v.type.dtype;
  if (!strong) {
    for (const Value& v : operands)
      if (v.is_literal()) strong = strong ? promote(*strong, v.type.dtype) : v.type.dtype;
    return strong;
  }
  DType result = *strong;
  for (const Value& v : operands)
    if (v.is_literal()) result = weak_dtype(result, v.literal);
  return result;
}

Value FunctionAnalyzer::apply(Op op, std::vector<Value> operands, const ir::Attrs& attrs, SourceLoc loc,
                              const ir::TensorType* requested) {
  std::vector<ir::TensorType> types;
  std::vector<ir::NodeId> ids;
  for (Value& v : operands) {
    if (v.failed()) return Value::error();
    if (v.is_literal()) v = materialize_default(v, loc);
    if (v.failed()) return Value::error();
    types.push_back(v.type);
    ids.push_back(v.node);
  }
  InferResult r = infer_type(op, types, attrs, requested);
  if (!r.ok()) {
    error(loc, r.error);
    return Value::error();
  }
  ir::TensorType t = *r.type;
  return Value::of_node(add_node(op, std::move(ids), attrs, t, loc), t);
}

// Promotes every operand to one dtype, then applies `op`.
Value FunctionAnalyzer::pointwise(Op op, std::vector<Value> operands, SourceLoc loc) {
  for (const Value& v : operands)
    if (v.failed()) return Value::error();
  auto dtype = common_dtype(operands);
  if (!dtype) return Value::error();
  for (Value& v : operands) {
    auto converted = convert(v, *dtype, loc);
    if (!converted) return Value::error();
    v = *converted;
  }
  return apply(op, std::move(operands), ir::Attrs{}, loc);
}

// ---- Expressions --------------------------------------------------------------------------

Value FunctionAnalyzer::expr(const ast::Expr& e) {
  switch (e.kind) {
    case ast::ExprKind::IntLiteral: return int_literal(e.int_value);
    case ast::ExprKind::FloatLiteral: return float_literal(e.float_value);
    case ast::ExprKind::BoolLiteral: return bool_literal(e.int_value != 0);
    case ast::ExprKind::StringLiteral:
      error(e.loc, "a string is only allowed as the file name in load(\"...\") initializers");
      return Value::error();
    case ast::ExprKind::Name: return name(e);
    case ast::ExprKind::Unary: return unary(e);
    case ast::ExprKind::Binary: return binary(e);
    case ast::ExprKind::Call: return call(e);
    case ast::ExprKind::List:
      error(e.loc, fmt::format("a list such as {} is only allowed as an axis list, a shape or a permutation",
                               expr_text(e)));
      return Value::error();
    case ast::ExprKind::Error: return Value::error();
  }
  return Value::error();
}

Value FunctionAnalyzer::param_read(Binding& b, const std::string& param_name) {
  if (b.param_index < 0) return Value::error();
  if (!b.value.failed()) return b.value;
  ir::Attrs attrs;
  attrs.index = b.param_index;
  const ir::TensorType& t = fn_.params[size_t(b.param_index)].type;
  ir::NodeId id = add_node(Op::Input, {}, attrs, t, fn_.params[size_t(b.param_index)].loc);
  fn_.nodes[size_t(id)].name = param_name;
  b.value = Value::of_node(id, t);
  return b.value;
}

Value FunctionAnalyzer::shared_read(int64_t index, SourceLoc loc) {
  if (!ctx_.shared_ok[size_t(index)]) return Value::error();
  const ir::SharedVar& s = ctx_.module.shareds[size_t(index)];
  auto it = shared_reads_.find(index);
  if (it != shared_reads_.end()) return Value::of_node(it->second, s.type);
  ir::Attrs attrs;
  attrs.index = index;
  ir::NodeId id = add_node(Op::SharedRead, {}, attrs, s.type, loc);
  fn_.nodes[size_t(id)].name = s.name;
  shared_reads_.emplace(index, id);
  return Value::of_node(id, s.type);
}

std::optional<ir::Dim> FunctionAnalyzer::dimension_named(const std::string& text) const {
  if (!frames_.empty()) {
    const auto& dims = frames_.back().dims;
    if (auto it = dims.find(text); it != dims.end()) return it->second;
    return std::nullopt;
  }
  if (symbols_.count(text)) return ir::Dim::sym(text);
  return std::nullopt;
}

// `n` in `sum(x) / cast(n, f32)`: the i64 scalar the dimension is bound to in this call. A fixed
// size is a constant; a symbol is the sum of a 1 broadcast over [n], which every backend computes
// with operations it has (n additions of a constant, one small kernel).
Value FunctionAnalyzer::dimension_value(const ir::Dim& dim, SourceLoc loc) {
  if (auto it = dimension_values_.find(dim.symbol); dim.is_symbolic() && it != dimension_values_.end())
    return it->second;
  Value one = convert(int_literal(dim.is_symbolic() ? 1 : dim.size), DType::I64, loc).value_or(Value::error());
  if (!dim.is_symbolic() || one.failed()) return one;
  ir::TensorType spread{DType::I64, {dim}};
  Value value = reduce(Op::ReduceSum, apply(Op::BroadcastTo, {one}, ir::Attrs{}, loc, &spread), {0}, false, loc);
  if (!value.failed()) dimension_values_.emplace(dim.symbol, value);
  return value;
}

Value FunctionAnalyzer::name(const ast::Expr& e) {
  if (auto it = scope_.find(e.text); it != scope_.end()) {
    Binding& b = it->second;
    if (b.kind == Binding::Kind::Param) return param_read(b, e.text);
    if (b.argument) return argument_read(b);
    return b.value;
  }
  if (auto it = ctx_.globals.find(e.text); it != ctx_.globals.end()) {
    if (it->second.kind == Global::Kind::Shared) return shared_read(it->second.index, e.loc);
    if (it->second.kind == Global::Kind::Helper) {
      error(e.loc, fmt::format("'{}' is a helper and cannot be used as a value; call it, as in {}(...)", e.text,
                               e.text));
      return Value::error();
    }
    error(e.loc, fmt::format("'{}' is {} and cannot be used as a value", e.text, global_kind_text(it->second.kind)));
    return Value::error();
  }
  if (std::optional<ir::Dim> dim = dimension_named(e.text)) return dimension_value(*dim, e.loc);
  if (e.text == "inf") return float_literal(std::numeric_limits<double>::infinity());
  if (e.text == "nan") return float_literal(std::numeric_limits<double>::quiet_NaN());
  if (is_builtin_op(e.text)) {
    error(e.loc, fmt::format("'{}' is an operation; call it, as in {}(x)", e.text, e.text));
    return Value::error();
  }
  if (ir::dtype_from_name(e.text)) {
    error(e.loc, fmt::format("'{}' is a dtype and only allowed where a dtype is expected, as in cast(x, {})",
                             e.text, e.text));
    return Value::error();
  }
  std::vector<std::string> candidates;
  for (const auto& [n, b] : scope_) candidates.push_back(n);
  for (const auto& [n, g] : ctx_.globals)
    if (g.kind == Global::Kind::Shared) candidates.push_back(n);
  if (frames_.empty()) candidates.insert(candidates.end(), symbols_.begin(), symbols_.end());
  else
    for (const auto& [symbol, dim] : frames_.back().dims) candidates.push_back(symbol);
  error(e.loc, fmt::format("unknown name '{}'{}", e.text, did_you_mean(e.text, candidates)));
  return Value::error();
}

Value FunctionAnalyzer::unary(const ast::Expr& e) {
  Value v = expr(*e.args.at(0));
  if (v.failed()) return v;
  if (e.text == "-") {
    if (v.is_literal() && v.literal == LiteralKind::Float) return float_literal(-v.fvalue);
    if (v.is_literal() && v.literal == LiteralKind::Int && v.ivalue != INT64_MIN) return int_literal(-v.ivalue);
    if (v.type.dtype == DType::Bool) {
      error(e.loc, fmt::format("'-' needs a numeric operand but '{}' is bool; use '!' for logical not",
                               expr_text(*e.args[0])));
      return Value::error();
    }
    return apply(Op::Neg, {v}, ir::Attrs{}, e.loc);
  }
  if (v.type.dtype != DType::Bool) {
    error(e.loc, fmt::format("'!' needs a bool operand but {}", what_is(v, *e.args[0])));
    return Value::error();
  }
  if (v.is_literal()) return bool_literal(v.ivalue == 0);
  return apply(Op::Not, {v}, ir::Attrs{}, e.loc);
}

Value FunctionAnalyzer::binary(const ast::Expr& e) {
  Op op = binary_op(e.text);
  Value a = expr(*e.args.at(0));
  Value b = expr(*e.args.at(1));
  if (a.failed() || b.failed()) return Value::error();
  if (op == Op::And || op == Op::Or) {
    for (size_t i = 0; i < 2; ++i) {
      const Value& v = i == 0 ? a : b;
      if (v.type.dtype != DType::Bool) {
        error(e.loc, fmt::format("'{}' needs bool operands but {}", e.text, what_is(v, *e.args[i])));
        return Value::error();
      }
    }
  }
  if (op == Op::Div) {
    auto dtype = common_dtype({a, b});
    if (dtype && !ir::is_float(*dtype)) {
      std::string hint = a.is_literal() && b.is_literal()
                             ? fmt::format("write a float literal such as {}.0", expr_text(*e.args[0]))
                             : fmt::format("use cast({}, f32)", expr_text(a.is_literal() ? *e.args[1] : *e.args[0]));
      // `//` starts a comment, so name numpy's integer division too.
      error(e.loc, fmt::format("'/' needs floating operands but {} and {}; {} (or floor_divide({}, {}) for an "
                               "integer quotient)", what_is(a, *e.args[0]), what_is(b, *e.args[1]), hint,
                               expr_text(*e.args[0]), expr_text(*e.args[1])));
      return Value::error();
    }
  }
  return pointwise(op, {a, b}, e.loc);
}

Value FunctionAnalyzer::call(const ast::Expr& e) {
  static const std::map<std::string, Op> unary_ops = {
      {"exp", Op::Exp}, {"log", Op::Log}, {"sqrt", Op::Sqrt}, {"tanh", Op::Tanh},
      {"sigmoid", Op::Sigmoid}, {"relu", Op::Relu}, {"abs", Op::Abs}, {"neg", Op::Neg},
      {"log1p", Op::Log1p}, {"expm1", Op::Expm1}, {"softplus", Op::Softplus}, {"sin", Op::Sin},
      {"cos", Op::Cos}, {"floor", Op::Floor}, {"ceil", Op::Ceil}, {"round", Op::Round}, {"sign", Op::Sign}};
  static const std::map<std::string, Op> binary_ops = {
      {"pow", Op::Pow}, {"maximum", Op::Maximum}, {"minimum", Op::Minimum}, {"matmul", Op::MatMul},
      {"mod", Op::Mod}, {"floor_divide", Op::FloorDiv},
      {"binary_cross_entropy_with_logits", Op::BceWithLogits}};
  static const std::map<std::string, Op> reductions = {
      {"sum", Op::ReduceSum}, {"mean", Op::ReduceMean}, {"max", Op::ReduceMax},
      {"min", Op::ReduceMin}, {"prod", Op::ReduceProd}, {"argmax", Op::ArgMax}};
  const std::string& f = e.text;
  if (ctx_.helpers_named_like_builtins.count(f)) {   // reported at the helper's declaration
    for (const ast::ExprPtr& a : e.args)
      if (!literal_only(*a)) expr(*a);
    return Value::error();
  }
  if (auto it = unary_ops.find(f); it != unary_ops.end()) return call_unary(e, it->second);
  if (auto it = binary_ops.find(f); it != binary_ops.end()) return call_binary(e, it->second);
  if (auto it = reductions.find(f); it != reductions.end()) return call_reduction(e, it->second);
  if (f == "where") return call_where(e);
  if (f == "clip") return call_clip(e);
  if (f == "logsumexp") return call_logsumexp(e);
  if (f == "argmin") return call_argmin(e);
  if (f == "var" || f == "std") return call_variance(e, f == "std");
  if (f == "norm") return call_norm(e);
  if (f == "expand_dims") return call_expand_dims(e);
  if (f == "squeeze") return call_squeeze(e);
  if (f == "stack") return call_stack(e);
  if (f == "transpose") return call_transpose(e);
  if (f == "reshape") return call_reshape(e, false);
  if (f == "flatten") return call_reshape(e, true);
  if (f == "broadcast_to") return call_broadcast_to(e);
  if (f == "cast") return call_cast(e);
  if (f == "softmax") return call_softmax(e, Op::Softmax);
  if (f == "log_softmax") return call_softmax(e, Op::LogSoftmax);
  if (f == "cumsum") return call_cumsum(e);
  if (f == "cross_entropy") return call_cross_entropy(e);
  if (f == "one_hot") return call_one_hot(e);
  if (f == "take") return call_take(e);
  if (f == "concat") return call_concat(e);
  if (f == "slice") return call_slice(e);
  if (f == "grad") return call_grad(e);
  if (f == "dropout") return call_dropout(e);
  if (f == "uniform" || f == "normal" || f == "bernoulli" || f == "uniform_like" || f == "normal_like" ||
      f == "bernoulli_like")
    return call_random(e);
  if (is_window_builtin(f)) return call_window_builtin(e);
  if (auto it = ctx_.helpers.find(f); it != ctx_.helpers.end()) return call_helper_value(e, it->second);
  if (auto it = ctx_.globals.find(f); it != ctx_.globals.end()) {
    if (it->second.kind == Global::Kind::Function) {
      error(e.loc, fmt::format("'{}' is a function, not an operation; functions cannot be called (write the "
                               "shared part as a helper, 'def {}(...) {{ ... return ...; }}', and call that)",
                               f, f));
    } else {
      error(e.loc, fmt::format("'{}' is {}, not an operation", f, global_kind_text(it->second.kind)));
    }
    return Value::error();
  }
  if (std::find(std::begin(kInitializers), std::end(kInitializers), f) != std::end(kInitializers)) {
    error(e.loc, fmt::format("'{}' initializes shared variables and cannot be used in an expression", f));
    return Value::error();
  }
  if (std::optional<std::string> hint = checks::operation_alias_hint(f)) {
    error(e.loc, fmt::format("unknown operation or helper '{}'{}", f, *hint));
    return Value::error();
  }
  std::vector<std::string> candidates(checks::builtin_operations().begin(), checks::builtin_operations().end());
  for (const auto& [name, helper] : ctx_.helpers) candidates.push_back(name);
  error(e.loc, fmt::format("unknown operation or helper '{}'{}", f, did_you_mean(f, candidates)));
  return Value::error();
}

}  // namespace synk::dsl::sema
