// The channels-last pass (channels_last.cpp): the function it returns computes what it was given
// (the float64 reference evaluator runs both on fresh random inputs: forward passes, gradients
// through conv, batch norm, residual adds, pools and a classifier, running-statistics updates),
// and it leaves no transpose between two convolutions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compiler/grad/grad.h"
#include "compiler/grad/train.h"
#include "compiler/passes/passes.h"
#include "dsl/frontend.h"
#include "ir/evaluator.h"

namespace synk::compiler {
namespace {

// Two residual blocks with batch norm, a strided projection, a pool, a classifier, trained by
// momentum SGD; `predict` is the inference form (running statistics), `pooled` keeps NCHW work
// after the last convolution, `separated` has a pool between its convolutions and `plain` an f64
// convolution: the pass leaves both alone.
constexpr const char* kNet = R"(
shared w0: f32[4, 1, 3, 3] = normal(seed=1, std=0.4);
shared g0: f32[4] = ones;
shared b0: f32[4];
shared m0: f32[4];
shared v0: f32[4] = ones;
shared w1: f32[6, 4, 3, 3] = normal(seed=2, std=0.3);
shared g1: f32[6] = ones;
shared b1: f32[6];
shared m1: f32[6];
shared v1: f32[6] = ones;
shared wd: f32[6, 4, 1, 1] = normal(seed=3, std=0.3);
shared w2: f32[6, 6, 3, 3] = normal(seed=4, std=0.3);
shared fc: f32[6, 3] = normal(seed=5, std=0.3);
shared wf: f64[2, 1, 2, 2] = normal(seed=6, std=0.3);
def block_train(x) {
  let h0 = relu(batch_norm(conv2d(x, w0, padding=1), g0, b0, m0, v0, training=true));
  let h1 = relu(batch_norm(conv2d(h0, w1, stride=2, padding=1), g1, b1, m1, v1, training=true));
  return relu(conv2d(h1, w2, padding=1) + conv2d(h0, wd, stride=2) * 0.5);
}
def block_eval(x) {
  let h0 = relu(batch_norm(conv2d(x, w0, padding=1), g0, b0, m0, v0));
  let h1 = relu(batch_norm(conv2d(h0, w1, stride=2, padding=1), g1, b1, m1, v1));
  return relu(conv2d(h1, w2, padding=1) + conv2d(h0, wd, stride=2) * 0.5);
}
optimizer opt = momentum(lr=0.1, momentum=0.9);
fn step(scatter x: f32[n, 1, 8, 8], scatter y: i64[n]) {
  let logits = global_avg_pool(block_train(x)) @ fc;
  out loss: avg = mean(cross_entropy(logits, y));
  minimize mean(cross_entropy(logits, y)) over w0, g0, b0, w1, g1, b1, wd, w2, fc using opt;
}
fn predict(scatter x: f32[n, 1, 8, 8]) {
  out p: gather = softmax(global_avg_pool(block_eval(x)) @ fc, axis=1);
}
fn pooled(scatter x: f32[n, 1, 8, 8]) {
  let h = block_eval(x);
  out s: sum = sum(max_pool2d(h, 2) * 2) + sum(exp(slice(h, 0, 1, axis=1)));
}
fn separated(scatter x: f32[n, 1, 8, 8]) {
  out s: sum = sum(conv2d(max_pool2d(relu(conv2d(x, w0, padding=1)), 2), w1, padding=1));
}
fn plain(scatter x: f64[n, 1, 8, 8]) {
  out z: sum = sum(conv2d(x, wf) * conv2d(x, wf));
}
)";

ir::Module net() {
  ir::Module m = dsl::compile_source("net.synk", kNet);
  expand_training_steps(m);
  return m;
}

// The pipeline up to the layout pass (lower.cpp), and the same plus it and its clean-up.
ir::Function before(const ir::Module& m, const ir::Function& fn) {
  ir::Function f = expand_gradients(m, fn);
  f = simplify(f);
  f = fold_constants(f);
  f = simplify(f);
  f = eliminate_common_subexpressions(f);
  return eliminate_dead_nodes(f);
}
ir::Function after(const ir::Function& f) {
  ir::Function g = convert_to_channels_last(f);
  g = simplify(g);
  g = eliminate_common_subexpressions(g);
  return eliminate_dead_nodes(g);
}

dsl::HostTensor random_tensor(const ir::TensorType& t, int64_t n, std::mt19937& rng) {
  std::vector<int64_t> shape;
  for (const ir::Dim& d : t.shape) shape.push_back(d.is_symbolic() ? n : d.size);
  dsl::HostTensor h = dsl::HostTensor::filled(t.dtype, shape, 0.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> label(0, 2);
  for (double& v : h.data) v = ir::is_float(t.dtype) ? double(float(normal(rng))) : double(label(rng));
  return h;
}

void expect_close(const dsl::HostTensor& got, const dsl::HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  // Both sides may overflow to the same infinity (or NaN) on some draws: equal, not near.
  double scale = 1e-30;
  for (double v : want.data)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double g = got.data[i], w = want.data[i];
    if (g == w || (std::isnan(g) && std::isnan(w))) continue;
    ASSERT_NEAR(g, w, 1e-10 * scale) << what << " element " << i;
  }
}

int count_rank4_transposes(const ir::Function& fn) {
  int k = 0;
  for (const ir::Node& n : fn.nodes) k += n.op == ir::Op::Transpose && n.type.rank() == 4;
  return k;
}

TEST(ChannelsLast, EveryFunctionComputesWhatItDidOnFreshInputs) {
  const ir::Module m = net();
  std::mt19937 rng(std::random_device{}());
  std::vector<dsl::HostTensor> shareds;
  for (const ir::SharedVar& v : m.shareds) {
    shareds.push_back(random_tensor(v.type, 0, rng));
    if (v.name[0] == 'v')   // running variances: positive
      for (double& x : shareds.back().data) x = std::abs(x) + 0.1;
  }
  for (const ir::Function& fn : m.functions) {
    SCOPED_TRACE(fn.name);
    const ir::Function a = before(m, fn), b = after(a);
    std::vector<dsl::HostTensor> inputs;
    for (const ir::Param& p : fn.params) inputs.push_back(random_tensor(p.type, 5, rng));
    const dsl::EvalResult want = dsl::evaluate(m, a, inputs, shareds);
    const dsl::EvalResult got = dsl::evaluate(m, b, inputs, shareds);
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    ASSERT_EQ(got.updates.size(), want.updates.size());
    for (size_t i = 0; i < want.outputs.size(); ++i) expect_close(got.outputs[i], want.outputs[i], "output");
    for (size_t i = 0; i < want.updates.size(); ++i)
      expect_close(got.updates[i], want.updates[i], "update of " + m.shareds[size_t(fn.updates[i].shared)].name);
  }
}

TEST(ChannelsLast, ConvolutionsMeetWithoutTransposesBetweenThem) {
  const ir::Module m = net();
  const ir::Function& step = *m.find_function("step");
  const ir::Function b = after(before(m, step));
  int convs = 0;
  for (const ir::Node& n : b.nodes) {
    if (!ir::is_window_op(n.op) || n.op > ir::Op::Conv2dBackwardWeights) continue;
    ++convs;
    EXPECT_TRUE(n.attrs.window.channels_last) << ir::op_name(n.op);
    // The activations a convolution reads are never an NCHW -> NHWC copy of a convolution's
    // result: the pairs cancelled.
    for (ir::NodeId o : n.operands) {
      const ir::Node& src = b.node(o);
      if (src.op != ir::Op::Transpose) continue;
      const ir::Node& under = b.node(src.operands[0]);
      EXPECT_FALSE(ir::is_window_op(under.op) && under.op <= ir::Op::Conv2dBackwardWeights)
          << "a transpose between two convolutions";
    }
  }
  EXPECT_EQ(convs, 4 + 4 + 3);   // 4 forward, 3 backward-data (not the first), 4 backward-weights
  // No rank-4 transpose is left: the image (C = 1) and the pool's [N, C, 1, 1] are reshapes, the
  // statistics and their gradients were computed in NHWC. The classifier's matmuls keep theirs.
  EXPECT_EQ(count_rank4_transposes(b), 0) << dsl::print_module(ir::Module{m.shareds, {b}});
  // A max pool needs NCHW: its input is one transpose of the last block's output, and its
  // gradient one transpose back (the forward `pooled` has no gradient: one).
  const ir::Function pooled = after(before(m, *m.find_function("pooled")));
  EXPECT_EQ(count_rank4_transposes(pooled), 1) << dsl::print_module(ir::Module{m.shareds, {pooled}});
  const ir::Function p = after(before(m, *m.find_function("plain")));
  for (const ir::Node& n : p.nodes) EXPECT_FALSE(n.attrs.window.channels_last);   // f64: left alone
  // A pool between every two convolutions: transposes at each would cost more than they save.
  const ir::Function sep = before(m, *m.find_function("separated"));
  const ir::Function sep_after = after(sep);
  EXPECT_EQ(dsl::print_module(ir::Module{m.shareds, {sep_after}}), dsl::print_module(ir::Module{m.shareds, {sep}}));
  EXPECT_EQ(count_rank4_transposes(p), 0);
}

}  // namespace
}  // namespace synk::compiler
