// Exact tests of the gradient pass: the conventions at ties and kinks (documented in
// docs/training.md), prod with zeros, zeros for variables the loss does not depend on, the flat
// layout for several variables, and what the pass does to the IR around the gradient (remapped
// outputs and updates, untouched functions, no work for data inputs, clear user errors).
#include <cmath>

#include <gtest/gtest.h>

#include "compiler/grad/grad.h"
#include "compiler/grad/node_writer.h"
#include "compiler/grad/grad_test_util.h"

namespace synk::compiler {
namespace {

using dsl::HostTensor;
using grad_detail::NodeWriter;
using ir::DType;
using ir::NodeId;
using ir::Op;
using testing::T;

// Hand-built IR: one function "f" in one module. Not copyable (the writer points at `fn`).
struct Graph {
  ir::Module module;
  ir::Function fn;
  NodeWriter w{fn, {}};
  Graph() { fn.name = "f"; }
  Graph(const Graph&) = delete;

  NodeId var(const std::string& name, const ir::TensorType& type) {
    module.shareds.push_back(ir::SharedVar{name, type, ir::InitZeros{}, false, {}});
    return w.shared_read(int64_t(module.shareds.size() - 1), type);
  }
  NodeId input(const std::string& name, const ir::TensorType& type) {
    fn.params.push_back(ir::Param{name, ir::Role::Broadcast, type, {}});
    return w.input(int64_t(fn.params.size() - 1));
  }
  NodeId grad(NodeId loss, std::vector<NodeId> vars, std::string name = {}) {
    vars.insert(vars.begin(), loss);
    return w.add(Op::Grad, vars, {}, nullptr, std::move(name));
  }
  NodeId sum(NodeId x) { return w.reduce(Op::ReduceSum, x, dsl::all_axes(w.type(x).rank()), false); }
  void out(NodeId id) { fn.outputs.push_back(ir::Output{"o" + std::to_string(fn.outputs.size()), id, ir::ReduceMode::Avg, {}}); }
  ir::Module finish() {
    module.functions.push_back(fn);
    return module;
  }
};

HostTensor f64(std::vector<int64_t> shape, std::vector<double> data) {
  return HostTensor::make(DType::F64, std::move(shape), std::move(data));
}

// Expands, verifies and evaluates function "f".
dsl::EvalResult run(const ir::Module& m, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& shareds) {
  const ir::Module expanded = expand_gradients(m);
  const std::vector<std::string> problems = ir::verify(expanded);
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems.front());
  EXPECT_FALSE(has_gradients(expanded));
  return dsl::evaluate(expanded, "f", inputs, shareds);
}

void expect_values(const HostTensor& got, const std::vector<double>& want, double tolerance = 1e-12) {
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.data[i], want[i], tolerance) << "element " << i;
}

TEST(GradTies, ReduceMaxSplitsEvenlyAmongTiedMaxima) {
  Graph g;
  const NodeId v = g.var("v", T(DType::F64, {2, 3}));
  g.out(g.grad(g.sum(g.w.reduce(Op::ReduceMax, v, {1}, false)), {v}));
  const auto r = run(g.finish(), {}, {f64({2, 3}, {1, 3, 3, 2, 2, 2})});
  expect_values(r.outputs[0], {0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST(GradTies, ReduceMinOverAllAxesSplitsEvenly) {
  Graph g;
  const NodeId v = g.var("v", T(DType::F64, {2, 2}));
  const NodeId m = g.w.reduce(Op::ReduceMin, v, {0, 1}, false);
  g.out(g.grad(g.w.binary_scalar(Op::Mul, m, 3), {v}));
  const auto r = run(g.finish(), {}, {f64({2, 2}, {-5, 1, -5, -5})});
  expect_values(r.outputs[0], {1, 0, 1, 1});
}

TEST(GradTies, MaximumAndMinimumSplitTiesInHalf) {
  Graph g;
  const NodeId a = g.var("a", T(DType::F64, {3}));
  const NodeId b = g.var("b", T(DType::F64, {}));
  g.out(g.grad(g.sum(g.w.binary(Op::Maximum, a, b)), {a, b}));
  g.out(g.grad(g.sum(g.w.binary(Op::Minimum, a, b)), {a, b}));
  const auto r = run(g.finish(), {}, {f64({3}, {2, 1, 3}), f64({}, {2})});
  expect_values(r.outputs[0], {0.5, 0, 1, /*b*/ 1.5});
  expect_values(r.outputs[1], {0.5, 1, 0, /*b*/ 1.5});
}

TEST(GradKinks, ReluAndAbsHaveDerivativeZeroAtZero) {
  Graph g;
  const NodeId v = g.var("v", T(DType::F64, {3}));
  g.out(g.grad(g.sum(g.w.unary(Op::Relu, v)), {v}));
  g.out(g.grad(g.sum(g.w.unary(Op::Abs, v)), {v}));
  const auto r = run(g.finish(), {}, {f64({3}, {-1, 0, 2})});
  expect_values(r.outputs[0], {0, 0, 1});
  expect_values(r.outputs[1], {-1, 0, 1});
}

TEST(GradProd, ZerosGiveTheProductOfTheOthers) {
  Graph g;
  const NodeId v = g.var("v", T(DType::F64, {4, 3}));
  g.out(g.grad(g.sum(g.w.reduce(Op::ReduceProd, v, {1}, false)), {v}));
  const auto r = run(g.finish(), {}, {f64({4, 3}, {0, 2, 3, /**/ 0, 0, 3, /**/ 1, 2, 3, /**/ -2, 0, 0.5})});
  expect_values(r.outputs[0], {6, 0, 0, /**/ 0, 0, 0, /**/ 6, 3, 2, /**/ 0, -1, 0});
}

TEST(GradCrossEntropy, IsSoftmaxMinusOneHotEvenForHugeLogits) {
  Graph g;
  const NodeId v = g.var("v", T(DType::F64, {2, 3}));
  const NodeId labels = g.input("labels", T(DType::I64, {2}));
  g.out(g.grad(g.sum(g.w.add(Op::CrossEntropy, {v, labels})), {v}));
  const std::vector<double> logits = {1000, 0, -1000, 1, 2, 3};
  const auto r = run(g.finish(), {HostTensor::make(DType::I64, {2}, {1, 2})}, {f64({2, 3}, logits)});
  std::vector<double> want;
  for (int row = 0; row < 2; ++row) {
    double total = 0;
    const double* z = logits.data() + row * 3;
    const double top = std::max({z[0], z[1], z[2]});
    for (int j = 0; j < 3; ++j) total += std::exp(z[j] - top);
    for (int j = 0; j < 3; ++j) want.push_back(std::exp(z[j] - top) / total - (j == (row == 0 ? 1 : 2) ? 1 : 0));
  }
  expect_values(r.outputs[0], want);
}

TEST(GradZeros, UnrelatedVariablesGetZerosOfTheirShape) {
  Graph g;
  const NodeId a = g.var("a", T(DType::F64, {3}));
  const NodeId b = g.var("b", T(DType::F64, {2, 2}));
  const NodeId x = g.input("x", T(DType::F64, {3}));
  const NodeId loss = g.sum(g.w.unary(Op::Exp, a));
  g.out(g.grad(loss, {b}));
  g.out(g.grad(loss, {a, b}));
  g.out(g.grad(g.sum(x), {a}));   // a loss that depends on no variable at all
  // a only reaches this loss through a comparison.
  g.out(g.grad(g.sum(g.w.where(g.w.binary_scalar(Op::Gt, a, 0), x, g.w.neg(x))), {a}));
  const auto r = run(g.finish(), {f64({3}, {1, 2, 3})}, {f64({3}, {0.5, -1, 2}), f64({2, 2}, {1, 2, 3, 4})});
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 2}));
  expect_values(r.outputs[0], {0, 0, 0, 0});
  expect_values(r.outputs[1], {std::exp(0.5), std::exp(-1), std::exp(2), 0, 0, 0, 0});
  expect_values(r.outputs[2], {0, 0, 0});
  expect_values(r.outputs[3], {0, 0, 0});
}

TEST(GradLayout, FlatVectorConcatenatesTheSeparateGradientsInOrder) {
  testing::Rng rng("FlatVectorConcatenatesTheSeparateGradientsInOrder");
  Graph g;
  const NodeId a = g.var("a", T(DType::F64, {2, 3}));
  const NodeId b = g.var("b", T(DType::F64, {4}));
  const NodeId c = g.var("c", T(DType::F64, {}));
  const NodeId loss = g.w.add(g.w.mul(g.sum(g.w.unary(Op::Tanh, a)), g.sum(g.w.mul(b, b))),
                              g.w.mul(g.w.mul(c, c), g.sum(a)));
  g.out(g.grad(loss, {a, b, c}));
  g.out(g.grad(loss, {c, a}));
  g.out(g.grad(loss, {a}));
  g.out(g.grad(loss, {b}));
  g.out(g.grad(loss, {c}));
  const auto r = run(g.finish(), {},
                     {testing::uniform_tensor(rng, DType::F64, {2, 3}), testing::uniform_tensor(rng, DType::F64, {4}),
                      testing::uniform_tensor(rng, DType::F64, {})});
  std::vector<double> abc, ca;
  for (size_t k : {2, 3, 4}) abc.insert(abc.end(), r.outputs[k].data.begin(), r.outputs[k].data.end());
  for (size_t k : {4, 2}) ca.insert(ca.end(), r.outputs[k].data.begin(), r.outputs[k].data.end());
  EXPECT_EQ(r.outputs[0].shape, std::vector<int64_t>{11});
  expect_values(r.outputs[0], abc, 1e-14);
  expect_values(r.outputs[1], ca, 1e-14);
}

TEST(GradLayout, FlatVectorHasTheLossDtypeAndOneVariableKeepsItsType) {
  Graph g;
  const NodeId a = g.var("a", T(DType::F32, {2}));
  const NodeId b = g.var("b", T(DType::F64, {2}));
  const NodeId loss = g.sum(g.w.mul(g.w.cast(a, DType::F64), b));
  const NodeId flat = g.grad(loss, {a, b});
  const NodeId only_a = g.grad(loss, {a});
  g.out(flat);
  g.out(only_a);
  const ir::Module m = g.finish();
  const ir::Module expanded = expand_gradients(m);
  const ir::Function& f = expanded.functions[0];
  EXPECT_EQ(f.node(f.outputs[0].node).type, T(DType::F64, {4}));
  EXPECT_EQ(f.node(f.outputs[1].node).type, T(DType::F32, {2}));
  const auto r = run(m, {}, {HostTensor::make(DType::F32, {2}, {1.5, 2.5}), f64({2}, {3, 4})});
  expect_values(r.outputs[0], {3, 4, 1.5, 2.5});
  EXPECT_EQ(r.outputs[1].dtype, DType::F32);
  expect_values(r.outputs[1], {3, 4});
}

TEST(GradLayout, LossThatIsTheVariableHasGradientOne) {
  Graph g;
  const NodeId w = g.var("w", T(DType::F64, {}));
  g.out(g.grad(w, {w}));
  expect_values(run(g.finish(), {}, {f64({}, {7})}).outputs[0], {1});
}

TEST(GradIr, DataInputsGetNoGradientWork) {
  Graph g;
  const NodeId x = g.input("x", T(DType::F64, {"n", 4}));
  const NodeId w = g.var("w", T(DType::F64, {4, 3}));
  g.out(g.grad(g.sum(g.w.matmul(x, w)), {w}));
  const ir::Module expanded = expand_gradients(g.finish());
  int matmuls = 0;
  for (const ir::Node& n : expanded.functions[0].nodes) matmuls += n.op == Op::MatMul;
  EXPECT_EQ(matmuls, 2) << "the forward product and x^T @ g only";
}

TEST(GradIr, OutputsAndUpdatesFollowTheExpandedNodes) {
  Graph g;
  const NodeId w = g.var("w", T(DType::F64, {3}));
  const NodeId loss = g.sum(g.w.mul(w, w));
  const NodeId dw = g.grad(loss, {w}, "dw");
  g.out(loss);
  g.out(g.w.binary_scalar(Op::Mul, dw, 10));   // a node after the grad
  g.fn.updates.push_back(ir::Update{0, g.w.sub(w, g.w.binary_scalar(Op::Mul, dw, 0.1)), ir::ReduceMode::Avg, {}});
  const ir::Module m = g.finish();
  const ir::Module expanded = expand_gradients(m);
  bool named = false;
  for (const ir::Node& n : expanded.functions[0].nodes) named = named || n.name == "dw";
  EXPECT_TRUE(named) << "the gradient keeps the user's name";
  const auto r = run(m, {}, {f64({3}, {1, -2, 4})});
  expect_values(r.outputs[0], {21});
  expect_values(r.outputs[1], {20, -40, 80});
  expect_values(r.updates[0], {0.8, -1.6, 3.2});
}

TEST(GradIr, FunctionsWithoutGradAreUntouched) {
  Graph g;
  const NodeId w = g.var("w", T(DType::F64, {3}));
  g.out(g.grad(g.sum(g.w.unary(Op::Exp, w)), {w}));
  ir::Module m = g.finish();
  ir::Function plain;
  plain.name = "plain";
  NodeWriter pw(plain, {});
  plain.outputs.push_back(ir::Output{"y", pw.unary(Op::Tanh, pw.shared_read(0, T(DType::F64, {3}))), ir::ReduceMode::Avg, {}});
  m.functions.push_back(plain);
  const ir::Module expanded = expand_gradients(m);
  ir::Module before = m, after = expanded;
  before.functions = {m.functions[1]};
  after.functions = {expanded.functions[1]};
  std::string difference;
  EXPECT_TRUE(ir::structurally_equal(before, after, &difference)) << difference;
  // The per-function form (what lower() runs) agrees with the whole-module form.
  ir::Module one = expanded;
  one.functions = {expand_gradients(m, m.functions[0]), expand_gradients(m, m.functions[1])};
  EXPECT_TRUE(ir::structurally_equal(one, expanded, &difference)) << difference;
  EXPECT_TRUE(has_gradients(m));
  EXPECT_FALSE(has_gradients(expanded));
  EXPECT_TRUE(ir::structurally_equal(expand_gradients(before), before)) << "no grad: nothing changes";
}

TEST(GradErrors, TakeFromASymbolicNumberOfRowsIsAUserError) {
  Graph g;
  const NodeId x = g.input("x", T(DType::F64, {"n", 3}));
  const NodeId idx = g.input("idx", T(DType::I64, {2}));
  const NodeId w = g.var("w", T(DType::F64, {3}));
  NodeWriter at_line_3(g.fn, {3, 7});
  const NodeId rows = at_line_3.add(Op::Take, {g.w.mul(x, w), idx});
  g.out(g.grad(g.sum(rows), {w}));
  try {
    expand_gradients(g.finish());
    FAIL() << "expected a UserError";
  } catch (const synk::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3, column 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("symbolic number of rows"), std::string::npos) << e.what();
  }
}

TEST(GradErrors, CrossEntropyWithSymbolicClassesIsAUserError) {
  Graph g;
  const NodeId x = g.input("x", T(DType::F64, {4, "k"}));
  const NodeId labels = g.input("labels", T(DType::I64, {4}));
  const NodeId w = g.var("w", T(DType::F64, {}));
  g.out(g.grad(g.sum(g.w.add(Op::CrossEntropy, {g.w.mul(x, w), labels})), {w}));
  EXPECT_THROW(expand_gradients(g.finish()), synk::UserError);
}

}  // namespace
}  // namespace synk::compiler
