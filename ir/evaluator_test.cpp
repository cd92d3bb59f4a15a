// Tests of the reference evaluator, the oracle of every differential test: so it is checked here
// against mathematics and independently written loops (explicit index arithmetic, identities such
// as softmax summing to 1), on hand-built IR and on fresh random data (the seed is printed on
// failure).
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "ir/evaluator.h"

namespace synk::dsl {
namespace {

using ir::DType;
using ir::Op;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A dimension written as 10 or "n".
struct D {
  ir::Dim dim;
  D(int64_t n) : dim(ir::Dim::fixed(n)) {}
  D(const char* s) : dim(ir::Dim::sym(s)) {}
};
ir::TensorType T(DType dtype, std::initializer_list<D> dims) {
  ir::TensorType t{dtype, {}};
  for (const D& d : dims) t.shape.push_back(d.dim);
  return t;
}

// Hand-built IR: one function in one module, nodes appended in order.
struct Graph {
  ir::Module module;
  ir::Function fn;
  Graph() { fn.name = "f"; }

  ir::NodeId input(const std::string& name, ir::TensorType type, ir::Role role = ir::Role::Scatter) {
    fn.params.push_back(ir::Param{name, role, type, {}});
    ir::Node n{Op::Input, type, {}, {}, name, {}};
    n.attrs.index = int64_t(fn.params.size() - 1);
    return fn.add(n);
  }
  ir::NodeId shared(const std::string& name, ir::TensorType type) {
    module.shareds.push_back(ir::SharedVar{name, type, ir::InitZeros{}, false, {}});
    ir::Node n{Op::SharedRead, type, {}, {}, name, {}};
    n.attrs.index = int64_t(module.shareds.size() - 1);
    return fn.add(n);
  }
  ir::NodeId node(Op op, ir::TensorType type, std::vector<ir::NodeId> operands, ir::Attrs attrs = {}) {
    return fn.add(ir::Node{op, type, std::move(operands), std::move(attrs), "", {}});
  }
  ir::NodeId constant(DType dtype, double value) {
    ir::Attrs a;
    if (ir::is_float(dtype)) a.value = value; else a.ivalue = int64_t(value);
    return node(Op::Constant, T(dtype, {}), {}, a);
  }
  void out(ir::NodeId id, ir::ReduceMode mode = ir::ReduceMode::Sum) {
    fn.outputs.push_back(ir::Output{"o" + std::to_string(fn.outputs.size()), id, mode, {}});
  }
  EvalResult run(std::vector<HostTensor> inputs, std::vector<HostTensor> shareds = {}) {
    module.functions = {fn};
    return evaluate(module, module.functions[0], inputs, shareds);
  }
  // Runs and returns the first output.
  HostTensor run1(std::vector<HostTensor> inputs, std::vector<HostTensor> shareds = {}) {
    return run(std::move(inputs), std::move(shareds)).outputs.at(0);
  }
};

ir::Attrs axes_attr(std::vector<int64_t> axes, bool keepdims = false) {
  ir::Attrs a;
  a.axes = std::move(axes);
  a.keepdims = keepdims;
  return a;
}
ir::Attrs axis_attr(int64_t axis) { ir::Attrs a; a.axis = axis; return a; }

// Fresh random data each run; the seed is reported by SCOPED_TRACE so that a failure reproduces.
class Random {
 public:
  Random() : seed_(std::random_device{}()), gen_(seed_) {}
  uint64_t seed() const { return seed_; }
  HostTensor normal(DType dtype, std::vector<int64_t> shape) {
    HostTensor t = HostTensor::filled(dtype, std::move(shape), 0);
    std::normal_distribution<double> dist(0, 1);
    for (double& v : t.data) v = dtype == DType::F32 ? double(float(dist(gen_))) : dist(gen_);
    return t;
  }
  HostTensor ints(DType dtype, std::vector<int64_t> shape, int64_t low, int64_t high) {
    HostTensor t = HostTensor::filled(dtype, std::move(shape), 0);
    std::uniform_int_distribution<int64_t> dist(low, high);
    for (double& v : t.data) v = double(dist(gen_));
    return t;
  }

 private:
  uint64_t seed_;
  std::mt19937_64 gen_;
};
#define TRACE_SEED(rng) SCOPED_TRACE("random seed " + std::to_string((rng).seed()))

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) { EXPECT_TRUE(std::isnan(got[i])) << "element " << i; continue; }
    if (std::isinf(want[i])) { EXPECT_EQ(got[i], want[i]) << "element " << i; continue; }
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
  }
}

template <class F>
void expect_user_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "message '" << msg << "' lacks '" << frag << "'";
  }
}

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
