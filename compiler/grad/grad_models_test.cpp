// Gradient checks for whole models written in `.synk` and compiled by the front end: a penalty on
// the gradient in the input (WGAN-GP's), a 2-layer MLP with cross_entropy, softmax regression with
// soft labels, a tied-weight autoencoder that uses its parameter twice, an embedding model (take,
// concat, slice, maximum, log_softmax), four convolutional models (conv2d with every parameter,
// pooling, batch norm in both modes, a gradient penalty that differentiates the backward ops),
// each with a symbolic batch; every element of the flat gradient is compared with float64 central
// differences through the reference evaluator. The expanded IR must also print as `.synk` that
// the front end reads back to the same graph (what `synkc --emit=ir-grad` relies on).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "compiler/grad/grad.h"
#include "compiler/grad/grad_test_util.h"
#include "compiler/grad/update_rules.h"
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
      // WGAN-GP's penalty: the norm of the critic's gradient in its input, trained over the weights.
      {"input_gradient_penalty", R"(
shared w: f64[4, 3];
shared v: f64[3];
def critic(x, a, b) { return sum(tanh(x @ a) * b, axis=1); }
fn train(scatter x: f64[n, 4]) {
  let gx = grad(sum(critic(x, w, v)), x);
  let penalty = mean((sqrt(sum(gx * gx, axis=1) + 1e-12) - 1) ** 2);
  let loss = mean(critic(x, w, v)) + 10 * penalty;
  out loss: avg = loss;
  out g: avg = grad(loss, w, v);
}
)",
       {"w", "v"},
       [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {5, 4})}; }},
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

// Convolutional models: conv2d with every parameter, both pools, batch norm in both modes.
std::vector<Model> conv_models() {
  return {
      {"cnn_conv_batch_norm_max_pool", R"(
shared w1: f64[4, 2, 3, 3];
shared b1: f64[4];
shared gamma: f64[4];
shared beta: f64[4];
shared rm: f64[4];
shared rv: f64[4];
shared w2: f64[36, 3];
fn train(scatter x: f64[n, 2, 7, 6], scatter y: i64[n]) {
  let h = relu(conv2d(x, w1, b1, padding=1));
  let p = max_pool2d(batch_norm(h, gamma, beta, rm, rv, training=true), 2);
  let loss = mean(cross_entropy(flatten(p, axis=1) @ w2, y));
  out loss: avg = loss;
  out g: avg = grad(loss, w1, b1, gamma, beta, w2);
}
)",
       {"w1", "b1", "gamma", "beta", "w2"},
       [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {3, 2, 7, 6}), labels(rng, 3, 3)}; }},
      {"strided_dilated_grouped_conv_avg_pool", R"(
shared w: f64[4, 1, 3, 2];
shared w2: f64[2, 4, 1, 1];
shared v: f64[2];
fn train(scatter x: f64[n, 2, 9, 8]) {
  let c = conv2d(x, w, stride=[2, 1], padding=[1, 0, 2, 1], dilation=[1, 2], groups=2);
  let a = avg_pool2d(tanh(c), [2, 3], stride=1, padding=1, count_include_pad=false);
  let d = conv2d(a, w2, stride=2);
  let loss = mean(global_avg_pool(d) * v);
  out loss: avg = loss;
  out g: avg = grad(loss, w, w2, v);
}
)",
       {"w", "w2", "v"},
       [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {2, 2, 9, 8})}; }},
      {"same_padding_batch_norm_eval", R"(
shared w: f64[3, 3, 2, 4];
shared g: f64[3];
shared b: f64[3];
shared m: f64[3];
shared s: f64[3];
fn train(scatter x: f64[n, 3, 5, 5]) {
  let c = conv2d(x, w, padding="same");
  let y = batch_norm(c, g, b, m, s * s + 0.5, training=false, eps=0.01);
  let loss = mean(y * y);
  out loss: avg = loss;
  out g: avg = grad(loss, w, g, b, m, s);
}
)",
       {"w", "g", "b", "m", "s"},
       [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {2, 3, 5, 5})}; }},
      // A gradient penalty: the outer grad differentiates the backward ops of the inner one.
      {"second_derivative_through_conv_and_pools", R"(
shared w: f64[3, 2, 3, 3];
shared w2: f64[2, 3, 2, 2];
shared v: f64[2];
fn train(scatter x: f64[n, 2, 8, 8]) {
  let c = tanh(conv2d(x, w, padding=1));
  let p = max_pool2d(c, 2);
  let d = conv2d(p, w2, stride=2, padding=1);
  let a = avg_pool2d(d, 2, stride=1, padding=1, count_include_pad=false);
  let inner = mean(global_avg_pool(a) * v) + mean(a * a);
  let gi = grad(inner, w, w2);
  let loss = inner + sum(gi * gi);
  out loss: avg = loss;
  out g: avg = grad(loss, w, w2, v);
}
)",
       {"w", "w2", "v"},
       [](Rng& rng) { return std::vector{testing::uniform_tensor(rng, DType::F64, {2, 2, 8, 8})}; }},
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
  } catch (const synk::UserError& e) {
    FAIL() << e.what() << "\n--- printed:\n" << text;
  }
  std::string difference;
  EXPECT_TRUE(ir::structurally_equal(expanded, reread, &difference)) << difference << "\n--- printed:\n" << text;
}

// grad with respect to inputs: a scattered input's per-row gradient and a broadcast input beside
// a shared variable in one flat vector, against central differences of the loss in each input.
TEST(InputGradient, MatchesCentralDifferences) {
  Rng rng("InputGradient");
  const ir::Module module = dsl::compile_source("inputs.synk", R"(
shared w: f64[4, 3];
fn train(scatter x: f64[n, 4], bcast b: f64[3], scatter y: i64[n]) {
  let loss = mean(cross_entropy(tanh(x @ w) * b, y)) + sum(x * x) * 0.1;
  out loss: avg = loss;
  out dx: gather = grad(loss, x);
  out db: none = grad(loss, b, w);
}
)");
  const ir::Module expanded = expand_gradients(module);
  ASSERT_TRUE(ir::verify(expanded).empty());
  std::vector<HostTensor> inputs{testing::uniform_tensor(rng, DType::F64, {5, 4}),
                                 testing::uniform_tensor(rng, DType::F64, {3}), labels(rng, 5, 3)};
  const std::vector<HostTensor> shareds{testing::uniform_tensor(rng, DType::F64, {4, 3}, -1, 1)};
  const dsl::EvalResult base = dsl::evaluate(expanded, "train", inputs, shareds);
  auto loss_at = [&](const std::vector<HostTensor>& values) {
    return dsl::evaluate(expanded, "train", values, shareds).outputs.at(0).data.at(0);
  };
  for (size_t input : {0, 1}) {
    const HostTensor& analytic = base.outputs.at(input + 1);   // dx; db's first 3 elements are b's
    const std::vector<int64_t> want = input == 0 ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{15};
    ASSERT_EQ(analytic.shape, want);
    for (int64_t j = 0; j < inputs[input].size(); ++j) {
      std::vector<HostTensor> plus = inputs, minus = inputs;
      plus[input].data[size_t(j)] += 1e-6;
      minus[input].data[size_t(j)] -= 1e-6;
      const double numeric = (loss_at(plus) - loss_at(minus)) / 2e-6;
      EXPECT_NEAR(analytic.data[size_t(j)], numeric, 1e-6 * (1 + std::fabs(numeric))) << "input " << input << "[" << j << "]";
    }
  }
}

// docs/training.md's example: its hand-written update function must do exactly what
// add_update_function() generates for the same rule, and its gradient must be right.
std::string docs_example() {
  std::ifstream file(std::string(SYNK_SOURCE_DIR) + "/docs/training.md");
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  const size_t section = doc.find("## Example");
  const size_t begin = doc.find("```synk\n", section);
  const size_t end = doc.find("```", begin + 8);
  if (section == std::string::npos || begin == std::string::npos || end == std::string::npos) return {};
  return doc.substr(begin + 8, end - begin - 8);
}

TEST(DocsExample, HandWrittenUpdateMatchesGeneratedUpdate) {
  Rng rng("HandWrittenUpdateMatchesGeneratedUpdate");
  const std::string source = docs_example();
  ASSERT_FALSE(source.empty()) << "no ```synk block under '## Example' in docs/training.md";
  const ir::Module doc = expand_gradients(dsl::compile_source("training.md.synk", source));
  ASSERT_TRUE(ir::verify(doc).empty());

  // The generated form: the same parameters (declared first), without the doc's state and update.
  ir::Module generated = doc;
  generated.shareds.resize(4);
  generated.functions = {*doc.find_function("gradient")};
  add_update_function(generated, "train_step", std::vector<std::string>{"w1", "b1", "w2", "b2"},
                      UpdateRule::with_momentum(0.05));
  ASSERT_TRUE(ir::verify(generated).empty());
  // The generated form has the doc's variables (by name) plus the f64 hyper-parameter variables
  // train_step_lr and train_step_momentum, initialised to the constants the doc writes.
  ASSERT_EQ(generated.shareds.size(), doc.shareds.size() + 2);
  for (const ir::SharedVar& s : doc.shareds) {
    const int64_t g = generated.find_shared(s.name);
    ASSERT_GE(g, 0) << s.name;
    EXPECT_EQ(generated.shareds[size_t(g)].type, s.type) << s.name;
  }
  for (const auto& [name, value] : {std::pair<std::string, double>{"train_step_lr", 0.05}, {"train_step_momentum", 0.9}}) {
    const int64_t g = generated.find_shared(name);
    ASSERT_GE(g, 0) << name;
    EXPECT_EQ(std::get<ir::InitConstant>(generated.shareds[size_t(g)].init).value, value) << name;
  }

  std::vector<HostTensor> values;
  for (const ir::SharedVar& s : doc.shareds)
    values.push_back(testing::uniform_tensor(rng, s.type.dtype, testing::static_sizes(s.type), -0.1, 0.1));
  std::vector<HostTensor> doc_values = values, generated_values;
  for (const ir::SharedVar& s : generated.shareds) {
    const int64_t d = doc.find_shared(s.name);
    generated_values.push_back(d >= 0 ? values[size_t(d)]
                                      : HostTensor::filled(s.type.dtype, {}, std::get<ir::InitConstant>(s.init).value));
  }
  const HostTensor x = testing::uniform_tensor(rng, DType::F32, {3, 784}, 0, 1);
  const HostTensor y = labels(rng, 3, 10);
  for (int step = 0; step < 2; ++step) {
    const HostTensor grad = dsl::evaluate(doc, "gradient", std::vector{x, y}, doc_values).outputs[1];
    ASSERT_EQ(grad.shape, std::vector<int64_t>{203530});
    auto apply = [&](const ir::Module& m, std::vector<HostTensor>& state) {
      const ir::Function& fn = *m.find_function("train_step");
      const dsl::EvalResult r = dsl::evaluate(m, fn, std::vector{grad}, state);
      for (size_t u = 0; u < fn.updates.size(); ++u) state[size_t(fn.updates[u].shared)] = r.updates[u];
    };
    apply(doc, doc_values);
    apply(generated, generated_values);
    for (size_t s = 0; s < values.size(); ++s) {
      const size_t g = size_t(generated.find_shared(doc.shareds[s].name));
      for (size_t i = 0; i < values[s].data.size(); ++i)
        ASSERT_NEAR(doc_values[s].data[i], generated_values[g].data[i], 1e-12)
            << doc.shareds[s].name << "[" << i << "] after step " << step + 1;
    }
  }
  // The gradient of the example itself, on a few coordinates of each parameter block. A coordinate
  // whose +-1e-3 step moves some hidden unit across ReLU's kink has no central difference to compare
  // with (its one-sided differences disagree); another one is drawn instead.
  const HostTensor analytic = dsl::evaluate(doc, "gradient", std::vector{x, y}, values).outputs[1];
  const double loss0 = dsl::evaluate(doc, "gradient", std::vector{x, y}, values).outputs[0].data[0];
  const int64_t offsets[] = {0, 200704, 200960, 203520};
  for (int block = 0; block < 4; ++block) {
    int k = 0;
    for (int draws = 0; k < 3 && draws < 50; ++draws) {
      const int64_t j = rng.integer(0, values[size_t(block)].size() - 1);
      std::vector<HostTensor> plus = values, minus = values;
      // f32 parameters: the step is what survives rounding to float.
      const double v = values[size_t(block)].data[size_t(j)];
      const double up = double(float(v + 1e-3)), down = double(float(v - 1e-3));
      plus[size_t(block)].data[size_t(j)] = up;
      minus[size_t(block)].data[size_t(j)] = down;
      const double f_up = dsl::evaluate(doc, "gradient", std::vector{x, y}, plus).outputs[0].data[0];
      const double f_down = dsl::evaluate(doc, "gradient", std::vector{x, y}, minus).outputs[0].data[0];
      const double numeric = (f_up - f_down) / (up - down);
      const double forward = (f_up - loss0) / (up - v), backward = (loss0 - f_down) / (v - down);
      if (std::fabs(forward - backward) > 1e-4 * (1 + std::fabs(numeric))) continue;   // a kink in the step
      ++k;
      EXPECT_NEAR(analytic.data[size_t(offsets[block] + j)], numeric, 1e-4 * (1 + std::fabs(numeric)))
          << doc.shareds[size_t(block)].name << "[" << j << "]";
    }
    EXPECT_EQ(k, 3) << "fewer smooth coordinates than asked in " << doc.shareds[size_t(block)].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradient, ::testing::ValuesIn([] {
                           std::vector<Model> all = models(), conv = conv_models();
                           all.insert(all.end(), conv.begin(), conv.end());
                           return all;
                         }()),
                         [](const ::testing::TestParamInfo<Model>& info) { return info.param.name; });

}  // namespace
}  // namespace synk::compiler
