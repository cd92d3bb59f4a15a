// Exact, order-independent weighted sums of floating-point terms spread over ranks: the arithmetic
// of a deterministic training step (docs/training.md, "The same bits on any number of ranks").
//
// A float sum depends on the order of its terms, so a gradient summed over 2 ranks differs in its
// last bits from the same gradient summed over 3. Here every term weights[k] * parts[k][i] is
// rounded once to a fixed-point integer on a grid that depends only on the largest term of
// element i over all ranks (its binary exponent, found by a max all-reduce of int32), and the
// integers are summed exactly (an int64 sum all-reduce; integer addition is associative). The
// result, sum * grid / total_weight rounded to the dtype, depends only on the set of terms: the
// same bits whichever rank holds which term and in whatever order the ranks combine.
//
// Precision: precision_bits(total_weight) bits below the largest term of an element (51 for up to
// 2047 rows, fewer for more, at least 31), well past float32's 24 and close to float64's 53.
// NaN and infinities follow IEEE: any NaN, or +inf with -inf, gives NaN; otherwise the infinity.
//
// The passes, per rank and variable:
//   exps[i] = 0;  max_exponents(terms, exps);           then max all-reduce of exps (int32)
//   fixed_sums(terms, exps, bits, sums);                 then sum all-reduce of sums (int64)
//   finish(dtype, exps, sums, count, bits, total_weight, out)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/call/descriptor.h"

namespace synk::rt::exact {

// One rank's terms of one variable: `count` elements of `dtype` (F32 or F64) per part, and each
// part's weight (its rows).
struct Terms {
  DType dtype = DType::F32;
  size_t count = 0;
  std::vector<const std::byte*> parts;
  std::vector<int64_t> weights;
};

// An element whose terms hold a NaN or an infinity somewhere has this exponent after the max pass.
inline constexpr int32_t kNonFinite = 0x7ff;

// Fixed-point bits kept below an element's largest term when the weights add up to
// `total_weight` (UsageError past 2^31 rows: the integer sums could overflow).
int precision_bits(int64_t total_weight);

// exps[i] = max(exps[i], biased float64 exponent of every term of element i).
void max_exponents(const Terms& terms, int32_t* exps);

// sums[i] = the sum of the fixed-point values of every term of element i on the grid of exps[i]
// (the all-reduced exponents); for a non-finite element, flags of this rank's NaNs and
// infinities instead (one count per kind and rank, so the all-reduced sum counts ranks).
void fixed_sums(const Terms& terms, const int32_t* exps, int bits, int64_t* sums);

// out[i] = the weighted average of element i (the all-reduced sums over total_weight), rounded
// once to `dtype`.
void finish(DType dtype, const int32_t* exps, const int64_t* sums, size_t count, int bits, int64_t total_weight,
            std::byte* out);

}  // namespace synk::rt::exact
