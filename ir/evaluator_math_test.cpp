// Tests of the reference evaluator's math ops of issue 16 against mathematics and numpy's
// documented semantics, on hand-built IR and fresh random data (the seed is printed on failure):
// the libm ops, the stable softplus and binary_cross_entropy_with_logits (no overflow, and equal
// to their naive forms where those are accurate), round half to even, sign of NaN and 0, and floor
// division and remainder checked by their defining identities (a = b * q + r, r has b's sign,
// |r| < |b|), for floats and integers; an integer division by zero is a user error.
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "ir/evaluator.h"
#include "ir/evaluator_test_util.h"

namespace synk::dsl {
namespace {

using namespace eval_test;
using synk::testing::expect_user_error;

HostTensor run_unary(Op op, const HostTensor& x) {
  Graph g;
  auto in = g.input("x", T(x.dtype, {int64_t(x.data.size())}));
  g.out(g.node(op, T(x.dtype, {int64_t(x.data.size())}), {in}));
  return g.run1({x});
}

HostTensor run_binary(Op op, const HostTensor& a, const HostTensor& b) {
  Graph g;
  const int64_t n = int64_t(a.data.size());
  auto x = g.input("a", T(a.dtype, {n}));
  auto y = g.input("b", T(b.dtype, {n}));
  g.out(g.node(op, T(a.dtype, {n}), {x, y}));
  return g.run1({a, b});
}

TEST(EvaluatorMath, LibmOpsAndStableForms) {
  Random rng;
  TRACE_SEED(rng);
  HostTensor x = rng.normal(DType::F64, {40});
  x.data[0] = 800;   // softplus must not overflow on either side
  x.data[1] = -800;
  struct Case { Op op; double (*f)(double); };
  const Case cases[] = {
      {Op::Log1p, [](double v) { return std::log(1 + v); }},
      {Op::Expm1, [](double v) { return std::exp(v) - 1; }},
      {Op::Sin, [](double v) { return std::sin(v); }},
      {Op::Cos, [](double v) { return std::cos(v); }},
      // The naive form, accurate where exp does not overflow.
      {Op::Softplus, [](double v) { return v > 700 ? v : std::log(1 + std::exp(v)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::op_name(c.op));
    const HostTensor got = run_unary(c.op, x);
    for (size_t i = 0; i < x.data.size(); ++i) {
      const double want = c.f(x.data[i]);
      if (std::isnan(want)) continue;   // log1p below -1
      if (std::isinf(want)) {
        EXPECT_EQ(got.data[i], want) << x.data[i];
        continue;
      }
      EXPECT_NEAR(got.data[i], want, 1e-9 * (1 + std::fabs(want))) << x.data[i];
    }
  }
}

TEST(EvaluatorMath, BceWithLogitsMatchesTheNaiveFormAndNeverOverflows) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor z = rng.normal(DType::F64, {50});
  HostTensor y = rng.ints(DType::F64, {50}, 0, 1000);
  for (double& v : y.data) v /= 1000;   // targets in [0, 1]
  const HostTensor got = run_binary(Op::BceWithLogits, z, y);
  for (size_t i = 0; i < z.data.size(); ++i) {
    const double p = 1 / (1 + std::exp(-z.data[i]));
    const double want = -(y.data[i] * std::log(p) + (1 - y.data[i]) * std::log(1 - p));
    EXPECT_NEAR(got.data[i], want, 1e-9 * (1 + want)) << z.data[i] << ", " << y.data[i];
  }
  const HostTensor big = run_binary(Op::BceWithLogits, HostTensor::make(DType::F64, {2}, {1000, -1000}),
                                    HostTensor::make(DType::F64, {2}, {0, 1}));
  EXPECT_EQ(big.data[0], 1000);
  EXPECT_EQ(big.data[1], 1000);
}

TEST(EvaluatorMath, RoundHalfToEvenFloorCeilSign) {
  Random rng;
  TRACE_SEED(rng);
  HostTensor x = rng.normal(DType::F64, {60});
  for (size_t i = 0; i < 20; ++i) x.data[i] = double(int64_t(i) - 10) + 0.5;   // the halves
  x.data[20] = kNaN;
  x.data[21] = 0;
  x.data[22] = -kInf;
  const HostTensor r = run_unary(Op::Round, x), s = run_unary(Op::Sign, x);
  const HostTensor fl = run_unary(Op::Floor, x), ce = run_unary(Op::Ceil, x);
  for (size_t i = 0; i < x.data.size(); ++i) {
    const double v = x.data[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(r.data[i]) && std::isnan(s.data[i]) && std::isnan(fl.data[i]) && std::isnan(ce.data[i]));
      continue;
    }
    EXPECT_EQ(fl.data[i], std::floor(v));
    EXPECT_EQ(ce.data[i], std::ceil(v));
    // Nearest integer; on a half, the even one.
    const double lower = std::floor(v), frac = v - lower;
    const double want = frac < 0.5 ? lower : frac > 0.5 ? lower + 1 : (std::fmod(lower, 2) == 0 ? lower : lower + 1);
    EXPECT_EQ(r.data[i], std::isinf(v) ? v : want) << v;
    EXPECT_EQ(s.data[i], v > 0 ? 1 : v < 0 ? -1 : 0) << v;
  }
  // Integers: sign is -1, 0, 1; floor, ceil and round are the identity.
  const HostTensor k = HostTensor::make(DType::I32, {5}, {-7, -1, 0, 1, 9});
  EXPECT_EQ(run_unary(Op::Sign, k).data, (std::vector<double>{-1, -1, 0, 1, 1}));
  EXPECT_EQ(run_unary(Op::Round, k).data, k.data);
  EXPECT_EQ(run_unary(Op::Floor, k).data, k.data);
}

TEST(EvaluatorMath, FloatFloorDivisionAndRemainderSatisfyTheirIdentities) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor a = rng.normal(DType::F64, {200});
  HostTensor b = rng.normal(DType::F64, {200});
  const HostTensor q = run_binary(Op::FloorDiv, a, b), r = run_binary(Op::Mod, a, b);
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double x = a.data[i], y = b.data[i];
    EXPECT_EQ(q.data[i], std::floor(q.data[i])) << "an integer quotient";
    EXPECT_NEAR(q.data[i], std::floor(x / y), 1) << x << " // " << y;
    EXPECT_NEAR(y * q.data[i] + r.data[i], x, 1e-12 * (1 + std::fabs(x))) << x << ", " << y;
    EXPECT_LT(std::fabs(r.data[i]), std::fabs(y) * (1 + 1e-15));
    EXPECT_TRUE(r.data[i] == 0 || (r.data[i] < 0) == (y < 0)) << "the remainder has the divisor's sign: " << x << " % " << y;
  }
  // Division by zero and infinities, as numpy: NaN remainder, a / 0 quotient; x % inf.
  const HostTensor edge_a = HostTensor::make(DType::F64, {3}, {1, -1, -1});
  const HostTensor edge_b = HostTensor::make(DType::F64, {3}, {0, 0, kInf});
  const HostTensor eq = run_binary(Op::FloorDiv, edge_a, edge_b), er = run_binary(Op::Mod, edge_a, edge_b);
  EXPECT_EQ(eq.data[0], kInf);
  EXPECT_EQ(eq.data[1], -kInf);
  EXPECT_EQ(eq.data[2], -1);
  EXPECT_TRUE(std::isnan(er.data[0]));
  EXPECT_EQ(er.data[2], kInf);
}

TEST(EvaluatorMath, IntegerFloorDivisionAndRemainder) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor a = rng.ints(DType::I32, {300}, -50, 50);
  HostTensor b = rng.ints(DType::I32, {300}, -50, 50);
  for (double& v : b.data) v = v == 0 ? 1 : v;
  const std::vector<double>& xs = a.data;
  const std::vector<double>& ys = b.data;
  const HostTensor q = run_binary(Op::FloorDiv, a, b), r = run_binary(Op::Mod, a, b);
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(q.data[i], std::floor(xs[i] / ys[i])) << xs[i] << " // " << ys[i];
    EXPECT_EQ(ys[i] * q.data[i] + r.data[i], xs[i]);
    EXPECT_TRUE(r.data[i] == 0 || (r.data[i] < 0) == (ys[i] < 0)) << xs[i] << " % " << ys[i];
  }
  // INT_MIN // -1 wraps (as numpy does), and INT_MIN % -1 is 0.
  const HostTensor lo = HostTensor::make(DType::I32, {1}, {-2147483648.0}), m1 = HostTensor::make(DType::I32, {1}, {-1});
  EXPECT_EQ(run_binary(Op::FloorDiv, lo, m1).data[0], -2147483648.0);
  EXPECT_EQ(run_binary(Op::Mod, lo, m1).data[0], 0);
}

TEST(EvaluatorMath, IntegerDivisionByZeroIsAUserError) {
  const HostTensor a = HostTensor::make(DType::I64, {2}, {3, 4}), b = HostTensor::make(DType::I64, {2}, {1, 0});
  expect_user_error([&] { run_binary(Op::Mod, a, b); }, {"'%'", "integer division by zero"});
  expect_user_error([&] { run_binary(Op::FloorDiv, a, b); }, {"floor_divide", "integer division by zero"});
}

}  // namespace
}  // namespace synk::dsl
