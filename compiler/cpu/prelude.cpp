// The fixed part of every generated CPU translation unit: freestanding headers, the random
// numbers of base/philox.h and the scalar helpers the kernels call (all `static inline`, so
// unused ones cost nothing). Their meaning matches scalar_semantics.cpp: integers wrap, float max/min propagate NaN, float-to-integer
// casts of NaN, infinities or out-of-range values are reported, never undefined.
#include <string>

#include "base/rng.h"
#include "compiler/codegen/scalar_semantics.h"
#include "compiler/cpu/codegen_cpu.h"

namespace synk::compiler::cpu {

const std::string& cpu_prelude() {
  static const std::string text = R"PRELUDE(#include <stddef.h>
#include <stdint.h>

#define SYNK_INLINE static inline __attribute__((always_inline))

// Always true, but volatile: each kernel reads it once into synk_keep, and float selects test
// `cond & synk_keep`, so that LLVM 14 cannot fold two of them under a NaN-blind rule
// (compiler/codegen/emitter.h, value_expr).
static volatile bool synk_opaque_true = true;

// base/philox.h: the random ops' draws.
#define SYNK_RNG_STD_INCLUDES 0
)PRELUDE" + philox_kernel_text() + "\n" + scalar_prelude("__builtin_powf", "__builtin_pow") + R"PRELUDE(
// f32 exp, log and tanh are written out (Cephes' polynomials, branch-free, exponent bits by
// bit casts) so that loops calling them vectorise; libm's are scalar calls. Within 2 ulp of the
// correctly rounded result (tested). f64 uses libm.
SYNK_INLINE float synk_exp_f32(float x) {
  // x = k ln2 + r with |r| <= ln2/2 (ln2 in two parts), exp(r) by a degree-6 polynomial, then
  // 2^k as two factors so that subnormal results and k = 128 stay exact.
  float xc = x > -104.0f ? x : -104.0f;   // also turns NaN into a harmless value
  xc = xc < 89.0f ? xc : 89.0f;
  const float k = __builtin_rintf(xc * 1.44269504088896341f);
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int32_t ki = (int32_t)k, k1 = ki / 2, k2 = ki - k1;
  const float s1 = __builtin_bit_cast(float, (k1 + 127) << 23), s2 = __builtin_bit_cast(float, (k2 + 127) << 23);
  const float result = y * s1 * s2;
  return x != x ? x : result;
}
SYNK_INLINE float synk_log_f32(float x) {
  // x = m 2^e with m in [sqrt(1/2), sqrt(2)); log x = e ln2 + log m (ln2 in two parts).
  const bool subnormal = x < 1.17549435e-38f;
  const float xs = subnormal ? x * 8388608.0f : x;   // 2^23
  const int32_t bits = __builtin_bit_cast(int32_t, xs);
  int32_t e = ((bits >> 23) & 0xff) - 126;
  float m = __builtin_bit_cast(float, (bits & 0x007fffff) | 0x3f000000);   // [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e -= low ? 1 : 0;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  const float fe = (float)(e - (subnormal ? 23 : 0));
  y += fe * -2.12194440e-4f;
  y += -0.5f * z;
  const float result = m + y + fe * 0.693359375f;
  return x != x ? x : x < 0.0f ? __builtin_nanf("") : x == 0.0f ? -__builtin_inff()
         : x == __builtin_inff() ? x : result;
}
SYNK_INLINE float synk_tanh_f32(float x) {
  // |x| <= 0.625: x + x^3 P(x^2); beyond: 1 - 2 / (exp(2|x|) + 1) with the sign of x.
  const float ax = __builtin_fabsf(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (synk_exp_f32(ax + ax) + 1.0f);
  return ax > 0.625f ? (x < 0 ? -big : big) : ax == 0.0f ? x : small;   // tanh(-0) is -0
}
SYNK_INLINE double synk_exp_f64(double x) { return __builtin_exp(x); }
SYNK_INLINE double synk_log_f64(double x) { return __builtin_log(x); }
SYNK_INLINE double synk_tanh_f64(double x) { return __builtin_tanh(x); }
)PRELUDE" + sigmoid_and_cast_prelude("__builtin_fabsf", "__builtin_fabs") + math_prelude();
  return text;
}

}  // namespace synk::compiler::cpu
