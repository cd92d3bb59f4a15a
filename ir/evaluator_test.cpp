// Tests of the reference evaluator, the oracle of every differential test: so it is checked here
// against mathematics and independently written loops (explicit index arithmetic, identities such
// as softmax summing to 1), on hand-built IR and on fresh random data (the seed is printed on
// failure). This file: pointwise ops, reductions and matmul; evaluator_structure_test.cpp: the
// structure ops, the softmax family, argument checks and the seed examples.
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "ir/evaluator.h"
#include "ir/evaluator_test_util.h"

namespace synk::dsl {
namespace {

using namespace eval_test;   // Graph, T, Random, DType, Op, ...: this test's vocabulary
using synk::testing::expect_user_error;

// ---- pointwise -------------------------------------------------------------------------------

TEST(EvaluatorPointwise, UnaryFloatOpsMatchTheLibm) {
  Random rng;
  TRACE_SEED(rng);
  HostTensor x = rng.normal(DType::F64, {3, 5});
  x.data[0] = 800;   // sigmoid must not overflow on either side
  x.data[1] = -800;
  struct Case { Op op; double (*f)(double); };
  const Case cases[] = {
      {Op::Exp, [](double v) { return std::exp(v); }},
      {Op::Tanh, [](double v) { return std::tanh(v); }},
      {Op::Sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {Op::Relu, [](double v) { return v > 0 ? v : 0.0; }},
      {Op::Abs, [](double v) { return std::fabs(v); }},
      {Op::Neg, [](double v) { return -v; }},
      {Op::Log, [](double v) { return std::log(v); }},
      {Op::Sqrt, [](double v) { return std::sqrt(v); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::op_name(c.op));
    Graph g;
    auto in = g.input("x", T(DType::F64, {3, 5}));
    g.out(g.node(c.op, T(DType::F64, {3, 5}), {in}));
    const HostTensor got = g.run1({x});
    std::vector<double> want;
    for (double v : x.data) want.push_back(c.f(v));
    EXPECT_EQ(got.shape, x.shape);
    expect_near_all(got.data, want);
  }
}

TEST(EvaluatorPointwise, SigmoidSaturatesWithoutNaN) {
  Graph g;
  auto in = g.input("x", T(DType::F64, {2}));
  g.out(g.node(Op::Sigmoid, T(DType::F64, {2}), {in}));
  const HostTensor got = g.run1({HostTensor::make(DType::F64, {2}, {1000, -1000})});
  EXPECT_EQ(got.data[0], 1.0);
  EXPECT_EQ(got.data[1], 0.0);
}

TEST(EvaluatorPointwise, NaNPropagatesThroughMaxMinAndRelu) {
  Graph g;
  auto a = g.input("a", T(DType::F64, {3}));
  auto b = g.input("b", T(DType::F64, {3}));
  g.out(g.node(Op::Maximum, T(DType::F64, {3}), {a, b}));
  g.out(g.node(Op::Minimum, T(DType::F64, {3}), {a, b}));
  g.out(g.node(Op::Relu, T(DType::F64, {3}), {a}));
  const EvalResult r = g.run({HostTensor::make(DType::F64, {3}, {kNaN, 1, -kInf}),
                              HostTensor::make(DType::F64, {3}, {0, kNaN, 2})});
  EXPECT_TRUE(std::isnan(r.outputs[0].data[0]));
  EXPECT_TRUE(std::isnan(r.outputs[0].data[1]));
  EXPECT_EQ(r.outputs[0].data[2], 2);
  EXPECT_TRUE(std::isnan(r.outputs[1].data[0]));
  EXPECT_TRUE(std::isnan(r.outputs[1].data[1]));
  EXPECT_EQ(r.outputs[1].data[2], -kInf);
  EXPECT_TRUE(std::isnan(r.outputs[2].data[0]));
  EXPECT_EQ(r.outputs[2].data[2], 0);
}

TEST(EvaluatorPointwise, BinaryBroadcastingMatchesExplicitIndexing) {
  Random rng;
  TRACE_SEED(rng);
  // [4, 1, 3] op [2, 1] -> [4, 2, 3]; and [2, 3] op [3]; and a scalar.
  HostTensor a = rng.normal(DType::F64, {4, 1, 3});
  HostTensor b = rng.normal(DType::F64, {2, 1});
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum, Op::Minimum}) {
    SCOPED_TRACE(ir::op_name(op));
    Graph g;
    auto ia = g.input("a", T(DType::F64, {4, 1, 3}));
    auto ib = g.input("b", T(DType::F64, {2, 1}));
    g.out(g.node(op, T(DType::F64, {4, 2, 3}), {ia, ib}));
    const HostTensor got = g.run1({a, b});
    ASSERT_EQ(got.shape, (std::vector<int64_t>{4, 2, 3}));
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 3; ++k) {
          const double x = a.data[size_t(i * 3 + k)], y = b.data[size_t(j)];
          double want = 0;
          switch (op) {
            case Op::Add: want = x + y; break;
            case Op::Sub: want = x - y; break;
            case Op::Mul: want = x * y; break;
            case Op::Div: want = x / y; break;
            case Op::Maximum: want = std::max(x, y); break;
            default: want = std::min(x, y); break;
          }
          EXPECT_DOUBLE_EQ(got.data[size_t((i * 2 + j) * 3 + k)], want);
        }
  }
}

TEST(EvaluatorPointwise, ScalarConstantBroadcastsAndF32ConstantsRoundToFloat) {
  Graph g;
  auto x = g.input("x", T(DType::F32, {"n", 2}));
  auto c = g.constant(DType::F32, 0.1);
  g.out(g.node(Op::Mul, T(DType::F32, {"n", 2}), {x, c}));
  const HostTensor got = g.run1({HostTensor::make(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(got.shape, (std::vector<int64_t>{3, 2}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got.data[size_t(i)], double(i + 1) * double(0.1f));
}

TEST(EvaluatorPointwise, PowMatchesStdPow) {
  Random rng;
  TRACE_SEED(rng);
  HostTensor a = rng.normal(DType::F64, {5});
  for (double& v : a.data) v = std::fabs(v) + 0.1;
  HostTensor b = rng.normal(DType::F64, {5});
  Graph g;
  auto ia = g.input("a", T(DType::F64, {5}));
  auto ib = g.input("b", T(DType::F64, {5}));
  g.out(g.node(Op::Pow, T(DType::F64, {5}), {ia, ib}));
  const HostTensor got = g.run1({a, b});
  for (size_t i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(got.data[i], std::pow(a.data[i], b.data[i]));
}

TEST(EvaluatorPointwise, IntegerArithmeticWrapsLikeTheDtype) {
  Graph g;
  auto a = g.input("a", T(DType::I32, {3}));
  auto b = g.input("b", T(DType::I32, {3}));
  auto u = g.input("u", T(DType::U8, {3}));
  auto v = g.input("v", T(DType::U8, {3}));
  g.out(g.node(Op::Add, T(DType::I32, {3}), {a, b}));
  g.out(g.node(Op::Mul, T(DType::I32, {3}), {a, b}));
  g.out(g.node(Op::Sub, T(DType::I32, {3}), {a, b}));
  g.out(g.node(Op::Add, T(DType::U8, {3}), {u, v}));
  g.out(g.node(Op::Sub, T(DType::U8, {3}), {u, v}));
  g.out(g.node(Op::Neg, T(DType::U8, {3}), {u}));
  g.out(g.node(Op::Neg, T(DType::I32, {3}), {a}));
  g.out(g.node(Op::Abs, T(DType::I32, {3}), {a}));
  const EvalResult r = g.run({HostTensor::make(DType::I32, {3}, {2147483647, -2147483648.0, 65536}),
                              HostTensor::make(DType::I32, {3}, {1, 1, 65536}),
                              HostTensor::make(DType::U8, {3}, {200, 0, 255}),
                              HostTensor::make(DType::U8, {3}, {100, 1, 255})});
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{-2147483648.0, -2147483647.0, 131072}));
  EXPECT_EQ(r.outputs[1].data, (std::vector<double>{2147483647, -2147483648.0, 0}));   // 2^32 wraps to 0
  EXPECT_EQ(r.outputs[2].data, (std::vector<double>{2147483646, 2147483647, 0}));
  EXPECT_EQ(r.outputs[3].data, (std::vector<double>{44, 1, 254}));
  EXPECT_EQ(r.outputs[4].data, (std::vector<double>{100, 255, 0}));
  EXPECT_EQ(r.outputs[5].data, (std::vector<double>{56, 0, 1}));
  EXPECT_EQ(r.outputs[6].data, (std::vector<double>{-2147483647, -2147483648.0, -65536}));
  EXPECT_EQ(r.outputs[7].data, (std::vector<double>{2147483647, -2147483648.0, 65536}));
}

TEST(EvaluatorPointwise, IntegerPower) {
  Graph g;
  auto a = g.input("a", T(DType::I64, {6}));
  auto b = g.input("b", T(DType::I64, {6}));
  g.out(g.node(Op::Pow, T(DType::I64, {6}), {a, b}));
  const HostTensor got = g.run1({HostTensor::make(DType::I64, {6}, {3, -2, 2, 1, -1, 5}),
                                 HostTensor::make(DType::I64, {6}, {4, 3, -1, -7, -3, 0})});
  EXPECT_EQ(got.data, (std::vector<double>{81, -8, 0, 1, -1, 1}));
}

TEST(EvaluatorPointwise, ComparisonsAndLogicIncludingNaN) {
  Graph g;
  auto a = g.input("a", T(DType::F64, {4}));
  auto b = g.input("b", T(DType::F64, {4}));
  const Op ops[] = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
  std::vector<ir::NodeId> cmp;
  for (Op op : ops) {
    cmp.push_back(g.node(op, T(DType::Bool, {4}), {a, b}));
    g.out(cmp.back());
  }
  g.out(g.node(Op::And, T(DType::Bool, {4}), {cmp[2], cmp[1]}));   // a < b && a != b
  g.out(g.node(Op::Or, T(DType::Bool, {4}), {cmp[2], cmp[0]}));    // a <= b
  g.out(g.node(Op::Not, T(DType::Bool, {4}), {cmp[0]}));
  const EvalResult r = g.run({HostTensor::make(DType::F64, {4}, {1, 2, 3, kNaN}),
                              HostTensor::make(DType::F64, {4}, {2, 2, 1, kNaN})});
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(r.outputs[1].data, (std::vector<double>{1, 0, 1, 1}));
  EXPECT_EQ(r.outputs[2].data, (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(r.outputs[3].data, (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(r.outputs[4].data, (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(r.outputs[5].data, (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(r.outputs[6].data, (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(r.outputs[7].data, (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(r.outputs[8].data, (std::vector<double>{1, 0, 1, 1}));
  for (const HostTensor& t : r.outputs) EXPECT_EQ(t.dtype, DType::Bool);
}

TEST(EvaluatorPointwise, WhereBroadcastsOverAllThree) {
  Graph g;
  auto c = g.input("c", T(DType::Bool, {2, 1}));
  auto a = g.input("a", T(DType::F64, {3}));
  auto b = g.constant(DType::F64, -1);
  g.out(g.node(Op::Where, T(DType::F64, {2, 3}), {c, a, b}));
  const HostTensor got = g.run1({HostTensor::make(DType::Bool, {2, 1}, {1, 0}),
                                 HostTensor::make(DType::F64, {3}, {7, 8, 9})});
  EXPECT_EQ(got.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(got.data, (std::vector<double>{7, 8, 9, -1, -1, -1}));
}

TEST(EvaluatorPointwise, Casts) {
  Graph g;
  auto x = g.input("x", T(DType::F64, {6}));
  auto i = g.input("i", T(DType::I32, {3}));
  g.out(g.node(Op::Cast, T(DType::I32, {6}), {x}));
  g.out(g.node(Op::Cast, T(DType::Bool, {6}), {x}));
  g.out(g.node(Op::Cast, T(DType::F32, {6}), {x}));
  g.out(g.node(Op::Cast, T(DType::U8, {3}), {i}));
  g.out(g.node(Op::Cast, T(DType::F64, {3}), {i}));
  const EvalResult r = g.run({HostTensor::make(DType::F64, {6}, {-2.7, 2.7, 0, 0.1, -0.5, 1e9}),
                              HostTensor::make(DType::I32, {3}, {300, -1, 255})});
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{-2, 2, 0, 0, 0, 1e9}));
  EXPECT_FALSE(std::signbit(r.outputs[0].data[4]));   // -0.5 truncates to 0, not -0
  EXPECT_EQ(r.outputs[1].data, (std::vector<double>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(r.outputs[2].data[3], double(0.1f));
  EXPECT_NE(r.outputs[2].data[3], 0.1);
  EXPECT_EQ(r.outputs[2].data[0], double(-2.7f));
  EXPECT_EQ(r.outputs[3].data, (std::vector<double>{44, 255, 255}));
  EXPECT_EQ(r.outputs[4].data, (std::vector<double>{300, -1, 255}));
}

TEST(EvaluatorPointwise, CastOfNaNOrOutOfRangeToIntegerIsAUserError) {
  for (double bad : {kNaN, kInf, 3e9}) {
    Graph g;
    auto x = g.input("x", T(DType::F64, {2}));
    g.out(g.node(Op::Cast, T(DType::I32, {2}), {x}));
    expect_user_error([&] { g.run({HostTensor::make(DType::F64, {2}, {1, bad})}); }, {"cast", "i32"});
  }
}

// ---- reductions ------------------------------------------------------------------------------

TEST(EvaluatorReduce, SumMeanProdMaxMinOverAxesWithAndWithoutKeepdims) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor x = rng.normal(DType::F64, {2, 3, 4});
  auto at = [&](int i, int j, int k) { return x.data[size_t((i * 3 + j) * 4 + k)]; };
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "keepdims" : "no keepdims");
    Graph g;
    auto in = g.input("x", T(DType::F64, {2, 3, 4}));
    // Axes {0, 2}: result [3] or [1, 3, 1].
    ir::TensorType rt = keep ? T(DType::F64, {1, 3, 1}) : T(DType::F64, {3});
    for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::ReduceProd, Op::ReduceMax, Op::ReduceMin})
      g.out(g.node(op, rt, {in}, axes_attr({0, 2}, keep)));
    // All axes: a scalar or [1, 1, 1].
    g.out(g.node(Op::ReduceSum, keep ? T(DType::F64, {1, 1, 1}) : T(DType::F64, {}), {in},
                 axes_attr({0, 1, 2}, keep)));
    const EvalResult r = g.run({x});
    EXPECT_EQ(r.outputs[0].shape, keep ? (std::vector<int64_t>{1, 3, 1}) : (std::vector<int64_t>{3}));
    double total = 0;
    for (int j = 0; j < 3; ++j) {
      double sum = 0, prod = 1, max = -kInf, min = kInf;
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 4; ++k) {
          sum += at(i, j, k), prod *= at(i, j, k);
          max = std::max(max, at(i, j, k)), min = std::min(min, at(i, j, k));
        }
      total += sum;
      EXPECT_NEAR(r.outputs[0].data[size_t(j)], sum, 1e-12);
      EXPECT_NEAR(r.outputs[1].data[size_t(j)], sum / 8, 1e-12);
      EXPECT_NEAR(r.outputs[2].data[size_t(j)], prod, 1e-12 * std::max(1.0, std::fabs(prod)));
      EXPECT_EQ(r.outputs[3].data[size_t(j)], max);
      EXPECT_EQ(r.outputs[4].data[size_t(j)], min);
    }
    EXPECT_NEAR(r.outputs[5].data[0], total, 1e-12);
  }
}

TEST(EvaluatorReduce, MaxPropagatesNaN) {
  Graph g;
  auto in = g.input("x", T(DType::F64, {2, 3}));
  g.out(g.node(Op::ReduceMax, T(DType::F64, {2}), {in}, axes_attr({1})));
  g.out(g.node(Op::ReduceMin, T(DType::F64, {3}), {in}, axes_attr({0})));
  const EvalResult r = g.run({HostTensor::make(DType::F64, {2, 3}, {1, kNaN, 3, 4, 5, 6})});
  EXPECT_TRUE(std::isnan(r.outputs[0].data[0]));
  EXPECT_EQ(r.outputs[0].data[1], 6);
  EXPECT_EQ(r.outputs[1].data[0], 1);
  EXPECT_TRUE(std::isnan(r.outputs[1].data[1]));
}

TEST(EvaluatorReduce, IntegerSumWrapsAndBoolSumCounts) {
  Graph g;
  auto i = g.input("i", T(DType::I32, {3}));
  auto b = g.input("b", T(DType::Bool, {4}));
  g.out(g.node(Op::ReduceSum, T(DType::I32, {}), {i}, axes_attr({0})));
  auto bi = g.node(Op::Cast, T(DType::I64, {4}), {b});
  g.out(g.node(Op::ReduceSum, T(DType::I64, {}), {bi}, axes_attr({0})));
  g.out(g.node(Op::ReduceProd, T(DType::I32, {}), {i}, axes_attr({0})));
  const EvalResult r = g.run({HostTensor::make(DType::I32, {3}, {2147483647, 2, 3}),
                              HostTensor::make(DType::Bool, {4}, {1, 0, 1, 1})});
  EXPECT_EQ(r.outputs[0].data[0], -2147483644.0);   // 2^31 - 1 + 5 wraps
  EXPECT_EQ(r.outputs[1].data[0], 3);
  EXPECT_EQ(r.outputs[2].data[0], double(int32_t(uint32_t(2147483647u * 6u))));
}

TEST(EvaluatorReduce, EmptyAxes) {
  Graph g;
  auto in = g.input("x", T(DType::F64, {"n", 3}));
  g.out(g.node(Op::ReduceSum, T(DType::F64, {3}), {in}, axes_attr({0})));
  g.out(g.node(Op::ReduceProd, T(DType::F64, {3}), {in}, axes_attr({0})));
  g.out(g.node(Op::ReduceMean, T(DType::F64, {3}), {in}, axes_attr({0})));
  g.out(g.node(Op::ReduceMax, T(DType::F64, {"n"}), {in}, axes_attr({1})));   // fine: nothing to reduce into
  const EvalResult r = g.run({HostTensor::filled(DType::F64, {0, 3}, 0)});
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(r.outputs[1].data, (std::vector<double>{1, 1, 1}));
  for (double v : r.outputs[2].data) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(r.outputs[3].shape, (std::vector<int64_t>{0}));
}

TEST(EvaluatorReduce, MaxMinArgmaxOfAnEmptyAxisAreUserErrors) {
  for (Op op : {Op::ReduceMax, Op::ReduceMin, Op::ArgMax}) {
    Graph g;
    auto in = g.input("x", T(DType::F64, {"n", 3}));
    g.out(g.node(op, T(op == Op::ArgMax ? DType::I64 : DType::F64, {3}), {in}, axes_attr({0})));
    expect_user_error([&] { g.run({HostTensor::filled(DType::F64, {0, 3}, 0)}); },
                      {ir::op_name(op), "empty axis", "axis 0"});
  }
}

TEST(EvaluatorReduce, DeadNodesRaiseNothingAndDeadSharedReadsNeedNoValue) {
  // Compiled code drops nodes that reach no output or update (DCE); the reference must agree:
  // an unused max/argmax over an empty axis, or an unused read of a shared variable not given.
  Graph g;
  auto in = g.input("x", T(DType::F64, {"n", 3}));
  g.node(Op::ReduceMin, T(DType::F64, {3}), {in}, axes_attr({0}));
  auto dead_argmax = g.node(Op::ArgMax, T(DType::I64, {3}), {in}, axes_attr({0}));
  g.node(Op::Neg, T(DType::I64, {3}), {dead_argmax});
  g.shared("unused", T(DType::F64, {4}));
  g.out(g.node(Op::ReduceSum, T(DType::F64, {3}), {in}, axes_attr({0})));
  const EvalResult r = g.run({HostTensor::filled(DType::F64, {0, 3}, 0)});
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{0, 0, 0}));
  // The same min, live, is still an error.
  Graph live;
  auto x = live.input("x", T(DType::F64, {"n", 3}));
  live.out(live.node(Op::ReduceMin, T(DType::F64, {3}), {x}, axes_attr({0})));
  expect_user_error([&] { live.run({HostTensor::filled(DType::F64, {0, 3}, 0)}); }, {"empty axis"});
}

TEST(EvaluatorReduce, ArgmaxReturnsTheFirstMaximumAndCountsNaNAsMaximum) {
  Graph g;
  auto in = g.input("x", T(DType::F64, {3, 4}));
  g.out(g.node(Op::ArgMax, T(DType::I64, {3}), {in}, axes_attr({1})));
  g.out(g.node(Op::ArgMax, T(DType::I64, {1, 4}), {in}, axes_attr({0}, true)));
  const EvalResult r = g.run({HostTensor::make(DType::F64, {3, 4}, {1, 5, 5, 2,      //
                                                                    -kInf, -kInf, -kInf, -kInf,
                                                                    0, kNaN, 9, kNaN})});
  EXPECT_EQ(r.outputs[0].dtype, DType::I64);
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(r.outputs[1].shape, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(r.outputs[1].data, (std::vector<double>{0, 2, 2, 2}));
}

TEST(EvaluatorReduce, ArgmaxAgreesWithALoopOnRandomData) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor x = rng.ints(DType::I32, {5, 7}, -3, 3);   // small range: many ties
  Graph g;
  auto in = g.input("x", T(DType::I32, {5, 7}));
  g.out(g.node(Op::ArgMax, T(DType::I64, {5}), {in}, axes_attr({1})));
  const HostTensor got = g.run1({x});
  for (int i = 0; i < 5; ++i) {
    int best = 0;
    for (int j = 1; j < 7; ++j)
      if (x.data[size_t(i * 7 + j)] > x.data[size_t(i * 7 + best)]) best = j;
    EXPECT_EQ(got.data[size_t(i)], best) << "row " << i;
  }
}

// ---- matmul ----------------------------------------------------------------------------------

TEST(EvaluatorMatMul, AllRankCombinationsMatchExplicitLoops) {
  Random rng;
  TRACE_SEED(rng);
  const int64_t n = 4, k = 5, m = 3;
  const HostTensor A = rng.normal(DType::F64, {n, k});
  const HostTensor B = rng.normal(DType::F64, {k, m});
  const HostTensor u = rng.normal(DType::F64, {k});
  const HostTensor v = rng.normal(DType::F64, {k});
  Graph g;
  auto a = g.input("A", T(DType::F64, {n, k}));
  auto b = g.input("B", T(DType::F64, {k, m}));
  auto iu = g.input("u", T(DType::F64, {k}));
  auto iv = g.input("v", T(DType::F64, {k}));
  g.out(g.node(Op::MatMul, T(DType::F64, {n, m}), {a, b}));
  g.out(g.node(Op::MatMul, T(DType::F64, {n}), {a, iu}));
  g.out(g.node(Op::MatMul, T(DType::F64, {m}), {iu, b}));
  g.out(g.node(Op::MatMul, T(DType::F64, {}), {iu, iv}));
  const EvalResult r = g.run({A, B, u, v});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += A.data[size_t(i * k + p)] * B.data[size_t(p * m + j)];
      EXPECT_NEAR(r.outputs[0].data[size_t(i * m + j)], s, 1e-12);
    }
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t p = 0; p < k; ++p) s += A.data[size_t(i * k + p)] * u.data[size_t(p)];
    EXPECT_NEAR(r.outputs[1].data[size_t(i)], s, 1e-12);
  }
  for (int64_t j = 0; j < m; ++j) {
    double s = 0;
    for (int64_t p = 0; p < k; ++p) s += u.data[size_t(p)] * B.data[size_t(p * m + j)];
    EXPECT_NEAR(r.outputs[2].data[size_t(j)], s, 1e-12);
  }
  double dot = 0;
  for (int64_t p = 0; p < k; ++p) dot += u.data[size_t(p)] * v.data[size_t(p)];
  EXPECT_EQ(r.outputs[3].shape, std::vector<int64_t>{});
  EXPECT_NEAR(r.outputs[3].data[0], dot, 1e-12);
}

TEST(EvaluatorMatMul, EmptyInnerDimensionGivesZerosAndIntegersWrap) {
  Graph g;
  auto a = g.input("a", T(DType::F64, {2, "k"}));
  auto b = g.input("b", T(DType::F64, {"k", 3}));
  auto i = g.input("i", T(DType::I32, {1, 2}));
  auto j = g.input("j", T(DType::I32, {2}));
  g.out(g.node(Op::MatMul, T(DType::F64, {2, 3}), {a, b}));
  g.out(g.node(Op::MatMul, T(DType::I32, {1}), {i, j}));
  const EvalResult r = g.run({HostTensor::filled(DType::F64, {2, 0}, 0), HostTensor::filled(DType::F64, {0, 3}, 0),
                              HostTensor::make(DType::I32, {1, 2}, {65536, 1}),
                              HostTensor::make(DType::I32, {2}, {65536, 5})});
  EXPECT_EQ(r.outputs[0].data, std::vector<double>(6, 0.0));
  EXPECT_EQ(r.outputs[1].data, std::vector<double>{5});   // 2^32 + 5 wraps to 5
}

}  // namespace
}  // namespace synk::dsl
