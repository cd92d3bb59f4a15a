// Scalar semantics of pointwise ops (see scalar_semantics.h).
#include "compiler/scalar_semantics.h"

#include <cmath>
#include <limits>

namespace synk::compiler {

Scalar make_scalar(ir::DType dtype, double f, int64_t i) {
  Scalar s;
  s.dtype = dtype;
  switch (dtype) {
    case ir::DType::F32: s.f = double(float(f)); break;
    case ir::DType::F64: s.f = f; break;
    case ir::DType::I32: s.i = int64_t(int32_t(uint32_t(uint64_t(i)))); break;
    case ir::DType::I64: s.i = i; break;
    case ir::DType::U8: s.i = int64_t(uint64_t(i) & 0xff); break;
    case ir::DType::Bool: s.i = i != 0; break;
    default: s.f = f; s.i = i; break;
  }
  return s;
}

int64_t integer_pow(int64_t base, int64_t exponent, ir::DType dtype) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent % 2 == 0) ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = uint64_t(base);
  uint64_t e = uint64_t(exponent);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return make_scalar(dtype, 0, int64_t(result)).i;
}

namespace {

double nan_max(double a, double b) { return (a > b || a != a) ? a : b; }
double nan_min(double a, double b) { return (a < b || a != a) ? a : b; }

std::optional<Scalar> cast(const Scalar& a, ir::DType to) {
  if (ir::is_float(to)) return make_scalar(to, a.as_double(), 0);
  if (to == ir::DType::Bool) return make_scalar(to, 0, ir::is_float(a.dtype) ? (a.f != 0) : (a.i != 0));
  if (!ir::is_float(a.dtype)) return make_scalar(to, 0, a.i);
  double t = std::trunc(a.f);
  double lo = to == ir::DType::I32 ? -2147483648.0 : to == ir::DType::U8 ? 0.0 : -9223372036854775808.0;
  double hi = to == ir::DType::I32 ? 2147483647.0 : to == ir::DType::U8 ? 255.0 : 9223372036854775807.0;
  if (!(t >= lo && t <= hi) || (to == ir::DType::I64 && t >= 9223372036854775807.0)) return std::nullopt;
  return make_scalar(to, 0, int64_t(t));
}

}  // namespace

std::optional<Scalar> eval_pointwise(ir::Op op, ir::DType result, const std::vector<Scalar>& args) {
  using ir::Op;
  const bool flt = ir::is_float(result);
  auto F = [&](double v) { return std::optional<Scalar>(make_scalar(result, v, 0)); };
  auto I = [&](int64_t v) { return std::optional<Scalar>(make_scalar(result, 0, v)); };
  auto B = [&](bool v) { return std::optional<Scalar>(make_scalar(ir::DType::Bool, 0, v)); };
  const Scalar& a = args.at(0);
  switch (op) {
    case Op::Neg: return flt ? F(-a.f) : I(int64_t(0ull - uint64_t(a.i)));
    case Op::Abs: return flt ? F(std::fabs(a.f)) : I(a.i < 0 ? int64_t(0ull - uint64_t(a.i)) : a.i);
    case Op::Exp: return F(std::exp(a.f));
    case Op::Log: return F(std::log(a.f));
    case Op::Sqrt: return F(std::sqrt(a.f));
    case Op::Tanh: return F(std::tanh(a.f));
    case Op::Sigmoid: return F(1.0 / (1.0 + std::exp(-a.f)));
    case Op::Relu: return flt ? F(a.f < 0 ? 0.0 : a.f) : I(a.i < 0 ? 0 : a.i);
    case Op::Not: return B(a.i == 0);
    case Op::Cast: return cast(a, result);
    default: break;
  }
  const Scalar& b = args.at(1);
  const bool cmp_flt = ir::is_float(a.dtype);
  switch (op) {
    case Op::Add:
      if (result == ir::DType::Bool) return B(a.i || b.i);
      return flt ? F(a.f + b.f) : I(int64_t(uint64_t(a.i) + uint64_t(b.i)));
    case Op::Sub: return flt ? F(a.f - b.f) : I(int64_t(uint64_t(a.i) - uint64_t(b.i)));
    case Op::Mul:
      if (result == ir::DType::Bool) return B(a.i && b.i);
      return flt ? F(a.f * b.f) : I(int64_t(uint64_t(a.i) * uint64_t(b.i)));
    case Op::Div:
      if (!flt) return std::nullopt;
      return F(a.f / b.f);
    case Op::Pow: return flt ? F(std::pow(a.f, b.f)) : I(integer_pow(a.i, b.i, result));
    case Op::Maximum: return flt ? F(nan_max(a.f, b.f)) : I(a.i > b.i ? a.i : b.i);
    case Op::Minimum: return flt ? F(nan_min(a.f, b.f)) : I(a.i < b.i ? a.i : b.i);
    case Op::Eq: return B(cmp_flt ? a.f == b.f : a.i == b.i);
    case Op::Ne: return B(cmp_flt ? a.f != b.f : a.i != b.i);
    case Op::Lt: return B(cmp_flt ? a.f < b.f : a.i < b.i);
    case Op::Le: return B(cmp_flt ? a.f <= b.f : a.i <= b.i);
    case Op::Gt: return B(cmp_flt ? a.f > b.f : a.i > b.i);
    case Op::Ge: return B(cmp_flt ? a.f >= b.f : a.i >= b.i);
    case Op::And: return B(a.i && b.i);
    case Op::Or: return B(a.i || b.i);
    case Op::Where: return a.i ? args.at(1) : args.at(2);
    default: return std::nullopt;
  }
}

}  // namespace synk::compiler
