// Tests of the C++ expression builder: for every example in examples/*.synk and for a program
// that uses every operation and literal rule, the builder's module must be structurally equal
// (same nodes in the same order, same types, attributes, outputs and updates) to what the .synk
// front end builds. Misuse, which both must reject, is tested in builder_rejects_test.cpp.
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "dsl/builder.h"
#include "dsl/builder_testing.h"
#include "ir/evaluator.h"
#include "dsl/frontend.h"

namespace synk::dsl {
namespace {

using ir::DType;
using ir::ReduceMode;
using synk::testing::expect_user_error;
using testing::examples_dir;
using testing::expect_same_module;
using testing::read_file;

// ---- the examples, written with the builder ----------------------------------------------------

ir::Module build_intro() {
  ModuleBuilder mb;
  auto f = mb.function("f");
  auto x = f.scatter("x", DType::F32, {"n", 10});
  auto y = f.bcast("y", DType::F32, {10});
  f.out("z", mean(x.matmul(y), 0), ReduceMode::Avg);
  return mb.build();
}

ir::Module build_shared_variable() {
  ModuleBuilder mb;
  auto s = mb.shared("s", DType::F32, {2}, init::ones());
  auto f = mb.function("f");
  auto x = f.scatter("x", DType::F32, {"n", 2});
  f.update(s, sum(x * s, 0));
  return mb.build();
}

ir::Module build_multi_output() {
  ModuleBuilder mb;
  auto f = mb.function("stats");
  auto x = f.scatter("x", DType::F32, {"n", 3});
  auto w = f.bcast("w", DType::F32, {3});
  auto scores = f.let("scores", x.matmul(w));
  f.out("mean_score", mean(scores));
  f.out("total", sum(x, 0), ReduceMode::Sum);
  f.out("largest", max(x), ReduceMode::Max);
  f.out("positive", sum(cast(scores > 0, DType::I64)), ReduceMode::Sum);
  f.out("all_scores", scores, ReduceMode::Gather);
  return mb.build();
}

ir::Module build_mlp() {
  ModuleBuilder mb;
  auto w1 = mb.shared("w1", DType::F32, {784, 256}, init::normal(1, 0, 0.05));
  auto b1 = mb.shared("b1", DType::F32, {256});
  auto w2 = mb.shared("w2", DType::F32, {256, 256}, init::normal(2, 0, 0.05));
  auto b2 = mb.shared("b2", DType::F32, {256});
  auto w3 = mb.shared("w3", DType::F32, {256, 10}, init::normal(3, 0, 0.05));
  auto b3 = mb.shared("b3", DType::F32, {10});
  // The two functions share their forward pass; in C++ it is one helper.
  auto forward = [&](FunctionBuilder& f) {
    auto images = f.scatter("images", DType::F32, {"n", 784});
    auto labels = f.scatter("labels", DType::I64, {"n"});
    auto h1 = f.let("h1", relu(images.matmul(w1) + b1));
    auto h2 = f.let("h2", relu(h1.matmul(w2) + b2));
    auto logits = f.let("logits", h2.matmul(w3) + b3);
    return std::pair{logits, labels};
  };
  auto loss = mb.function("loss");
  auto [logits, labels] = forward(loss);
  loss.out("loss", mean(cross_entropy(logits, labels)));
  loss.out("accuracy", mean(cast(argmax(logits, 1) == labels, DType::F32)));

  auto gradient = mb.function("gradient");
  auto [logits2, labels2] = forward(gradient);
  auto l = gradient.let("loss", mean(cross_entropy(logits2, labels2)));
  gradient.out("grads", grad(l, {w1, b1, w2, b2, w3, b3}));
  return mb.build();
}

// examples/fashion_mnist/mlp.synk: an optimizer and two training functions that share it.
ir::Module build_fashion_mnist_mlp() {
  ModuleBuilder mb;
  auto w1 = mb.shared("w1", DType::F32, {784, 256}, init::uniform(1, -0.0357142857, 0.0357142857));
  auto b1 = mb.shared("b1", DType::F32, {256}, init::uniform(2, -0.0357142857, 0.0357142857));
  auto w2 = mb.shared("w2", DType::F32, {256, 256}, init::uniform(3, -0.0625, 0.0625));
  auto b2 = mb.shared("b2", DType::F32, {256}, init::uniform(4, -0.0625, 0.0625));
  auto w3 = mb.shared("w3", DType::F32, {256, 10}, init::uniform(5, -0.0625, 0.0625));
  auto b3 = mb.shared("b3", DType::F32, {10}, init::uniform(6, -0.0625, 0.0625));
  mb.optimizer("opt", "momentum", {{"lr", 0.05}, {"momentum", 0.9}});
  // The file's helpers (docs/builder.md, "Helpers").
  auto dense = mb.helper("dense", [](FunctionBuilder&, const Expr& x, const Expr& w, const Expr& b) {
    return relu(x.matmul(w) + b);
  });
  auto forward = mb.helper("logits_of", [&](FunctionBuilder& f, const Expr& images) {
    auto x = f.let("x", cast(images, DType::F32) / 255);
    auto h1 = f.let("h1", dense(f, x, w1, b1));
    auto h2 = f.let("h2", dense(f, h1, w2, b2));
    return h2.matmul(w3) + b3;
  });
  auto logits_of = [&](FunctionBuilder& f, const Expr& images) { return f.let("logits", forward(f, images)); };
  auto step = [&](FunctionBuilder& f, const Expr& images, const Expr& labels) {
    auto losses = f.let("losses", cross_entropy(logits_of(f, images), labels));
    f.out("loss_sum", sum(losses), ReduceMode::Sum);
    f.minimize(mean(losses), {w1, b1, w2, b2, w3, b3}, "opt");
  };
  // The front end declares every shared variable before it reads a function, so the gradient
  // variable that the first minimize adds comes after these two, written later in the file.
  auto train_images = mb.shared("train_images", DType::U8, {"m", 784}, init::zeros(), true);
  auto train_labels = mb.shared("train_labels", DType::I64, {"m"}, init::zeros(), true);
  auto train = mb.function("train");
  auto images = train.scatter("images", DType::U8, {"n", 784});
  auto labels = train.scatter("labels", DType::I64, {"n"});
  step(train, images, labels);
  auto device = mb.function("train_device");
  step(device, train_images, train_labels);
  auto evaluate = mb.function("evaluate");
  auto eval_images = evaluate.scatter("images", DType::U8, {"n", 784});
  auto eval_labels = evaluate.scatter("labels", DType::I64, {"n"});
  auto logits = logits_of(evaluate, eval_images);
  evaluate.out("loss", mean(cross_entropy(logits, eval_labels)));
  evaluate.out("accuracy", mean(cast(argmax(logits, 1) == eval_labels, DType::F32)));
  return mb.build();
}

TEST(BuilderExamples, OptimizersAndTrainingStepsBuildTheSameModuleAsTheFrontEnd) {
  const std::filesystem::path file = examples_dir() / "fashion_mnist" / "mlp.synk";
  const ir::Module parsed = compile_source(file.string(), read_file(file));
  const ir::Module built = build_fashion_mnist_mlp();
  ASSERT_EQ(built.optimizers.size(), 1u);
  EXPECT_EQ(built.optimizers[0].gradient, built.find_shared("opt_grads"));
  ASSERT_EQ(built.train_steps.size(), 2u);
  EXPECT_EQ(built.train_steps[1].function, "train_device");
  expect_same_module(built, parsed);
}

// A .synk helper with two results, called at two dtypes and shapes and from another helper,
// builds the same module as the same helpers made with ModuleBuilder::helper, whose lets (the
// same names in two calls) are their own.
TEST(BuilderHelpers, AHelperBuildsWhatASynkHelperBuilds) {
  const std::string text = R"(
shared scale: f64 = 0.5;
def moments(x: f64[n, k]) {
  let centered = x - mean(x, axis=0, keepdims=true);
  return mean(centered * centered, axis=0), sum(x, axis=0);
}
def affine(x, w, b) { return x @ w + b * 2; }
def whitened(x) {
  let var, total = moments(x);
  return var * scale + total;
}
fn f(scatter x: f32[n, 3], bcast w: f32[3, 4], bcast b: f32[4], bcast v: f64[5, 2], bcast c: f64[2]) {
  let y = affine(x, w, b);
  let z = affine(transpose(v), v, c);
  let var, total = moments(cast(y, f64));
  out spread: gather = var + total;
  out z: avg = sum(whitened(v)) + sum(z);
}
)";
  ModuleBuilder mb;
  auto scale = mb.shared("scale", DType::F64, {}, init::constant(0.5));
  auto moments = mb.helper("moments", [](FunctionBuilder& f, const Expr& x) {
    auto centered = f.let("centered", x - mean(x, 0, true));
    return std::pair{mean(centered * centered, 0), sum(x, 0)};
  });
  auto affine = mb.helper("affine", [](FunctionBuilder&, const Expr& x, const Expr& w, const Expr& b) {
    return x.matmul(w) + b * 2;
  });
  auto whitened = mb.helper("whitened", [&](FunctionBuilder& f, const Expr& x) {
    auto [var_value, total_value] = moments(f, x);
    auto var = f.let("var", var_value);
    auto total = f.let("total", total_value);
    return var * scale + total;
  });
  auto f = mb.function("f");
  auto x = f.scatter("x", DType::F32, {"n", 3});
  auto w = f.bcast("w", DType::F32, {3, 4});
  auto b = f.bcast("b", DType::F32, {4});
  auto v = f.bcast("v", DType::F64, {5, 2});
  auto c = f.bcast("c", DType::F64, {2});
  auto y = f.let("y", affine(f, x, w, b));
  auto z = f.let("z", affine(f, transpose(v), v, c));
  auto [var_value, total_value] = moments(f, cast(y, DType::F64));
  auto var = f.let("var", var_value);
  auto total = f.let("total", total_value);
  f.out("spread", var + total, ReduceMode::Gather);
  // A helper's lets are written when C++ calls it: here that is where the .synk walk reaches it.
  f.out("z", sum(whitened(f, v)) + sum(z));
  expect_same_module(mb.build(), compile_source("helpers.synk", text));
}

// A UserError inside a helper names each call on the way there; a helper may not be named like
// an operation or like another global; C++ recursion that ends is fine (it unrolls).
TEST(BuilderHelpers, ErrorsNameTheHelperAndItsCaller) {
  ModuleBuilder mb;
  auto dense = mb.helper("dense", [](FunctionBuilder&, const Expr& x, const Expr& w) { return relu(x.matmul(w)); });
  auto outer = mb.helper("outer", [&](FunctionBuilder& f, const Expr& x, const Expr& w) {
    return f.let("h", dense(f, x, w)) * 2;
  });
  auto f = mb.function("f");
  auto x = f.bcast("x", DType::F32, {2, 3});
  auto w = f.bcast("w", DType::F32, {4, 5});
  expect_user_error([&] { dense(f, x, w); },
                    {"matmul(f32[2, 3], f32[4, 5]) in function 'f': inner dimensions of '@' do not match: [2, 3] "
                    "and [4, 5] (3 vs 4)\n  in call to helper 'dense' from function 'f'"});
  expect_user_error([&] { outer(f, x, w); },
                    {"(3 vs 4)\n  in call to helper 'dense' from helper 'outer'\n  in call to helper 'outer' from "
                    "function 'f'"});
  expect_user_error([&] { mb.helper("relu", [](FunctionBuilder&, const Expr& e) { return e; }); },
                    {"helper 'relu' has the name of a built-in operation"});
  expect_user_error([&] { mb.helper("f", [](FunctionBuilder&, const Expr& e) { return e; }); },
                    {"'f' is already declared as a function"});
  std::function<Expr(FunctionBuilder&, const Expr&, int)> layers;
  auto stack = mb.helper("deep", [&](FunctionBuilder& g, const Expr& h, int n) {
    return n == 0 ? h : layers(g, g.let("h", relu(h)), n - 1);
  });
  layers = [&](FunctionBuilder& g, const Expr& h, int n) { return stack(g, h, n); };
  f.out("y", stack(f, x, 3));
  const ir::Module m = mb.build();
  EXPECT_EQ(m.functions[0].nodes.size(), 4u);   // x and three relus
}

TEST(BuilderTraining, AFailedMinimizeChangesNothing) {
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {2});
  mb.optimizer("opt", "sgd", {{"lr", 0.1}});
  auto f = mb.function("f");
  auto x = f.bcast("x", DType::F32, {2});
  f.out("o", sum(x * w));
  auto g = mb.function("g");
  auto y = g.bcast("y", DType::F32, {2});
  g.out("p", sum(y));
  expect_user_error([&] { g.minimize(sum(x * w), {w}, "opt"); }, {"function 'g' uses an expression of function 'f'"});
  const ir::Module built = mb.build();
  EXPECT_EQ(built.find_shared("opt_grads"), -1) << "no gradient variable was made";
  EXPECT_EQ(built.optimizers.at(0).gradient, -1);
  EXPECT_TRUE(built.train_steps.empty());
  g.minimize(sum(y * w), {w}, "opt");   // the builders are still usable
  EXPECT_EQ(mb.build().train_steps.size(), 1u);
}

TEST(BuilderTraining, OneVariableAndNumPacks) {
  const char* synk = "shared w: f32[3, 2]; optimizer o = adam(lr=0.01, num_packs=2);\n"
                     "fn f(scatter x: f32[n, 3]) { minimize mean(x @ w) over w using o; }";
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {3, 2});
  mb.optimizer("o", "adam", {{"lr", 0.01}, {"num_packs", 2}});
  auto f = mb.function("f");
  f.minimize(mean(f.scatter("x", DType::F32, {"n", 3}).matmul(w)), {w}, "o");
  const ir::Module built = mb.build();
  EXPECT_EQ(built.optimizers.at(0).num_packs, 2);
  expect_same_module(built, compile_source("one.synk", synk));
}

const std::map<std::string, std::function<ir::Module()>>& builder_examples() {
  static const std::map<std::string, std::function<ir::Module()>> examples = {
      {"intro.synk", build_intro},
      {"mlp.synk", build_mlp},
      {"multi_output.synk", build_multi_output},
      {"shared_variable.synk", build_shared_variable},
  };
  return examples;
}

TEST(BuilderExamples, EveryExampleBuildsTheSameModuleAsTheFrontEnd) {
  size_t compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples_dir())) {
    if (entry.path().extension() != ".synk") continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    auto it = builder_examples().find(name);
    if (it == builder_examples().end()) {
      ADD_FAILURE() << "examples/" << name << " has no builder counterpart in dsl/builder_test.cpp";
      continue;
    }
    const ir::Module parsed = compile_source(entry.path().string(), read_file(entry.path()));
    expect_same_module(it->second(), parsed);
    ++compared;
  }
  EXPECT_GE(compared, builder_examples().size());
}

TEST(BuilderExamples, ComparisonNoticesADifference) {
  // The comparison is not vacuous: a one-attribute change (axis 0 vs all axes) is caught.
  ModuleBuilder mb;
  auto s = mb.shared("s", DType::F32, {2}, init::ones());
  auto f = mb.function("f");
  auto x = f.scatter("x", DType::F32, {"n", 2});
  f.update(s, sum(x * s, 0) + 0 * sum(x));
  const ir::Module parsed = compile_source("shared_variable.synk", read_file(examples_dir() / "shared_variable.synk"));
  EXPECT_FALSE(ir::structurally_equal(mb.build(), parsed));
}

TEST(BuilderExamples, BuiltSharedVariableExampleEvaluatesToTheGuidesAnswer) {
  const ir::Module m = build_shared_variable();
  const std::vector<HostTensor> inputs{HostTensor::make(DType::F32, {4, 2}, {1, 1, 2, 2, 3, 3, 4, 4})};
  const std::vector<HostTensor> shareds{HostTensor::make(DType::F32, {2}, {1, 1})};
  const EvalResult r = evaluate(m, "f", inputs, shareds);
  ASSERT_EQ(r.updates.size(), 1u);
  EXPECT_EQ(r.updates[0].data, (std::vector<double>{10, 10}));
}

// ---- every operation and literal rule, against the front end ----------------------------------

constexpr const char* kEverything = R"(
shared w: f32[4, 3] = uniform(seed=7, low=-1, high=1);
shared v: f32[3] = 0.5;
shared counts: i32[5] = zeros;
shared rows: f64[r, 4] = zeros sliceable;

fn everything(scatter x: f32[n, 4], scatter y: i32[n], bcast idx: i64[k], bcast flags: bool[3]) {
  let two = 2;
  let h = x @ w;
  let a = -h * two + 1.5;
  let c = where(h > 0, h, 0);
  let d = maximum(a, c) - minimum(a, two) / sqrt(abs(h) + 1) ** 2;
  let e = exp(log(sigmoid(tanh(relu(d)))));
  let p = softmax(e);
  let q = log_softmax(e, axis=0);
  let ce = cross_entropy(e, y);
  let ce2 = cross_entropy(q, p);
  let oh = one_hot(y, 3, dtype=f64);
  let t = take(w, idx);
  let cat = concat(h, e, p, axis=1);
  let sl = slice(cat, 1, -2, axis=1);
  let r2 = reshape(sl, [n, -1]);
  let fl = flatten(w);
  let tr = transpose(w);
  let tp = transpose(cat, [1, 0]);
  let bt = broadcast_to(v, [4, 3]);
  let logic = !(flags && (v > 0.1)) || flags == true;
  let nm = neg(matmul(x, w)) + pow(h, 2) * -2;
  let k1 = cast(2.5, i32) + cast(2, i64);
  out o1: gather = p;
  out o2: sum = sum(ce) + sum(ce2);
  out o3: gather = argmax(q, axis=1);
  out o4: sum = sum(oh, axis=[0, -1], keepdims=true);
  out o5 = t;
  out o6: gather = r2;
  out o7: sum = prod(fl) * mean(tr) + min(tp) + max(nm);
  out o8: sum = cast(logic, i32);
  out o9: max = max(bt, axis=0);
  out o10: sum = sum(cast(argmax(e), i64));
  out o11 = 3.0;
  out o12: sum = two;
  out o13 = mean(take(rows, idx), axis=0);
  out o14: sum = k1;
  out o15: sum = sum(where(!true, y, 3));
  out o16: min = min(concat(cast(counts, f32), v, axis=0) - inf);
  out o17: gather = grad(sum(ce), x);
  update counts: sum = counts + 1;
  update v = v - 0.1 * grad(mean(ce), v);
}

fn second(bcast z: f64[k, 2]) {
  out g: gather = z * 2;
}
)";

// The same program through the builder, statement by statement.
ir::Module build_everything() {
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {4, 3}, init::uniform(7, -1, 1));
  auto v = mb.shared("v", DType::F32, {3}, init::constant(0.5));
  auto counts = mb.shared("counts", DType::I32, {5});
  auto rows = mb.shared("rows", DType::F64, {"r", 4}, init::zeros(), /*sliceable=*/true);
  auto f = mb.function("everything");
  auto x = f.scatter("x", DType::F32, {"n", 4});
  auto y = f.scatter("y", DType::I32, {"n"});
  auto idx = f.bcast("idx", DType::I64, {"k"});
  auto flags = f.bcast("flags", DType::Bool, {3});
  auto two = f.let("two", 2);
  auto h = f.let("h", x.matmul(w));
  auto a = f.let("a", -h * two + 1.5);
  auto c = f.let("c", where(h > 0, h, 0));
  auto d = f.let("d", maximum(a, c) - minimum(a, two) / pow(sqrt(abs(h) + 1), 2));
  auto e = f.let("e", exp(log(sigmoid(tanh(relu(d))))));
  auto p = f.let("p", softmax(e));
  auto q = f.let("q", log_softmax(e, 0));
  auto ce = f.let("ce", cross_entropy(e, y));
  auto ce2 = f.let("ce2", cross_entropy(q, p));
  auto oh = f.let("oh", one_hot(y, 3, DType::F64));
  auto t = f.let("t", take(w, idx));
  auto cat = f.let("cat", concat({h, e, p}, 1));
  auto sl = f.let("sl", slice(cat, 1, -2, 1));
  auto r2 = f.let("r2", reshape(sl, {"n", -1}));
  auto fl = f.let("fl", flatten(w));
  auto tr = f.let("tr", transpose(w));
  auto tp = f.let("tp", transpose(cat, {1, 0}));
  auto bt = f.let("bt", broadcast_to(v, {4, 3}));
  auto logic = f.let("logic", !(flags && (v > 0.1)) || flags == true);
  auto nm = f.let("nm", neg(matmul(x, w)) + pow(h, 2) * -2);
  auto k1 = f.let("k1", cast(2.5, DType::I32) + cast(2, DType::I64));
  f.out("o1", p, ReduceMode::Gather);
  f.out("o2", sum(ce) + sum(ce2), ReduceMode::Sum);
  f.out("o3", argmax(q, 1), ReduceMode::Gather);
  f.out("o4", sum(oh, {0, -1}, true), ReduceMode::Sum);
  f.out("o5", t);
  f.out("o6", r2, ReduceMode::Gather);
  f.out("o7", prod(fl) * mean(tr) + min(tp) + max(nm), ReduceMode::Sum);
  f.out("o8", cast(logic, DType::I32), ReduceMode::Sum);
  f.out("o9", max(bt, 0), ReduceMode::Max);
  f.out("o10", sum(cast(argmax(e), DType::I64)), ReduceMode::Sum);
  f.out("o11", 3.0);
  f.out("o12", two, ReduceMode::Sum);
  f.out("o13", mean(take(rows, idx), 0));
  f.out("o14", k1, ReduceMode::Sum);
  f.out("o15", sum(where(!Expr(true), y, 3)), ReduceMode::Sum);
  f.out("o16", min(concat({cast(counts, DType::F32), v}, 0) - std::numeric_limits<double>::infinity()),
        ReduceMode::Min);
  f.out("o17", grad(sum(ce), x), ReduceMode::Gather);
  f.update(counts, counts + 1, ReduceMode::Sum);
  f.update(v, v - 0.1 * grad(mean(ce), v));
  auto g = mb.function("second");
  auto z = g.bcast("z", DType::F64, {"k", 2});
  g.out("g", z * 2, ReduceMode::Gather);
  return mb.build();
}

TEST(BuilderEverything, EveryOperationMatchesTheFrontEnd) {
  const ir::Module parsed = compile_source("everything.synk", kEverything);
  expect_same_module(build_everything(), parsed);
}

// ---- literals, types and the API's conveniences ----------------------------------------------

TEST(BuilderLiterals, WeakLiteralsFollowTheLanguageRules) {
  ModuleBuilder mb;
  auto f = mb.function("f");
  auto i = f.bcast("i", DType::I32, {2});
  auto u = f.bcast("u", DType::U8, {2});
  auto d = f.bcast("d", DType::F64, {2});
  auto b = f.bcast("b", DType::Bool, {2});
  EXPECT_EQ((i * 2).dtype(), DType::I32);        // an int literal keeps the tensor's dtype
  EXPECT_EQ((u + 1).dtype(), DType::U8);
  EXPECT_EQ((i * 0.5).dtype(), DType::F32);      // a float literal with an integer tensor: f32
  EXPECT_EQ((d * 0.5f).dtype(), DType::F64);     // a float literal keeps a float tensor's dtype
  EXPECT_EQ((b == true).dtype(), DType::Bool);
  EXPECT_EQ((i + d).dtype(), DType::F64);        // strong operands promote
  EXPECT_EQ(Expr(3).dtype(), DType::I32);        // defaults: i32 (i64 when it does not fit), f32, bool
  EXPECT_EQ(Expr(int64_t(1) << 40).dtype(), DType::I64);
  EXPECT_EQ(Expr(2.5).dtype(), DType::F32);
  EXPECT_TRUE((-Expr(2)).is_literal());          // `-2` folds
  EXPECT_EQ((-Expr(2)).str(), "-2");
  EXPECT_TRUE((!Expr(false)).is_literal());
  EXPECT_FALSE(neg(Expr(2)).is_literal());        // the call neg(2) is an op, as in the language
  EXPECT_EQ(cast(2, DType::F64).dtype(), DType::F64);
  EXPECT_EQ(exp(1).dtype(), DType::F32);          // a float-only op takes an int literal as f32
  EXPECT_EQ((i == 3).dtype(), DType::Bool);
  EXPECT_EQ(sum(i).type(), (ir::TensorType{DType::I32, {}}));
  EXPECT_EQ(i.str(), "i32[2]");
}

// ---- how trees become nodes --------------------------------------------------------------------

TEST(BuilderEmission, AnExprUsedTwiceIsWrittenOnceAndLetFixesTheOrder) {
  ModuleBuilder mb;
  auto f = mb.function("f");
  auto x = f.bcast("x", DType::F32, {3});
  auto y = f.bcast("y", DType::F32, {3});
  auto e = exp(x);
  f.out("a", e + e);
  const ir::Module m = mb.build();
  const ir::Function& fn = m.functions[0];
  ASSERT_EQ(fn.nodes.size(), 3u);   // input x, exp, add
  EXPECT_EQ(fn.nodes[2].operands, (std::vector<ir::NodeId>{1, 1}));

  // Without let, `y + h` writes y first; with let, h's nodes come where the let is.
  auto order_of = [](bool use_let) {
    ModuleBuilder m2;
    auto g = m2.function("g");
    auto gx = g.bcast("x", DType::F32, {3});
    auto gy = g.bcast("y", DType::F32, {3});
    auto h = use_let ? g.let("h", exp(gx)) : exp(gx);
    g.out("o", gy + h);
    std::vector<ir::Op> ops;
    const ir::Module built = m2.build();
    for (const ir::Node& n : built.functions[0].nodes) ops.push_back(n.op);
    return ops;
  };
  EXPECT_EQ(order_of(false), (std::vector<ir::Op>{ir::Op::Input, ir::Op::Input, ir::Op::Exp, ir::Op::Add}));
  EXPECT_EQ(order_of(true), (std::vector<ir::Op>{ir::Op::Input, ir::Op::Exp, ir::Op::Input, ir::Op::Add}));
  (void)y;
}

TEST(BuilderEmission, LetNamesTheNodeItMakes) {
  ModuleBuilder mb;
  auto f = mb.function("f");
  auto x = f.bcast("x", DType::F32, {3});
  auto h = f.let("h", exp(x));
  f.let("same", h);   // already written: keeps its name
  f.out("o", h);
  const ir::Module m = mb.build();
  const ir::Function& fn = m.functions[0];
  EXPECT_EQ(fn.nodes[0].name, "x");
  EXPECT_EQ(fn.nodes[1].name, "h");
}

TEST(BuilderEmission, ASharedOnlyExpressionIsWrittenIntoEachFunctionThatUsesIt) {
  ModuleBuilder mb;
  auto w = mb.shared("w", DType::F32, {3});
  auto norm = sum(w * w);
  mb.function("f").out("a", norm);
  mb.function("g").out("b", norm * 2);
  const ir::Module m = mb.build();
  ASSERT_EQ(m.functions.size(), 2u);
  EXPECT_EQ(m.functions[0].nodes.size(), 3u);   // shared_read, mul, sum
  EXPECT_EQ(m.functions[1].nodes.size(), 5u);   // shared_read, mul, sum, constant, mul
  EXPECT_EQ(m.functions[1].nodes[0].op, ir::Op::SharedRead);
}

TEST(BuilderEmission, VeryDeepChainsNeitherOverflowNorLeak) {
  ModuleBuilder mb;
  auto f = mb.function("f");
  Expr acc = f.bcast("x", DType::F32, {2});
  const int depth = 200000;
  for (int i = 0; i < depth; ++i) acc = acc + 1.0;
  f.out("o", acc);
  const ir::Module m = mb.build();
  EXPECT_EQ(m.functions[0].nodes.size(), size_t(1 + 2 * depth));
  acc = Expr();   // releases the chain iteratively
}

// ---- the example of docs/builder.md, verbatim ----------------------------------------------------

ir::Module docs_make_mlp() {
  ModuleBuilder mb;
  // shared w1: f32[784, 256] = normal(seed=1, mean=0, std=0.05);  ... and so on
  auto w1 = mb.shared("w1", DType::F32, {784, 256}, init::normal(/*seed=*/1, 0.0, 0.05));
  auto b1 = mb.shared("b1", DType::F32, {256});                      // zeros by default
  auto w2 = mb.shared("w2", DType::F32, {256, 256}, init::normal(2, 0.0, 0.05));
  auto b2 = mb.shared("b2", DType::F32, {256});
  auto w3 = mb.shared("w3", DType::F32, {256, 10}, init::normal(3, 0.0, 0.05));
  auto b3 = mb.shared("b3", DType::F32, {10});

  // fn loss(scatter images: f32[n, 784], scatter labels: i64[n]) { ... }
  auto f = mb.function("loss");
  auto images = f.scatter("images", DType::F32, {"n", 784});   // dims: sizes or symbols
  auto labels = f.scatter("labels", DType::I64, {"n"});
  auto h1 = f.let("h1", relu(images.matmul(w1) + b1));
  auto h2 = f.let("h2", relu(h1.matmul(w2) + b2));
  auto logits = f.let("logits", matmul(h2, w3) + b3);
  f.out("loss", mean(cross_entropy(logits, labels)));           // mode avg by default
  f.out("accuracy", mean(cast(argmax(logits, 1) == labels, DType::F32)));

  // fn gradient(...) { ...; out grads: avg = grad(loss, w1, b1, w2, b2, w3, b3); }
  auto g = mb.function("gradient");
  auto gi = g.scatter("images", DType::F32, {"n", 784});
  auto gl = g.scatter("labels", DType::I64, {"n"});
  auto gh1 = g.let("h1", relu(gi.matmul(w1) + b1));
  auto gh2 = g.let("h2", relu(gh1.matmul(w2) + b2));
  auto glogits = g.let("logits", gh2.matmul(w3) + b3);
  auto loss = g.let("loss", mean(cross_entropy(glogits, gl)));
  g.out("grads", grad(loss, {w1, b1, w2, b2, w3, b3}));

  return mb.build();   // checks the whole module, runs ir::verify
}

TEST(BuilderDocs, TheDocumentedExampleIsTheMlpExample) {
  const std::filesystem::path p = examples_dir() / "mlp.synk";
  expect_same_module(docs_make_mlp(), compile_source(p.string(), read_file(p)));
}

}  // namespace
}  // namespace synk::dsl
