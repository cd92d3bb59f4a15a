// The random ops on the CPU (uniform, normal, bernoulli and their _like forms, dropout): the
// compiled kernels draw exactly the reference evaluator's numbers (every element equal), for
// any split of the rows given as first rows (what the call engine does for ranks and slices);
// 10^6 uniform draws pass a chi-square test and 10^6 normal draws a mean/variance test; the seed,
// the step and the salt each change every draw; dropout's gradient is the forward pass's mask.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "compiler/cpu/cpu_test_util.h"

namespace synk::compiler::testing {
namespace {

// Runs `fn` (inputs only, no shared variables) compiled with `rng`; returns its first output.
rt::Array run_compiled(CpuFunction& f, const std::vector<dsl::HostTensor>& inputs, const RngState& rng) {
  CallArguments args = call_arguments(f, inputs, {});
  std::vector<rt::Array> outputs(f.plan().function.outputs.size()), updates(f.plan().function.updates.size());
  f.set_random_state(rng);
  f.run(args.inputs, args.shareds, outputs, updates);
  return outputs.at(0);
}

dsl::HostTensor zeros(ir::DType t, std::vector<int64_t> shape) { return dsl::HostTensor::filled(t, std::move(shape), 0.0); }

constexpr const char* kProgram = R"(
fn u32(scatter x: f32[n, 7]) { out y: gather = uniform_like(x, low=-2, high=3); }
fn u64(scatter x: f64[n, 7]) { out y: gather = uniform_like(x); }
fn n32(scatter x: f32[n, 7]) { out y: gather = normal_like(x, mean=1, std=2); }
fn n64(scatter x: f64[n, 7]) { out y: gather = normal([n, 7], dtype=f64); }
fn b32(scatter x: f32[n, 7]) { out y: gather = bernoulli_like(x, 0.3); }
fn drop(scatter x: f32[n, 7]) { out y: gather = dropout(x, 0.25, training=true); }
fn two(scatter x: f32[n, 7]) { out y: gather = uniform_like(x) - uniform_like(x); }
fn fixed(scatter x: f32[n, 7]) { out y: sum = uniform([3, 5]); }
)";

TEST(RandomOps, CompiledDrawsAreTheEvaluatorsBitForBit) {
  ir::Module m = parse(kProgram);
  std::mt19937_64 gen(test_seed());
  // The draws themselves and bernoulli agree bit for bit; the evaluator computes the f32 scaling
  // and shifting of u32 and n32, dropout's 1/(1-p) and the difference of two draws in float64, so
  // those agree to f32's rounding (a mask that differs would differ by the whole value).
  const std::set<std::string> rounded = {"u32", "n32", "two", "drop"};
  for (const char* name : {"u32", "u64", "n32", "n64", "b32", "drop", "two", "fixed"}) {
    const ir::Function& fn = *m.find_function(name);
    std::unique_ptr<CpuFunction> f = compile_cpu_function(m, name);
    const std::vector<dsl::HostTensor> in = {random_tensor(fn.params[0].type, {{"n", 13}}, gen)};
    const RngState rng{0x5eedULL, 41, 1000};
    const dsl::HostTensor want = dsl::evaluate(m, fn, in, {}, rng).outputs.at(0);
    const rt::Array got = run_compiled(*f, in, rng);
    const std::vector<double> values = values_of(got);
    ASSERT_EQ(values.size(), want.data.size()) << name;
    const double tol = rounded.count(name) ? 1e-6 : 0.0;
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_TRUE(std::abs(values[i] - want.data[i]) <= tol * (1 + std::abs(want.data[i])))
          << name << " element " << i << ": " << values[i] << " vs " << want.data[i] << " (seed " << test_seed() << ")";
  }
}

TEST(RandomOps, AnySplitOfTheRowsDrawsTheSameNumbers) {
  ir::Module m = parse("fn f(scatter x: f32[n, 5]) { out y: gather = normal_like(x) + uniform_like(x); }");
  std::unique_ptr<CpuFunction> f = compile_cpu_function(m, "f");
  const rt::Array whole = run_compiled(*f, {zeros(ir::DType::F32, {10, 5})}, RngState{7, 3, 0});
  const std::vector<double> all = values_of(whole);
  for (int64_t first : {1, 4, 9}) {
    const std::vector<double> part = values_of(run_compiled(*f, {zeros(ir::DType::F32, {10 - first, 5})}, RngState{7, 3, first}));
    for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], all[size_t(first * 5) + i]) << first << " " << i;
  }
  // A shape without scattered rows draws the same on every part.
  ir::Module g = parse("fn f(scatter x: f32[n, 5]) { out y: sum = uniform([4]); }");
  std::unique_ptr<CpuFunction> h = compile_cpu_function(g, "f");
  EXPECT_EQ(values_of(run_compiled(*h, {zeros(ir::DType::F32, {2, 5})}, RngState{7, 3, 0})),
            values_of(run_compiled(*h, {zeros(ir::DType::F32, {2, 5})}, RngState{7, 3, 6})));
}

TEST(RandomOps, SeedStepAndSaltEachChangeEveryDraw) {
  ir::Module m = parse("fn f(scatter x: f32[n, 64]) { out a: gather = uniform_like(x); out b: gather = uniform_like(x); }");
  std::unique_ptr<CpuFunction> f = compile_cpu_function(m, "f");
  auto both = [&](const RngState& rng) {
    CallArguments args = call_arguments(*f, {zeros(ir::DType::F32, {4, 64})}, {});
    std::vector<rt::Array> outputs(2), updates;
    f->set_random_state(rng);
    f->run(args.inputs, args.shareds, outputs, updates);
    return std::make_pair(values_of(outputs[0]), values_of(outputs[1]));
  };
  auto base = both({1, 1, 0}), seed = both({2, 1, 0}), step = both({1, 2, 0});
  auto differ = [](const std::vector<double>& a, const std::vector<double>& b) {
    size_t same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    return same < 3;   // 256 draws of 2^24 values: a few coincidences at most
  };
  EXPECT_TRUE(differ(base.first, base.second)) << "salt";
  EXPECT_TRUE(differ(base.first, seed.first)) << "seed";
  EXPECT_TRUE(differ(base.first, step.first)) << "step";
  EXPECT_EQ(base.first, both({1, 1, 0}).first) << "the same state draws the same numbers";
}

TEST(RandomOps, UniformChiSquareAndNormalMomentsOverAMillionDraws) {
  ir::Module m = parse("fn f(scatter x: f32[n, 1000]) { out u: gather = uniform_like(x); out z: gather = normal_like(x); }");
  std::unique_ptr<CpuFunction> f = compile_cpu_function(m, "f");
  CallArguments args = call_arguments(*f, {zeros(ir::DType::F32, {1000, 1000})}, {});
  std::vector<rt::Array> outputs(2), updates;
  f->set_random_state({20240616, 0, 0});
  f->run(args.inputs, args.shareds, outputs, updates);
  const float* u = outputs[0].data<float>();
  const float* z = outputs[1].data<float>();
  constexpr int kBins = 100;
  std::vector<double> count(kBins, 0);
  double sum = 0, sum2 = 0;
  for (size_t i = 0; i < 1000000; ++i) {
    ASSERT_TRUE(u[i] >= 0.0f && u[i] < 1.0f) << u[i];
    count[size_t(u[i] * kBins)] += 1;
    sum += z[i];
    sum2 += double(z[i]) * z[i];
  }
  double chi2 = 0;
  for (double c : count) chi2 += (c - 10000.0) * (c - 10000.0) / 10000.0;
  EXPECT_LT(chi2, 148.2);   // 99 degrees of freedom, p = 0.001
  const double mean = sum / 1e6, var = sum2 / 1e6 - mean * mean;
  EXPECT_LT(std::abs(mean), 4.0 / 1000.0);           // 4 sigma of the mean of 10^6 draws
  EXPECT_LT(std::abs(var - 1.0), 4.0 * std::sqrt(2.0) / 1000.0);
}

TEST(RandomOps, DropoutKeepsScalesAndItsGradientReadsTheSameMask) {
  ir::Module m = parse(R"(
shared w: f32[6] = ones;
optimizer opt = sgd(lr=0.1);
fn train(scatter x: f32[n, 6]) {
  let h = dropout(x * w, 0.5);
  out y: gather = h;
  minimize sum(h) over w using opt;
}
fn evaluate(scatter x: f32[n, 6]) { out y: gather = dropout(x * w, 0.5); }
)");
  std::unique_ptr<CpuFunction> f = compile_cpu_function(m, "train");
  std::vector<dsl::HostTensor> shareds = {dsl::HostTensor::filled(ir::DType::F32, {6}, 1.0),
                                          dsl::HostTensor::filled(ir::DType::F32, {6}, 0.0)};
  CallArguments args = call_arguments(*f, {dsl::HostTensor::filled(ir::DType::F32, {50, 6}, 3.0)}, shareds);
  std::vector<rt::Array> outputs(1), updates(1);
  f->set_random_state({99, 5, 0});
  f->run(args.inputs, args.shareds, outputs, updates);
  const std::vector<double> y = values_of(outputs[0]), g = values_of(updates[0]);
  std::vector<double> want(6, 0.0);
  size_t kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(y[i] == 0.0 || y[i] == 6.0) << y[i];   // 3 * w, dropped or scaled by 2
    if (y[i] != 0) ++kept, want[i % 6] += 3.0 * 2.0;    // d sum(h) / d w_j = x * 2 where kept
  }
  EXPECT_GT(kept, 100u);
  EXPECT_LT(kept, 200u);
  EXPECT_EQ(g, want);
  // Evaluating, dropout is the identity.
  std::unique_ptr<CpuFunction> e = compile_cpu_function(m, "evaluate");
  CallArguments eargs = call_arguments(*e, {dsl::HostTensor::filled(ir::DType::F32, {3, 6}, 3.0)}, shareds);
  std::vector<rt::Array> eout(1), eupd;
  e->run(eargs.inputs, eargs.shareds, eout, eupd);
  EXPECT_EQ(values_of(eout[0]), std::vector<double>(18, 3.0));
}

}  // namespace
}  // namespace synk::compiler::testing
