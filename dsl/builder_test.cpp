// Tests of the C++ expression builder: for every example in examples/*.synk and for a program
// that uses every operation and literal rule, the builder's module must be structurally equal
// (same nodes in the same order, same types, attributes, outputs and updates) to what the .synk
// front end builds; and every misuse must be a UserError that says what was wrong.
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "dsl/builder.h"
#include "dsl/evaluator.h"
#include "dsl/frontend.h"

namespace synk::dsl {
namespace {

using ir::DType;
using ir::ReduceMode;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path examples_dir() { return std::filesystem::path(SYNK_SOURCE_DIR) / "examples"; }

void expect_same_module(const ir::Module& built, const ir::Module& parsed) {
  std::string difference;
  EXPECT_TRUE(ir::structurally_equal(built, parsed, &difference))
      << difference << "\n--- builder:\n" << print_module(built) << "--- front end:\n" << print_module(parsed);
}

template <class F>
void expect_user_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "message '" << msg << "' lacks '" << frag << "'";
  }
}

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

}  // namespace
}  // namespace synk::dsl
