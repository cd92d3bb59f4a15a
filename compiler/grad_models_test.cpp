// Gradient checks for whole models written in `.synk` and compiled by the front end: a 2-layer
// MLP with cross_entropy, softmax regression with soft labels, a tied-weight autoencoder that
// uses its parameter twice, an embedding model (take, concat, slice, maximum, log_softmax), each
// with a symbolic batch; every element of the flat gradient is compared with float64 central
// differences through the reference evaluator. The expanded IR must also print as `.synk` that
// the front end reads back to the same graph (what `synkc --emit=ir-grad` relies on).
#include <gtest/gtest.h>

#include "compiler/grad.h"
#include "compiler/grad_test_util.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

using dsl::HostTensor;
using ir::DType;
using testing::Rng;

struct Model {
  std::string name;
  std::string source;
  std::vector<std::string> vars;   // the grad's variables, in order
  std::function<std::vector<HostTensor>(Rng&)> inputs;
};
void PrintTo(const Model& m, std::ostream* os) { *os << m.name; }

HostTensor labels(Rng& rng, int64_t n, int64_t classes) {
  return testing::tensor_from(DType::I64, {n}, [&](size_t) { return double(rng.integer(0, classes - 1)); });
}

std::vector<Model> models() {
  return {
      {"mlp_cross_entropy", R"(
shared w1: f64[4, 6];
shared b1: f64[6];
shared w2: f64[6, 3];
shared b2: f64[3];
fn train(scatter x: f64[n, 4], scatter y: i64[n]) {
  let h = relu(x @ w1 + b1);
  let logits = h @ w2 + b2;
  let loss = mean(cross_entropy(logits, y));
  out loss: avg = loss;
  out g: avg = grad(loss, w1, b1, w2, b2);
}
)",
       {"w1", "b1", "w2", "b2"},
       [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {7, 4}), labels(rng, 7, 3)}; }},
      {"softmax_regression_soft_labels", R"(
shared w: f64[5, 4];
shared b: f64[4];
fn train(scatter x: f64[n, 5], scatter t: f64[n, 4]) {
  let p = softmax(x @ w + b, axis=-1);
  let loss = -mean(sum(t * log(p), axis=1));
  out loss: avg = loss;
  out g: avg = grad(loss, w, b);
}
)",
       {"w", "b"},
       [](Rng& rng) {
         HostTensor t = testing::uniform_tensor(rng, DType::F64, {6, 4}, 0, 1);
         for (int i = 0; i < 6; ++i) {
           double total = 0;
           for (int j = 0; j < 4; ++j) total += t.data[size_t(i * 4 + j)];
           for (int j = 0; j < 4; ++j) t.data[size_t(i * 4 + j)] /= total;
         }
         return std::vector{testing::uniform_tensor(rng, DType::F64, {6, 5}), t};
       }},
      {"tied_autoencoder_uses_parameter_twice", R"(
shared w: f64[5, 3];
shared c: f64[3];
fn train(scatter x: f64[n, 5]) {
  let code = tanh(x @ w + c);
  let recon = code @ transpose(w);
  let loss = mean((recon - x) ** 2) + 0.01 * sum(w * w);
  out loss: avg = loss;
  out g: avg = grad(loss, c, w);
}
)",
       {"c", "w"},
       [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {8, 5})}; }},
      {"embedding_take_concat_slice", R"(
shared emb: f64[6, 3];
shared v: f64[5, 2];
shared scale: f64;
fn train(bcast idx: i64[m], bcast y: i64[m]) {
  let e = take(emb, idx);
  let z = concat(e, maximum(slice(e, 1, 3, axis=1), 0.1) * scale, axis=1);
  let logits = z @ v;
  let loss = -mean(sum(log_softmax(logits) * one_hot(y, 2, dtype=f64), axis=1)) + 0.1 * max(abs(z));
  out loss: avg = loss;
  out g: avg = grad(loss, emb, v, scale);
}
)",
       {"emb", "v", "scale"},
       [](Rng& rng) {
         return std::vector{testing::tensor_from(DType::I64, {9}, [&](size_t) { return double(rng.integer(0, 5)); }),
                            labels(rng, 9, 2)};
       }},
      {"mean_squared_error_f32_params", R"(
shared w: f32[3, 2];
fn train(scatter x: f32[n, 3], scatter y: f32[n, 2]) {
  let d = cast(x @ w, f64) - cast(y, f64);
  let loss = mean(d * d);
  out loss: avg = loss;
  out g: avg = grad(loss, w);
}
)",
       {"w"},
       [](Rng& rng) {
         return std::vector{testing::uniform_tensor(rng, DType::F32, {5, 3}), testing::uniform_tensor(rng, DType::F32, {5, 2})};
       }},
  };
}

class ModelGradient : public ::testing::TestWithParam<Model> {};

TEST_P(ModelGradient, MatchesCentralDifferences) {
  const Model& model = GetParam();
  Rng rng(model.name);
  const ir::Module module = dsl::compile_source(model.name + ".synk", model.source);
  ASSERT_TRUE(has_gradients(module));
  const ir::Module expanded = expand_gradients(module);
  const std::vector<std::string> problems = ir::verify(expanded);
  ASSERT_TRUE(problems.empty()) << problems.front();
  ASSERT_FALSE(has_gradients(expanded));

  std::vector<HostTensor> shareds;
  for (const ir::SharedVar& s : module.shareds)
    shareds.push_back(testing::uniform_tensor(rng, s.type.dtype, testing::static_sizes(s.type), -1, 1));
  std::vector<int64_t> vars;
  for (const std::string& v : model.vars) vars.push_back(module.find_shared(v));
  testing::FiniteDifferenceOptions fd;
  if (module.shareds[size_t(vars[0])].type.dtype == DType::F32) fd = {1e-3, 1e-4};
  testing::check_gradient(expanded, "train", model.inputs(rng), shareds, 0, 1, vars, fd);
}

TEST_P(ModelGradient, ExpandedIrPrintsAsSynkThatReadsBack) {
  const Model& model = GetParam();
  const ir::Module expanded = expand_gradients(dsl::compile_source(model.name + ".synk", model.source));
  const std::string text = dsl::print_module(expanded);
  ir::Module reread;
  try {
    reread = dsl::compile_source(model.name + ".ir-grad.synk", text);
  } catch (const dsl::UserError& e) {
    FAIL() << e.what() << "\n--- printed:\n" << text;
  }
  std::string difference;
  EXPECT_TRUE(ir::structurally_equal(expanded, reread, &difference)) << difference << "\n--- printed:\n" << text;
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradient, ::testing::ValuesIn(models()),
                         [](const ::testing::TestParamInfo<Model>& info) { return info.param.name; });

}  // namespace
}  // namespace synk::compiler
