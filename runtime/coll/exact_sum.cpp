// Exact weighted sums over ranks (exact_sum.h). The loops are per element over every part; the
// grid scale of each element is a power of two built once from its exponent, so converting a
// term is one multiply and one round (the 1.5 * 2^52 trick, exact for |x| <= 2^51, which the
// grid guarantees).
#include "runtime/coll/exact_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "base/errors.h"

namespace synk::rt::exact {
namespace {

constexpr int kMaxPrecision = 51;            // the rounding trick's limit
constexpr double kRoundMagic = 6755399441055744.0;   // 1.5 * 2^52
constexpr int64_t kNaNFlag = int64_t(1) << 42, kPosInfFlag = int64_t(1) << 21, kNegInfFlag = 1;

inline int32_t biased_exponent(double x) { return int32_t((std::bit_cast<uint64_t>(x) >> 52) & 0x7ff); }

// |x| < 2^(exponent_bound(b)) for every double with biased exponent b < 0x7ff.
inline int exponent_bound(int32_t biased) { return std::max(biased, 1) - 1022; }

// 2^k as a double, exactly, for any k a double can hold (0 below, inf above).
inline double pow2(int k) {
  if (k >= -1022 && k <= 1023) return std::bit_cast<double>(uint64_t(k + 1023) << 52);
  return std::ldexp(1.0, k);
}

// round-to-nearest-even of x as an integer, for |x| <= 2^51: adding 1.5 * 2^52 leaves the
// integer in the low mantissa bits, so one integer subtraction of the bit patterns yields it
// (vectorisable, unlike a double -> int64 conversion without AVX-512).
inline int64_t round_to_int(double x) {
  return int64_t(std::bit_cast<uint64_t>(x + kRoundMagic) - std::bit_cast<uint64_t>(kRoundMagic));
}

template <class T>
const T* part_values(const Terms& terms, size_t k) {
  return reinterpret_cast<const T*>(terms.parts[k]);
}

// Elements per block of the loops over parts: the block's exponents, scales and sums stay in
// the L2 cache while every part streams through it.
constexpr size_t kBlock = 4096;

template <class T>
void max_exponents_of(const Terms& terms, int32_t* __restrict exps) {
  const size_t count = terms.count;   // a local: the stores below may not alias it
  for (size_t lo = 0; lo < count; lo += kBlock) {
    const size_t hi = std::min(count, lo + kBlock);
    for (size_t k = 0; k < terms.parts.size(); ++k) {
      const T* __restrict v = part_values<T>(terms, k);
      const double w = double(terms.weights[k]);
      for (size_t i = lo; i < hi; ++i) exps[i] = std::max(exps[i], biased_exponent(w * double(v[i])));
    }
  }
}

// sums[i] += round(w * v[i] * scale[i] (* rest[i])): the hot loop, kept free of branches.
template <class T, bool kRest, bool kGuardNonFinite>
void add_terms(const T* __restrict v, double w, const double* __restrict scale, const double* __restrict rest,
               size_t count, int64_t* __restrict sums) {
  for (size_t i = 0; i < count; ++i) {
    double scaled = w * double(v[i]) * scale[i];
    if constexpr (kRest) scaled *= rest[i];
    // A non-finite element's scale is 0: its NaN * 0 is dropped here and counted by the caller.
    if constexpr (kGuardNonFinite) scaled = std::isfinite(scaled) ? scaled : 0.0;
    sums[i] += round_to_int(scaled);
  }
}

// The scale of each element, 2^(bits - bound): one bit pattern per element on the fast path. Its
// exponent field is shift + 1023 with shift in [-973, 1072] (bits <= 51); past 1000 (tiny float64
// elements) a second factor `rest` keeps both in range; non-finite elements get scale 0.
void grid_scales(const int32_t* __restrict exps, size_t count, int bits, double* __restrict scale,
                 double* __restrict rest, bool* any_non_finite, bool* any_rest) {
  bool non_finite = false, large = false;
  for (size_t i = 0; i < count; ++i) {
    const int32_t b = exps[i];
    const int shift = bits - exponent_bound(b);
    non_finite |= b == kNonFinite;
    large |= shift > 1000;
    scale[i] = std::bit_cast<double>(uint64_t(std::min(shift, 1000) + 1023) << 52);
  }
  *any_non_finite = non_finite;
  *any_rest = large;
  if (!non_finite && !large) return;
  for (size_t i = 0; i < count; ++i) {
    const int shift = bits - exponent_bound(exps[i]);
    rest[i] = pow2(shift - std::min(shift, 1000));
    if (exps[i] == kNonFinite) scale[i] = 0.0;
  }
}

template <class T>
void fixed_sums_of(const Terms& terms, const int32_t* __restrict exps, int bits, int64_t* __restrict sums) {
  const size_t count = terms.count;
  thread_local std::vector<double> scale, rest;
  scale.resize(count);
  rest.resize(count);
  bool any_non_finite = false, any_rest = false;
  grid_scales(exps, count, bits, scale.data(), rest.data(), &any_non_finite, &any_rest);
  std::fill(sums, sums + count, int64_t(0));
  for (size_t lo = 0; lo < count; lo += kBlock) {
    const size_t n = std::min(count, lo + kBlock) - lo;
    for (size_t k = 0; k < terms.parts.size(); ++k) {
      const T* v = part_values<T>(terms, k) + lo;
      const double w = double(terms.weights[k]);
      if (any_non_finite) add_terms<T, true, true>(v, w, scale.data() + lo, rest.data() + lo, n, sums + lo);
      else if (any_rest) add_terms<T, true, false>(v, w, scale.data() + lo, rest.data() + lo, n, sums + lo);
      else add_terms<T, false, false>(v, w, scale.data() + lo, rest.data() + lo, n, sums + lo);
    }
  }
  if (!any_non_finite) return;
  for (size_t i = 0; i < count; ++i) {
    if (exps[i] != kNonFinite) continue;
    int64_t flags = 0;
    for (size_t k = 0; k < terms.parts.size(); ++k) {
      const double x = double(terms.weights[k]) * double(part_values<T>(terms, k)[i]);
      if (std::isnan(x)) flags |= kNaNFlag;
      else if (std::isinf(x)) flags |= x > 0 ? kPosInfFlag : kNegInfFlag;
    }
    sums[i] = flags;
  }
}

double non_finite_value(int64_t counts) {
  const int64_t nans = counts >> 42, pos = (counts >> 21) & ((1 << 21) - 1), neg = counts & ((1 << 21) - 1);
  if (nans > 0 || (pos > 0 && neg > 0) || (pos == 0 && neg == 0)) return std::numeric_limits<double>::quiet_NaN();
  return pos > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

template <class T>
void finish_as(const int32_t* exps, const int64_t* sums, size_t count, int bits, int64_t total_weight, T* out) {
  const double weight = double(total_weight);
  for (size_t i = 0; i < count; ++i) {
    if (exps[i] == kNonFinite) {
      out[i] = T(non_finite_value(sums[i]));
      continue;
    }
    // Zeros (common: dead units, constant inputs) skip pow2's slow path for the tiny grid of an
    // all-zero element.
    out[i] = sums[i] == 0 ? T(0) : T(double(sums[i]) * pow2(exponent_bound(exps[i]) - bits) / weight);
  }
}

void require_float(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::F64)
    throw InternalError(fmt::format("exact sum: dtype {} is not f32 or f64", dtype_name(dtype)));
}

}  // namespace

int precision_bits(int64_t total_weight) {
  if (total_weight <= 0 || total_weight >= (int64_t(1) << 31))
    throw UsageError(fmt::format("deterministic reduction: the step's {} rows are outside 1..2^31-1", total_weight));
  // Every term is below 2^bits on its grid and there are at most total_weight terms: the sum
  // stays below 2^(bits + bit_width(total_weight)) <= 2^62.
  return std::min(kMaxPrecision, 62 - int(std::bit_width(uint64_t(total_weight))));
}

void max_exponents(const Terms& terms, int32_t* exps) {
  require_float(terms.dtype);
  if (terms.dtype == DType::F32) max_exponents_of<float>(terms, exps);
  else max_exponents_of<double>(terms, exps);
}

void fixed_sums(const Terms& terms, const int32_t* exps, int bits, int64_t* sums) {
  require_float(terms.dtype);
  if (terms.dtype == DType::F32) fixed_sums_of<float>(terms, exps, bits, sums);
  else fixed_sums_of<double>(terms, exps, bits, sums);
}

void finish(DType dtype, const int32_t* exps, const int64_t* sums, size_t count, int bits, int64_t total_weight,
            std::byte* out) {
  require_float(dtype);
  if (total_weight <= 0) throw InternalError("exact sum: total weight must be positive");
  if (dtype == DType::F32) finish_as(exps, sums, count, bits, total_weight, reinterpret_cast<float*>(out));
  else finish_as(exps, sums, count, bits, total_weight, reinterpret_cast<double*>(out));
}

}  // namespace synk::rt::exact
