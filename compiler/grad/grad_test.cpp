// Gradient checks for every differentiable op: each case builds y = op(variables, inputs) on
// hand-written IR, takes loss = sum(y * r) with fresh random weights r, expands grad(loss, vars)
// with the gradient pass and compares it, element by element, with float64 central finite
// differences of the loss, both through the reference evaluator. Inputs are random (the seed is
// printed) and kept away from kinks and ties; the conventions at kinks and ties are tested
// exactly in grad_pass_test.cpp.
#include <functional>

#include <gtest/gtest.h>

#include "compiler/grad/grad.h"
#include "compiler/grad/node_writer.h"
#include "compiler/grad/grad_test_util.h"

namespace synk::compiler {
namespace {

using grad_detail::NodeWriter;
using ir::DType;
using ir::NodeId;
using ir::Op;
using testing::D;
using testing::HostTensor;
using testing::Rng;
using testing::T;

using Ids = std::vector<NodeId>;
using Body = std::function<NodeId(NodeWriter&, const Ids& vars, const Ids& inputs)>;
using Sampler = std::function<HostTensor(Rng&, const ir::TensorType&)>;
using InputValues = std::function<std::vector<HostTensor>(Rng&)>;

ir::TensorType f64(std::initializer_list<D> dims) { return T(DType::F64, dims); }

struct OpCase {
  std::string name;
  std::vector<ir::TensorType> vars;
  Body body;
  std::vector<Sampler> samplers = {};           // none: uniform in [-2, 2]; one: for every var
  std::vector<ir::TensorType> inputs = {};
  InputValues input_values = {};
  testing::FiniteDifferenceOptions fd = {};
};

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

Sampler uniform(double low, double high) {
  return [=](Rng& rng, const ir::TensorType& t) { return testing::uniform_tensor(rng, t.dtype, testing::static_sizes(t), low, high); };
}
Sampler positive() { return uniform(0.5, 2); }
Sampler nonzero() {
  return [](Rng& rng, const ir::TensorType& t) {
    return testing::tensor_from(t.dtype, testing::static_sizes(t), [&](size_t) { return rng.away_from_zero(0.2, 2); });
  };
}
Sampler distinct() {
  return [](Rng& rng, const ir::TensorType& t) { return testing::distinct_tensor(rng, t.dtype, testing::static_sizes(t)); };
}

// Builds function "f": reads of the variables (shared 0..k-1), the inputs, y = body; with
// `weights` (shared k, y's type) it outputs loss = sum(y * weights) and grad(loss, vars),
// without it just y.
ir::Module build(const OpCase& c, const ir::TensorType* weights) {
  ir::Module m;
  for (size_t k = 0; k < c.vars.size(); ++k)
    m.shareds.push_back(ir::SharedVar{"v" + std::to_string(k), c.vars[k], ir::InitZeros{}, false, {}});
  ir::Function fn;
  fn.name = "f";
  for (size_t i = 0; i < c.inputs.size(); ++i)
    fn.params.push_back(ir::Param{"in" + std::to_string(i), ir::Role::Broadcast, c.inputs[i], {}});
  NodeWriter w(fn, {});
  Ids vars, inputs;
  for (size_t k = 0; k < c.vars.size(); ++k) vars.push_back(w.shared_read(int64_t(k), c.vars[k]));
  for (size_t i = 0; i < c.inputs.size(); ++i) inputs.push_back(w.input(int64_t(i)));
  const NodeId y = c.body(w, vars, inputs);
  if (!weights) {
    fn.outputs.push_back(ir::Output{"y", y, ir::ReduceMode::None, {}});
  } else {
    m.shareds.push_back(ir::SharedVar{"weights", *weights, ir::InitZeros{}, false, {}});
    const NodeId r = w.shared_read(int64_t(c.vars.size()), *weights);
    const NodeId loss = w.reduce(Op::ReduceSum, w.mul(y, r), dsl::all_axes(weights->rank()), false);
    Ids grad_operands = {loss};
    grad_operands.insert(grad_operands.end(), vars.begin(), vars.end());
    const NodeId g = w.add(Op::Grad, grad_operands, {}, nullptr, "g");
    fn.outputs.push_back(ir::Output{"loss", loss, ir::ReduceMode::Avg, {}});
    fn.outputs.push_back(ir::Output{"grad", g, ir::ReduceMode::Avg, {}});
  }
  m.functions.push_back(std::move(fn));
  return m;
}

void run_case(const OpCase& c) {
  Rng rng(c.name);
  std::vector<HostTensor> shareds;
  for (size_t k = 0; k < c.vars.size(); ++k) {
    const Sampler& s = c.samplers.empty() ? uniform(-2, 2) : c.samplers[c.samplers.size() == 1 ? 0 : k];
    shareds.push_back(s(rng, c.vars[k]));
  }
  const std::vector<HostTensor> inputs = c.input_values ? c.input_values(rng) : std::vector<HostTensor>{};

  const ir::Module forward = build(c, nullptr);
  ASSERT_TRUE(ir::verify(forward).empty()) << ir::verify(forward).front();
  const ir::Function& f = forward.functions[0];
  const ir::TensorType y_type = f.node(f.outputs[0].node).type;
  const HostTensor y = dsl::evaluate(expand_gradients(forward), "f", inputs, shareds).outputs[0];
  shareds.push_back(testing::uniform_tensor(rng, y.dtype, y.shape, -1, 1));

  const ir::Module module = build(c, &y_type);
  const ir::Module expanded = expand_gradients(module);
  const std::vector<std::string> problems = ir::verify(expanded);
  ASSERT_TRUE(problems.empty()) << problems.front();
  EXPECT_FALSE(has_gradients(expanded));
  std::vector<int64_t> var_indices;
  for (size_t k = 0; k < c.vars.size(); ++k) var_indices.push_back(int64_t(k));
  testing::check_gradient(expanded, "f", inputs, shareds, 0, 1, var_indices, c.fd);
}

// ---- the cases ----------------------------------------------------------------------------

std::vector<OpCase> unary_cases() {
  std::vector<OpCase> cases;
  const std::vector<std::pair<Op, Sampler>> ops = {
      {Op::Neg, uniform(-2, 2)}, {Op::Abs, nonzero()},     {Op::Exp, uniform(-2, 2)},
      {Op::Log, positive()},     {Op::Sqrt, positive()},   {Op::Tanh, uniform(-2, 2)},
      {Op::Sigmoid, uniform(-4, 4)}, {Op::Relu, nonzero()}};
  for (const auto& [op, sampler] : ops) {
    cases.push_back({std::string(ir::op_name(op)), {f64({3, 4})},
                     [op = op](NodeWriter& w, const Ids& v, const Ids&) { return w.unary(op, v[0]); },
                     {sampler}});
  }
  return cases;
}

std::vector<OpCase> binary_cases() {
  std::vector<OpCase> cases;
  struct Shapes { const char* suffix; ir::TensorType a, b; };
  const std::vector<Shapes> shapes = {{"same", f64({3, 4}), f64({3, 4})},
                                      {"broadcast", f64({2, 3, 4}), f64({3, 1})},
                                      {"scalar", f64({}), f64({2, 3})}};
  const std::vector<std::pair<Op, std::vector<Sampler>>> ops = {
      {Op::Add, {}}, {Op::Sub, {}}, {Op::Mul, {}},
      {Op::Div, {uniform(-2, 2), nonzero()}},
      {Op::Pow, {positive(), uniform(-1.5, 1.5)}},
      {Op::Maximum, {}}, {Op::Minimum, {}}};
  for (const auto& [op, samplers] : ops)
    for (const Shapes& s : shapes)
      cases.push_back({fmt::format("{}_{}", ir::op_name(op), s.suffix), {s.a, s.b},
                       [op = op](NodeWriter& w, const Ids& v, const Ids&) { return w.binary(op, v[0], v[1]); },
                       samplers});
  // Constant exponents: only the base is differentiated (negative bases are fine for integers).
  for (double e : {2.0, 3.0, -1.0}) {
    cases.push_back({fmt::format("pow_constant_{}", int(e) < 0 ? "minus1" : std::to_string(int(e))),
                     {f64({3, 4})},
                     [e](NodeWriter& w, const Ids& v, const Ids&) { return w.binary_scalar(Op::Pow, v[0], e); },
                     {nonzero()}});
  }
  cases.push_back({"pow_constant_half", {f64({5})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.binary_scalar(Op::Pow, v[0], 0.5); },
                   {positive()}});
  // A variable on one side only: the other side is an input.
  cases.push_back({"mul_by_input", {f64({4})},
                   [](NodeWriter& w, const Ids& v, const Ids& in) { return w.mul(in[0], v[0]); },
                   {}, {f64({3, 4})},
                   [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {3, 4})}; }});
  return cases;
}

std::vector<OpCase> selection_cases() {
  std::vector<OpCase> cases;
  auto x_input = [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {3, 4})}; };
  cases.push_back({"where_input_condition", {f64({3, 4}), f64({4})},
                   [](NodeWriter& w, const Ids& v, const Ids& in) {
                     return w.where(w.binary_scalar(Op::Gt, in[0], 0), v[0], v[1]);
                   },
                   {}, {f64({3, 4})}, x_input});
  // The condition depends on the variable too, but is not differentiated.
  cases.push_back({"where_variable_condition", {f64({3, 4}), f64({3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     return w.where(w.binary_scalar(Op::Gt, v[0], 0), w.mul(v[0], v[0]), w.mul(v[1], v[0]));
                   },
                   {nonzero()}});
  return cases;
}

std::vector<OpCase> cast_cases() {
  std::vector<OpCase> cases;
  // An f32 variable into an f64 loss; central differences of a quadratic are exact, so only
  // f32 rounding of the perturbed values limits the accuracy.
  cases.push_back({"cast_f32_variable_to_f64", {T(DType::F32, {3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     const NodeId x = w.cast(v[0], DType::F64);
                     return w.mul(x, w.unary(Op::Exp, w.binary_scalar(Op::Mul, x, 0.1)));
                   },
                   {}, {}, {}, {1e-3, 1e-4}});
  // An f64 variable through an f32 value (the cast to f32 rounds, so a larger step).
  cases.push_back({"cast_through_f32", {f64({3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     return w.cast(w.unary(Op::Tanh, w.cast(v[0], DType::F32)), DType::F64);
                   },
                   {}, {}, {}, {1e-3, 1e-3}});
  return cases;
}

std::vector<OpCase> reduction_cases() {
  std::vector<OpCase> cases;
  struct Axes { const char* suffix; ir::TensorType x; std::vector<int64_t> axes; bool keepdims; };
  const std::vector<Axes> variants = {{"axis0", f64({3, 4}), {0}, false},
                                      {"axis1_keepdims", f64({3, 4}), {1}, true},
                                      {"all", f64({3, 4}), {0, 1}, false},
                                      {"axes02", f64({2, 3, 4}), {0, 2}, false},
                                      {"axes02_keepdims", f64({2, 3, 4}), {0, 2}, true}};
  const std::vector<std::pair<Op, Sampler>> ops = {{Op::ReduceSum, uniform(-2, 2)},
                                                   {Op::ReduceMean, uniform(-2, 2)},
                                                   {Op::ReduceMax, distinct()},
                                                   {Op::ReduceMin, distinct()},
                                                   {Op::ReduceProd, uniform(-1.5, 1.5)}};
  for (const auto& [op, sampler] : ops)
    for (const Axes& a : variants)
      cases.push_back({fmt::format("{}_{}", ir::op_name(op), a.suffix), {a.x},
                       [op = op, a](NodeWriter& w, const Ids& v, const Ids&) {
                         return w.reduce(op, v[0], a.axes, a.keepdims);
                       },
                       {sampler}});
  // prod with exact zeros: row 0 has one zero, row 1 two, row 2 none. The product is linear in
  // each element, so central differences are exact even at 0.
  cases.push_back({"prod_with_zeros", {f64({3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.reduce(Op::ReduceProd, v[0], {1}, false); },
                   {[](Rng& rng, const ir::TensorType&) {
                     HostTensor t = testing::uniform_tensor(rng, DType::F64, {3, 4}, 0.5, 2);
                     t.data[size_t(rng.integer(0, 3))] = 0;
                     const int64_t first = rng.integer(0, 3);
                     t.data[size_t(4 + first)] = 0;
                     t.data[size_t(4 + (first + 1 + rng.integer(0, 2)) % 4)] = 0;
                     return t;
                   }}});
  return cases;
}

std::vector<OpCase> matmul_cases() {
  auto mm = [](NodeWriter& w, const Ids& v, const Ids&) { return w.matmul(v[0], v[1]); };
  return {{"matmul_2x2", {f64({3, 4}), f64({4, 5})}, mm},
          {"matmul_1x2", {f64({4}), f64({4, 5})}, mm},
          {"matmul_2x1", {f64({3, 4}), f64({4})}, mm},
          {"matmul_1x1", {f64({4}), f64({4})}, mm},
          // Data on the left with a symbolic batch: only the weight is differentiated.
          {"matmul_input_batch", {f64({4, 3})},
           [](NodeWriter& w, const Ids& v, const Ids& in) { return w.matmul(in[0], v[0]); },
           {}, {f64({"n", 4})},
           [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {5, 4})}; }}};
}

std::vector<OpCase> structure_cases() {
  std::vector<OpCase> cases;
  cases.push_back({"transpose", {f64({2, 3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.transpose(v[0], {2, 0, 1}); }});
  cases.push_back({"transpose_2d", {f64({3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.transpose(v[0], {1, 0}); }});
  cases.push_back({"reshape", {f64({2, 3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.reshape(v[0], {ir::Dim::fixed(4), ir::Dim::fixed(6)}); }});
  cases.push_back({"broadcast_to", {f64({3, 1})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.broadcast_to(v[0], f64({2, 3, 4}).shape); }});
  cases.push_back({"broadcast_to_scalar", {f64({})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.broadcast_to(v[0], f64({2, 3}).shape); }});
  cases.push_back({"concat_axis1", {f64({3, 2}), f64({3, 1}), f64({3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) { return w.concat(v, 1); }});
  cases.push_back({"concat_axis0_with_input", {f64({2, 3})},
                   [](NodeWriter& w, const Ids& v, const Ids& in) {
                     const Ids parts = {in[0], v[0], in[0]};
                     return w.concat(parts, 0);
                   },
                   {}, {f64({1, 3})},
                   [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {1, 3})}; }});
  struct Range { int64_t start, stop, axis; };
  for (Range r : {Range{1, 3, 1}, Range{0, 2, 0}, Range{2, 5, 1}, Range{0, 3, 0}}) {
    cases.push_back({fmt::format("slice_{}_{}_axis{}", r.start, r.stop, r.axis), {f64({3, 5})},
                     [r](NodeWriter& w, const Ids& v, const Ids&) {
                       ir::Attrs a;   // built directly so that a full-range slice stays a node
                       a.axis = r.axis;
                       a.start = r.start;
                       a.stop = r.stop;
                       return w.add(Op::Slice, {v[0]}, a);
                     }});
  }
  // take: indices with repeats, so several rows' adjoints land on one row.
  auto indices = [](int64_t count, int64_t rows) {
    return [=](Rng& rng) {
      return std::vector{testing::tensor_from(DType::I64, {count}, [&](size_t) { return double(rng.integer(0, rows - 1)); })};
    };
  };
  auto take = [](NodeWriter& w, const Ids& v, const Ids& in) { return w.add(Op::Take, {v[0], in[0]}); };
  cases.push_back({"take_rows", {f64({5, 3})}, take, {}, {T(DType::I64, {7})}, indices(7, 5)});
  cases.push_back({"take_vector", {f64({6})}, take, {}, {T(DType::I64, {"m"})}, indices(9, 6)});
  cases.push_back({"take_rank3", {f64({4, 2, 3})}, take, {}, {T(DType::I32, {5})},
                   [](Rng& rng) {
                     return std::vector{testing::tensor_from(DType::I32, {5}, [&](size_t) { return double(rng.integer(0, 3)); })};
                   }});
  return cases;
}

std::vector<OpCase> softmax_cases() {
  std::vector<OpCase> cases;
  for (Op op : {Op::Softmax, Op::LogSoftmax})
    for (int axis : {0, 1})
      cases.push_back({fmt::format("{}_axis{}", ir::op_name(op), axis), {f64({3, 4})},
                       [=](NodeWriter& w, const Ids& v, const Ids&) { return w.softmax(op, v[0], axis); }});
  auto ce = [](NodeWriter& w, const Ids& v, const Ids& in) { return w.add(Op::CrossEntropy, {v[0], in[0]}); };
  cases.push_back({"cross_entropy_class_labels", {f64({4, 5})}, ce, {}, {T(DType::I64, {4})},
                   [](Rng& rng) {
                     return std::vector{testing::tensor_from(DType::I64, {4}, [&](size_t) { return double(rng.integer(0, 4)); })};
                   }});
  cases.push_back({"cross_entropy_class_labels_i32_batch", {f64({3})},
                   [](NodeWriter& w, const Ids& v, const Ids& in) {
                     // logits [n, 3] = x * v: a symbolic batch.
                     return w.add(Op::CrossEntropy, {w.mul(in[0], v[0]), in[1]});
                   },
                   {}, {f64({"n", 3}), T(DType::I32, {"n"})},
                   [](Rng& rng) {
                     return std::vector{testing::uniform_tensor(rng, DType::F64, {6, 3}),
                                        testing::tensor_from(DType::I32, {6}, [&](size_t) { return double(rng.integer(0, 2)); })};
                   }});
  auto probabilities = [](bool normalized) {
    return [=](Rng& rng) {
      HostTensor t = testing::uniform_tensor(rng, DType::F64, {4, 5}, 0, 1);
      if (normalized)
        for (int i = 0; i < 4; ++i) {
          double total = 0;
          for (int j = 0; j < 5; ++j) total += t.data[size_t(i * 5 + j)];
          for (int j = 0; j < 5; ++j) t.data[size_t(i * 5 + j)] /= total;
        }
      return std::vector{t};
    };
  };
  cases.push_back({"cross_entropy_probabilities", {f64({4, 5})}, ce, {}, {f64({4, 5})}, probabilities(true)});
  cases.push_back({"cross_entropy_unnormalized", {f64({4, 5})}, ce, {}, {f64({4, 5})}, probabilities(false)});
  // Both logits and (soft) labels are variables.
  cases.push_back({"cross_entropy_label_variable", {f64({4, 5}), f64({4, 5})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     return w.add(Op::CrossEntropy, {v[0], w.softmax(Op::Softmax, v[1], 1)});
                   }});
  // Large logits: the stable forms must not overflow.
  cases.push_back({"cross_entropy_large_logits", {f64({4, 5})},
                   [](NodeWriter& w, const Ids& v, const Ids& in) {
                     return w.add(Op::CrossEntropy, {w.binary_scalar(Op::Mul, v[0], 300), in[0]});
                   },
                   {}, {T(DType::I64, {4})},
                   [](Rng& rng) {
                     return std::vector{testing::tensor_from(DType::I64, {4}, [&](size_t) { return double(rng.integer(0, 4)); })};
                   },
                   {1e-7, 1e-5}});
  return cases;
}

std::vector<OpCase> graph_cases() {
  std::vector<OpCase> cases;
  // Fan-out: one value used several times sums its adjoints.
  cases.push_back({"fan_out", {f64({3, 4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     const NodeId a = v[0];
                     return w.add(w.mul(a, a), w.mul(w.unary(Op::Exp, a), w.reduce(Op::ReduceSum, a, {0}, true)));
                   }});
  // Two separate reads of the same shared variable: both count.
  cases.push_back({"two_reads", {f64({4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     const NodeId again = w.shared_read(0, w.type(v[0]));
                     return w.mul(v[0], w.unary(Op::Tanh, again));
                   }});
  // Paths through comparisons, argmax and integer casts carry nothing.
  cases.push_back({"non_differentiable_paths", {f64({3, 4}), f64({3})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     const NodeId idx = w.reduce(Op::ArgMax, v[0], {1}, false);
                     const NodeId as_float = w.cast(idx, DType::F64);
                     // x * 10 + 0.25 stays at least 0.25 away from an integer for the distinct() values.
                     const NodeId scaled = w.binary_scalar(Op::Add, w.binary_scalar(Op::Mul, v[0], 10), 0.25);
                     const NodeId truncated = w.cast(w.cast(scaled, DType::I64), DType::F64);
                     return w.add(w.mul(as_float, v[1]), w.reduce(Op::ReduceSum, truncated, {1}, false));
                   },
                   {distinct(), uniform(-2, 2)}});
  // Symbolic batch: mean over n divides by a count computed at run time.
  auto batch = [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {5, 3})}; };
  cases.push_back({"mean_over_symbolic_batch", {f64({3}), f64({})},
                   [](NodeWriter& w, const Ids& v, const Ids& in) {
                     const NodeId h = w.unary(Op::Tanh, w.add(w.mul(in[0], v[0]), v[1]));
                     return w.reduce(Op::ReduceMean, h, {0}, false);
                   },
                   {}, {f64({"n", 3})}, batch});
  cases.push_back({"max_over_symbolic_batch", {f64({3})},
                   [](NodeWriter& w, const Ids& v, const Ids& in) {
                     return w.reduce(Op::ReduceMax, w.mul(in[0], v[0]), {0}, false);
                   },
                   {nonzero()}, {f64({"n", 3})}, batch});
  // A second derivative: the loss is built from grad(sum(tanh(w)^3), w).
  cases.push_back({"second_order", {f64({4})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     const NodeId inner = w.reduce(Op::ReduceSum, w.binary_scalar(Op::Pow, w.unary(Op::Tanh, v[0]), 3), {0}, false);
                     return w.add(Op::Grad, {inner, v[0]});
                   }});
  cases.push_back({"second_order_through_max_and_softmax", {f64({2, 3})},
                   [](NodeWriter& w, const Ids& v, const Ids&) {
                     const NodeId s = w.softmax(Op::LogSoftmax, w.binary_scalar(Op::Mul, v[0], 2), 1);
                     const NodeId inner = w.reduce(Op::ReduceSum, w.reduce(Op::ReduceMax, w.mul(s, s), {1}, false), {0}, false);
                     return w.add(Op::Grad, {inner, v[0]});
                   },
                   {distinct()}});
  return cases;
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> all;
  for (auto make : {unary_cases, binary_cases, selection_cases, cast_cases, reduction_cases, matmul_cases,
                    structure_cases, softmax_cases, graph_cases}) {
    std::vector<OpCase> part = make();
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

class GradientCheck : public ::testing::TestWithParam<OpCase> {};

TEST_P(GradientCheck, MatchesCentralDifferences) { run_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(EveryOp, GradientCheck, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace
}  // namespace synk::compiler
