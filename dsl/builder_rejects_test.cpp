// Tests of the C++ expression builder's misuse: every program the builder rejects, the .synk front
// end rejects too (the same rule, dsl/checks.h), and the builder's message says what was wrong;
// plus the builder's own misuse (expressions of two functions or modules, bad names, empty
// Exprs). builder_test.cpp compares the modules the two front ends accept.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "dsl/builder.h"
#include "dsl/frontend.h"

namespace synk::dsl {
namespace {

using ir::DType;
using ir::ReduceMode;
using synk::testing::expect_user_error;

struct Rejected {
  const char* what;
  const char* synk;                              // the same program as .synk text
  std::function<void()> build;                   // builds it with the builder (must throw)
  std::vector<std::string> fragments;            // in the builder's message
};

// Operations given operands of the wrong dtype or a literal that does not fit.
std::vector<Rejected> rejected_operand_types() {
  using F = DType;
  return {
      {"broadcast mismatch", "fn f(scatter x: f32[n, 10], bcast z: f32[3]) { out o: gather = x + z; }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         auto x = f.scatter("x", F::F32, {"n", 10});
         auto z = f.bcast("z", F::F32, {3});
         f.out("o", x + z, ReduceMode::Gather);
       },
       {"add(f32[n, 10], f32[3])", "cannot broadcast shapes [n, 10] and [3]", "function 'f'"}},
      {"integer division", "fn f(bcast i: i32[3]) { out o: sum = i / 2; }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         auto i = f.bcast("i", F::I32, {3});
         f.out("o", i / 2, ReduceMode::Sum);
       },
       {"'/' needs floating operands", "i32[3]", "the literal 2"}},
      {"literal too large for u8", "fn f(bcast u: u8[3]) { out o: sum = u + 300; }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", f.bcast("u", F::U8, {3}) + 300, ReduceMode::Sum);
       },
       {"integer 300 does not fit in u8"}},
      {"logical and of floats", "fn f(bcast a: f32[3], bcast b: bool[3]) { out o: sum = cast(a && b, i32); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         auto a = f.bcast("a", F::F32, {3});
         auto b = f.bcast("b", F::Bool, {3});
         f.out("o", cast(a && b, F::I32), ReduceMode::Sum);
       },
       {"'&&' needs bool operands", "left operand is f32[3]"}},
      {"mean of integers", "fn f(bcast i: i32[3]) { out o = mean(i); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", mean(f.bcast("i", F::I32, {3})));
       },
       {"mean needs a floating operand", "i32[3]"}},
      {"axis out of range", "fn f(bcast x: f32[3]) { out o = sum(x, axis=1); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(f.bcast("x", F::F32, {3}), 1));
       },
       {"axis 1 is out of range for rank 1", "sum"}},
      {"exp of an integer", "fn f(bcast i: i32[3]) { out o: sum = exp(i); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", exp(f.bcast("i", F::I32, {3})), ReduceMode::Sum);
       },
       {"exp needs a floating operand", "i32[3]"}},
      {"negating a bool", "fn f(bcast b: bool[3]) { out o: sum = cast(-b, i32); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", cast(-f.bcast("b", F::Bool, {3}), F::I32), ReduceMode::Sum);
       },
       {"'-' needs a numeric operand", "'!'"}},
  };
}

// Shapes that do not match, axes and slices out of range, and misused grad.
std::vector<Rejected> rejected_shapes_and_gradients() {
  using F = DType;
  return {
      {"unknown dimension in broadcast_to", "fn f(bcast x: f32[2]) { out o = sum(broadcast_to(x, [m, 2])); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(broadcast_to(f.bcast("x", F::F32, {2}), {"m", 2})));
         mb.build();
       },
       {"unknown dimension 'm' in broadcast_to"}},
      {"reshape that cannot hold the elements", "fn f(bcast x: f32[6]) { out o = sum(reshape(x, [4, -1])); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(reshape(f.bcast("x", F::F32, {6}), {4, -1})));
       },
       {"reshape(f32[6])", "does not divide"}},
      {"grad with respect to an expression", "shared w: f32[2]; fn f(bcast x: f32[2]) { out o = grad(sum(x * w), x * w); }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         auto f = mb.function("f");
         auto x = f.bcast("x", F::F32, {2});
         f.out("o", grad(sum(x * w), x * w));
       },
       {"grad differentiates with respect to shared variables and inputs"}},
      {"grad with respect to an integer input", "fn f(bcast x: f32[2], bcast i: i32[2]) { out o = grad(sum(x * cast(i, f32)), i); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         auto x = f.bcast("x", F::F32, {2});
         auto i = f.bcast("i", F::I32, {2});
         f.out("o", grad(sum(x * cast(i, F::F32)), i));
       },
       {"grad needs floating variables", "'i' is i32[2]"}},
      {"grad of a vector", "shared w: f32[2]; fn f() { out o = grad(w * 2, w); }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         mb.function("f").out("o", grad(w * 2, w));
       },
       {"grad needs a scalar loss", "[2]"}},
      {"grad twice in one variable", "shared w: f32[2]; fn f() { out o = grad(sum(w), w, w); }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         mb.function("f").out("o", grad(sum(w), {w, w}));
       },
       {"'w' appears twice in grad"}},
      {"slice out of range", "fn f(bcast x: f32[4]) { out o = sum(slice(x, 2, 9)); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(slice(f.bcast("x", F::F32, {4}), 2, 9)));
       },
       {"slice [2, 9) is out of range", "size 4"}},
      {"slice of a symbolic axis", "fn f(scatter x: f32[n]) { out o = sum(slice(x, 0, 1)); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(slice(f.scatter("x", F::F32, {"n"}), 0, 1)));
       },
       {"slice needs a static size along axis 0"}},
      {"one_hot without classes", "fn f(bcast y: i32[3]) { out o = sum(one_hot(y, 0)); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(one_hot(f.bcast("y", F::I32, {3}), 0)));
       },
       {"one_hot needs at least one class, found 0"}},
  };
}

// out and update statements: modes, types, scattered rows, and a function with no result.
std::vector<Rejected> rejected_statements() {
  using F = DType;
  return {
      {"avg of an integer output", "fn f(bcast i: i32[3]) { out o = sum(i); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(f.bcast("i", F::I32, {3})));
       },
       {"output 'o' has dtype i32", "cannot be averaged"}},
      {"scattered rows in an avg output", "fn f(scatter x: f32[n, 3]) { out o = x; }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", f.scatter("x", F::F32, {"n", 3}));
         mb.build();
       },
       {"output 'o'", "scattered row dimension 'n'", "gather or none"}},
      {"gather of a scalar", "fn f(scatter x: f32[n]) { out o: gather = sum(x); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", sum(f.scatter("x", F::F32, {"n"})), ReduceMode::Gather);
       },
       {"output 'o' is a scalar", "gather"}},
      {"update with the wrong type", "shared s: f32[2]; fn f(bcast x: f32[3]) { update s = x; }",
       [] {
         ModuleBuilder mb;
         auto s = mb.shared("s", F::F32, {2});
         auto f = mb.function("f");
         f.update(s, f.bcast("x", F::F32, {3}));
       },
       {"update of 's' needs a value of type f32[2]", "f32[3]"}},
      {"update of a parameter", "fn f(bcast x: f32[3]) { update x = x; }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         auto x = f.bcast("x", F::F32, {3});
         f.update(x, x);
       },
       {"only shared variables can be updated", "parameter 'x'"}},
      {"update twice", "shared s: f32[2]; fn f() { update s = s; update s = s; }",
       [] {
         ModuleBuilder mb;
         auto s = mb.shared("s", F::F32, {2});
         auto f = mb.function("f");
         f.update(s, s);
         f.update(s, s);
       },
       {"'s' is already updated", "at most once"}},
      {"update with mode gather", "shared s: f32[2]; fn f() { update s: gather = s; }",
       [] {
         ModuleBuilder mb;
         auto s = mb.shared("s", F::F32, {2});
         mb.function("f").update(s, s, ReduceMode::Gather);
       },
       {"mode 'gather' is for outputs only"}},
      {"function without results", "fn f(bcast x: f32[3]) { let y = x; }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.let("y", f.bcast("x", F::F32, {3}));
         mb.build();
       },
       {"function 'f' has no 'out' or 'update'"}},
      {"integer literal as a bool", "shared b: bool[]; fn f() { update b: max = 1; }",
       [] {
         ModuleBuilder mb;
         auto b = mb.shared("b", F::Bool, {});
         mb.function("f").update(b, 1, ReduceMode::Max);
       },
       {"integer 1 cannot be used as a bool"}},
  };
}

// Parameters and shared variables: names, row dimensions, initializers and dtypes.
std::vector<Rejected> rejected_declarations() {
  using F = DType;
  return {
      {"parameter shadows a shared variable", "shared w: f32[2]; fn f(bcast w: f32[2]) { out o = w; }",
       [] {
         ModuleBuilder mb;
         mb.shared("w", F::F32, {2});
         mb.function("f").bcast("w", F::F32, {2});
       },
       {"parameter 'w' would shadow the shared variable"}},
      {"shared declared after the function it is shadowed in", "fn f(bcast w: f32[2]) { out o = w; } shared w: f32[2];",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.out("o", f.bcast("w", F::F32, {2}));
         mb.shared("w", F::F32, {2});
         mb.build();
       },
       {"parameter 'w' of function 'f' would shadow the shared variable"}},
      {"duplicate parameter", "fn f(bcast x: f32[2], bcast x: f32[2]) { out o = x; }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.bcast("x", F::F32, {2});
         f.bcast("x", F::F32, {2});
       },
       {"'x' is already declared"}},
      {"scatter without a symbolic row", "fn f(scatter x: f32[4]) { out o: gather = x; }",
       [] { ModuleBuilder mb; mb.function("f").scatter("x", F::F32, {4}); },
       {"scatter parameter 'x' is split by rows", "found f32[4]"}},
      {"row symbol reused for a whole dimension", "fn f(scatter x: f32[n], bcast y: f32[n]) { out o = sum(y); }",
       [] {
         ModuleBuilder mb;
         auto f = mb.function("f");
         f.scatter("x", F::F32, {"n"});
         f.out("o", sum(f.bcast("y", F::F32, {"n"})));
         mb.build();
       },
       {"'n' is a scattered row dimension", "parameter 'y'"}},
      {"shared and function with one name", "shared f: f32[2]; fn f() { out o = f; }",
       [] {
         ModuleBuilder mb;
         mb.shared("f", F::F32, {2});
         mb.function("f");
       },
       {"'f' is already declared as a shared variable"}},
      {"normal initializer of an integer", "shared w: i32[2] = normal(seed=1);",
       [] { ModuleBuilder mb; mb.shared("w", F::I32, {2}, init::normal(1)); },
       {"normal initializes floating variables", "i32"}},
      {"constant initializer that does not fit", "shared w: u8[2] = 300;",
       [] { ModuleBuilder mb; mb.shared("w", F::U8, {2}, init::constant(300)); },
       {"initial value 300 does not fit", "u8"}},
      {"sliceable with a static row", "shared w: f32[4, 2] = zeros sliceable;",
       [] { ModuleBuilder mb; mb.shared("w", F::F32, {4, 2}, init::zeros(), true); },
       {"sliceable shared variable 'w'", "symbolic row dimension"}},
      {"reserved dtype", "fn f(bcast x: f16[2]) { out o = x; }",
       [] { ModuleBuilder mb; mb.function("f").bcast("x", F::F16, {2}); },
       {"dtype 'f16' is reserved"}},
  };
}

// Optimizers and training steps (minimize).
std::vector<Rejected> rejected_training() {
  using F = DType;
  return {
      {"unknown update rule", "optimizer o = newton(lr=1);",
       [] { ModuleBuilder mb; mb.optimizer("o", "newton", {{"lr", 1}}); },
       {"optimizer 'o': unknown update rule 'newton'", "momentum"}},
      {"hyper-parameter out of range", "optimizer o = momentum(lr=0.1, momentum=1.5);",
       [] { ModuleBuilder mb; mb.optimizer("o", "momentum", {{"lr", 0.1}, {"momentum", 1.5}}); },
       {"optimizer 'o'", "momentum"}},
      {"keyword the rule does not take", "optimizer o = sgd(lr=0.1, rho=0.9);",
       [] { ModuleBuilder mb; mb.optimizer("o", "sgd", {{"lr", 0.1}, {"rho", 0.9}}); },
       {"optimizer 'o'", "rho"}},
      {"num_packs not a positive integer", "optimizer o = sgd(lr=0.1, num_packs=0);",
       [] { ModuleBuilder mb; mb.optimizer("o", "sgd", {{"lr", 0.1}, {"num_packs", 0}}); },
       {"num_packs must be an integer >= 1"}},
      {"minimize with an unknown optimizer", "shared w: f32[2]; fn f(bcast x: f32[2]) { minimize sum(x * w) over w using o; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         auto f = mb.function("f");
         f.minimize(sum(f.bcast("x", F::F32, {2}) * w), {w}, "o");
       },
       {"unknown optimizer 'o'"}},
      {"minimize using a shared variable", "shared w: f32[2]; fn f(bcast x: f32[2]) { minimize sum(x * w) over w using w; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         auto f = mb.function("f");
         f.minimize(sum(f.bcast("x", F::F32, {2}) * w), {w}, "w");
       },
       {"'w' is a shared variable, not an optimizer"}},
      {"minimize over an input", "shared w: f32[2]; optimizer o = sgd(lr=1); fn f(bcast x: f32[2]) { minimize sum(x * w) over x using o; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         mb.optimizer("o", "sgd", {{"lr", 1.0}});
         auto f = mb.function("f");
         auto x = f.bcast("x", F::F32, {2});
         f.minimize(sum(x * w), {x}, "o");
       },
       {"minimize differentiates with respect to shared variables, but 'x'", "is a parameter"}},
      {"two training steps in one function",
       "shared w: f32[2]; optimizer o = sgd(lr=1); fn f(bcast x: f32[2]) { minimize sum(x * w) over w using o; "
       "minimize sum(x * w) over w using o; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         mb.optimizer("o", "sgd", {{"lr", 1}});
         auto f = mb.function("f");
         auto x = f.bcast("x", F::F32, {2});
         f.minimize(sum(x * w), {w}, "o");
         f.minimize(sum(x * w), {w}, "o");
       },
       {"function 'f' already has a training step"}},
      {"one optimizer, two sets of variables",
       "shared w: f32[2]; shared v: f32[2]; optimizer o = sgd(lr=1); fn f(bcast x: f32[2]) { minimize sum(x * w) over w "
       "using o; } fn g(bcast x: f32[2]) { minimize sum(x * v) over v using o; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         auto v = mb.shared("v", F::F32, {2});
         mb.optimizer("o", "sgd", {{"lr", 1}});
         auto f = mb.function("f");
         f.minimize(sum(f.bcast("x", F::F32, {2}) * w), {w}, "o");
         auto g = mb.function("g");
         g.minimize(sum(g.bcast("x", F::F32, {2}) * v), {v}, "o");
       },
       {"optimizer 'o' already trains w", "not v"}},
      {"loss of another dtype than the variables",
       "shared w: f32[2]; optimizer o = sgd(lr=1); fn f(bcast x: f64[2]) { minimize sum(x * cast(w, f64)) over w using o; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         mb.optimizer("o", "sgd", {{"lr", 1}});
         auto f = mb.function("f");
         f.minimize(sum(f.bcast("x", F::F64, {2}) * cast(w, F::F64)), {w}, "o");
       },
       {"the loss of minimize is f64", "f32"}},
      {"a trained variable also updated by the function",
       "shared w: f32[2]; optimizer o = sgd(lr=1); fn f(bcast x: f32[2]) { minimize sum(x * w) over w using o; "
       "update w = w * 2; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         mb.optimizer("o", "sgd", {{"lr", 1}});
         auto f = mb.function("f");
         f.minimize(sum(f.bcast("x", F::F32, {2}) * w), {w}, "o");
         f.update(w, w * 2);
         mb.build();
       },
       {"'w' is trained by the step", "cannot also update it"}},
      {"the state's name is taken",
       "shared w: f32[2]; shared w_velocity: f32[2]; optimizer o = momentum(lr=1); "
       "fn f(bcast x: f32[2]) { minimize sum(x * w) over w using o; }",
       [] {
         ModuleBuilder mb;
         auto w = mb.shared("w", F::F32, {2});
         mb.shared("w_velocity", F::F32, {2});
         mb.optimizer("o", "momentum", {{"lr", 1}});
         auto f = mb.function("f");
         f.minimize(sum(f.bcast("x", F::F32, {2}) * w), {w}, "o");
         mb.build();
       },
       {"optimizer 'o' (momentum) adds 'w_velocity'", "rename one of them"}},
  };
}

// Every misuse above, each a program that both front ends must reject.
std::vector<Rejected> rejected_programs() {
  std::vector<Rejected> all;
  for (auto group : {rejected_operand_types, rejected_shapes_and_gradients, rejected_statements,
                     rejected_declarations, rejected_training})
    for (Rejected& r : group()) all.push_back(std::move(r));
  return all;
}

TEST(BuilderErrors, TheBuilderAndTheFrontEndRejectTheSamePrograms) {
  for (const Rejected& r : rejected_programs()) {
    SCOPED_TRACE(r.what);
    EXPECT_THROW(compile_source("rejected.synk", r.synk), UserError);
    expect_user_error(r.build, r.fragments);
  }
}

TEST(BuilderErrors, ExpressionsOfTwoFunctionsDoNotMix) {
  ModuleBuilder mb;
  auto f = mb.function("f");
  auto g = mb.function("g");
  auto x = f.bcast("x", DType::F32, {3});
  auto y = g.bcast("y", DType::F32, {3});
  expect_user_error([&] { (void)(x + y); }, {"add", "different functions ('f' and 'g')"});
  expect_user_error([&] { g.out("o", exp(x)); }, {"output 'o' of function 'g'", "function 'f'"});
  expect_user_error([&] { g.let("t", x * 2); }, {"let 't' of function 'g'", "function 'f'"});
  ModuleBuilder other;
  auto w = other.shared("w", DType::F32, {3});
  expect_user_error([&] { (void)(x + w); }, {"different ModuleBuilders"});
  expect_user_error([&] { g.out("o", w * 2); }, {"shared variable of another ModuleBuilder"});
}

TEST(BuilderErrors, BadNamesAndEmptyExprs) {
  ModuleBuilder mb;
  expect_user_error([&] { mb.function("2fast"); }, {"'2fast' is not a valid function name"});
  expect_user_error([&] { mb.shared("let", DType::F32, {2}); }, {"'let' is not a valid shared variable name"});
  expect_user_error([&] { mb.shared("nan", DType::F32, {2}); }, {"'nan' is a built-in constant"});
  auto f = mb.function("f");
  expect_user_error([&] { f.bcast("x", DType::F32, {"bad dim"}); }, {"'bad dim' is not a valid dimension name"});
  expect_user_error([&] { f.bcast("x", DType::F32, {-2}); }, {"dimension size must be 0 or more, found -2"});
  auto x = f.bcast("x", DType::F32, {3});
  f.out("o", x);
  expect_user_error([&] { f.out("o", x * 2); }, {"output 'o' is already declared"});
  expect_user_error([&] { f.let("x", x); }, {"'x' is already declared"});
  Expr empty;
  expect_user_error([&] { (void)(x + empty); }, {"empty Expr"});
  expect_user_error([&] { f.out("p", empty); }, {"empty Expr"});
  EXPECT_EQ(empty.str(), "<empty Expr>");
  // A UserError leaves the module usable.
  EXPECT_NO_THROW(mb.build());
}

}  // namespace
}  // namespace synk::dsl
