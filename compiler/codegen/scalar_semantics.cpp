// Scalar semantics of pointwise ops (see scalar_semantics.h).
#include "compiler/codegen/scalar_semantics.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "base/diagnostics.h"
#include "base/numpy_math.h"

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
    case Op::Log1p: return F(std::log1p(a.f));
    case Op::Expm1: return F(std::expm1(a.f));
    case Op::Softplus: return F(numpy_math::softplus(a.f));
    case Op::Sin: return F(std::sin(a.f));
    case Op::Cos: return F(std::cos(a.f));
    case Op::Floor: return flt ? F(std::floor(a.f)) : I(a.i);
    case Op::Ceil: return flt ? F(std::ceil(a.f)) : I(a.i);
    case Op::Round: return flt ? F(numpy_math::round_half_even(a.f)) : I(a.i);
    case Op::Sign: return flt ? F(numpy_math::sign(a.f)) : I(a.i > 0 ? 1 : a.i < 0 ? -1 : 0);
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
    case Op::Mod: case Op::FloorDiv:
      // An integer division by zero is left to the kernel, which reports it with the location.
      if (!flt && b.i == 0) return std::nullopt;
      if (op == Op::Mod) return flt ? F(numpy_math::floor_mod(a.f, b.f)) : I(numpy_math::int_floor_mod(a.i, b.i));
      return flt ? F(numpy_math::floor_divide(a.f, b.f)) : I(numpy_math::int_floor_divide(a.i, b.i));
    case Op::BceWithLogits: return F(numpy_math::bce_with_logits(a.f, b.f));
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

namespace {

// `text` with each hole replaced by its name (every hole must be there).
std::string fill_holes(std::string_view text, std::initializer_list<std::pair<std::string_view, std::string_view>> holes) {
  std::string out(text);
  for (const auto& [hole, name] : holes) {
    size_t at = out.find(hole);
    if (at == std::string::npos) synk::internal_error(std::string("prelude: no ") + std::string(hole) + " in the text");
    out.replace(at, hole.size(), name);
  }
  return out;
}

}  // namespace

std::string scalar_prelude(std::string_view float_pow, std::string_view double_pow) {
  static const std::string_view text = R"PRELUDE(SYNK_INLINE float synk_add_f32(float a, float b) { return a + b; }
SYNK_INLINE double synk_add_f64(double a, double b) { return a + b; }
SYNK_INLINE int32_t synk_add_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
SYNK_INLINE int64_t synk_add_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
SYNK_INLINE uint8_t synk_add_u8(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
SYNK_INLINE bool synk_add_b(bool a, bool b) { return a | b; }

SYNK_INLINE float synk_sub_f32(float a, float b) { return a - b; }
SYNK_INLINE double synk_sub_f64(double a, double b) { return a - b; }
SYNK_INLINE int32_t synk_sub_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
SYNK_INLINE int64_t synk_sub_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
SYNK_INLINE uint8_t synk_sub_u8(uint8_t a, uint8_t b) { return (uint8_t)(a - b); }
SYNK_INLINE bool synk_sub_b(bool a, bool b) { return a ^ b; }

SYNK_INLINE float synk_mul_f32(float a, float b) { return a * b; }
SYNK_INLINE double synk_mul_f64(double a, double b) { return a * b; }
SYNK_INLINE int32_t synk_mul_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
SYNK_INLINE int64_t synk_mul_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
SYNK_INLINE uint8_t synk_mul_u8(uint8_t a, uint8_t b) { return (uint8_t)(a * b); }
SYNK_INLINE bool synk_mul_b(bool a, bool b) { return a & b; }

SYNK_INLINE int32_t synk_neg_i32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }
SYNK_INLINE int64_t synk_neg_i64(int64_t a) { return (int64_t)(0ull - (uint64_t)a); }
SYNK_INLINE uint8_t synk_neg_u8(uint8_t a) { return (uint8_t)(0u - a); }
SYNK_INLINE int32_t synk_abs_i32(int32_t a) { return a < 0 ? synk_neg_i32(a) : a; }
SYNK_INLINE int64_t synk_abs_i64(int64_t a) { return a < 0 ? synk_neg_i64(a) : a; }
SYNK_INLINE uint8_t synk_abs_u8(uint8_t a) { return a; }
SYNK_INLINE bool synk_neg_b(bool a) { return a; }   // -1 wraps to true, -0 to false
SYNK_INLINE bool synk_abs_b(bool a) { return a; }

// NaN-propagating like numpy's maximum/minimum: the first NaN operand wins.
SYNK_INLINE float synk_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }
SYNK_INLINE double synk_max_f64(double a, double b) { return (a > b || a != a) ? a : b; }
SYNK_INLINE float synk_min_f32(float a, float b) { return (a < b || a != a) ? a : b; }
SYNK_INLINE double synk_min_f64(double a, double b) { return (a < b || a != a) ? a : b; }
SYNK_INLINE int32_t synk_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }
SYNK_INLINE int64_t synk_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
SYNK_INLINE uint8_t synk_max_u8(uint8_t a, uint8_t b) { return a > b ? a : b; }
SYNK_INLINE bool synk_max_b(bool a, bool b) { return a | b; }
SYNK_INLINE int32_t synk_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
SYNK_INLINE int64_t synk_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
SYNK_INLINE uint8_t synk_min_u8(uint8_t a, uint8_t b) { return a < b ? a : b; }
SYNK_INLINE bool synk_min_b(bool a, bool b) { return a & b; }

SYNK_INLINE uint64_t synk_upow(uint64_t b, int64_t e) {
  uint64_t r = 1;
  while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return r;
}
// A negative exponent gives 1 for base 1, +-1 for base -1, else 0 (C integer division).
SYNK_INLINE int64_t synk_pow_i64(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
  return (int64_t)synk_upow((uint64_t)b, e);
}
SYNK_INLINE int32_t synk_pow_i32(int32_t b, int32_t e) { return (int32_t)(uint32_t)(uint64_t)synk_pow_i64(b, e); }
SYNK_INLINE uint8_t synk_pow_u8(uint8_t b, uint8_t e) { return (uint8_t)synk_upow(b, e); }
SYNK_INLINE bool synk_pow_b(bool b, bool e) { return b | !e; }
SYNK_INLINE float synk_pow_f32(float a, float b) { return @FLOAT_POW@(a, b); }
SYNK_INLINE double synk_pow_f64(double a, double b) { return @DOUBLE_POW@(a, b); }
)PRELUDE";
  return fill_holes(text, {{"@FLOAT_POW@", float_pow}, {"@DOUBLE_POW@", double_pow}});
}

std::string sigmoid_and_cast_prelude(std::string_view float_abs, std::string_view double_abs) {
  static const std::string_view text = R"PRELUDE(// exp of a non-positive number only, so nothing overflows: e = exp(-|x|), 1/(1+e) or e/(1+e).
SYNK_INLINE float synk_sigmoid_f32(float x) {
  const float e = synk_exp_f32(-@FLOAT_ABS@(x)), r = 1.0f / (1.0f + e);
  return x >= 0 ? r : e * r;
}
SYNK_INLINE double synk_sigmoid_f64(double x) {
  const double e = synk_exp_f64(-@DOUBLE_ABS@(x)), r = 1.0 / (1.0 + e);
  return x >= 0 ? r : e * r;
}

// Float-to-integer casts truncate toward zero; NaN, infinities and values outside the target
// range set `bad` (the kernel then fails with KernelError::CastOutOfRange) instead of being
// undefined behaviour. Bounds are exact doubles: trunc(x) fits iff LO < x < HI.
#define SYNK_CAST(F, FT, I, IT, LO, HI) \
  SYNK_INLINE IT synk_cast_##F##_##I(FT x, bool& bad) { \
    const double t = (double)x; const bool ok = t > (LO) && t < (HI); bad |= !ok; return ok ? (IT)t : (IT)0; }
SYNK_CAST(f32, float, i32, int32_t, -2147483649.0, 2147483648.0)
SYNK_CAST(f64, double, i32, int32_t, -2147483649.0, 2147483648.0)
SYNK_CAST(f32, float, u8, uint8_t, -1.0, 256.0)
SYNK_CAST(f64, double, u8, uint8_t, -1.0, 256.0)
#undef SYNK_CAST
#define SYNK_CAST64(F, FT) \
  SYNK_INLINE int64_t synk_cast_##F##_i64(FT x, bool& bad) { \
    const double t = (double)x; const bool ok = t >= -9223372036854775808.0 && t < 9223372036854775808.0; \
    bad |= !ok; return ok ? (int64_t)t : 0; }
SYNK_CAST64(f32, float)
SYNK_CAST64(f64, double)
#undef SYNK_CAST64
)PRELUDE";
  return fill_holes(text, {{"@FLOAT_ABS@", float_abs}, {"@DOUBLE_ABS@", double_abs}});
}

std::string math_prelude() {
  // The GCC builtins name libm's functions on the CPU; the CUDA prelude maps them to CUDA's.
  static const std::string text = R"PRELUDE(// log1p(exp(-|x|)) never overflows: base/numpy_math.h's stable forms.
SYNK_INLINE float synk_softplus_f32(float x) {
  const float l = __builtin_log1pf(synk_exp_f32(-__builtin_fabsf(x)));
  return x != x ? x : (x > 0 ? x : 0.0f) + l;
}
SYNK_INLINE double synk_softplus_f64(double x) {
  const double l = __builtin_log1p(synk_exp_f64(-__builtin_fabs(x)));
  return x != x ? x : (x > 0 ? x : 0.0) + l;
}
SYNK_INLINE float synk_bce_f32(float z, float y) {
  return (z > 0 ? z : 0.0f) - z * y + __builtin_log1pf(synk_exp_f32(-__builtin_fabsf(z)));
}
SYNK_INLINE double synk_bce_f64(double z, double y) {
  return (z > 0 ? z : 0.0) - z * y + __builtin_log1p(synk_exp_f64(-__builtin_fabs(z)));
}

// numpy's sign: NaN stays NaN, 0 gives 0.
SYNK_INLINE float synk_sign_f32(float x) { return x != x ? x : (float)((x > 0) - (x < 0)); }
SYNK_INLINE double synk_sign_f64(double x) { return x != x ? x : (double)((x > 0) - (x < 0)); }
SYNK_INLINE int32_t synk_sign_i32(int32_t x) { return (x > 0) - (x < 0); }
SYNK_INLINE int64_t synk_sign_i64(int64_t x) { return (x > 0) - (x < 0); }
SYNK_INLINE uint8_t synk_sign_u8(uint8_t x) { return x > 0; }

// numpy's floor division and remainder (npy_divmod): the remainder has the divisor's sign, and
// the quotient is floor((a - mod) / b) corrected for rounding; b = 0 gives NaN / a / b.
#define SYNK_FLOOR_DIVMOD(S, T, F) \
  SYNK_INLINE T synk_mod_##S(T a, T b) { \
    T mod = __builtin_fmod##F(a, b); \
    if (b == 0) return mod; \
    if (mod != 0) { if ((b < 0) != (mod < 0)) mod += b; } else { mod = __builtin_copysign##F((T)0, b); } \
    return mod; } \
  SYNK_INLINE T synk_floordiv_##S(T a, T b) { \
    if (b == 0) return a / b; \
    const T mod = __builtin_fmod##F(a, b); \
    T div = (a - mod) / b; \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= (T)1; \
    if (div == 0) return __builtin_copysign##F((T)0, a / b); \
    T fl = __builtin_floor##F(div); \
    if (div - fl > (T)0.5) fl += (T)1; \
    return fl; }
SYNK_FLOOR_DIVMOD(f32, float, f)
SYNK_FLOOR_DIVMOD(f64, double, )
#undef SYNK_FLOOR_DIVMOD
// Integers: a zero divisor sets `bad` (the kernel fails with KernelError::DivisionByZero); -1 is
// special-cased because C's INT_MIN / -1 traps (numpy wraps, and so do we).
SYNK_INLINE int64_t synk_floordiv_i64(int64_t a, int64_t b, bool& bad) {
  if (b == 0) { bad = true; return 0; }
  if (b == -1) return (int64_t)(0ull - (uint64_t)a);
  const int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
SYNK_INLINE int64_t synk_mod_i64(int64_t a, int64_t b, bool& bad) {
  if (b == 0) { bad = true; return 0; }
  if (b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
SYNK_INLINE int32_t synk_floordiv_i32(int32_t a, int32_t b, bool& bad) { return (int32_t)(uint32_t)(uint64_t)synk_floordiv_i64(a, b, bad); }
SYNK_INLINE int32_t synk_mod_i32(int32_t a, int32_t b, bool& bad) { return (int32_t)synk_mod_i64(a, b, bad); }
SYNK_INLINE uint8_t synk_floordiv_u8(uint8_t a, uint8_t b, bool& bad) { return (uint8_t)synk_floordiv_i64(a, b, bad); }
SYNK_INLINE uint8_t synk_mod_u8(uint8_t a, uint8_t b, bool& bad) { return (uint8_t)synk_mod_i64(a, b, bad); }
)PRELUDE";
  return text;
}

}  // namespace synk::compiler
