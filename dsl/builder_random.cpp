// The C++ builder's random operations: uniform, normal and bernoulli over a shape or `_like` a
// value, and dropout, each the counterpart of sema's handler (dsl/sema_random.cpp): one
// ir::Op::Random node (a uniform [0, 1) or standard normal draw) and the same pointwise ops
// around it. A draw's number (attrs.salt) is given when it is written into a function, in the
// order sema would number it, and whether its axis 0 is the call's rows once the function is
// built (builder.cpp), since only the whole function says which dimensions are scattered.
#include <cmath>

#include <fmt/format.h>

#include "dsl/builder.h"
#include "dsl/checks.h"
#include "dsl/builder_internal.h"

namespace synk::dsl {

using builder_detail::describe;
using builder_detail::ExprNode;
using builder_detail::make_op;
using builder_detail::require;
using builder_detail::target_shape;
using ir::DType;
using ir::Op;

namespace {

// The smallest multiple of 2^-24 that is >= p (sema_random.cpp: exact in f32, and philox.h's
// bernoulli).
double threshold24(double p) { return std::ceil(p * 16777216.0) / 16777216.0; }

// One draw: `dist` 0 uniform [0, 1), 1 standard normal. `like`: the value whose shape it takes,
// which sema evaluates before the draw.
Expr draw(int64_t dist, const ir::TensorType& type, std::vector<std::string> symbols, const Expr* like) {
  ir::Attrs attrs;
  attrs.index = dist;
  Expr u = make_op(Op::Random, {}, attrs, &type, std::move(symbols));
  if (!like) return u;
  return builder_detail::with_sequence(u, {like->node()}, {});
}

void check_probability(double p, const char* op) {
  if (!(p >= 0 && p <= 1)) throw UserError(fmt::format("{}'s probability must be a number in [0, 1], found {}", op, p));
}

// uniform / normal: a draw, scaled and shifted as sema writes it.
Expr continuous(bool normal, const char* op, ir::TensorType type, std::vector<std::string> symbols, double a,
                double b, const Expr* like) {
  if (!ir::is_float(type.dtype))
    throw UserError(fmt::format("{} draws floating values; dtype must be f32 or f64, found {}", op,
                                ir::dtype_name(type.dtype)));
  if (!std::isfinite(a) || !std::isfinite(b))
    throw UserError(fmt::format("{}'s {} must be a finite number, found {}", op,
                                std::isfinite(a) ? (normal ? "std" : "high") : (normal ? "mean" : "low"),
                                std::isfinite(a) ? b : a));
  if (normal ? !(b >= 0) : !(a < b))
    throw UserError(normal ? fmt::format("{}'s std must be >= 0, found {}", op, b)
                           : fmt::format("{} needs low < high, found low={} and high={}", op, a, b));
  if (std::optional<std::string> why = checks::random_parameters_fit_error(normal, a, b, type.dtype))
    throw UserError(std::move(*why));
  if (std::optional<std::string> why = normal ? std::nullopt : checks::uniform_width_error(a, b, type.dtype))
    throw UserError(std::move(*why));
  Expr out = draw(normal ? 1 : 0, type, std::move(symbols), like);
  const double scale = normal ? b : b - a;
  if (scale != 1) out = mul(out, Expr(scale));
  if (a != 0) out = add(out, Expr(a));
  return out;
}

Expr binary(const char* op, const ir::Shape& shape, std::vector<std::string> symbols, double p, DType dtype,
            const Expr* like) {
  check_probability(p, op);
  const Expr hit = less(draw(0, ir::TensorType{DType::F32, shape}, std::move(symbols), like), Expr(threshold24(p)));
  return dtype == DType::Bool ? hit : cast(hit, dtype);
}

ir::TensorType like_type(const Expr& x) {
  return ir::TensorType{ir::is_float(x.dtype()) ? x.dtype() : DType::F32, x.shape()};
}

}  // namespace

Expr uniform(ShapeArg shape, double low, double high, DType dtype) {
  std::vector<std::string> symbols;
  ir::TensorType type{dtype, target_shape(shape, "uniform", false, symbols)};
  return continuous(false, "uniform", type, std::move(symbols), low, high, nullptr);
}

Expr normal(ShapeArg shape, double mean, double std, DType dtype) {
  std::vector<std::string> symbols;
  ir::TensorType type{dtype, target_shape(shape, "normal", false, symbols)};
  return continuous(true, "normal", type, std::move(symbols), mean, std, nullptr);
}

Expr bernoulli(ShapeArg shape, double p, DType dtype) {
  std::vector<std::string> symbols;
  ir::Shape s = target_shape(shape, "bernoulli", false, symbols);
  return binary("bernoulli", s, std::move(symbols), p, dtype, nullptr);
}

Expr uniform_like(const Expr& x, double low, double high) {
  require(x, "uniform_like");
  return continuous(false, "uniform_like", like_type(x), {}, low, high, &x);
}

Expr normal_like(const Expr& x, double mean, double std) {
  require(x, "normal_like");
  return continuous(true, "normal_like", like_type(x), {}, mean, std, &x);
}

Expr bernoulli_like(const Expr& x, double p) {
  require(x, "bernoulli_like");
  return binary("bernoulli_like", x.shape(), {}, p, like_type(x).dtype, &x);
}

Expr dropout(const Expr& x, double p, bool training) {
  const ExprNode& n = *require(x, "dropout");
  if (!ir::is_float(n.type.dtype))
    throw UserError(fmt::format("dropout needs a floating operand but the operand is {}", describe(n)));
  check_probability(p, "dropout");
  if (!training || p == 0) return x;
  const Expr u = draw(0, ir::TensorType{DType::F32, x.shape()}, {}, nullptr);
  const Expr keep = greater_equal(u, Expr(threshold24(p)));
  const Expr kept = p < 1 ? mul(x, Expr(1.0 / (1.0 - p))) : x;
  return builder_detail::with_sequence(where(keep, kept, cast(Expr(0.0), n.type.dtype)), {x.node()}, {});
}

}  // namespace synk::dsl
