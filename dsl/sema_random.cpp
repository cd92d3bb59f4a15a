// Semantic analysis of the random ops (docs/language.md, "Random numbers"): uniform, normal and
// bernoulli over a shape or `_like` a value, and dropout. Each becomes one ir::Op::Random node (a
// uniform [0, 1) or standard normal draw of base/philox.h) and ordinary pointwise ops around it,
// which fuse and differentiate like any other: dropout is where(u >= p, x * 1/(1-p), 0), so its
// gradient reads the very mask the forward pass drew. A random op's salt is its index among the
// function's random ops (the printer writes it back as `salt=`); an op whose axis 0 is a
// scattered row dimension draws at the call's rows, whatever split of them a rank computes.
#include <cmath>

#include <fmt/format.h>

#include "dsl/checks.h"
#include "dsl/sema.h"

namespace synk::dsl::sema {

using ir::DType;
using ir::Op;

namespace {

// The smallest multiple of 2^-24 that is >= p: `u < that` for u = k 2^-24 is exactly philox.h's
// bernoulli (k < ceil(p 2^24)), and it is exact in f32.
double threshold24(double p) { return std::ceil(p * 16777216.0) / 16777216.0; }

}  // namespace

bool FunctionAnalyzer::is_training_function() const {
  for (const ast::Stmt& s : decl_.body)
    if (s.kind == ast::StmtKind::Minimize || (s.kind == ast::StmtKind::Update && !s.optimizer.empty())) return true;
  return false;
}

std::optional<double> FunctionAnalyzer::random_parameter(const ast::Expr& call, const char* name, double fallback) {
  const ast::Expr* written = keyword(call, name);
  if (!written) return fallback;
  const ast::Expr* arg = &literal_argument(*written);
  std::optional<double> v = literal_number(*arg);
  if (!v || !std::isfinite(*v)) {
    if (arg->kind != ast::ExprKind::Error)
      error(arg->loc, fmt::format("{}'s {} must be a finite number, found '{}'", call.text, name, expr_text(*arg)));
    return std::nullopt;
  }
  return v;
}

// One Random node: `dist` 0 uniform [0, 1), 1 standard normal, of `type`.
Value FunctionAnalyzer::random_node(const ast::Expr& call, int64_t dist, const ir::TensorType& type) {
  ir::Attrs attrs;
  attrs.index = dist;
  attrs.salt = next_salt_;
  if (const ast::Expr* salt = keyword(call, "salt")) {   // as the IR printer writes it
    std::optional<int64_t> s = int_argument(*salt, "salt");
    if (!s) return Value::error();
    if (*s < 0 || *s > 0xffffffffLL) {
      error(salt->loc, fmt::format("salt must be in [0, 2^32), found {}", *s));
      return Value::error();
    }
    attrs.salt = *s;
  }
  next_salt_ = std::max(next_salt_, attrs.salt + 1);
  attrs.global_rows = type.rank() > 0 && type.shape[0].is_symbolic() && scattered_.count(type.shape[0].symbol) > 0;
  return apply(Op::Random, {}, attrs, call.loc, &type);
}

// uniform(shape, low=0, high=1, dtype=f32), normal(shape, mean=0, std=1, dtype=f32),
// bernoulli(shape, p, dtype=f32) and their `_like(x, ...)` forms (x's shape; x's dtype when
// floating, else f32).
Value FunctionAnalyzer::call_random(const ast::Expr& e) {
  const bool like = e.text.size() > 5 && e.text.compare(e.text.size() - 5, 5, "_like") == 0;
  const std::string base = like ? e.text.substr(0, e.text.size() - 5) : e.text;
  const bool bernoulli = base == "bernoulli";
  if (const ast::Expr* seed = keyword(e, "seed"); seed && !like && !bernoulli) {
    error(e.loc, fmt::format("'{0}(seed=...)' initializes shared variables and cannot be used in an expression; "
                             "{0}(shape, ...) draws from the function's seed and step (set from C++ or synkc run --seed)",
                             e.text));
    return Value::error();
  }
  const size_t positional = bernoulli ? 2 : 1;
  const bool arguments_ok = base == "uniform" ? check_arguments(e, positional, positional, {"low", "high", "dtype", "salt"})
                            : base == "normal" ? check_arguments(e, positional, positional, {"mean", "std", "dtype", "salt"})
                                               : check_arguments(e, positional, positional, {"dtype", "salt"});
  if (!arguments_ok) return Value::error();
  ir::TensorType type{DType::F32, {}};
  if (like) {
    if (keyword(e, "dtype")) {
      error(keyword(e, "dtype")->loc, fmt::format("{} takes the dtype of its operand; use {}(shape, dtype=...)", e.text, base));
      return Value::error();
    }
    Value x = operand(*e.args[0]);
    if (x.failed()) return x;
    type = ir::TensorType{ir::is_float(x.type.dtype) ? x.type.dtype : DType::F32, x.type.shape};
  } else {
    std::optional<ir::Shape> shape = shape_argument(*e.args[0], e.text.c_str(), false);
    if (!shape) return Value::error();
    type.shape = *shape;
    if (const ast::Expr* d = keyword(e, "dtype")) {
      std::optional<DType> dtype = dtype_argument(*d);
      if (!dtype) return Value::error();
      if (!ir::is_float(*dtype) && !bernoulli) {
        error(d->loc, fmt::format("{} draws floating values; dtype must be f32 or f64, found {}", e.text, ir::dtype_name(*dtype)));
        return Value::error();
      }
      type.dtype = *dtype;
    }
  }
  if (bernoulli) {
    const ast::Expr& pa = literal_argument(*e.args[1]);
    std::optional<double> p = literal_number(pa);
    if (!p || !(*p >= 0 && *p <= 1)) {
      error(pa.loc, fmt::format("{}'s probability must be a number in [0, 1], found '{}'", e.text, expr_text(pa)));
      return Value::error();
    }
    Value u = random_node(e, 0, ir::TensorType{DType::F32, type.shape});
    if (u.failed()) return u;
    Value hit = pointwise(Op::Lt, {u, float_literal(threshold24(*p))}, e.loc);
    std::optional<Value> r = convert(hit, type.dtype, e.loc);
    return r ? *r : Value::error();
  }
  const bool normal = base == "normal";
  std::optional<double> a = random_parameter(e, normal ? "mean" : "low", 0.0);
  std::optional<double> b = random_parameter(e, normal ? "std" : "high", 1.0);
  if (!a || !b) return Value::error();
  if (normal ? !(*b >= 0) : !(*a < *b)) {
    error(e.loc, normal ? fmt::format("{}'s std must be >= 0, found {}", e.text, *b)
                        : fmt::format("{} needs low < high, found low={} and high={}", e.text, *a, *b));
    return Value::error();
  }
  if (std::optional<std::string> why = checks::random_parameters_fit_error(normal, *a, *b, type.dtype)) {
    error(e.loc, std::move(*why));
    return Value::error();
  }
  if (std::optional<std::string> why = normal ? std::nullopt : checks::uniform_width_error(*a, *b, type.dtype)) {
    error(e.loc, std::move(*why));
    return Value::error();
  }
  Value draw = random_node(e, normal ? 1 : 0, type);
  if (draw.failed()) return draw;
  const double scale = normal ? *b : *b - *a;
  if (scale != 1) draw = pointwise(Op::Mul, {draw, float_literal(scale)}, e.loc);
  if (*a != 0) draw = pointwise(Op::Add, {draw, float_literal(*a)}, e.loc);
  return draw;
}

// dropout(x, p, training=...): in training, each element is kept with probability 1 - p and
// scaled by 1/(1-p), else +0; evaluating, x itself. `training` defaults to whether the function
// is a training function (it has `minimize`, or an `update ... using`).
Value FunctionAnalyzer::call_dropout(const ast::Expr& e) {
  if (!check_arguments(e, 2, 2, {"training", "salt"})) return Value::error();
  Value x = operand(*e.args[0]);
  if (x.failed()) return x;
  if (!ir::is_float(x.type.dtype)) {
    error(e.args[0]->loc, fmt::format("dropout needs a floating operand but '{}' is {}", expr_text(*e.args[0]),
                                      ir::type_str(x.type)));
    return Value::error();
  }
  const ast::Expr& pa = literal_argument(*e.args[1]);
  std::optional<double> p = literal_number(pa);
  if (!p || !(*p >= 0 && *p <= 1)) {
    error(pa.loc, fmt::format("dropout's probability must be a number in [0, 1], found '{}'", expr_text(pa)));
    return Value::error();
  }
  std::optional<bool> training = is_training_function();
  if (const ast::Expr* t = keyword(e, "training")) training = bool_argument(*t, "training");
  if (!training) return Value::error();
  if (!*training || *p == 0) return x;
  Value u = random_node(e, 0, ir::TensorType{DType::F32, x.type.shape});
  if (u.failed()) return u;
  Value keep = pointwise(Op::Ge, {u, float_literal(threshold24(*p))}, e.loc);
  Value kept = *p < 1 ? pointwise(Op::Mul, {x, float_literal(1.0 / (1.0 - *p))}, e.loc) : x;
  std::optional<Value> zero = convert(float_literal(0.0), x.type.dtype, e.loc);
  if (keep.failed() || kept.failed() || !zero) return Value::error();
  return apply(Op::Where, {keep, kept, *zero}, ir::Attrs{}, e.loc);
}

}  // namespace synk::dsl::sema
