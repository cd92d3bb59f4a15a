// Gradient checks for the math ops of issue 16 (softplus, log1p, expm1, sin, cos, %, the
// binary_cross_entropy_with_logits and cumsum ops, and sema's compositions clip, logsumexp, var, std, norm,
// stack, expand_dims, squeeze), written in `.synk` and compiled by the front end: every element of
// each gradient is compared with float64 central differences through the reference evaluator, on
// fresh random values. Then the values at the kinks that the docs promise (docs/language.md):
// the gradients of softplus and binary_cross_entropy_with_logits at 0 are sigmoid(0) (- y), clip
// passes the adjoint at its bounds, norm's gradient at 0 is 0 (not NaN), logsumexp's is softmax,
// cumsum's is the reversed cumsum of the adjoint, and the piecewise-constant ops (floor, ceil,
// round, sign, floor_divide) give zero.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "compiler/grad/grad.h"
#include "compiler/grad/grad_test_util.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

using dsl::HostTensor;
using ir::DType;
using testing::Rng;

struct Case {
  std::string name;
  std::string body;                  // the loss, over shared `w: f64[3, 4]` and `v: f64[4]`
  double low = -2, high = 2;         // w and v are drawn uniformly from [low, high)
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string source(const Case& c) {
  return "shared w: f64[3, 4];\nshared v: f64[4];\nfn train(bcast x: f64[3, 4]) {\n  let loss = " + c.body +
         ";\n  out loss: avg = loss;\n  out g: avg = grad(loss, w, v);\n}\n";
}

std::vector<Case> cases() {
  return {
      {"softplus", "sum(softplus(w * 3.0) * x) + sum(softplus(v))"},
      {"log1p", "sum(log1p(w) * x) + sum(log1p(v))", 0.1, 2},
      {"expm1", "sum(expm1(w) * x) + sum(expm1(v))"},
      {"sin_cos", "sum(sin(w) * x) + sum(cos(v) * cos(w))"},
      {"mod", "sum((w % 0.7) * x) + sum(w % v)", 0.3, 2},
      {"bce_broadcast", "mean(binary_cross_entropy_with_logits(w * 2.0, sigmoid(v)))"},
      {"bce_both_sides", "sum(binary_cross_entropy_with_logits(v, w) * x)"},
      {"clip", "sum(clip(w, -0.5, v) * x)"},
      {"logsumexp_axis", "sum(logsumexp(w, axis=1) * slice(v, 0, 3)) + logsumexp(v)"},
      {"logsumexp_keepdims", "sum(logsumexp(w * x, axis=0, keepdims=true) * v)"},
      {"var", "sum(var(w, axis=1) * sum(x, axis=1)) + var(v)"},
      {"var_ddof", "sum(var(w, axis=0, ddof=1) * v) + var(v, ddof=1)"},
      {"std", "sum(std(w, axis=1, keepdims=true) * x) + std(v)"},
      {"norm", "sum(norm(w, axis=1) * sum(x, axis=1)) + norm(v) * norm(w)"},
      {"stack", "sum(stack([w, x * w], axis=1) * stack([x, x], axis=1)) + sum(stack([v, v], axis=-1))"},
      {"cumsum", "sum(cumsum(w, axis=1) * x) + sum(cumsum(v) * v)"},
      {"cumsum_reverse", "sum(cumsum(w * x, axis=0, reverse=true) * cumsum(x, -1)) + sum(cumsum(cumsum(v), reverse=true) * v)"},
      {"expand_squeeze", "sum(squeeze(expand_dims(v, 0) * slice(w, 0, 1), 0) * v) + sum(squeeze(expand_dims(w, -1), axis=2) * x)"},
  };
}

class MathOpGradient : public ::testing::TestWithParam<Case> {};

TEST_P(MathOpGradient, MatchesCentralDifferences) {
  const Case& c = GetParam();
  Rng rng(c.name);
  const ir::Module module = dsl::compile_source(c.name + ".synk", source(c));
  const ir::Module expanded = expand_gradients(module);
  const std::vector<std::string> problems = ir::verify(expanded);
  ASSERT_TRUE(problems.empty()) << problems.front();
  std::vector<HostTensor> shareds = {testing::uniform_tensor(rng, DType::F64, {3, 4}, c.low, c.high),
                                     testing::uniform_tensor(rng, DType::F64, {4}, c.low, c.high)};
  const std::vector<HostTensor> inputs = {testing::uniform_tensor(rng, DType::F64, {3, 4}, -1, 1)};
  testing::check_gradient(expanded, "train", inputs, shareds, 0, 1, {0, 1});
}

INSTANTIATE_TEST_SUITE_P(Ops, MathOpGradient, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// The gradient of `loss` with respect to `shared p: f64[n]` at `p`; `shared q` holds `q`.
std::vector<double> gradient_at(const std::string& loss, const std::vector<double>& p,
                                const std::vector<double>& q = {0}) {
  const std::string text =
      fmt::format("shared p: f64[{}];\nshared q: f64[{}];\nfn f() {{\n  out g: avg = grad({}, p);\n}}\n", p.size(),
                  q.size(), loss);
  const ir::Module m = expand_gradients(dsl::compile_source("kink.synk", text));
  const std::vector<HostTensor> values = {HostTensor::make(DType::F64, {int64_t(p.size())}, p),
                                          HostTensor::make(DType::F64, {int64_t(q.size())}, q)};
  return dsl::evaluate(m, "f", {}, values).outputs.at(0).data;
}

double inf_value() { return std::numeric_limits<double>::infinity(); }

// The sigmoid op's value (exp of a non-positive number only), which the gradient must equal.
double sigmoid(double z) { return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z)); }

TEST(MathOpKinks, BceGradientIsSigmoidMinusTargetIncludingZero) {
  const std::vector<double> z = {0, -0.0, 1.5, -3, 40, -40};
  for (double y : {0.0, 0.25, 1.0}) {
    const std::vector<double> g = gradient_at(fmt::format("sum(binary_cross_entropy_with_logits(p, {}))", y), z);
    for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(g[i], sigmoid(z[i]) - y) << "z = " << z[i] << ", y = " << y;
  }
  // With respect to the targets: -z.
  const std::vector<double> targets = {0.2, 0.9, 0.5};
  const std::vector<double> g = gradient_at("sum(binary_cross_entropy_with_logits(q, p))", targets, {1.5, 0.0, -2.0});
  EXPECT_EQ(g, (std::vector<double>{-1.5, 0.0, 2.0}));
}

TEST(MathOpKinks, SoftplusGradientIsSigmoid) {
  const std::vector<double> x = {0, 2, -2, 50, -50};
  const std::vector<double> g = gradient_at("sum(softplus(p))", x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_DOUBLE_EQ(g[i], sigmoid(x[i])) << x[i];
  EXPECT_EQ(g[0], 0.5);
}

TEST(MathOpKinks, ClipPassesTheAdjointInsideAndAtItsBounds) {
  const std::vector<double> g = gradient_at("sum(clip(p, -1.0, 2.0))", {-1, 2, 0.5, -1.5, 2.5});
  EXPECT_EQ(g, (std::vector<double>{1, 1, 1, 0, 0}));
}

TEST(MathOpKinks, NormGradientIsXOverNormAndZeroAtZero) {
  const std::vector<double> g = gradient_at("norm(p)", {3, -4});
  EXPECT_DOUBLE_EQ(g[0], 0.6);
  EXPECT_DOUBLE_EQ(g[1], -0.8);
  for (double v : gradient_at("norm(p)", {0, 0, 0})) EXPECT_EQ(v, 0.0);
}

TEST(MathOpKinks, LogsumexpGradientIsSoftmax) {
  const std::vector<double> x = {1, 2, 3, 3, -1e3};
  const std::vector<double> g = gradient_at("logsumexp(p)", x);
  double total = 0;
  for (double v : x) total += std::exp(v - 3);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(g[i], std::exp(x[i] - 3) / total, 1e-15) << i;
}

TEST(MathOpKinks, CumsumGradientIsTheReversedCumsumOfTheAdjoint) {
  // d/dp_j of sum_i cumsum(p)_i * q_i is q_j + ... + q_last; reversed, q_0 + ... + q_j (exact:
  // small integers).
  const std::vector<double> q = {1, -2, 4, 8};
  EXPECT_EQ(gradient_at("sum(cumsum(p) * q)", {0.5, 1, -3, 2}, q), (std::vector<double>{11, 10, 12, 8}));
  EXPECT_EQ(gradient_at("sum(cumsum(p, reverse=true) * q)", {0.5, 1, -3, 2}, q), (std::vector<double>{1, -1, 3, 11}));
  // An infinite adjoint reaches only the elements before it (after it, when reversed).
  EXPECT_EQ(gradient_at("sum(cumsum(p) * q)", {0, 0, 0}, {1, inf_value(), 1})[2], 1);
}

TEST(MathOpKinks, PiecewiseConstantOpsHaveZeroGradient) {
  // d/dp (c(p) * p) = c(p) where c is locally constant: only the direct factor contributes.
  const std::vector<double> p = {-1.3, 0.2, 2.5, 3.7};
  struct Op { const char* loss; double (*c)(double); };
  const Op ops[] = {{"sum(floor(p) * p)", [](double v) { return std::floor(v); }},
                    {"sum(ceil(p) * p)", [](double v) { return std::ceil(v); }},
                    {"sum(round(p) * p)", [](double v) { return std::nearbyint(v); }},
                    {"sum(sign(p) * p)", [](double v) { return v > 0 ? 1.0 : -1.0; }},
                    {"sum(floor_divide(p, 0.5) * p)", [](double v) { return std::floor(v / 0.5); }}};
  for (const Op& op : ops) {
    const std::vector<double> g = gradient_at(op.loss, p);
    for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(g[i], op.c(p[i])) << op.loss << " at " << p[i];
  }
}

}  // namespace
}  // namespace synk::compiler
