// numpy's scalar semantics for the ops whose C/C++ library counterparts differ from numpy's:
// floor division and remainder (the remainder takes the divisor's sign; C's `/` and `%`
// truncate), round half to even, and sign with sign(NaN) = NaN. The reference evaluator and
// constant folding call these; the kernels' preludes (compiler/codegen/scalar_semantics.cpp) spell
// the same formulas in C, and the differential tests compare the two.
#pragma once

#include <cmath>
#include <cstdint>

namespace synk::numpy_math {

// npy_divmod: the remainder of a / b with b's sign (NaN for b = 0) and floor(a / b) corrected for
// the rounding of (a - mod) / b; b = 0 gives a / b (an infinity or NaN), like numpy.
inline double floor_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (b == 0) return mod;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

inline double floor_divide(double a, double b) {
  if (b == 0) return a / b;
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// Integer forms; b must not be 0 (the callers report that as a user error). a // -1 is the
// wrapping negation (numpy wraps INT_MIN // -1 too) and a % -1 is 0, avoiding C's overflow trap.
inline int64_t int_floor_divide(int64_t a, int64_t b) {
  if (b == -1) return int64_t(0 - uint64_t(a));
  const int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

inline int64_t int_floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// Half to even in the default rounding mode, numpy's np.round (std::round rounds half away).
inline double round_half_even(double v) { return std::nearbyint(v); }

inline double sign(double v) { return v != v ? v : v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }

// The stable forms: exp only of a non-positive number, so nothing overflows.
inline double softplus(double x) { return x != x ? x : (x > 0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x))); }
inline double bce_with_logits(double z, double y) {
  return (z > 0 ? z : 0.0) - z * y + std::log1p(std::exp(-std::fabs(z)));
}

}  // namespace synk::numpy_math
