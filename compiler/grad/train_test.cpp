// Training steps declared in .synk, end to end: the expansion (compiler/grad/train.h) gives exactly the
// update function add_update_function makes for the declared rule, for every rule; a one-call
// synk::TrainStep (jit::Module::train_step) equals the gradient call, all_reduce(avg) and update
// call made separately, bit for bit, on 1, 2 and 3 ranks, with steps made before and after
// synk::fork(); the same step built with the C++ builder trains to the same bits; an sgd step
// matches a float64 reference; and misuse is reported naming the step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/testing.h"
#include "compiler/grad/linear_model_test_util.h"
#include "synk/jit.h"
#include "compiler/grad/train.h"
#include "dsl/builder.h"
#include "dsl/frontend.h"

using namespace synk;

namespace {

using synk::testing::error_of;

using StepData = synk::testing::LinearBatch;
using synk::testing::linear_model;
using synk::testing::random_batch;

void expect_same_bits(const Array& a, const Array& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  ASSERT_EQ(a.dtype, b.dtype) << what;
  EXPECT_EQ(0, std::memcmp(a.data<float>(), b.data<float>(), size_t(a.size()) * sizeof(float))) << what;
}

class OneCallStep : public ::testing::TestWithParam<int> {};

TEST_P(OneCallStep, EqualsTheThreeCallsBitForBit) {
  const int ranks = GetParam();
  const std::string source = linear_model("adam(lr=0.01)");
  // One module trained by the one-call step (made before the fork), one by the three calls, one
  // by a step made after the fork with the gradient in two packs.
  jit::Module one = jit::compile_string(source);
  TrainStep step = one.train_step("train");
  jit::Module three = jit::compile_string(source);
  jit::Module packed = jit::compile_string(source);
  ASSERT_EQ(ranks, synk::fork(ranks));
  TrainStep packed_step = packed.train_step("train", 2);
  Function gradient = three.function("train");
  Function update = three.function("opt_update");
  Var gradient_var = three.shared("opt_grads").var();
  EXPECT_EQ(step.gradient_var().name(), "opt_grads");
  EXPECT_EQ(step.update().name(), "opt_update");

  std::mt19937_64 rng(12345);
  for (int s = 0; s < 4; ++s) {
    StepData b = random_batch(10 + 3 * s, rng);
    std::vector<int64_t> rows;
    for (int64_t i = b.rows - 1; i >= 0; i -= 2) rows.push_back(i);   // a shuffled-looking subset
    Outputs a = step({b.x, b.y}, {.batch = rows});
    Outputs p = packed_step({b.x, b.y}, {.batch = rows});
    Outputs c = gradient({b.x, b.y}, {.batch = rows});
    // The step's reduction written out: the plain mean when the rows split evenly, else weighted.
    const std::vector<int64_t>& w = c.rank_weights();
    if (std::equal(w.begin() + 1, w.end(), w.begin())) all_reduce(gradient_var, Op::Avg);
    else all_reduce_weighted(gradient_var, std::vector<double>(w.begin(), w.end()));
    update({});
    expect_same_bits(a[0], c[0], fmt::format("loss_sum, step {}", s));
    expect_same_bits(p[0], c[0], fmt::format("loss_sum (2 packs), step {}", s));
    for (int r = 0; r < ranks; ++r)
      for (const char* name : {"w", "b", "opt_grads", "w_m", "w_v", "b_m", "b_v", "opt_update_t"}) {
        expect_same_bits(one.shared(name).get_value(r), three.shared(name).get_value(r),
                         fmt::format("{} on rank {}, step {}", name, r, s));
        expect_same_bits(packed.shared(name).get_value(r), three.shared(name).get_value(r),
                         fmt::format("{} (2 packs) on rank {}, step {}", name, r, s));
      }
  }
  // Training moved the parameters (the comparison above is not between untouched copies).
  jit::Module fresh = jit::compile_string(source);
  EXPECT_NE(fresh.shared("w").values<float>(), one.shared("w").values<float>());
  synk::close();
}

INSTANTIATE_TEST_SUITE_P(Ranks, OneCallStep, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return fmt::format("ranks{}", info.param); });

// The same model and step written with the C++ builder (ModuleBuilder::optimizer and
// FunctionBuilder::minimize) trains to the same bits as the .synk text on 2 ranks.
TEST(TrainStep, BuilderStepEqualsTheSynkStep) {
  using dsl::ModuleBuilder;
  using ir::DType;
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {4, 3}, dsl::init::normal(7, 0.0, 0.5));
  auto b = mb.shared("b", DType::F32, {3}, dsl::init::uniform(8, -0.5, 0.5));
  mb.optimizer("opt", "nesterov", {{"lr", 0.05}, {"momentum", 0.8}});
  auto train = mb.function("train");
  auto x = train.scatter("x", DType::F32, {"n", 4});
  auto y = train.scatter("y", DType::F32, {"n", 3});
  auto e = train.let("e", x.matmul(w) + b - y);
  auto losses = train.let("losses", dsl::sum(e * e, 1));
  train.out("loss_sum", dsl::sum(losses), ir::ReduceMode::Sum);
  train.minimize(dsl::mean(losses), {w, b}, "opt");
  auto evaluate = mb.function("evaluate");
  evaluate.out("y", evaluate.scatter("x", DType::F32, {"n", 4}).matmul(w) + b, ir::ReduceMode::Gather);

  jit::Module built = jit::compile(mb);
  jit::Module parsed = jit::compile_string(linear_model("nesterov(lr=0.05, momentum=0.8)"));
  TrainStep built_step = built.train_step("train");
  TrainStep parsed_step = parsed.train_step("train");
  ASSERT_EQ(2, synk::fork(2));
  std::mt19937_64 rng(2024);
  for (int s = 0; s < 3; ++s) {
    StepData batch = random_batch(9 + s, rng);
    Outputs a = built_step({batch.x, batch.y});
    Outputs c = parsed_step({batch.x, batch.y});
    expect_same_bits(a[0], c[0], fmt::format("loss_sum, step {}", s));
    for (int r = 0; r < 2; ++r)
      for (const char* name : {"w", "b", "opt_grads", "w_velocity", "b_velocity"})
        expect_same_bits(built.shared(name).get_value(r), parsed.shared(name).get_value(r),
                         fmt::format("{} on rank {}, step {}", name, r, s));
  }
  synk::close();
}

// sgd on 2 ranks against the gradient of the mean squared error computed in float64.
TEST(TrainStep, SgdStepMatchesFloat64Reference) {
  const double lr = 0.1;
  jit::Module mod = jit::compile_string(linear_model("sgd(lr=0.1)"));
  const std::vector<float> w0 = mod.shared("w").values<float>(), b0 = mod.shared("b").values<float>();
  std::vector<double> w(w0.begin(), w0.end()), bias(b0.begin(), b0.end());
  ASSERT_EQ(2, synk::fork(2));
  TrainStep step = mod.train_step("train");
  std::mt19937_64 rng(99);
  for (int s = 0; s < 3; ++s) {
    StepData b = random_batch(9 + s, rng);
    std::vector<double> gw(12, 0), gb(3, 0);
    double loss = 0;
    for (int64_t i = 0; i < b.rows; ++i)
      for (int j = 0; j < 3; ++j) {
        double e = bias[size_t(j)] - b.ys[size_t(i * 3 + j)];
        for (int k = 0; k < 4; ++k) e += double(b.xs[size_t(i * 4 + k)]) * w[size_t(k * 3 + j)];
        loss += e * e;
        gb[size_t(j)] += 2 * e / double(b.rows);
        for (int k = 0; k < 4; ++k) gw[size_t(k * 3 + j)] += 2 * e * b.xs[size_t(i * 4 + k)] / double(b.rows);
      }
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * gw[i];
    for (size_t i = 0; i < bias.size(); ++i) bias[i] -= lr * gb[i];
    Outputs out = step({b.x, b.y});
    EXPECT_NEAR(to_vector<float>(out[0])[0], loss, 1e-4 * std::max(1.0, loss));
    for (int r = 0; r < 2; ++r) {
      std::vector<float> got_w = mod.shared("w").values<float>(r), got_b = mod.shared("b").values<float>(r);
      for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(got_w[i], w[i], 1e-5) << "w[" << i << "] rank " << r;
      for (size_t i = 0; i < bias.size(); ++i) EXPECT_NEAR(got_b[i], bias[i], 1e-5) << "b[" << i << "] rank " << r;
    }
  }
  synk::close();
}

// Every rule of make_update_rule, declared in .synk with non-default hyper-parameters, expands to
// exactly the update function add_update_function makes (update_rules_test checks those against
// a float64 reference), and one step of it runs.
TEST(TrainStep, EveryRuleIsReachableFromSynk) {
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>> rules = {
      {"sgd", {{"lr", 0.2}}},
      {"momentum", {{"lr", 0.05}, {"momentum", 0.8}}},
      {"nesterov", {{"lr", 0.05}, {"momentum", 0.7}}},
      {"adagrad", {{"lr", 0.03}, {"epsilon", 1e-5}}},
      {"rmsprop", {{"lr", 0.002}, {"rho", 0.8}, {"epsilon", 1e-5}}},
      {"adadelta", {{"lr", 0.5}, {"rho", 0.9}, {"epsilon", 1e-5}}},
      {"adam", {{"lr", 0.003}, {"beta1", 0.8}, {"beta2", 0.99}, {"epsilon", 1e-7}}},
      {"adamax", {{"lr", 0.004}, {"beta1", 0.85}, {"beta2", 0.995}, {"epsilon", 1e-7}}},
      {"adamw", {{"lr", 0.003}, {"beta2", 0.99}, {"weight_decay", 0.05}, {"clip_norm", 1.0}}},
  };
  std::vector<jit::Module> modules;
  for (const auto& [name, hyper] : rules) {
    std::vector<std::string> args;
    for (const auto& [k, v] : hyper) args.push_back(fmt::format("{}={}", k, v));
    const std::string source = linear_model(fmt::format("{}({})", name, fmt::join(args, ", ")));
    ir::Module declared = dsl::compile_source("<" + name + ">", source);
    ir::Module by_hand = declared;
    compiler::expand_training_steps(declared);
    compiler::add_update_function(by_hand, "opt_update", std::vector<std::string>{"w", "b"},
                                  compiler::make_update_rule(name, hyper), {}, "opt");
    compiler::read_input_from_shared(by_hand, "opt_update", "grad", "opt_grads");
    std::string difference;
    EXPECT_TRUE(ir::structurally_equal(declared, by_hand, &difference)) << name << ": " << difference;
    modules.push_back(jit::compile_string(source));
    modules.back().compile_all();
  }
  ASSERT_EQ(2, synk::fork(2));
  std::mt19937_64 rng(5);
  for (size_t i = 0; i < modules.size(); ++i) {
    std::vector<float> before = modules[i].shared("w").values<float>();
    StepData b = random_batch(8, rng);
    modules[i].train_step("train")({b.x, b.y});
    std::vector<float> after = modules[i].shared("w").values<float>();
    EXPECT_NE(before, after) << rules[i].first;
    EXPECT_EQ(after, modules[i].shared("w").values<float>(1)) << rules[i].first << ": the ranks disagree";
    for (float v : after) EXPECT_TRUE(std::isfinite(v)) << rules[i].first;
  }
  synk::close();
}

TEST(TrainStep, MisuseIsReportedNamingTheStep) {
  jit::Module mod = jit::compile_string(linear_model("momentum(lr=0.1)"));
  EXPECT_EQ(mod.train_step_names(), std::vector<std::string>{"train"});
  std::string e = error_of<UsageError>([&] { mod.train_step("evaluate"); });
  EXPECT_HAS(e, "'evaluate' is not a training function");
  EXPECT_HAS(e, "the module has: train");
  EXPECT_HAS(error_of<UsageError>([&] { mod.train_step("trian"); }), "did you mean 'train'?");
  TrainStep step = mod.train_step("train");
  std::mt19937_64 rng(1);
  StepData b = random_batch(4, rng);
  e = error_of<UsageError>([&] { step({b.x}); });   // one input missing, before the fork
  EXPECT_HAS(e, "training step 'train', gradient function:");
  e = error_of<UsageError>([&] { TrainStep()({}); });
  EXPECT_HAS(e, "empty synk::TrainStep");
  e = error_of<UsageError>([&] { TrainStep("s", mod.function("evaluate"), mod.shared("opt_grads").var(),
                                           mod.function("opt_update")); });
  EXPECT_HAS(e, "does not update the gradient variable 'opt_grads'");
  e = error_of<UsageError>([&] { TrainStep("s", mod.function("train"), mod.shared("opt_grads").var(),
                                           mod.function("evaluate")); });
  EXPECT_HAS(e, "must take no inputs");
  e = error_of<UsageError>([&] { step.set_num_packs(-1); });
  EXPECT_HAS(e, "num_packs must be >= 0");
  // num_packs: the optimizer's declaration, unless the caller asks for another.
  EXPECT_EQ(step.num_packs(), 0);
  jit::Module declared_packs = jit::compile_string(linear_model("sgd(lr=0.1, num_packs=2)"));
  EXPECT_EQ(declared_packs.train_step("train").num_packs(), 2);
  EXPECT_EQ(declared_packs.train_step("train", 3).num_packs(), 3);

  ASSERT_EQ(2, synk::fork(2));
  StepData wrong = random_batch(4, rng);
  e = error_of<UsageError>([&] { step({wrong.y}); });   // one input missing, after the fork
  EXPECT_HAS(e, "training step 'train', gradient function:");
  step({wrong.x, wrong.y});   // and the next call works
  synk::close();

  // A module whose steps are expanded already cannot go through jit::compile again.
  EXPECT_HAS(error_of<UsageError>([&] { jit::compile(mod.ir()); }), "already expanded");
  // The optimizer can be replaced before expansion, checked like a declaration.
  ir::Module ir = dsl::compile_source("<m>", linear_model("momentum(lr=0.1)"));
  std::vector<std::pair<std::string, double>> hyper = {{"lr", 0.01}};
  compiler::set_optimizer(ir, "opt", "adam", hyper);
  EXPECT_EQ(ir.optimizers[0].rule, "adam");
  EXPECT_HAS(error_of<synk::UserError>([&] { compiler::set_optimizer(ir, "nope", "adam", hyper); }),
             "no optimizer 'nope' (it has: opt)");
  std::vector<std::pair<std::string, double>> bad = {{"lr", 0.01}, {"rho", 2.0}};
  EXPECT_HAS(error_of<synk::UserError>([&] { compiler::set_optimizer(ir, "opt", "adam", bad); }),
             "has no hyper-parameter 'rho'");
  jit::Module adam = jit::compile(ir);
  EXPECT_NO_THROW(adam.shared("w_m"));
}

}  // namespace
