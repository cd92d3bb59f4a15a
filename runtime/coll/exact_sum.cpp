// Exact weighted sums over ranks (exact_sum.h). The loops are per element over every part; the
// grid scale of each element is a power of two built once from its exponent, so converting a
// term is one multiply and one round (the 1.5 * 2^52 trick, exact for |x| <= 2^51, which the
// grid guarantees).
#include "runtime/coll/exact_sum.h"

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

inline double round_even(double x) { return (x + kRoundMagic) - kRoundMagic; }

template <class T>
const T* part_values(const Terms& terms, size_t k) {
  return reinterpret_cast<const T*>(terms.parts[k]);
}

template <class T>
void max_exponents_of(const Terms& terms, int32_t* exps) {
  for (size_t k = 0; k < terms.parts.size(); ++k) {
    const T* v = part_values<T>(terms, k);
    const double w = double(terms.weights[k]);
    for (size_t i = 0; i < terms.count; ++i) exps[i] = std::max(exps[i], biased_exponent(w * double(v[i])));
  }
}

template <class T>
void fixed_sums_of(const Terms& terms, const int32_t* exps, int bits, int64_t* sums) {
  // The grid of element i: 2^(bound - bits); a term is scaled by its inverse.
  // The scale of the smallest elements (float64 below 2^-972) passes 2^1023: two factors then.
  thread_local std::vector<double> scale, scale_rest;
  scale.resize(terms.count);
  scale_rest.resize(terms.count);
  bool any_non_finite = false;
  for (size_t i = 0; i < terms.count; ++i) {
    any_non_finite |= exps[i] == kNonFinite;
    const int shift = exps[i] == kNonFinite ? 0 : bits - exponent_bound(exps[i]);
    scale[i] = exps[i] == kNonFinite ? 0.0 : pow2(std::min(shift, 1000));
    scale_rest[i] = pow2(shift - std::min(shift, 1000));
    sums[i] = 0;
  }
  for (size_t k = 0; k < terms.parts.size(); ++k) {
    const T* v = part_values<T>(terms, k);
    const double w = double(terms.weights[k]);
    for (size_t i = 0; i < terms.count; ++i) {
      const double scaled = w * double(v[i]) * scale[i] * scale_rest[i];
      // A non-finite element's scale is 0: its NaN * 0 is dropped here and counted below.
      sums[i] += int64_t(round_even(std::isfinite(scaled) ? scaled : 0.0));
    }
  }
  if (!any_non_finite) return;
  for (size_t i = 0; i < terms.count; ++i) {
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
    out[i] = T(double(sums[i]) * pow2(exponent_bound(exps[i]) - bits) / weight);
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
