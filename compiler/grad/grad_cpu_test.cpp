// Gradient and update-rule functions through the real CPU pipeline: lower() runs the gradient
// pass first, then the passes, fusion, C++ generation and the JIT; the compiled kernels must agree
// with the reference evaluator on the expanded IR (whose gradients grad_test.cpp checks against
// finite differences). This is what makes sure every op the gradient pass emits (masks,
// broadcast_to, one_hot scatter-adds, slices and concats of the flat vector) compiles and fuses.
#include <cstdlib>

#include "compiler/cpu/cpu_test_util.h"
#include "compiler/grad/update_rules.h"

namespace synk::compiler {
namespace {

using Sizes = std::map<std::string, int64_t>;

const testing::Tolerance kTolerance{.f32_rel = 2e-4, .f32_abs = 2e-4};

void check(const ir::Module& m, const std::string& fn, const std::vector<Sizes>& size_sets,
           const testing::ValueStyle& style) {
  for (size_t i = 0; i < size_sets.size(); ++i) {
    const uint64_t seed = testing::test_seed() + i;
    const testing::CaseResult r = testing::run_differential(m, fn, size_sets[i], seed, style, kTolerance);
    EXPECT_TRUE(r.failure.empty()) << "replay: SYNK_TEST_SEED=" << testing::test_seed() << ", sizes "
                                   << fmt::format("{}", size_sets[i]) << ": " << r.failure;
    EXPECT_TRUE(r.user_error_compiled.empty()) << r.user_error_compiled;
  }
}

void check(const std::string& source, const std::string& fn, const std::vector<Sizes>& size_sets,
           const testing::ValueStyle& style = {.scale = 1, .int_low = 0, .int_high = 2}) {
  SCOPED_TRACE(source);
  check(testing::parse(source), fn, size_sets, style);
}

TEST(GradCpu, MlpWithCrossEntropy) {
  for (const char* t : {"f32", "f64"})
    check(fmt::format(R"(
shared w1: {0}[5, 8];
shared b1: {0}[8];
shared w2: {0}[8, 3];
shared b2: {0}[3];
fn train(scatter x: {0}[n, 5], scatter y: i64[n]) {{
  let h = relu(x @ w1 + b1);
  let logits = h @ w2 + b2;
  let loss = mean(cross_entropy(logits, y));
  out loss: avg = loss;
  out g: avg = grad(loss, w1, b1, w2, b2);
}}
)", t),
          "train", {{{"n", 7}}, {{"n", 1}}, {{"n", 64}}});
}

TEST(GradCpu, SoftmaxRegressionTiedWeightsAndEmbedding) {
  check(R"(
shared w: f32[5, 4];
shared b: f32[4];
fn train(scatter x: f32[n, 5], scatter t: f32[n, 4]) {
  let loss = -mean(sum(softmax(t) * log_softmax(x @ w + b), axis=1));
  out g: avg = grad(loss, w, b);
}
)", "train", {{{"n", 6}}, {{"n", 33}}});
  check(R"(
shared w: f64[5, 3];
fn train(scatter x: f64[n, 5]) {
  let recon = tanh(x @ w) @ transpose(w);
  out g: avg = grad(mean((recon - x) ** 2) + 0.01 * sum(w * w), w);
}
)", "train", {{{"n", 8}}});
  check(R"(
shared emb: f32[6, 3];
shared v: f32[5, 2];
fn train(bcast idx: i64[m], bcast y: i64[m]) {
  let e = take(emb, idx);
  let z = concat(e, maximum(slice(e, 1, 3, axis=1), 0.1), axis=1);
  let loss = mean(cross_entropy(z @ v, y)) + 0.1 * max(abs(z));
  out g: avg = grad(loss, emb, v);
}
)", "train", {{{"m", 9}}, {{"m", 1}}}, {.scale = 1, .int_low = 0, .int_high = 1});
}

TEST(GradCpu, TiesAndSelections) {
  // concat(w, w) makes every maximum and minimum a tie, maximum(w, w) ties everywhere: the
  // compiled masks (x == max) must pick exactly what the reference picks.
  for (const char* t : {"f32", "f64"})
    check(fmt::format(R"(
shared w: {0}[4, 5];
shared u: {0}[5];
fn f(bcast c: bool[4, 1]) {{
  let ww = concat(w, w, axis=1);
  let loss = sum(max(ww, axis=1)) + sum(min(ww, axis=0) * concat(u, u)) + sum(prod(w, axis=1))
           + sum(maximum(w, w) * u) + sum(where(c, w, u * 2)) + sum(abs(w) + relu(u));
  out g: none = grad(loss, w, u);
}}
)", t), "f", {{}});
}

TEST(GradCpu, CumsumBothDirections) {
  // The gradient of a cumsum is a reversed cumsum and vice versa: both kernels run compiled.
  for (const char* t : {"f32", "f64"})
    check(fmt::format(R"(
shared w: {0}[4, 6];
fn train(scatter x: {0}[n, 4]) {{
  let c = cumsum(x @ w, axis=1);
  out g: avg = grad(mean(cumsum(c * c, axis=0, reverse=true)) + sum(cumsum(w, axis=0) * w), w);
}}
)", t), "train", {{{"n", 5}}, {{"n", 1}}, {{"n", 0}}});
}

TEST(GradCpu, EveryUpdateRule) {
  for (const char* name : {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adadelta", "adam", "adamax",
                           "adamw"}) {
    SCOPED_TRACE(name);
    ir::Module m = testing::parse("shared w: f32[4, 3]; shared b: f32[3]; shared s: f32;\n"
                                  "fn unused(bcast x: f32[3]) { out y: none = x; }");
    // With gradient clipping: the norm's reduction and the factor in f64 go through the backend too.
    const std::vector<std::pair<std::string, double>> lr = {{"lr", 0.05}, {"clip_norm", 0.5}};
    add_update_function(m, "train_step", std::vector<std::string>{"s", "w", "b"}, make_update_rule(name, lr));
    // Positive state values, as the rules' own steps would leave them.
    check(m, "train_step", {{}}, {.scale = 0.5});
  }
}

}  // namespace
}  // namespace synk::compiler
