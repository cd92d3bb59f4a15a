// The exact sums of deterministic steps (exact_sum.h), simulated without processes: the same
// terms dealt to 1..5 "ranks" in different ways give the same bits, the result is within the
// documented precision of the float64 weighted mean, and NaN/inf follow IEEE.
#include "runtime/coll/exact_sum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "base/errors.h"

namespace synk::rt::exact {
namespace {

// Terms k = 0..K-1 of `count` elements each, and their weights.
struct Problem {
  size_t count = 0;
  std::vector<std::vector<float>> parts;
  std::vector<int64_t> weights;
  int64_t total() const {
    int64_t t = 0;
    for (int64_t w : weights) t += w;
    return t;
  }
};

// Deals the terms to `ranks` ranks by `owner`, runs the three passes as the collectives would
// (max over ranks, sum over ranks) and returns the result.
std::vector<float> reduce_over(const Problem& p, int ranks, const std::vector<int>& owner) {
  std::vector<Terms> per_rank(static_cast<size_t>(ranks));
  for (Terms& t : per_rank) t.count = p.count;
  for (size_t k = 0; k < p.parts.size(); ++k) {
    per_rank[size_t(owner[k])].parts.push_back(reinterpret_cast<const std::byte*>(p.parts[k].data()));
    per_rank[size_t(owner[k])].weights.push_back(p.weights[k]);
  }
  std::vector<int32_t> exps(p.count, 0);
  for (const Terms& t : per_rank) {
    std::vector<int32_t> mine(p.count, 0);
    max_exponents(t, mine.data());
    for (size_t i = 0; i < p.count; ++i) exps[i] = std::max(exps[i], mine[i]);
  }
  const int bits = precision_bits(p.total());
  std::vector<int64_t> sums(p.count, 0);
  for (const Terms& t : per_rank) {
    std::vector<int64_t> mine(p.count, -7);   // fixed_sums writes every element
    fixed_sums(t, exps.data(), bits, mine.data());
    for (size_t i = 0; i < p.count; ++i) sums[i] += mine[i];
  }
  std::vector<float> out(p.count);
  finish(DType::F32, exps.data(), sums.data(), p.count, bits, p.total(), reinterpret_cast<std::byte*>(out.data()));
  return out;
}

Problem random_problem(std::mt19937_64& rng, size_t count, size_t terms) {
  Problem p;
  p.count = count;
  std::normal_distribution<float> value;
  std::uniform_int_distribution<int> scale(-30, 30), rows(1, 64);
  for (size_t k = 0; k < terms; ++k) {
    std::vector<float> v(count);
    for (float& x : v) x = std::ldexp(value(rng), scale(rng));
    p.parts.push_back(std::move(v));
    p.weights.push_back(rows(rng));
  }
  return p;
}

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b;
  for (float x : v) b.push_back(std::bit_cast<uint32_t>(x));
  return b;
}

TEST(ExactSum, SameBitsForEveryDealOfTheTermsToRanks) {
  std::mt19937_64 rng(20261128);
  for (int trial = 0; trial < 20; ++trial) {
    Problem p = random_problem(rng, 257, 1 + size_t(trial % 9));
    std::vector<int> one(p.parts.size(), 0);
    const std::vector<uint32_t> expected = bits_of(reduce_over(p, 1, one));
    for (int ranks = 2; ranks <= 5; ++ranks) {
      std::vector<int> owner(p.parts.size());
      for (int& o : owner) o = int(rng() % uint64_t(ranks));
      EXPECT_EQ(bits_of(reduce_over(p, ranks, owner)), expected) << "trial " << trial << ", " << ranks << " ranks";
      // Reversing the order of the terms changes no bit either.
      Problem r = p;
      std::reverse(r.parts.begin(), r.parts.end());
      std::reverse(r.weights.begin(), r.weights.end());
      std::reverse(owner.begin(), owner.end());
      EXPECT_EQ(bits_of(reduce_over(r, ranks, owner)), expected);
    }
  }
}

TEST(ExactSum, MatchesTheFloat64WeightedMeanToFloat32Rounding) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 10; ++trial) {
    Problem p = random_problem(rng, 1000, 6);
    std::vector<float> got = reduce_over(p, 1, std::vector<int>(p.parts.size(), 0));
    for (size_t i = 0; i < p.count; ++i) {
      long double sum = 0, largest = 0;
      for (size_t k = 0; k < p.parts.size(); ++k) {
        long double term = (long double)p.weights[k] * p.parts[k][i];
        sum += term;
        largest = std::max(largest, std::fabs(term));
      }
      const long double mean = sum / p.total();
      // One float32 rounding of the mean, plus the grid's error (2^-51 of the largest term per term).
      const long double tolerance = std::fabs(mean) * 0x1p-24L + largest * 6 * 0x1p-51L / p.total();
      EXPECT_LE(std::fabs((long double)got[i] - mean), tolerance) << "element " << i;
    }
  }
}

TEST(ExactSum, CancellationIsExact) {
  // 1e8 + 1 - 1e8 in float order loses the 1; the fixed-point sum keeps it.
  Problem p;
  p.count = 1;
  p.parts = {{1e8f}, {1.0f}, {-1e8f}};
  p.weights = {1, 1, 1};
  EXPECT_EQ(reduce_over(p, 1, {0, 0, 0})[0], 1.0f / 3.0f);
  EXPECT_EQ(reduce_over(p, 3, {2, 0, 1})[0], 1.0f / 3.0f);
}

TEST(ExactSum, NaNAndInfinitiesFollowIEEE) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Problem p;
  p.count = 5;
  p.parts = {{1, inf, inf, nan, 0}, {2, 1, -inf, 1, 0}, {3, inf, 5, 1, 0}};
  p.weights = {1, 2, 3};
  for (const std::vector<int>& owner : {std::vector<int>{0, 0, 0}, {0, 1, 2}, {1, 0, 1}}) {
    const int ranks = 1 + *std::max_element(owner.begin(), owner.end());
    std::vector<float> out = reduce_over(p, ranks, owner);
    EXPECT_EQ(out[0], float((1.0 + 4.0 + 9.0) / 6.0));
    EXPECT_EQ(out[1], inf);
    EXPECT_TRUE(std::isnan(out[2])) << "+inf and -inf";
    EXPECT_TRUE(std::isnan(out[3]));
    EXPECT_EQ(out[4], 0.0f);
  }
}

TEST(ExactSum, PrecisionShrinksWithRowsAndRejectsTooMany) {
  EXPECT_EQ(precision_bits(1), 51);
  EXPECT_EQ(precision_bits(2047), 51);
  EXPECT_EQ(precision_bits(4096), 49);
  EXPECT_EQ(precision_bits((int64_t(1) << 31) - 1), 31);
  EXPECT_THROW(precision_bits(int64_t(1) << 31), UsageError);
  EXPECT_THROW(precision_bits(0), UsageError);
}

TEST(ExactSum, Float64TermsIncludingSubnormalsAndHugeValues) {
  std::vector<std::vector<double>> parts = {{1e-310, 1e300, -3.0}, {2e-310, 1e300, 3.0}, {0.0, -1e300, 1e-20}};
  const std::vector<int64_t> weights = {1, 1, 1};
  auto run = [&](const std::vector<int>& owner, int ranks) {
    std::vector<Terms> per(static_cast<size_t>(ranks));
    for (Terms& t : per) t.dtype = DType::F64, t.count = 3;
    for (size_t k = 0; k < parts.size(); ++k) {
      per[size_t(owner[k])].parts.push_back(reinterpret_cast<const std::byte*>(parts[k].data()));
      per[size_t(owner[k])].weights.push_back(weights[k]);
    }
    std::vector<int32_t> exps(3, 0);
    for (const Terms& t : per) max_exponents(t, exps.data());
    std::vector<int64_t> sums(3, 0);
    const int bits = precision_bits(3);
    for (const Terms& t : per) {
      std::vector<int64_t> mine(3);
      fixed_sums(t, exps.data(), bits, mine.data());
      for (size_t i = 0; i < 3; ++i) sums[i] += mine[i];
    }
    std::vector<double> out(3);
    finish(DType::F64, exps.data(), sums.data(), 3, bits, 3, reinterpret_cast<std::byte*>(out.data()));
    return out;
  };
  std::vector<double> a = run({0, 0, 0}, 1), b = run({1, 0, 1}, 2);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(double) * 3), 0);
  EXPECT_NEAR(a[0], 1e-310, 1e-320);
  EXPECT_DOUBLE_EQ(a[1], 1e300 / 3);
  // 1e-20 lies below the grid of the largest term (2^-49 for 3): the documented precision.
  EXPECT_EQ(a[2], 0.0);
}

}  // namespace
}  // namespace synk::rt::exact
