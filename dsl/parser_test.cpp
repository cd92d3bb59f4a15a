// Unit tests of the parser: the AST it builds (precedence, associativity, calls, declarations,
// locations), the `--emit=ast` printer, and error recovery (exact messages, exact counts, no
// follow-on errors, bounded nesting).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing.h"
#include "dsl/frontend.h"
#include "dsl/parser.h"

namespace synk::dsl {
namespace {

struct Parse {
  // The file outlives the diagnostics that refer to it.
  std::unique_ptr<SourceFile> file;
  ast::Program program;
  std::vector<Diagnostic> diagnostics;

  std::vector<std::string> messages() const {
    std::vector<std::string> result;
    for (const Diagnostic& d : diagnostics) {
      result.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + d.message);
    }
    return result;
  }
};

Parse parse(const std::string& text) {
  Parse result;
  result.file = std::make_unique<SourceFile>("t.synk", text);
  DiagnosticEngine diags(*result.file);
  result.program = parse_program(*result.file, diags);
  result.diagnostics = diags.diagnostics();
  return result;
}

// Fully parenthesized prefix form: `(+ a (* b c))`, `(call sum x axis=0)`, `[1 2]`.
std::string sexpr(const ast::Expr& e) {
  switch (e.kind) {
    case ast::ExprKind::IntLiteral: return std::to_string(e.int_value);
    case ast::ExprKind::FloatLiteral: {
      std::string text = std::to_string(e.float_value);
      return text.substr(0, text.find_last_not_of('0') + 1);
    }
    case ast::ExprKind::BoolLiteral: return e.int_value ? "true" : "false";
    case ast::ExprKind::StringLiteral: return "\"" + e.text + "\"";
    case ast::ExprKind::Name: return e.text;
    case ast::ExprKind::Unary: return "(" + e.text + " " + sexpr(*e.args[0]) + ")";
    case ast::ExprKind::Binary: return "(" + e.text + " " + sexpr(*e.args[0]) + " " + sexpr(*e.args[1]) + ")";
    case ast::ExprKind::Call: {
      std::string text = "(call " + e.text;
      for (const auto& arg : e.args) text += " " + sexpr(*arg);
      for (const auto& kwarg : e.kwargs) text += " " + kwarg.name + "=" + sexpr(*kwarg.value);
      return text + ")";
    }
    case ast::ExprKind::List: {
      std::string text = "[";
      for (size_t i = 0; i < e.args.size(); ++i) text += (i ? " " : "") + sexpr(*e.args[i]);
      return text + "]";
    }
    case ast::ExprKind::Error: return "<error>";
  }
  return "?";
}

// The value of `let v = EXPR;` inside a function, as an s-expression ("" on errors).
std::string expr(const std::string& source) {
  Parse p = parse("fn f() {\n  let v = " + source + ";\n}\n");
  if (!p.diagnostics.empty()) {
    ADD_FAILURE() << source << ": " << p.messages()[0];
    return "";
  }
  return sexpr(*p.program.functions.at(0).body.at(0).value);
}

// The diagnostics for `let v = EXPR;`.
std::vector<std::string> expr_errors(const std::string& source) {
  return parse("fn f() {\n  let v = " + source + ";\n}\n").messages();
}

// An expression, as the value of `let v = SOURCE;`, and the s-expression it parses to.
struct ExprCase {
  const char* source;
  const char* sexpr;
};

void expect_sexprs(std::initializer_list<ExprCase> cases) {
  for (const ExprCase& c : cases) EXPECT_EQ(expr(c.source), c.sexpr) << c.source;
}

// An expression, as the value of `let v = SOURCE;`, and every diagnostic it gives.
struct ExprErrorCase {
  const char* source;
  std::vector<std::string> messages;
};

void expect_expr_errors(std::initializer_list<ExprErrorCase> cases) {
  for (const ExprErrorCase& c : cases) EXPECT_EQ(expr_errors(c.source), c.messages) << c.source;
}

TEST(ParserExpr, Precedence) {
  expect_sexprs({
      {"a + b * c", "(+ a (* b c))"},
      {"a * b + c", "(+ (* a b) c)"},
      {"a @ b + c", "(+ (@ a b) c)"},
      {"a / b @ c", "(@ (/ a b) c)"},
      {"a == b + c", "(== a (+ b c))"},
      {"a < b && c >= d", "(&& (< a b) (>= c d))"},
      {"a || b && c", "(|| a (&& b c))"},
      {"!a && b", "(&& (! a) b)"},
      {"-a * b", "(* (- a) b)"},
      {"(a + b) * c", "(* (+ a b) c)"},
  });
}

TEST(ParserExpr, Associativity) {
  expect_sexprs({
      {"a - b - c", "(- (- a b) c)"},
      {"a / b / c", "(/ (/ a b) c)"},
      {"a || b || c", "(|| (|| a b) c)"},
      {"a ** b ** c", "(** a (** b c))"},
  });
}

TEST(ParserExpr, PowerBindsTighterThanUnaryMinus) {
  expect_sexprs({
      {"-a ** b", "(- (** a b))"},
      {"-2 ** 2", "(- (** 2 2))"},
      {"a ** -b", "(** a (- b))"},
      {"a ** -b ** c", "(** a (- (** b c)))"},
      {"!-a", "(! (- a))"},
  });
}

TEST(ParserExpr, MinusOnANumberIsFoldedIntoTheLiteral) {
  expect_sexprs({
      {"-1", "-1"},
      {"- -1", "1"},
      {"-(2.5)", "-2.5"},
      {"x * -2", "(* x -2)"},
  });
  Parse p = parse("fn f() {\n  let v = -9223372036854775807;\n}\n");
  ASSERT_TRUE(p.diagnostics.empty());
  const ast::Expr& literal = *p.program.functions[0].body[0].value;
  EXPECT_EQ(literal.int_value, -INT64_MAX);
  EXPECT_EQ(literal.loc, (SourceLoc{2, 11}));  // at the minus sign
}

TEST(ParserExpr, ComparisonsAreNonAssociative) {
  expect_expr_errors({
      {"a < b < c", {"2:17: comparisons cannot be chained: '<' follows '<'; use parentheses or '&&'"}},
  });
  EXPECT_EQ(expr_errors("a == b != c").size(), 1u);
  EXPECT_EQ(expr("(a < b) == c"), "(== (< a b) c)");
}

TEST(ParserExpr, LiteralsNamesAndLists) {
  expect_sexprs({
      {"true || false", "(|| true false)"},
      {"[1, -1, n]", "[1 -1 n]"},
      {"[]", "[]"},
      {"[[1, 2], [3]]", "[[1 2] [3]]"},
      {"inf + nan", "(+ inf nan)"},
      {"0.5", "0.5"},
  });
}

TEST(ParserExpr, CallsWithKeywordArguments) {
  expect_sexprs({
      {"mean(x @ y, axis=0)", "(call mean (@ x y) axis=0)"},
      {"sum(x, axis=[0, 1], keepdims=true)", "(call sum x axis=[0 1] keepdims=true)"},
      {"f()", "(call f)"},
      {"g(a == b)", "(call g (== a b))"},
      {"cast(x, f64) + 1", "(+ (call cast x f64) 1)"},
  });
}

TEST(ParserExpr, PositionalAfterKeywordIsAnError) {
  expect_expr_errors({
      {"sum(x, axis=0, y)", {"2:26: positional argument after keyword argument 'axis' in the call to 'sum'"}},
      {"sum(x, axis=0, axis=1)", {"2:26: keyword argument 'axis' is given twice in the call to 'sum'"}},
  });
}

TEST(ParserExpr, MissingCloseParenNamesTheCall) {
  expect_expr_errors({
      {"mean(x, axis=0", {"2:25: expected ')' to close the call to 'mean' but found ';'"}},
      {"(a + b", {"2:17: expected ')' to close '(' but found ';'"}},
      {"[1, 2", {"2:16: expected ',' or ']' in the list but found ';'"}},
      {"a +", {"2:14: expected an expression but found ';'"}},
      {"x[0]",
       {"2:12: indexing with '[...]' is not supported; use take(x, idx) or slice(x, start, stop, axis=0)"}},
  });
}

TEST(ParserDecl, SharedVariables) {
  Parse p = parse(
      "shared w: f32[10, k] = normal(seed=1, std=0.1) sliceable;\n"
      "shared b: f64;\n"
      "shared c: i32[] = -3;\n"
      "shared d: f32[2] = ones;\n");
  ASSERT_TRUE(p.diagnostics.empty()) << p.messages()[0];
  ASSERT_EQ(p.program.shareds.size(), 4u);
  const ast::SharedDecl& w = p.program.shareds[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.name_loc, (SourceLoc{1, 8}));
  EXPECT_EQ(w.type.dtype, "f32");
  ASSERT_EQ(w.type.dims.size(), 2u);
  EXPECT_EQ(w.type.dims[0].size, 10);
  EXPECT_EQ(w.type.dims[1].symbol, "k");
  EXPECT_EQ(w.type.dims[1].loc, (SourceLoc{1, 19}));
  EXPECT_TRUE(w.sliceable);
  EXPECT_EQ(sexpr(*w.init), "(call normal seed=1 std=0.1)");
  EXPECT_FALSE(p.program.shareds[1].init);
  EXPECT_FALSE(p.program.shareds[1].sliceable);
  EXPECT_TRUE(p.program.shareds[2].type.dims.empty());
  EXPECT_EQ(sexpr(*p.program.shareds[2].init), "-3");
  EXPECT_EQ(sexpr(*p.program.shareds[3].init), "ones");
}

TEST(ParserDecl, InitializerMustBeANameANumberOrACall) {
  EXPECT_EQ(parse("shared w: f32 = 1 + 2;\n").messages(),
            std::vector<std::string>{"1:17: the initializer of shared variable 'w' must be zeros, ones, "
                                     "a number, true or false, or a call such as normal(seed=1)"});
}

TEST(ParserDecl, FunctionsParamsAndStatements) {
  Parse p = parse(
      "fn step(scatter x: f32[n, 10], bcast lr: f32, minibatch y: i64[n]) {\n"
      "  let h: f32[n] = x @ w;\n"
      "  out loss: sum = mean(h);\n"
      "  out idx = argmax(x, axis=1);\n"
      "  update w: avg = w - lr;\n"
      "}\n");
  ASSERT_TRUE(p.diagnostics.empty()) << p.messages()[0];
  const ast::FnDecl& fn = p.program.functions.at(0);
  EXPECT_EQ(fn.name, "step");
  EXPECT_EQ(fn.loc, (SourceLoc{1, 1}));
  ASSERT_EQ(fn.params.size(), 3u);
  EXPECT_EQ(fn.params[0].role, "scatter");
  EXPECT_EQ(fn.params[1].role, "bcast");
  EXPECT_EQ(fn.params[2].role, "minibatch");
  EXPECT_EQ(fn.params[1].name, "lr");
  EXPECT_EQ(fn.params[1].name_loc, (SourceLoc{1, 38}));
  EXPECT_TRUE(fn.params[1].type.dims.empty());
  EXPECT_EQ(fn.params[2].type.dtype, "i64");
  ASSERT_EQ(fn.body.size(), 4u);
  EXPECT_EQ(fn.body[0].kind, ast::StmtKind::Let);
  ASSERT_TRUE(fn.body[0].type);
  EXPECT_EQ(fn.body[0].type->dims[0].symbol, "n");
  EXPECT_EQ(fn.body[1].kind, ast::StmtKind::Out);
  EXPECT_EQ(fn.body[1].mode, "sum");
  EXPECT_EQ(fn.body[1].mode_loc, (SourceLoc{3, 13}));
  EXPECT_EQ(fn.body[2].mode, "");
  EXPECT_EQ(fn.body[3].kind, ast::StmtKind::Update);
  EXPECT_EQ(fn.body[3].name, "w");
  EXPECT_EQ(fn.body[3].mode, "avg");
  EXPECT_EQ(fn.body[3].loc, (SourceLoc{5, 3}));
  EXPECT_EQ(sexpr(*fn.body[3].value), "(- w lr)");
}

TEST(ParserDecl, HelpersReturnsAndLetsOfSeveralNames) {
  Parse p = parse(
      "def split(x: f32[n, k], s) {\n"
      "  let a, _ = pair(x);\n"
      "  return a * s, -x;\n"
      "}\n"
      "fn f(bcast x: f32[2, 3]) { let h, c = split(x, 2); out z = h + c; }\n");
  ASSERT_TRUE(p.diagnostics.empty()) << p.messages()[0];
  ASSERT_EQ(p.program.helpers.size(), 1u);
  const ast::HelperDecl& h = p.program.helpers[0];
  EXPECT_EQ(h.name, "split");
  EXPECT_EQ(h.name_loc, (SourceLoc{1, 5}));
  ASSERT_EQ(h.params.size(), 2u);
  EXPECT_EQ(h.params[0].name, "x");
  ASSERT_TRUE(h.params[0].type.has_value());
  EXPECT_EQ(h.params[0].type->dims[1].symbol, "k");
  EXPECT_FALSE(h.params[1].type.has_value());
  ASSERT_EQ(h.body.size(), 2u);
  EXPECT_EQ(h.body[0].name, "a");
  ASSERT_EQ(h.body[0].more_names.size(), 1u);
  EXPECT_EQ(h.body[0].more_names[0].name, "_");
  EXPECT_EQ(h.body[0].more_names[0].loc, (SourceLoc{2, 10}));
  EXPECT_EQ(h.body[1].kind, ast::StmtKind::Return);
  ASSERT_EQ(h.body[1].values.size(), 2u);
  EXPECT_EQ(sexpr(*h.body[1].values[0]), "(* a s)");
  EXPECT_EQ(sexpr(*h.body[1].values[1]), "(- x)");
  const ast::Stmt& let = p.program.functions.at(0).body.at(0);
  EXPECT_EQ(let.more_names.at(0).name, "c");
  EXPECT_EQ(sexpr(*let.value), "(call split x 2)");
}

TEST(ParserRecovery, HelperBodies) {
  EXPECT_EQ(parse("def h(x) {\n  let y = x;\n}\nfn f() { out z = 1; }\n").messages(),
            std::vector<std::string>{"1:5: helper 'h' has no 'return'; end its body with the values it gives "
                                     "back, as in 'return h;' or 'return h, c;'"});
  EXPECT_EQ(parse("def h(x) { return x; let y = x; }\n").messages(),
            std::vector<std::string>{"1:22: a statement after 'return' in helper 'h'; 'return' must be the last "
                                     "statement of a helper"});
  EXPECT_EQ(parse("def h(x) { out z = x; return x; }\n").messages(),
            std::vector<std::string>{"1:12: a helper cannot use 'out': helper 'h' gives back its values with "
                                     "'return', and the function that calls it writes outputs and updates"});
  EXPECT_EQ(parse("def h(bcast x: f32, y) { return x; }\n").messages(),
            std::vector<std::string>{"1:7: a helper's parameters have no role, but helper 'h' has 'bcast'; "
                                     "write 'x' or 'x: f32[n, k]' (only a function's parameters are scatter, "
                                     "bcast or minibatch)"});
  EXPECT_EQ(parse("def h(x { return x; }\ndef g(x) { return x }\n").messages(),
            (std::vector<std::string>{"1:9: expected ',' or ')' in the parameter list of helper 'h' but found '{'",
                                      "2:21: expected ';' after the values of 'return' but found '}'"}));
  EXPECT_EQ(parse("fn f(bcast x: f32) { let a, b: f32 = x; let return = 1; }\n").messages(),
            (std::vector<std::string>{"1:30: a 'let' of several names cannot declare their types; bind them one "
                                      "by one to annotate them",
                                      "1:45: expected a variable name after 'let' but found 'return', which is a "
                                      "reserved keyword"}));
}

TEST(ParserDecl, OptimizersAndMinimize) {
  Parse p = parse(
      "optimizer opt = adam(lr=0.01, beta1=0.8);\n"
      "fn train(scatter x: f32[n, 3]) {\n"
      "  minimize sum(x @ w) * 2 over w, b using opt;\n"
      "  update opt_grads = grad(sum(x @ w), w) using opt;\n"
      "}\n");
  ASSERT_TRUE(p.diagnostics.empty()) << p.messages()[0];
  ASSERT_EQ(p.program.optimizers.size(), 1u);
  const ast::OptimizerDecl& opt = p.program.optimizers[0];
  EXPECT_EQ(opt.name, "opt");
  EXPECT_EQ(opt.rule, "adam");
  EXPECT_EQ(opt.rule_loc, (SourceLoc{1, 17}));
  ASSERT_EQ(opt.hyper_parameters.size(), 2u);
  EXPECT_EQ(opt.hyper_parameters[1].name, "beta1");
  EXPECT_EQ(sexpr(*opt.hyper_parameters[1].value), "0.8");
  const ast::FnDecl& fn = p.program.functions.at(0);
  ASSERT_EQ(fn.body.size(), 2u);
  const ast::Stmt& m = fn.body[0];
  EXPECT_EQ(m.kind, ast::StmtKind::Minimize);
  EXPECT_EQ(sexpr(*m.value), "(* (call sum (@ x w)) 2)");
  ASSERT_EQ(m.over.size(), 2u);
  EXPECT_EQ(m.over[1].name, "b");
  EXPECT_EQ(m.over[1].loc, (SourceLoc{3, 35}));
  EXPECT_EQ(m.optimizer, "opt");
  EXPECT_EQ(m.optimizer_loc, (SourceLoc{3, 43}));
  EXPECT_EQ(fn.body[1].kind, ast::StmtKind::Update);
  EXPECT_EQ(fn.body[1].optimizer, "opt");
  EXPECT_EQ(sexpr(*fn.body[1].value), "(call grad (call sum (@ x w)) w)");
}

TEST(ParserDecl, OverAndUsingAreOrdinaryNames) {
  Parse p = parse("fn f(bcast over: f32) {\n  let using = over * 2;\n  out minimized = using;\n}\n");
  EXPECT_TRUE(p.diagnostics.empty()) << p.messages()[0];
}

TEST(ParserRecovery, TrainingDeclarationErrorsAreOneEach) {
  Parse p = parse(
      "optimizer opt = 0.1;\n"
      "fn f(bcast x: f32) {\n"
      "  minimize x over using opt;\n"
      "  minimize x over w\n"
      "  out y = x;\n"
      "}\n");
  EXPECT_EQ(p.messages(),
            (std::vector<std::string>{
                "1:17: expected an update rule such as momentum(lr=0.05) for optimizer 'opt' but found '0.1'",
                "3:25: expected ',' or 'using' and an optimizer after the variables of 'minimize' but found 'opt'",
                "5:3: expected ',' or 'using' and an optimizer after the variables of 'minimize' but found 'out'"}));
}

TEST(ParserDecl, NodeLocations) {
  Parse p = parse("fn f(scatter x: f32[n, 10], bcast y: f32[10]) {\n"
                  "  out z: avg = mean(x @ y, axis=0);\n"
                  "}\n");
  ASSERT_TRUE(p.diagnostics.empty());
  const ast::Stmt& out = p.program.functions[0].body[0];
  const ast::Expr& call = *out.value;
  EXPECT_EQ(call.loc, (SourceLoc{2, 16}));
  EXPECT_EQ(call.args[0]->loc, (SourceLoc{2, 23}));           // Binary: at its operator
  EXPECT_EQ(call.args[0]->args[0]->loc, (SourceLoc{2, 21}));  // x
  EXPECT_EQ(call.kwargs[0].loc, (SourceLoc{2, 28}));
  EXPECT_EQ(call.kwargs[0].value->loc, (SourceLoc{2, 33}));
  EXPECT_EQ(p.program.functions[0].params[0].type.loc, (SourceLoc{1, 17}));
}

TEST(AstPrinter, IndentedTreeWithLocations) {
  Parse p = parse("shared w: f32[10] = uniform(seed=3) sliceable;\n"
                  "fn f(scatter x: f32[n, 10]) {\n"
                  "  let s = \"a\\n\";\n"
                  "  out z: avg = mean(-x @ w, axis=0) * 2.0;\n"
                  "}\n"
                  "shared v: bool;\n");
  ASSERT_TRUE(p.diagnostics.empty());
  EXPECT_EQ(print_ast(p.program),
            "Shared 'w' sliceable @1:1\n"
            "  Type f32[10] @1:11\n"
            "  Call 'uniform' @1:21\n"
            "    Kwarg 'seed' @1:29\n"
            "      IntLiteral 3 @1:34\n"
            "Function 'f' @2:1\n"
            "  Param scatter 'x' @2:6\n"
            "    Type f32[n, 10] @2:17\n"
            "  Let 's' @3:3\n"
            "    StringLiteral \"a\\n\" @3:11\n"
            "  Out 'z' mode=avg @4:3\n"
            "    Binary '*' @4:37\n"
            "      Call 'mean' @4:16\n"
            "        Binary '@' @4:24\n"
            "          Unary '-' @4:21\n"
            "            Name 'x' @4:22\n"
            "          Name 'w' @4:26\n"
            "        Kwarg 'axis' @4:29\n"
            "          IntLiteral 0 @4:34\n"
            "      FloatLiteral 2.0 @4:39\n"
            "Shared 'v' @6:1\n"
            "  Type bool @6:11\n");
}

// ---- recovery

TEST(ParserRecovery, ThreeIndependentErrorsGiveExactlyThreeMessages) {
  Parse p = parse(
      "shared w: f32[10 = zeros;\n"          // 1: missing ']'
      "fn f(scatter x: f32[n]) {\n"
      "  let a = x +;\n"                      // 2: missing operand
      "  let b = a * 2;\n"
      "  out z = mean(b\n"                    // 3: missing ')' (and ';')
      "  out y = sum(a);\n"
      "}\n");
  EXPECT_EQ(p.messages(),
            (std::vector<std::string>{
                "1:18: expected ',' or ']' in the shape of 'w' but found '='",
                "3:14: expected an expression but found ';'",
                "6:3: expected ')' to close the call to 'mean' but found 'out'",
            }));
  // Recovery keeps the statements that were fine.
  ASSERT_EQ(p.program.functions.size(), 1u);
  EXPECT_EQ(p.program.functions[0].body.size(), 4u);
  EXPECT_EQ(p.program.functions[0].body[3].name, "y");
}

// numpy's `x // 2` comments out the rest of the line in .synk: the missing ';' says why.
TEST(ParserRecovery, AFloorDivisionThatIsACommentIsExplained) {
  Parse p = parse("fn f(scatter x: i32[n]) {\n"
                  "  out z: gather = x // 2;\n"
                  "}\n");
  EXPECT_EQ(p.messages(), std::vector<std::string>{
                              "3:1: expected ';' after expression but found '}': the '//' before it starts a comment "
                              "in .synk; for floor division write floor_divide(a, b)"});
  Parse comment = parse("fn f(scatter x: i32[n]) {\n"
                        "  out z: gather = x // a comment, then no ';'\n"
                        "}\n");
  ASSERT_EQ(comment.messages().size(), 1u);
  EXPECT_HAS(comment.messages()[0], "floor_divide") << "a word after // reads like an operand too";
  Parse plain = parse("fn f(scatter x: i32[n]) {\n"
                      "  out z: gather = x //\n"
                      "}\n");
  EXPECT_EQ(plain.messages(), std::vector<std::string>{
                                  "2:20: expected ';' after expression at the end of this line (the next line starts with '}')"});
}

TEST(ParserRecovery, MissingSemicolonIsOneErrorAndTheNextStatementParses) {
  Parse p = parse("fn f(scatter x: f32[n]) {\n"
                  "  let a = x\n"
                  "  out z = a;\n"
                  "}\n");
  EXPECT_EQ(p.messages(), std::vector<std::string>{
                                  "2:12: expected ';' after expression at the end of this line (the next line starts with 'out')"});
  EXPECT_EQ(p.program.functions[0].body.size(), 2u);
}

TEST(ParserRecovery, KeywordUsedAsANameIsOneError) {
  EXPECT_EQ(parse("fn f() {\n  let out = 1;\n  out z = out;\n}\n").messages(),
            (std::vector<std::string>{
                "2:7: expected a variable name after 'let' but found 'out', which is a reserved keyword",
                "3:11: expected an expression but found 'out'",
            }));
}

TEST(ParserRecovery, LexicalErrorGivesNoSyntaxErrorOnTop) {
  Parse p = parse("fn f(scatter x: f32[n]) {\n"
                  "  out z = x $ 2;\n"
                  "  out w = \"unterminated;\n"
                  "  out v = x;\n"
                  "}\n");
  EXPECT_EQ(p.messages(), (std::vector<std::string>{
                              "2:13: unexpected character '$'",
                              "3:11: unterminated string: a string must end with '\"' on the same line",
                          }));
  EXPECT_EQ(p.program.functions[0].body.back().name, "v");
}

TEST(ParserRecovery, ABinaryFileIsOneError) {
  Parse p = parse(std::string("fn f\x01\x02\0\0$ & |", 13) + std::string(1000, '$'));
  EXPECT_EQ(p.messages(), (std::vector<std::string>{
                              "0:0: not a text file (a NUL byte at offset 6); .synk programs are UTF-8 text",
                          }));
  EXPECT_TRUE(p.program.functions.empty());
}

TEST(ParserRecovery, ErrorsInSeveralParametersAreAllReported) {
  Parse p = parse("fn f(scatter x f32[n, 10], bogus y: f32, bcast z: f32[2) {\n"
                  "  out o = x + ;\n"
                  "}\n");
  EXPECT_EQ(p.messages(), (std::vector<std::string>{
                              "1:16: expected ':' and a type after parameter 'x' but found 'f32'",
                              "1:28: expected a parameter role (scatter, bcast or minibatch) but found 'bogus'",
                              "1:56: expected ',' or ']' in the shape of 'z' but found ')'",
                              "2:15: expected an expression but found ';'",
                          }));
}

TEST(ParserRecovery, AResultTypeArrowIsExplained) {
  EXPECT_EQ(parse("def c(x: f32[r]) -> f32[r] {\n  return x;\n}\nfn f(scatter x: f32[n]) {\n  out z: sum = sum(c(x));\n}\n")
                .messages(),
            std::vector<std::string>{"1:18: expected '{' to start the body of helper 'c' but found '-': a helper declares "
                                     "no result type ('-> ...'); its results' types follow from its return expressions"});
  EXPECT_EQ(parse("fn f(scatter x: f32[n]) -> f32 {\n  out z: sum = sum(x);\n}\n").messages(),
            std::vector<std::string>{"1:25: expected '{' to start the body of function 'f' but found '-': a function "
                                     "declares no result type ('-> ...'); its results are its 'out' statements, typed "
                                     "by their expressions"});
}

TEST(ParserRecovery, MissingBraceAndStrayTopLevelTokens) {
  EXPECT_EQ(parse("fn f(scatter x: f32)\n  out z = x;\n}\n").messages(),
            std::vector<std::string>{"2:3: expected '{' to start the body of function 'f' but found 'out'"});
  EXPECT_EQ(parse("fn f(scatter x: f32) {\n  out z = x;\n").messages(),
            std::vector<std::string>{"2:13: expected '}' to close the body of function 'f' but found end of file"});
  EXPECT_EQ(parse("let a = 1;\nlet b = 2;\nshared s: f32;\n").messages(),
            std::vector<std::string>{"1:1: expected 'fn', 'def', 'shared' or 'optimizer' but found 'let' (statements belong "
                                     "inside a function body)"});
  EXPECT_EQ(parse("fn f() {\n  z = 1;\n  out y = 2;\n}\n").messages(),
            std::vector<std::string>{"2:3: expected a statement (let, out, update or minimize) but found 'z'"});
}

TEST(ParserRecovery, EveryErrorOnItsOwnStatement) {
  std::string text = "fn f() {\n";
  for (int i = 0; i < 50; ++i) text += "  let a" + std::to_string(i) + " = (1 + ;\n";
  text += "}\n";
  Parse p = parse(text);
  // One error per statement, up to the error limit; then one line says the rest was not read.
  const size_t limit = DiagnosticEngine::kErrorLimit;
  ASSERT_EQ(p.diagnostics.size(), limit + 1);
  for (size_t i = 0; i < limit; ++i) EXPECT_EQ(p.diagnostics[i].loc.line, static_cast<uint32_t>(i + 2));
  EXPECT_EQ(p.diagnostics[limit].message, "too many errors (20); stopping");
  EXPECT_FALSE(p.diagnostics[limit].loc.valid());
}

TEST(ParserRecovery, DeepNestingIsAnErrorNotACrash) {
  std::string parens = std::string(100000, '(') + "x" + std::string(100000, ')');
  std::vector<std::string> errors = expr_errors(parens);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("expression is nested too deeply (the limit is 256 levels)"), std::string::npos);

  std::string chain = "a";
  for (int i = 0; i < 5000; ++i) chain += " + a";
  EXPECT_EQ(expr_errors(chain).size(), 1u);
  EXPECT_EQ(expr_errors(std::string(100000, '-') + "x").size(), 1u);
  EXPECT_EQ(expr_errors(std::string(50000, '[') + std::string(50000, ']')).size(), 1u);

  // The limit is generous for real programs.
  std::string sum = "a";
  for (int i = 0; i < 200; ++i) sum += " + a";
  EXPECT_TRUE(expr_errors(sum).empty());
}

}  // namespace
}  // namespace synk::dsl
