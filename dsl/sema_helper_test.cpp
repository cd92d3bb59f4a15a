// Helpers (`def`) through the real front end: a call builds exactly the module of its body written
// out at the call (structurally equal, node for node), whatever the argument order, literals stay
// weak across the call and a caller's literal let is not confused with a helper's, discarded and
// unused results still have their errors reported, shared variables read through helpers count
// for the function's scattered rows, each error inside a helper carries one note per call, the
// limits on nesting and on inlined calls hold, and the helper leaves no function in the module.
#include <gtest/gtest.h>

#include <algorithm>

#include "dsl/frontend.h"
#include "ir/ir.h"

namespace synk::dsl {
namespace {

struct Analyzed {
  std::optional<ir::Module> module;
  std::vector<std::string> diagnostics;   // "error 3:5: message", "note 7:9: message", as reported
};

Analyzed analyze_text(const std::string& text) {
  SourceFile file("test.synk", text);
  DiagnosticEngine diags(file);
  ast::Program program = parse_program(file, diags);
  Analyzed out;
  if (!diags.has_errors()) out.module = analyze(program, diags, ".");
  for (const Diagnostic& d : diags.diagnostics())
    out.diagnostics.push_back(std::string(d.severity == Severity::Note ? "note " : "error ") +
                              std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + d.message);
  return out;
}

void expect_same(const std::string& with_helpers, const std::string& written_out) {
  Analyzed a = analyze_text(with_helpers), b = analyze_text(written_out);
  ASSERT_TRUE(a.module) << (a.diagnostics.empty() ? "" : a.diagnostics[0]);
  ASSERT_TRUE(b.module) << (b.diagnostics.empty() ? "" : b.diagnostics[0]);
  std::string difference;
  EXPECT_TRUE(ir::structurally_equal(*a.module, *b.module, &difference))
      << difference << "\n--- helpers:\n" << print_module(*a.module) << "--- written out:\n" << print_module(*b.module);
}

// The diagnostics of `text`, in the order reported, as "error 3:5: message" / "note 7:9: message".
void expect_diagnostics(const std::string& text, const std::vector<std::string>& expected) {
  Analyzed a = analyze_text(text);
  EXPECT_EQ(a.diagnostics, expected) << ::testing::PrintToString(a.diagnostics);
}

TEST(SemaHelpers, ACallBuildsItsBodyWrittenOut) {
  // Arguments are read in another order than they are passed, one twice (it is evaluated once,
  // like a let, where it is first read), one never.
  expect_same("def h(a, b, unused) { let s = b * a; return s + a; }\n"
              "fn f(bcast x: f32[3], bcast y: f32[3]) { out z = h(x + 1, exp(y), y); }\n",
              "fn f(bcast x: f32[3], bcast y: f32[3]) {\n"
              "  let b = exp(y); let a = x + 1; let s = b * a; out z = s + a; }\n");
}

TEST(SemaHelpers, NestedCallsAndSeveralResults) {
  expect_same("def sq(v) { return v * v; }\n"
              "def stats(v: f64[n]) { let m = mean(v); return m, sum(sq(v - m)); }\n"
              "fn f(bcast x: f64[5]) { let mu, var = stats(x); out a = mu; out b = var; }\n",
              "fn f(bcast x: f64[5]) { let m = mean(x); let d = x - m; let var = sum(d * d);\n"
              "  out a = m; out b = var; }\n");
}

TEST(SemaHelpers, LiteralsStayWeakAndLetsAreHygienic) {
  // `t` of the caller (a literal let, cached per dtype) and `t` of the helper are different.
  Analyzed a = analyze_text("def add3(x) { let t = 3; return x + t; }\n"
                            "def two() { let t = 2; return t; }\n"
                            "fn f(bcast x: u8[2], bcast y: f64[2]) {\n"
                            "  let t = 1;\n"
                            "  out a: sum = add3(x) + t + two();\n"
                            "  out b = add3(y) * t;\n}\n");
  ASSERT_TRUE(a.module) << a.diagnostics[0];
  const ir::Function& f = a.module->functions[0];
  EXPECT_EQ(ir::type_str(f.node(f.outputs[0].node).type), "u8[2]");   // the literals took x's dtype
  std::vector<double> constants;
  for (const ir::Node& n : f.nodes)
    if (n.op == ir::Op::Constant) constants.push_back(ir::is_float(n.type.dtype) ? n.attrs.value : double(n.attrs.ivalue));
  EXPECT_EQ(constants, (std::vector<double>{3, 1, 2, 3, 1}));
  EXPECT_EQ(a.module->functions.size(), 1u);   // helpers are not functions of the module
}

TEST(SemaHelpers, UnusedArgumentsAndDiscardedResultsAreStillChecked) {
  Analyzed a = analyze_text("def first(a, b) { return a; }\n"
                            "def pair(v) { return v, exp(v); }\n"
                            "fn f(bcast x: f32[2], bcast i: i32[2]) {\n"
                            "  out a = first(x, nope);\n"
                            "  let p, _ = pair(i);\n"
                            "  out b = p;\n}\n");
  EXPECT_EQ(a.diagnostics, (std::vector<std::string>{
                               "error 4:20: unknown name 'nope'",
                               "error 2:29: exp needs a floating operand but 'v' is i32[2]; use exp(cast(v, f32))",
                               "note 5:14: in call to helper 'pair' from function 'f'"}));
}

TEST(SemaHelpers, SharedVariablesReadThroughHelpersCountForTheFunction) {
  // rows_data's scattered `m` reaches the output through a helper: the output needs gather.
  Analyzed a = analyze_text("shared rows_data: f32[m, 4] sliceable;\n"
                            "def inner() { return rows_data; }\n"
                            "def outer() { return inner() * 2; }\n"
                            "fn f(bcast x: f32[4]) { out s: avg = outer() + x; }\n");
  ASSERT_EQ(a.diagnostics.size(), 1u);
  EXPECT_NE(a.diagnostics[0].find("error 4:32: output 's' has shape [m, 4], which depends on the scattered row"),
            std::string::npos)
      << a.diagnostics[0];
}

TEST(SemaHelpers, NotesNameEveryCallOnTheWay) {
  Analyzed a = analyze_text("def bad(v) { return v / 2; }\n"
                            "def mid(v) { return bad(v); }\n"
                            "fn f(bcast i: i32[2]) { out a: sum = mid(i); }\n");
  EXPECT_EQ(a.diagnostics, (std::vector<std::string>{
                               "error 1:23: '/' needs floating operands but 'v' is i32[2] and '2' is an integer "
                               "literal; use cast(v, f32) (or floor_divide(v, 2) for an integer quotient)",
                               "note 2:21: in call to helper 'bad' from helper 'mid'",
                               "note 3:38: in call to helper 'mid' from function 'f'"}));
}

TEST(SemaHelpers, InliningIsBounded) {
  // Each helper calls the next twice: 2^20 calls if nothing stopped it.
  std::string text = "def h0(x) { return x + 1; }\n";
  for (int i = 1; i <= 20; ++i)
    text += "def h" + std::to_string(i) + "(x) { return h" + std::to_string(i - 1) + "(x) * h" +
            std::to_string(i - 1) + "(x); }\n";
  Analyzed a = analyze_text(text + "fn f(bcast x: f32) { out y = h20(x); }\n");
  ASSERT_FALSE(a.diagnostics.empty());
  EXPECT_NE(a.diagnostics[0].find("function 'f' calls helpers more than 10000 times once they are inlined"),
            std::string::npos)
      << a.diagnostics[0];
  EXPECT_LE(a.diagnostics.size(), 21u);   // one error, its notes
  // A chain of 70 helpers nests deeper than 64.
  std::string chain = "def c0(x) { return x; }\n";
  for (int i = 1; i <= 70; ++i)
    chain += "def c" + std::to_string(i) + "(x) { return c" + std::to_string(i - 1) + "(x); }\n";
  Analyzed b = analyze_text(chain + "fn f(bcast x: f32) { out y = c70(x); }\n");
  ASSERT_FALSE(b.diagnostics.empty());
  EXPECT_NE(b.diagnostics[0].find("helper calls nest too deeply (the limit is 64 levels)"), std::string::npos)
      << b.diagnostics[0];
}

TEST(SemaHelpers, LiteralsPassThroughParametersToOperations) {
  // An operation's literal argument (training=, axis=, stride=, padding=, eps=) may name a
  // parameter: the literal written at the call, followed through every helper on the way.
  const char* shared = "shared g: f32[4] = ones; shared b: f32[4] = zeros;\n"
                       "shared rm: f32[4] = zeros; shared rv: f32[4] = ones; shared w: f32[4, 2, 3, 3] = ones;\n";
  expect_same(std::string(shared) +
                  "def bn(x, training, eps) { return batch_norm(x, g, b, rm, rv, training=training, eps=eps); }\n"
                  "def block(x, s, pad, training) { return relu(bn(conv2d(x, w, stride=s, padding=pad), training, 1e-3)); }\n"
                  "fn f(scatter x: f32[n, 2, 8, 8]) { out y: gather = block(x, 1, \"same\", true); }\n"
                  "fn e(scatter x: f32[n, 2, 8, 8]) { out y: gather = block(x, [2, 2], [1, 0], false); }\n",
              std::string(shared) +
                  "fn f(scatter x: f32[n, 2, 8, 8]) { out y: gather = relu(batch_norm(conv2d(x, w, stride=1, "
                  "padding=\"same\"), g, b, rm, rv, training=true, eps=1e-3)); }\n"
                  "fn e(scatter x: f32[n, 2, 8, 8]) { out y: gather = relu(batch_norm(conv2d(x, w, stride=[2, 2], "
                  "padding=[1, 0]), g, b, rm, rv, training=false, eps=1e-3)); }\n");
  expect_same("def total(x, ax, keep) { return sum(x, axis=ax, keepdims=keep); }\n"
              "def outer(x, a) { return total(x, a, true) + total(x, [0, 1], false); }\n"
              "fn f(bcast x: f32[3, 4]) { out y = outer(x, 1); }\n",
              "fn f(bcast x: f32[3, 4]) { out y = sum(x, axis=1, keepdims=true) + sum(x, axis=[0, 1]); }\n");
  expect_same("def pick(x, lo, hi, ax, p, k, y) { return dropout(slice(x, lo, hi, axis=ax), p, training=true), "
              "one_hot(y, k); }\n"
              "fn f(scatter x: f32[n, 6], scatter y: i64[n]) { let a, b = pick(x, 1, -1, 1, 0.5, 3, y); "
              "out s: gather = a; out t: gather = b; }\n",
              "fn f(scatter x: f32[n, 6], scatter y: i64[n]) { out s: gather = dropout(slice(x, 1, -1, axis=1), 0.5, "
              "training=true); out t: gather = one_hot(y, 3); }\n");
  // A let of a literal stands for it too, also passed on to a helper.
  expect_same("def total(x, ax) { return sum(x, axis=ax); }\n"
              "fn f(bcast x: f32[3, 4]) { let a = 1; let k = -1; let keep = false;\n"
              "  out y = total(x, a) + sum(x, axis=k, keepdims=keep); }\n",
              "fn f(bcast x: f32[3, 4]) { out y = sum(x, axis=1) + sum(x, axis=-1, keepdims=false); }\n");
  expect_same("def as(x, dt) { return cast(x, dt) * 2; }\n"
              "fn f(bcast x: f32[3]) { out y = as(x, f64); out z: sum = as(x, i32); }\n",
              "fn f(bcast x: f32[3]) { out y = cast(x, f64) * 2; out z: sum = cast(x, i32) * 2; }\n");
}

// A helper that passes its literal parameter on to another helper: strings, dtypes and lists went
// through one level but were taken for values at the second.
TEST(SemaHelpers, LiteralsPassThroughTwoLevelsOfHelpers) {
  expect_same("def k1(v, dt) { return cast(v, dt); }\n"
              "def k2(v, dt) { return k1(v, dt); }\n"
              "def r1(v, ax, kd) { return sum(v, axis=ax, keepdims=kd); }\n"
              "def r2(v, ax, kd) { return r1(v, ax, kd); }\n"
              "fn f(bcast x: f32[3, 4]) { out a = k2(x, f64); out b = r2(x, [0, 1], true); }\n",
              "fn f(bcast x: f32[3, 4]) { out a = cast(x, f64); out b = sum(x, axis=[0, 1], keepdims=true); }\n");
  expect_same("shared w: f32[2, 1, 3, 3] = ones;\n"
              "def c1(x, p) { return conv2d(x, w, padding=p); }\n"
              "def c2(x, q) { return c1(x, q); }\n"
              "fn f(scatter x: f32[n, 1, 4, 4]) { out a: gather = c2(x, \"same\"); }\n",
              "shared w: f32[2, 1, 3, 3] = ones;\n"
              "fn f(scatter x: f32[n, 1, 4, 4]) { out a: gather = conv2d(x, w, padding=\"same\"); }\n");
}

TEST(SemaHelpers, MaxWithAValueForItsAxisPointsAtMaximum) {
  expect_diagnostics("fn f(bcast x: f32[3]) { out y = max(x, 0.0); }\n",
                     {"error 1:40: max's second argument is the axis it reduces, an integer literal, found '0.0'; "
                      "for the element-wise maximum of two values write maximum(x, 0.0)"});
}

TEST(SemaHelpers, APassedThroughLiteralThatIsNotOneIsReportedWhereItWasWritten) {
  expect_diagnostics("def total(x, ax) { return sum(x, axis=ax); }\n"
                     "fn f(bcast x: f32[3, 4], bcast k: i64) { out y = total(x, k); out z = total(x, 5); }\n",
                     {"error 2:59: axis must be an integer literal, found 'k'",
                      "note 2:50: in call to helper 'total' from function 'f'",
                      "error 1:39: axis 5 is out of range for rank 2 in sum: 'x' has type f32[3, 4]",
                      "note 2:71: in call to helper 'total' from function 'f'"});
  // An unread list of literals is no value and no error; an unread list of anything else is.
  expect_diagnostics("def keep(x, ax) { return x; }\n"
                     "fn f(bcast x: f32[3]) { out y = keep(x, [0, -1]); out z = keep(x, [0, x]); }\n",
                     {"error 2:67: a list such as [0, x] is only allowed as an axis list, a shape or a permutation"});
}

TEST(SemaHelpers, AHelperNamedLikeAnOperationIsOneError) {
  // Its calls are not checked against the operation's signature (which would report each of
  // them), but their arguments still are.
  expect_diagnostics("def norm(x, ax, keep) { return x - mean(x, axis=ax, keepdims=keep); }\n"
                     "fn f(bcast x: f32[3, 2]) { out y = norm(x, 1, true) + norm(x, 0, false); "
                     "out z = norm(x, 1, exp(q)); }\n",
                     {"error 1:5: helper 'norm' has the name of a built-in operation, which a call 'norm(...)' "
                      "always means; choose another name",
                      "error 2:97: unknown name 'q'"});
}

TEST(SemaHelpers, ADeclarationIsCheckedOnceEvenWithoutCalls) {
  Analyzed a = analyze_text("shared w: f32;\n"
                            "def unused(w, q: f99) { let w2 = 1; let w2 = 2; return w2; }\n"
                            "fn f(bcast x: f32) { out y = x; }\n");
  EXPECT_EQ(a.diagnostics, (std::vector<std::string>{
                               "error 2:12: parameter 'w' of helper 'unused' would shadow the shared variable "
                               "declared at 1:8; choose another name",
                               "error 2:18: unknown dtype 'f99'; expected f32, f64, i32, i64, u8 or bool",
                               "error 2:41: 'w2' is already declared at 2:29"}));
}

}  // namespace
}  // namespace synk::dsl
