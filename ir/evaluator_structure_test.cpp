// Tests of the reference evaluator, continued (evaluator_test.cpp has the pointwise ops,
// reductions and matmul): structure ops, cumsum, the softmax family, argument checks and the seed
// examples, on hand-built IR against independently written loops and identities.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "ir/evaluator.h"
#include "ir/evaluator_test_util.h"

namespace synk::dsl {
namespace {

using namespace eval_test;   // Graph, T, Random, DType, Op, ...: this test's vocabulary
using synk::testing::expect_user_error;

// ---- structure -------------------------------------------------------------------------------

TEST(EvaluatorStructure, TransposeWithPermutation) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor x = rng.normal(DType::F64, {2, 3, 4});
  Graph g;
  auto in = g.input("x", T(DType::F64, {2, 3, 4}));
  ir::Attrs p;
  p.perm = {2, 0, 1};
  g.out(g.node(Op::Transpose, T(DType::F64, {4, 2, 3}), {in}, p));
  const HostTensor got = g.run1({x});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(got.data[size_t((k * 2 + i) * 3 + j)], x.data[size_t((i * 3 + j) * 4 + k)]);
}

TEST(EvaluatorStructure, ReshapeKeepsRowMajorOrderAndChecksCounts) {
  Graph g;
  auto in = g.input("x", T(DType::F64, {"n", 4}));
  g.out(g.node(Op::Reshape, T(DType::F64, {"n", 2, 2}), {in}));
  const HostTensor x = HostTensor::make(DType::F64, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  const HostTensor got = g.run1({x});
  EXPECT_EQ(got.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(got.data, x.data);

  // A dimension the front end could not name (unbound symbol) takes what is left, and must divide.
  Graph h;
  auto hin = h.input("x", T(DType::F64, {"n"}));
  h.out(h.node(Op::Reshape, T(DType::F64, {"rows", 3}), {hin}));
  EXPECT_EQ(h.run1({HostTensor::filled(DType::F64, {6}, 1)}).shape, (std::vector<int64_t>{2, 3}));
  expect_user_error([&] { h.run({HostTensor::filled(DType::F64, {7}, 1)}); }, {"reshape", "f64[7]"});
}

TEST(EvaluatorStructure, BroadcastTo) {
  Graph g;
  auto in = g.input("x", T(DType::F64, {3, 1}));
  auto n = g.input("y", T(DType::F64, {"n"}));
  g.out(g.node(Op::BroadcastTo, T(DType::F64, {"n", 3, 2}), {in}));
  g.out(g.node(Op::ReduceSum, T(DType::F64, {}), {n}, axes_attr({0})));
  const HostTensor got = g.run({HostTensor::make(DType::F64, {3, 1}, {1, 2, 3}), HostTensor::filled(DType::F64, {2}, 0)}).outputs[0];
  EXPECT_EQ(got.shape, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(got.data, (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
}

TEST(EvaluatorStructure, ConcatAlongEachAxis) {
  Graph g;
  auto a = g.input("a", T(DType::F64, {2, 2}));
  auto b = g.input("b", T(DType::F64, {2, 1}));
  auto c = g.input("c", T(DType::F64, {1, 2}));
  g.out(g.node(Op::Concat, T(DType::F64, {2, 3}), {a, b}, axis_attr(1)));
  g.out(g.node(Op::Concat, T(DType::F64, {4, 2}), {a, c, c}, axis_attr(0)));
  const EvalResult r = g.run({HostTensor::make(DType::F64, {2, 2}, {1, 2, 3, 4}),
                              HostTensor::make(DType::F64, {2, 1}, {9, 8}),
                              HostTensor::make(DType::F64, {1, 2}, {5, 6})});
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{1, 2, 9, 3, 4, 8}));
  EXPECT_EQ(r.outputs[1].data, (std::vector<double>{1, 2, 3, 4, 5, 6, 5, 6}));
}

TEST(EvaluatorStructure, SliceAndItsRuntimeBoundsCheck) {
  Graph g;
  auto in = g.input("x", T(DType::F64, {"n", 3}));
  ir::Attrs s;
  s.axis = 0, s.start = 1, s.stop = 3;
  g.out(g.node(Op::Slice, T(DType::F64, {2, 3}), {in}, s));
  ir::Attrs t;
  t.axis = 1, t.start = 2, t.stop = 3;
  g.out(g.node(Op::Slice, T(DType::F64, {"n", 1}), {in}, t));
  const HostTensor x = HostTensor::make(DType::F64, {4, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const EvalResult r = g.run({x});
  EXPECT_EQ(r.outputs[0].data, (std::vector<double>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(r.outputs[1].data, (std::vector<double>{2, 5, 8, 11}));
  expect_user_error([&] { g.run({HostTensor::filled(DType::F64, {2, 3}, 0)}); },
                    {"slice", "[1, 3)", "axis 0", "size 2"});
}

TEST(EvaluatorStructure, TakeGathersRowsAndChecksEveryIndex) {
  Graph g;
  auto x = g.input("x", T(DType::F64, {3, 2}));
  auto idx = g.input("idx", T(DType::I64, {"m"}));
  g.out(g.node(Op::Take, T(DType::F64, {"m", 2}), {x, idx}));
  const HostTensor xs = HostTensor::make(DType::F64, {3, 2}, {1, 2, 3, 4, 5, 6});
  const HostTensor got = g.run1({xs, HostTensor::make(DType::I64, {4}, {2, 0, 2, 1})});
  EXPECT_EQ(got.data, (std::vector<double>{5, 6, 1, 2, 5, 6, 3, 4}));
  expect_user_error([&] { g.run({xs, HostTensor::make(DType::I64, {2}, {0, 3})}); },
                    {"take", "index 3", "position 1"});
  expect_user_error([&] { g.run({xs, HostTensor::make(DType::I64, {1}, {-1})}); }, {"take", "index -1"});
}

TEST(EvaluatorStructure, OneHotAndItsLabelCheck) {
  Graph g;
  auto labels = g.input("y", T(DType::I32, {"n"}));
  ir::Attrs a;
  a.num_classes = 3;
  g.out(g.node(Op::OneHot, T(DType::F32, {"n", 3}), {labels}, a));
  const HostTensor got = g.run1({HostTensor::make(DType::I32, {3}, {2, 0, 1})});
  EXPECT_EQ(got.dtype, DType::F32);
  EXPECT_EQ(got.data, (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0}));
  expect_user_error([&] { g.run({HostTensor::make(DType::I32, {2}, {0, 3})}); },
                    {"one_hot", "label 3", "row 1", "3 classes"});
}

// ---- cumsum ------------------------------------------------------------------------------------

ir::Attrs cumsum_attr(int64_t axis, bool reverse) {
  ir::Attrs a = axis_attr(axis);
  a.reverse = reverse;
  return a;
}

// Each axis and direction of one [2, 3] array, against sums written out by hand.
TEST(EvaluatorCumsum, PrefixSumsAlongEachAxisAndDirection) {
  Graph g;
  auto x = g.input("x", T(DType::F64, {2, 3}));
  for (int64_t axis : {0, 1})
    for (bool reverse : {false, true}) g.out(g.node(Op::Cumsum, T(DType::F64, {2, 3}), {x}, cumsum_attr(axis, reverse)));
  const std::vector<HostTensor> out = g.run({HostTensor::make(DType::F64, {2, 3}, {1, 2, 3, 10, 20, 30})}).outputs;
  EXPECT_EQ(out[0].data, (std::vector<double>{1, 2, 3, 11, 22, 33}));
  EXPECT_EQ(out[1].data, (std::vector<double>{11, 22, 33, 10, 20, 30}));
  EXPECT_EQ(out[2].data, (std::vector<double>{1, 3, 6, 10, 30, 60}));
  EXPECT_EQ(out[3].data, (std::vector<double>{6, 5, 3, 60, 50, 30}));
}

// numpy's conventions: the first element is copied (-0.0 stays -0.0), NaN and inf propagate
// forward only, integers wrap in their dtype, and an empty axis gives an empty result.
TEST(EvaluatorCumsum, SpecialValuesIntegersAndEmptyAxes) {
  Graph g;
  auto x = g.input("x", T(DType::F64, {5}));
  auto i = g.input("i", T(DType::I32, {3}));
  auto u = g.input("u", T(DType::U8, {3}));
  auto e = g.input("e", T(DType::F32, {"n", 2}));
  g.out(g.node(Op::Cumsum, T(DType::F64, {5}), {x}, cumsum_attr(0, false)));
  g.out(g.node(Op::Cumsum, T(DType::I32, {3}), {i}, cumsum_attr(0, false)));
  g.out(g.node(Op::Cumsum, T(DType::U8, {3}), {u}, cumsum_attr(0, true)));
  g.out(g.node(Op::Cumsum, T(DType::F32, {"n", 2}), {e}, cumsum_attr(0, false)));
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<HostTensor> out =
      g.run({HostTensor::make(DType::F64, {5}, {-0.0, 1, inf, -inf, 2}),
             HostTensor::make(DType::I32, {3}, {2147483647, 1, 5}), HostTensor::make(DType::U8, {3}, {200, 100, 1}),
             HostTensor::filled(DType::F32, {0, 2}, 0)})
          .outputs;
  EXPECT_TRUE(std::signbit(out[0].data[0]));
  EXPECT_EQ(out[0].data[1], 1);
  EXPECT_EQ(out[0].data[2], inf);
  EXPECT_TRUE(std::isnan(out[0].data[3]));
  EXPECT_TRUE(std::isnan(out[0].data[4]));
  EXPECT_EQ(out[1].data, (std::vector<double>{2147483647, -2147483648.0, -2147483643.0}));
  EXPECT_EQ(out[2].data, (std::vector<double>{45, 101, 1}));   // 301 mod 256, from the end
  EXPECT_EQ(out[3].shape, (std::vector<int64_t>{0, 2}));
}

// ---- softmax family ----------------------------------------------------------------------------

struct SoftmaxGraph {
  Graph g;
  SoftmaxGraph(int64_t rows, int64_t cols, int64_t axis, DType label_dtype, bool prob_labels) {
    auto x = g.input("x", T(DType::F64, {rows, cols}));
    auto y = prob_labels ? g.input("p", T(DType::F64, {rows, cols})) : g.input("y", T(label_dtype, {rows}));
    g.out(g.node(Op::Softmax, T(DType::F64, {rows, cols}), {x}, axis_attr(axis)));
    g.out(g.node(Op::LogSoftmax, T(DType::F64, {rows, cols}), {x}, axis_attr(axis)));
    g.out(g.node(Op::CrossEntropy, T(DType::F64, {rows}), {x, y}));
  }
};

TEST(EvaluatorSoftmax, IdentitiesOnRandomData) {
  Random rng;
  TRACE_SEED(rng);
  const int64_t n = 5, k = 7;
  HostTensor x = rng.normal(DType::F64, {n, k});
  for (int64_t j = 0; j < k; ++j) x.data[size_t(j)] += 1000;   // row 0: would overflow naive exp
  const HostTensor y = rng.ints(DType::I32, {n}, 0, k - 1);
  SoftmaxGraph sg(n, k, 1, DType::I32, false);
  const EvalResult r = sg.g.run({x, y});
  const HostTensor& sm = r.outputs[0];
  const HostTensor& lsm = r.outputs[1];
  const HostTensor& ce = r.outputs[2];
  for (int64_t i = 0; i < n; ++i) {
    double total = 0, row_max = -kInf;
    for (int64_t j = 0; j < k; ++j) row_max = std::max(row_max, x.data[size_t(i * k + j)]);
    double denom = 0;
    for (int64_t j = 0; j < k; ++j) denom += std::exp(x.data[size_t(i * k + j)] - row_max);
    for (int64_t j = 0; j < k; ++j) {
      const size_t e = size_t(i * k + j);
      ASSERT_TRUE(std::isfinite(sm.data[e]));
      total += sm.data[e];
      EXPECT_NEAR(sm.data[e], std::exp(x.data[e] - row_max) / denom, 1e-14);
      EXPECT_NEAR(lsm.data[e], std::log(sm.data[e]), 1e-12);
    }
    EXPECT_NEAR(total, 1.0, 1e-14);
    const int64_t label = int64_t(y.data[size_t(i)]);
    EXPECT_NEAR(ce.data[size_t(i)], -lsm.data[size_t(i * k + label)], 1e-12);
    EXPECT_GE(ce.data[size_t(i)], 0);
  }
}

TEST(EvaluatorSoftmax, SoftmaxAlongAxisZero) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor x = rng.normal(DType::F64, {4, 3});
  SoftmaxGraph sg(4, 3, 0, DType::I32, false);
  const HostTensor sm = sg.g.run({x, HostTensor::filled(DType::I32, {4}, 0)}).outputs[0];
  for (int j = 0; j < 3; ++j) {
    double total = 0;
    for (int i = 0; i < 4; ++i) total += sm.data[size_t(i * 3 + j)];
    EXPECT_NEAR(total, 1.0, 1e-14) << "column " << j;
  }
}

TEST(EvaluatorSoftmax, ProbabilityLabelsEqualClassIndicesWhenOneHot) {
  Random rng;
  TRACE_SEED(rng);
  const HostTensor x = rng.normal(DType::F64, {3, 4});
  const HostTensor y = rng.ints(DType::I64, {3}, 0, 3);
  HostTensor p = HostTensor::filled(DType::F64, {3, 4}, 0);
  for (int i = 0; i < 3; ++i) p.data[size_t(i * 4 + int(y.data[size_t(i)]))] = 1;
  SoftmaxGraph by_index(3, 4, 1, DType::I64, false);
  SoftmaxGraph by_prob(3, 4, 1, DType::F64, true);
  expect_near_all(by_prob.g.run({x, p}).outputs[2].data, by_index.g.run({x, y}).outputs[2].data);

  // And a soft label is the weighted sum of the per-class losses.
  HostTensor soft = HostTensor::filled(DType::F64, {3, 4}, 0.25);
  const HostTensor lsm = by_prob.g.run({x, soft}).outputs[1];
  const HostTensor ce = by_prob.g.run({x, soft}).outputs[2];
  for (int i = 0; i < 3; ++i) {
    double want = 0;
    for (int j = 0; j < 4; ++j) want -= 0.25 * lsm.data[size_t(i * 4 + j)];
    EXPECT_NEAR(ce.data[size_t(i)], want, 1e-12);
  }
}

TEST(EvaluatorSoftmax, CrossEntropyChecksLabels) {
  SoftmaxGraph sg(2, 3, 1, DType::I32, false);
  expect_user_error([&] {
    sg.g.run({HostTensor::filled(DType::F64, {2, 3}, 0), HostTensor::make(DType::I32, {2}, {1, 3})});
  }, {"cross_entropy", "label 3", "row 1", "3 classes"});
}

// ---- arguments, symbols, shared variables -------------------------------------------------------

struct TwoArgGraph {
  Graph g;
  TwoArgGraph() {
    auto x = g.input("x", T(DType::F32, {"n", 10}));
    auto y = g.input("y", T(DType::F32, {"n"}));
    auto s = g.node(Op::ReduceSum, T(DType::F32, {"n"}), {x}, axes_attr({1}));
    g.out(g.node(Op::Add, T(DType::F32, {"n"}), {s, y}));
  }
};

TEST(EvaluatorArguments, SymbolsBindOnceAndMismatchesNameTheArgument) {
  TwoArgGraph t;
  const HostTensor ok = t.g.run1({HostTensor::filled(DType::F32, {3, 10}, 1), HostTensor::filled(DType::F32, {3}, 2)});
  EXPECT_EQ(ok.data, std::vector<double>(3, 12.0));
  expect_user_error([&] { t.g.run({HostTensor::filled(DType::F32, {3, 10}, 1), HostTensor::filled(DType::F32, {4}, 2)}); },
                    {"argument 'y'", "'n' = 4", "'n' = 3", "argument 'x'"});
  expect_user_error([&] { t.g.run({HostTensor::filled(DType::F32, {3, 9}, 1), HostTensor::filled(DType::F32, {3}, 2)}); },
                    {"argument 'x'", "f32[n, 10]", "dimension 1 must be 10"});
  expect_user_error([&] { t.g.run({HostTensor::filled(DType::F64, {3, 10}, 1), HostTensor::filled(DType::F32, {3}, 2)}); },
                    {"argument 'x'", "dtype f64"});
  expect_user_error([&] { t.g.run({HostTensor::filled(DType::F32, {30}, 1), HostTensor::filled(DType::F32, {3}, 2)}); },
                    {"argument 'x'", "rank 2", "[30]"});
  expect_user_error([&] { t.g.run({HostTensor::filled(DType::F32, {3, 10}, 1)}); }, {"'f'", "2 arguments", "x, y", "got 1"});
  HostTensor short_data = HostTensor::filled(DType::F32, {3}, 2);
  short_data.data.pop_back();
  expect_user_error([&] { t.g.run({HostTensor::filled(DType::F32, {3, 10}, 1), short_data}); }, {"argument 'y'", "2 values"});
}

TEST(EvaluatorArguments, IntegerArgumentsMustHoldValidValuesAndF32ArgumentsRound) {
  Graph g;
  auto i = g.input("i", T(DType::U8, {2}));
  auto f = g.input("f", T(DType::F32, {1}));
  g.out(i);
  g.out(f);
  expect_user_error([&] { g.run({HostTensor::make(DType::U8, {2}, {1, 256}), HostTensor::filled(DType::F32, {1}, 0)}); },
                    {"argument 'i'", "element 1", "256", "u8"});
  expect_user_error([&] { g.run({HostTensor::make(DType::U8, {2}, {1.5, 2}), HostTensor::filled(DType::F32, {1}, 0)}); },
                    {"argument 'i'", "element 0"});
  const EvalResult r = g.run({HostTensor::make(DType::U8, {2}, {0, 255}), HostTensor::make(DType::F32, {1}, {0.1})});
  EXPECT_EQ(r.outputs[1].data[0], double(0.1f));
}

TEST(EvaluatorArguments, SharedVariablesBindSymbolsAndMustBeGivenWhenRead) {
  Graph g;
  auto x = g.input("x", T(DType::F64, {"n", "d"}));
  auto w = g.shared("w", T(DType::F64, {"d", 2}));
  g.out(g.node(Op::MatMul, T(DType::F64, {"n", 2}), {x, w}));
  const HostTensor xs = HostTensor::filled(DType::F64, {2, 3}, 1);
  const HostTensor got = g.run1({xs}, {HostTensor::make(DType::F64, {3, 2}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(got.data, (std::vector<double>{9, 12, 9, 12}));
  expect_user_error([&] { g.run({xs}, {}); }, {"shared variable 'w'", "no value"});
  expect_user_error([&] { g.run({xs}, {HostTensor::filled(DType::F64, {4, 2}, 0)}); },
                    {"shared variable 'w'", "'d' = 4", "'d' = 3", "argument 'x'"});
  expect_user_error([&] { g.run({xs}, {HostTensor::filled(DType::F64, {3, 2}, 0), HostTensor::filled(DType::F64, {1}, 0)}); },
                    {"2 shared values", "1 shared variable"});
}

TEST(EvaluatorArguments, GradMustBeExpandedFirst) {
  Graph g;
  auto w = g.shared("w", T(DType::F32, {3}));
  auto loss = g.node(Op::ReduceSum, T(DType::F32, {}), {w}, axes_attr({0}));
  g.out(g.node(Op::Grad, T(DType::F32, {3}), {loss, w}));
  expect_user_error([&] { g.run({}, {HostTensor::filled(DType::F32, {3}, 1)}); }, {"grad(...)", "gradient pass"});
}

TEST(EvaluatorArguments, ANodeWhoseTypeDisagreesWithItsValueIsAnInternalError) {
  Graph g;
  auto x = g.input("x", T(DType::F64, {3}));
  g.out(g.node(Op::Exp, T(DType::F64, {4}), {x}));   // wrong on purpose
  EXPECT_THROW(g.run({HostTensor::filled(DType::F64, {3}, 0)}), InternalError);
}

// ---- the seed examples, built by hand ---------------------------------------------------------

TEST(EvaluatorExamples, SharedVariableUpdateOfTheUserGuide) {
  // update s = sum(x * s, axis=0) with x = [[1,1],[2,2],[3,3],[4,4]], s = [1, 1] gives [10, 10].
  Graph g;
  auto x = g.input("x", T(DType::F32, {"n", 2}));
  auto s = g.shared("s", T(DType::F32, {2}));
  auto xs = g.node(Op::Mul, T(DType::F32, {"n", 2}), {x, s});
  auto sum = g.node(Op::ReduceSum, T(DType::F32, {2}), {xs}, axes_attr({0}));
  g.fn.updates.push_back(ir::Update{0, sum, ir::ReduceMode::Avg, {}});
  const EvalResult r = g.run({HostTensor::make(DType::F32, {4, 2}, {1, 1, 2, 2, 3, 3, 4, 4})},
                             {HostTensor::make(DType::F32, {2}, {1, 1})});
  ASSERT_EQ(r.updates.size(), 1u);
  EXPECT_EQ(r.outputs.size(), 0u);
  EXPECT_EQ(r.updates[0].data, (std::vector<double>{10, 10}));
}

TEST(EvaluatorExamples, IntroMeanOfMatrixVectorProduct) {
  Random rng;
  TRACE_SEED(rng);
  Graph g;
  auto x = g.input("x", T(DType::F32, {"n", 10}));
  auto y = g.input("y", T(DType::F32, {10}), ir::Role::Broadcast);
  auto xy = g.node(Op::MatMul, T(DType::F32, {"n"}), {x, y});
  g.out(g.node(Op::ReduceMean, T(DType::F32, {}), {xy}, axes_attr({0})), ir::ReduceMode::Avg);
  const HostTensor xs = rng.normal(DType::F32, {6, 10});
  const HostTensor ys = rng.normal(DType::F32, {10});
  double want = 0;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 10; ++j) want += xs.data[size_t(i * 10 + j)] * ys.data[size_t(j)] / 6;
  EXPECT_NEAR(g.run1({xs, ys}).data[0], want, 1e-12);
}

}  // namespace
}  // namespace synk::dsl
