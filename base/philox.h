// Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC'11) and the distributions synk's random ops draw from: uniform, normal, bernoulli and
// dropout. A draw is a pure function of (seed, salt, step, global row, element in the row), so a
// program gives the same bits on any number of processes, whatever rows each one holds, on the
// CPU and on the GPU. One text serves three compilers: host C++ (g++, clang++), the generated CPU
// kernels (clang, no standard headers) and the generated CUDA kernels (NVRTC, no standard headers).
//
// Settings. On the host the header includes <cstdint>; a generated prelude, which has already
// typedef'd uint32_t and uint64_t, defines SYNK_RNG_STD_INCLUDES 0 before pasting this text (NVRTC
// and -ffreestanding builds are recognised without it). Under NVCC or NVRTC the functions are
// __host__ __device__, and device code calls CUDA's explicitly rounded intrinsics.
//
// Mapping (the contract: changing any of it changes every random number synk draws):
//   key     = seed XOR (salt * 0x9E3779B97F4A7C15)  (64 bits; key[0] = low word, key[1] = high).
//             salt is the random op's index in the program, so two ops draw independent streams;
//             salt 0 leaves the seed as it is. The multiplier is odd, so salts never collide
//             under one seed; (seed, salt) and (seed', salt') share a key only where
//             seed XOR seed' = (salt XOR salt') scrambled by the multiply, which no natural pair
//             of seeds (small, consecutive) is.
//   counter = { block bits 0..31,
//               row bits 0..31,
//               step bits 0..31,
//               block bits 32..39 | row bits 32..39 << 8 | step bits 32..47 << 16 }
//             where step is the program's step counter and block the index of a group of
//             elements within the row that shares one Philox call. Distinct (step, row, block) get
//             distinct counters for step < 2^48, row < 2^40, block < 2^40; higher bits are
//             dropped, so larger values alias. Ordinary sizes leave word 3 zero.
//   words   = philox4x32_10(counter, key) = w[0..3].
//   32-bit draws (uniform f32, bernoulli, dropout, normal of either type): element e of a row
//             uses block e / 4 and word w[e % 4] (so e < 2^42).
//   uniform f64: element e uses block e / 2 and the words (w[2 (e % 2)], w[2 (e % 2) + 1]) as
//             (hi, lo) (so e < 2^41).
//   normal:   elements 4b .. 4b+3 are the Box-Muller pairs of (w[0], w[1]) and (w[2], w[3]): the
//             even element takes the cosine output, the odd one the sine output.
//
// Bit-identity. Uniform, bernoulli and dropout use only integer operations, exact conversions and
// one correctly rounded IEEE operation (fma, multiply or reciprocal), so every IEEE target agrees.
// The normal transform does not call log, cos, sin: libm, the CPU prelude and CUDA round those
// differently in the last place. It computes -2 ln(u1), cos and sin in 64-bit fixed point
// (integer arithmetic, exact everywhere) and then only correctly rounded conversions, sqrt and
// multiplies, so its results are bit-identical too (and within 3 ulp of the exact Box-Muller
// value in f32). Device code uses __fmul_rn, __fmaf_rn, __fsqrt_rn, ..., which neither
// contraction (--fmad) nor --use_fast_math may change; fast math only adds flush-to-zero, which
// touches denormal inputs (dropout's x, low, high, mean, std), never a draw. The header has no
// multiply followed by an add for a host compiler to fuse; a caller that adds to a result may
// see g++ fuse across the inlined call (its default -ffp-contract=fast, on an FMA target).
// clang's default (-ffp-contract=on) never fuses across statements.
#ifndef SYNK_PHILOX_H
#define SYNK_PHILOX_H

#ifndef SYNK_RNG_STD_INCLUDES
#if defined(__CUDACC_RTC__) || !__STDC_HOSTED__
#define SYNK_RNG_STD_INCLUDES 0
#else
#define SYNK_RNG_STD_INCLUDES 1
#endif
#endif
#if SYNK_RNG_STD_INCLUDES
#include <cstdint>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SYNK_RNG_FN static __host__ __device__ __forceinline__
#else
// always_inline: clang otherwise keeps the 10-round block as a call, and a loop with a call in
// it is not vectorised.
#define SYNK_RNG_FN static inline __attribute__((always_inline))
#endif

// Every floating-point step that rounds goes through one of these, so that device code gets the
// explicitly rounded intrinsic (never fused, never approximated) and host code the IEEE operator.
#if defined(__CUDA_ARCH__)
#define SYNK_RNG_CLZ64(x) __clzll((long long)(x))
#define SYNK_RNG_MULHI32(a, b) __umulhi((a), (b))
#define SYNK_RNG_MULF(a, b) __fmul_rn((a), (b))
#define SYNK_RNG_SUBF(a, b) __fsub_rn((a), (b))
#define SYNK_RNG_FMAF(a, b, c) __fmaf_rn((a), (b), (c))
#define SYNK_RNG_SQRTF(x) __fsqrt_rn(x)
#define SYNK_RNG_RCPF(x) __frcp_rn(x)
#define SYNK_RNG_I64_F32(x) __ll2float_rn(x)
#define SYNK_RNG_MUL(a, b) __dmul_rn((a), (b))
#define SYNK_RNG_SUB(a, b) __dsub_rn((a), (b))
#define SYNK_RNG_FMA(a, b, c) __fma_rn((a), (b), (c))
#define SYNK_RNG_SQRT(x) __dsqrt_rn(x)
#define SYNK_RNG_RCP(x) __drcp_rn(x)
#define SYNK_RNG_I64_F64(x) __ll2double_rn(x)
#define SYNK_RNG_F32_BITS(x) __float_as_uint(x)
#define SYNK_RNG_BITS_F32(x) __uint_as_float(x)
#define SYNK_RNG_F64_BITS(x) ((uint64_t)__double_as_longlong(x))
#define SYNK_RNG_BITS_F64(x) __longlong_as_double((long long)(x))
#else
#define SYNK_RNG_CLZ64(x) __builtin_clzll(x)
#define SYNK_RNG_MULHI32(a, b) ((uint32_t)(((uint64_t)(a) * (b)) >> 32))
#define SYNK_RNG_MULF(a, b) ((a) * (b))
#define SYNK_RNG_SUBF(a, b) ((a) - (b))
#define SYNK_RNG_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#define SYNK_RNG_SQRTF(x) __builtin_sqrtf(x)
#define SYNK_RNG_RCPF(x) (1.0f / (x))
#define SYNK_RNG_I64_F32(x) ((float)(x))
#define SYNK_RNG_MUL(a, b) ((a) * (b))
#define SYNK_RNG_SUB(a, b) ((a) - (b))
#define SYNK_RNG_FMA(a, b, c) __builtin_fma((a), (b), (c))
#define SYNK_RNG_SQRT(x) __builtin_sqrt(x)
#define SYNK_RNG_RCP(x) (1.0 / (x))
#define SYNK_RNG_I64_F64(x) ((double)(x))
#define SYNK_RNG_F32_BITS(x) __builtin_bit_cast(uint32_t, (x))
#define SYNK_RNG_BITS_F32(x) __builtin_bit_cast(float, (uint32_t)(x))
#define SYNK_RNG_F64_BITS(x) __builtin_bit_cast(uint64_t, (x))
#define SYNK_RNG_BITS_F64(x) __builtin_bit_cast(double, (uint64_t)(x))
#endif

// The fixed-point code is signed; long long is 64 bits on every target synk compiles for, and
// >> of a negative value is arithmetic on all of them (and by definition from C++20 on).
typedef long long synk_rng_i64;

struct synk_rng_u32x2 { uint32_t v[2]; };
struct synk_rng_u32x4 { uint32_t v[4]; };
struct synk_rng_f32x2 { float v[2]; };
struct synk_rng_f64x2 { double v[2]; };

// ---- The generator ---------------------------------------------------------------------------

// Any round count, so that the tests can check the 7-round answers of Random123 too; synk only
// ever uses 10 (the count cuRAND and JAX use: 7 already pass BigCrush, 10 is the margin).
SYNK_RNG_FN synk_rng_u32x4 synk_philox4x32_rounds(synk_rng_u32x4 ctr, synk_rng_u32x2 key, int rounds) {
  uint32_t k0 = key.v[0], k1 = key.v[1];
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {   // the key schedule: a Weyl sequence, bumped before every round but the first
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // The high halves through mulhi: NVVM would otherwise emit a 64-bit multiply.
    const uint32_t hi0 = SYNK_RNG_MULHI32(0xD2511F53u, ctr.v[0]), lo0 = 0xD2511F53u * ctr.v[0];
    const uint32_t hi1 = SYNK_RNG_MULHI32(0xCD9E8D57u, ctr.v[2]), lo1 = 0xCD9E8D57u * ctr.v[2];
    const synk_rng_u32x4 next = {{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    ctr = next;
  }
  return ctr;
}

SYNK_RNG_FN synk_rng_u32x4 synk_philox4x32_10(synk_rng_u32x4 counter, synk_rng_u32x2 key) {
  return synk_philox4x32_rounds(counter, key, 10);
}

// ---- The mapping (see the top of the file) -----------------------------------------------------

// What one random op at one step needs; built once per kernel (or hoisted by the compiler).
struct synk_rng_stream {
  synk_rng_u32x2 key;
  uint32_t step_lo;
  uint32_t step_hi;   // step bits 32..47, already in place for counter word 3
};

SYNK_RNG_FN synk_rng_stream synk_rng_make_stream(uint64_t seed, uint32_t salt, uint64_t step) {
  const uint64_t k = seed ^ ((uint64_t)salt * 0x9E3779B97F4A7C15ull);
  synk_rng_stream s;
  s.key.v[0] = (uint32_t)k;
  s.key.v[1] = (uint32_t)(k >> 32);
  s.step_lo = (uint32_t)step;
  s.step_hi = (uint32_t)((step >> 32) & 0xFFFFu) << 16;
  return s;
}

SYNK_RNG_FN synk_rng_u32x4 synk_rng_counter(synk_rng_stream s, uint64_t row, uint64_t block) {
  const uint32_t high = (uint32_t)((block >> 32) & 0xFFu) | (uint32_t)((row >> 32) & 0xFFu) << 8 | s.step_hi;
  const synk_rng_u32x4 c = {{(uint32_t)block, (uint32_t)row, s.step_lo, high}};
  return c;
}

SYNK_RNG_FN synk_rng_u32x4 synk_rng_block(synk_rng_stream s, uint64_t row, uint64_t block) {
  return synk_philox4x32_10(synk_rng_counter(s, row, block), s.key);
}

// Selects without indexing, so that CUDA keeps the four words in registers, and on bits rather
// than on i == 0, 1, 2, which clang turns into a switch that stops vectorisation.
SYNK_RNG_FN uint32_t synk_rng_word(synk_rng_u32x4 w, uint32_t i) {
  const uint32_t low = (i & 1u) ? w.v[1] : w.v[0], high = (i & 1u) ? w.v[3] : w.v[2];
  return (i & 2u) ? high : low;
}

// ---- Uniform -----------------------------------------------------------------------------------

// [0, 1) on a grid of 2^-24: every value is exact, and 1 can never come out (u / 2^32 rounded to
// float would round the top values up to 1).
SYNK_RNG_FN float synk_rng_uniform01_f32(uint32_t u) {
  return SYNK_RNG_MULF((float)(u >> 8), 0x1p-24f);
}

SYNK_RNG_FN double synk_rng_uniform01_f64(uint32_t hi, uint32_t lo) {
  const uint64_t bits53 = (uint64_t)hi << 21 | (uint64_t)(lo >> 11);
  return SYNK_RNG_MUL((double)bits53, 0x1p-53);
}

// The largest value below x (finite x): what [low, high) returns where low + (high - low) u
// rounds up to high, e.g. low = 1000, high = 1001 and u = 1 - 2^-24.
SYNK_RNG_FN float synk_rng_below_f32(float x) {
  const uint32_t b = SYNK_RNG_F32_BITS(x);
  return SYNK_RNG_BITS_F32(x > 0.0f ? b - 1u : x < 0.0f ? b + 1u : 0x80000001u);
}

SYNK_RNG_FN double synk_rng_below_f64(double x) {
  const uint64_t b = SYNK_RNG_F64_BITS(x);
  return SYNK_RNG_BITS_F64(x > 0.0 ? b - 1u : x < 0.0 ? b + 1u : 0x8000000000000001ull);
}

// [low, high) for low < high (and high - low finite); one fused rounding, so no compiler can
// split it differently.
SYNK_RNG_FN float synk_rng_uniform_f32(uint32_t u, float low, float high) {
  const float r = SYNK_RNG_FMAF(SYNK_RNG_SUBF(high, low), synk_rng_uniform01_f32(u), low);
  return r >= high && high > low ? synk_rng_below_f32(high) : r;
}

SYNK_RNG_FN double synk_rng_uniform_f64(uint32_t hi, uint32_t lo, double low, double high) {
  const double r = SYNK_RNG_FMA(SYNK_RNG_SUB(high, low), synk_rng_uniform01_f64(hi, lo), low);
  return r >= high && high > low ? synk_rng_below_f64(high) : r;
}

// ---- Normal: Box-Muller in fixed point -----------------------------------------------------

SYNK_RNG_FN synk_rng_i64 synk_rng_round_shift(synk_rng_i64 v, int s) {
  return (v + (1ll << (s - 1))) >> s;
}

// -2 ln U in Q56 (2^56 means 1) for U = (2 u + 1) / 2^33, in (0, 1): never 0 (no log 0) and
// never 1, and symmetric about 1/2. Result in [2^-32, 45.75] (radii up to 6.76 standard
// deviations), within 5e-10 of the exact value, relatively and absolutely (tested).
// U = 2^-n (1 + t) with 1 + t in [sqrt(1/2), sqrt(2)), so that n is exact and |ln(1 + t)| <= 0.35;
// ln(1 + t) = t Q(t) with Q a degree-12 fit on that range (reference_model.py; error 2.2e-11).
SYNK_RNG_FN synk_rng_i64 synk_rng_minus2log_q56(uint32_t u) {
  const uint64_t x = 2ull * u + 1u;                      // U in Q33, odd, in [1, 2^33)
  const int e = 63 - SYNK_RNG_CLZ64(x);                  // floor(log2 x), 0 .. 32
  const synk_rng_i64 m = (synk_rng_i64)(x << (32 - e));  // mantissa in Q32, [1, 2)
  const bool big = m >= 6074001000ll;                    // m >= sqrt(2): use m / 2 instead
  const synk_rng_i64 t33 = big ? m - (1ll << 33) : 2 * m - (1ll << 33);   // t in Q33, exact
  const synk_rng_i64 n = 33 - e - (big ? 1 : 0);
  const synk_rng_i64 t = t33 >> 1;                       // Q32 is enough inside Q(t)
  synk_rng_i64 p = 112440059ll;                          // Q31 coefficients, highest first
  p = -210548264ll + synk_rng_round_shift(p * t, 32);
  p = 215761902ll + synk_rng_round_shift(p * t, 32);
  p = -213588620ll + synk_rng_round_shift(p * t, 32);
  p = 236352905ll + synk_rng_round_shift(p * t, 32);
  p = -268337436ll + synk_rng_round_shift(p * t, 32);
  p = 306892843ll + synk_rng_round_shift(p * t, 32);
  p = -357921627ll + synk_rng_round_shift(p * t, 32);
  p = 429494327ll + synk_rng_round_shift(p * t, 32);
  p = -536870756ll + synk_rng_round_shift(p * t, 32);
  p = 715827902ll + synk_rng_round_shift(p * t, 32);
  p = -1073741825ll + synk_rng_round_shift(p * t, 32);
  p = 2147483648ll + synk_rng_round_shift(p * t, 32);
  // p t33 is ln(1 + t) in Q64, and |ln(1 + t)| <= 0.347 keeps it below 2^63. Rounding it to Q56,
  // not to t's Q33, keeps the relative precision where U is near 1 and the result is tiny.
  const synk_rng_i64 log1p_q56 = synk_rng_round_shift(p * t33, 8);
  const synk_rng_i64 ln2_q56 = 0xB17217F7D1CF7All;
  return 2 * (n * ln2_q56 - log1p_q56);
}

// cos and sin of 2 pi u / 2^32 in Q31, within 5.6e-10 (tested). The top two bits pick the
// quadrant and the octant is folded onto [0, pi/4], so the Taylor series (degree 11 and 12) are
// short; quadrant rotations are exact, so the results keep the circle's symmetries exactly.
SYNK_RNG_FN void synk_rng_sincos_q31(uint32_t u, synk_rng_i64* c_out, synk_rng_i64* s_out) {
  const uint32_t quadrant = u >> 30, f = u & 0x3FFFFFFFu;
  const bool upper = f > (1u << 29);                      // past pi/4: use pi/2 - angle
  const synk_rng_i64 x = (synk_rng_i64)(upper ? (1u << 30) - f : f) << 1;   // angle / (pi/2), Q31
  const synk_rng_i64 x2 = synk_rng_round_shift(x * x, 31);
  synk_rng_i64 s = -7728ll;                               // (-1)^k (pi/2)^(2k+1) / (2k+1)!
  s = 344545ll + synk_rng_round_shift(s * x2, 31);
  s = -10053990ll + synk_rng_round_shift(s * x2, 31);
  s = 171138612ll + synk_rng_round_shift(s * x2, 31);
  s = -1387197337ll + synk_rng_round_shift(s * x2, 31);
  s = 3373259426ll + synk_rng_round_shift(s * x2, 31);
  s = synk_rng_round_shift(s * x, 31);
  synk_rng_i64 c = 1012ll;                                // (-1)^k (pi/2)^(2k) / (2k)!
  c = -54121ll + synk_rng_round_shift(c * x2, 31);
  c = 1974096ll + synk_rng_round_shift(c * x2, 31);
  c = -44803984ll + synk_rng_round_shift(c * x2, 31);
  c = 544751120ll + synk_rng_round_shift(c * x2, 31);
  c = -2649351758ll + synk_rng_round_shift(c * x2, 31);
  c = 2147483648ll + synk_rng_round_shift(c * x2, 31);
  const synk_rng_i64 c0 = upper ? s : c, s0 = upper ? c : s;
  *c_out = quadrant == 0 ? c0 : quadrant == 1 ? -s0 : quadrant == 2 ? -c0 : s0;
  *s_out = quadrant == 0 ? s0 : quadrant == 1 ? c0 : quadrant == 2 ? -s0 : -c0;
}

// Two independent standard normals from two words: radius from u1, angle from u2. Four roundings
// (radius^2, sqrt, cosine, product) put the result within 3 ulp of the exact value.
SYNK_RNG_FN synk_rng_f32x2 synk_rng_normal2_f32(uint32_t u1, uint32_t u2) {
  synk_rng_i64 c, s;
  synk_rng_sincos_q31(u2, &c, &s);
  // Scaling by powers of two is exact, so each value is rounded once, by the conversion.
  const float r = SYNK_RNG_SQRTF(SYNK_RNG_MULF(SYNK_RNG_I64_F32(synk_rng_minus2log_q56(u1)), 0x1p-56f));
  const synk_rng_f32x2 z = {{SYNK_RNG_MULF(r, SYNK_RNG_MULF(SYNK_RNG_I64_F32(c), 0x1p-31f)),
                             SYNK_RNG_MULF(r, SYNK_RNG_MULF(SYNK_RNG_I64_F32(s), 0x1p-31f))}};
  return z;
}

// The same pair in double: ~31 correct bits (the fixed point's), not 53, but identical everywhere.
SYNK_RNG_FN synk_rng_f64x2 synk_rng_normal2_f64(uint32_t u1, uint32_t u2) {
  synk_rng_i64 c, s;
  synk_rng_sincos_q31(u2, &c, &s);
  const double r = SYNK_RNG_SQRT(SYNK_RNG_MUL(SYNK_RNG_I64_F64(synk_rng_minus2log_q56(u1)), 0x1p-56));
  const synk_rng_f64x2 z = {{SYNK_RNG_MUL(r, SYNK_RNG_MUL(SYNK_RNG_I64_F64(c), 0x1p-31)),
                             SYNK_RNG_MUL(r, SYNK_RNG_MUL(SYNK_RNG_I64_F64(s), 0x1p-31))}};
  return z;
}

// mean + std z with one rounding (a fused multiply-add by construction, not by the compiler's
// choice). On x86 without -mfma the host version is a libm call.
SYNK_RNG_FN float synk_rng_affine_f32(float z, float mean, float std) { return SYNK_RNG_FMAF(std, z, mean); }
SYNK_RNG_FN double synk_rng_affine_f64(double z, double mean, double std) { return SYNK_RNG_FMA(std, z, mean); }

// ---- Bernoulli and dropout ---------------------------------------------------------------------

// bernoulli(p) is uniform01_f32(u) < p, i.e. (u >> 8) < ceil(p 2^24): computed once per op, so
// that each element costs one integer compare. Exact for any float or double p: scaling by 2^24
// is exact, and so are the truncation and the compare. p <= 0 or NaN gives 0 (never true),
// p >= 1 gives 2^24 (always true).
SYNK_RNG_FN uint32_t synk_rng_threshold24(double p) {
  if (!(p > 0.0)) return 0u;
  if (p >= 1.0) return 1u << 24;
  const double x = SYNK_RNG_MUL(p, 16777216.0);
  const uint32_t t = (uint32_t)x;
  return t + ((double)t < x ? 1u : 0u);
}

SYNK_RNG_FN bool synk_rng_bernoulli(uint32_t u, uint32_t threshold24) { return (u >> 8) < threshold24; }

// Inverted dropout keeps x with probability 1 - p and scales it by 1 / (1 - p). p >= 1 gives
// scale 0, not a division by zero (and nothing is kept anyway). Dropped elements are +0 even
// where x is NaN or infinite: the same mask multiplies the gradient, which must be 0 there.
SYNK_RNG_FN float synk_rng_dropout_scale_f32(float p) { return p < 1.0f ? SYNK_RNG_RCPF(SYNK_RNG_SUBF(1.0f, p)) : 0.0f; }
SYNK_RNG_FN double synk_rng_dropout_scale_f64(double p) { return p < 1.0 ? SYNK_RNG_RCP(SYNK_RNG_SUB(1.0, p)) : 0.0; }

SYNK_RNG_FN float synk_rng_dropout_f32(uint32_t u, uint32_t threshold24, float x, float scale) {
  return synk_rng_bernoulli(u, threshold24) ? 0.0f : SYNK_RNG_MULF(x, scale);
}
SYNK_RNG_FN double synk_rng_dropout_f64(uint32_t u, uint32_t threshold24, double x, double scale) {
  return synk_rng_bernoulli(u, threshold24) ? 0.0 : SYNK_RNG_MUL(x, scale);
}

// ---- One element at (row, e): what an element-wise kernel calls ---------------------------------
// Each call runs Philox for the element's whole block; a kernel that writes 4 (f64 uniform: 2)
// consecutive elements per thread can call synk_rng_block once instead, with identical results.

SYNK_RNG_FN uint32_t synk_rng_bits(synk_rng_stream s, uint64_t row, uint64_t e) {
  return synk_rng_word(synk_rng_block(s, row, e >> 2), (uint32_t)(e & 3u));
}

SYNK_RNG_FN float synk_rng_uniform_at_f32(synk_rng_stream s, uint64_t row, uint64_t e, float low, float high) {
  return synk_rng_uniform_f32(synk_rng_bits(s, row, e), low, high);
}

SYNK_RNG_FN double synk_rng_uniform_at_f64(synk_rng_stream s, uint64_t row, uint64_t e, double low, double high) {
  const synk_rng_u32x4 w = synk_rng_block(s, row, e >> 1);
  return (e & 1u) ? synk_rng_uniform_f64(w.v[2], w.v[3], low, high) : synk_rng_uniform_f64(w.v[0], w.v[1], low, high);
}

SYNK_RNG_FN float synk_rng_normal_at_f32(synk_rng_stream s, uint64_t row, uint64_t e, float mean, float std) {
  const synk_rng_u32x4 w = synk_rng_block(s, row, e >> 2);
  const synk_rng_f32x2 z = (e & 2u) ? synk_rng_normal2_f32(w.v[2], w.v[3]) : synk_rng_normal2_f32(w.v[0], w.v[1]);
  return synk_rng_affine_f32((e & 1u) ? z.v[1] : z.v[0], mean, std);
}

SYNK_RNG_FN double synk_rng_normal_at_f64(synk_rng_stream s, uint64_t row, uint64_t e, double mean, double std) {
  const synk_rng_u32x4 w = synk_rng_block(s, row, e >> 2);
  const synk_rng_f64x2 z = (e & 2u) ? synk_rng_normal2_f64(w.v[2], w.v[3]) : synk_rng_normal2_f64(w.v[0], w.v[1]);
  return synk_rng_affine_f64((e & 1u) ? z.v[1] : z.v[0], mean, std);
}

SYNK_RNG_FN bool synk_rng_bernoulli_at(synk_rng_stream s, uint64_t row, uint64_t e, uint32_t threshold24) {
  return synk_rng_bernoulli(synk_rng_bits(s, row, e), threshold24);
}

SYNK_RNG_FN float synk_rng_dropout_at_f32(synk_rng_stream s, uint64_t row, uint64_t e, uint32_t threshold24, float x, float scale) {
  return synk_rng_dropout_f32(synk_rng_bits(s, row, e), threshold24, x, scale);
}

SYNK_RNG_FN double synk_rng_dropout_at_f64(synk_rng_stream s, uint64_t row, uint64_t e, uint32_t threshold24, double x, double scale) {
  return synk_rng_dropout_f64(synk_rng_bits(s, row, e), threshold24, x, scale);
}

// The operation macros are this header's own; the function qualifier goes too, so that a
// prelude can paste this text next to others without clashes.
#undef SYNK_RNG_FN
#undef SYNK_RNG_CLZ64
#undef SYNK_RNG_MULHI32
#undef SYNK_RNG_MULF
#undef SYNK_RNG_SUBF
#undef SYNK_RNG_FMAF
#undef SYNK_RNG_SQRTF
#undef SYNK_RNG_RCPF
#undef SYNK_RNG_I64_F32
#undef SYNK_RNG_MUL
#undef SYNK_RNG_SUB
#undef SYNK_RNG_FMA
#undef SYNK_RNG_SQRT
#undef SYNK_RNG_RCP
#undef SYNK_RNG_I64_F64
#undef SYNK_RNG_F32_BITS
#undef SYNK_RNG_BITS_F32
#undef SYNK_RNG_F64_BITS
#undef SYNK_RNG_BITS_F64

#endif  // SYNK_PHILOX_H
