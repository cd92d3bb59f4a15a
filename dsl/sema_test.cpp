// Semantic analysis through the real front end (parse_program + analyze): the inferred type of
// many expressions, the IR nodes they become, diagnostics with their locations, and the printer
// round-trip (print, parse, analyze gives a structurally equal module and the same text) for
// every examples/*.synk and for op-heavy programs written here.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

#include "dsl/frontend.h"
#include "ir/ir.h"

namespace synk::dsl {
namespace {

struct Analyzed {
  std::optional<ir::Module> module;
  std::vector<std::string> errors;   // "line:col: message"
};

Analyzed analyze_text(const std::string& text, const std::string& base_dir = ".") {
  SourceFile file("test.synk", text);
  DiagnosticEngine diags(file);
  ast::Program program = parse_program(file, diags);
  Analyzed out;
  if (!diags.has_errors()) out.module = analyze(program, diags, base_dir);
  std::vector<Diagnostic> sorted = diags.diagnostics();
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& x, const Diagnostic& y) {
    return std::pair(x.loc.line, x.loc.col) < std::pair(y.loc.line, y.loc.col);
  });
  for (const Diagnostic& d : sorted)
    if (d.severity == Severity::Error)
      out.errors.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + d.message);
  return out;
}

const char* kPrelude =
    "shared w: f32[10, 3] = zeros;\n"
    "shared v: f64[3] = ones;\n"
    "shared c: i32 = 0;\n"
    "fn f(scatter x: f32[n, 10], bcast y: f32[10], scatter i: i32[n], bcast b: bool[3],\n"
    "     bcast u: u8[3], bcast k: i64[m], bcast z: f64[n2, 3]) {\n";

// The type of `expr` as the output of a function over the prelude's names.
std::string type_of(const std::string& expr) {
  Analyzed a = analyze_text(std::string(kPrelude) + "  out r: none = " + expr + ";\n}\n");
  if (!a.module) return "error: " + (a.errors.empty() ? std::string("?") : a.errors[0]);
  const ir::Function& f = a.module->functions.at(0);
  return ir::type_str(f.node(f.outputs.at(0).node).type);
}

TEST(SemaTypes, ExpressionsOverThePrelude) {
  const std::pair<const char*, const char*> cases[] = {
      {"x", "f32[n, 10]"},
      {"x + y", "f32[n, 10]"},
      {"x * 2", "f32[n, 10]"},
      {"2 * x", "f32[n, 10]"},
      {"i * 2", "i32[n]"},
      {"i * 2.5", "f32[n]"},
      {"u + 1", "u8[3]"},
      {"u + 1.5", "f32[3]"},
      {"x @ y", "f32[n]"},
      {"matmul(x, w)", "f32[n, 3]"},
      {"y @ w", "f32[3]"},
      {"y @ y", "f32[]"},
      {"(x @ w) + v", "f64[n, 3]"},
      {"mean(x @ y, axis=0)", "f32[]"},
      {"sum(x)", "f32[]"},
      {"sum(x, axis=-1)", "f32[n]"},
      {"sum(x, axis=[0, 1], keepdims=true)", "f32[1, 1]"},
      {"max(x, 1)", "f32[n]"},
      {"argmax(x, axis=1)", "i64[n]"},
      {"argmax(x)", "i64[n]"},
      {"x > 0", "bool[n, 10]"},
      {"(x > 0) && (x < 1)", "bool[n, 10]"},
      {"!b", "bool[3]"},
      {"b || true", "bool[3]"},
      {"where(b, v, 0)", "f64[3]"},
      {"where(x > 0, x, 0.5)", "f32[n, 10]"},
      {"exp(x)", "f32[n, 10]"},
      {"relu(i)", "i32[n]"},
      {"abs(-i)", "i32[n]"},
      {"-x", "f32[n, 10]"},
      {"x ** 2", "f32[n, 10]"},
      {"pow(v, 2)", "f64[3]"},
      {"maximum(x, y)", "f32[n, 10]"},
      {"minimum(i, 3)", "i32[n]"},
      {"transpose(x)", "f32[10, n]"},
      {"transpose(z, [1, 0])", "f64[3, n2]"},
      {"reshape(x, [n, 2, 5])", "f32[n, 2, 5]"},
      {"reshape(x, [n, -1])", "f32[n, 10]"},
      {"reshape(w, [-1])", "f32[30]"},
      {"flatten(w)", "f32[30]"},
      {"broadcast_to(y, [n, 10])", "f32[n, 10]"},
      {"cast(i, f64)", "f64[n]"},
      {"cast(x > 0, u8)", "u8[n, 10]"},
      {"softmax(x)", "f32[n, 10]"},
      {"log_softmax(x, axis=0)", "f32[n, 10]"},
      {"cross_entropy(x, i)", "f32[n]"},
      {"cross_entropy(x, softmax(x))", "f32[n]"},
      {"one_hot(i, 10)", "f32[n, 10]"},
      {"one_hot(k, 4, dtype=f64)", "f64[m, 4]"},
      {"take(x, k)", "f32[m, 10]"},
      {"take(w, i)", "f32[n, 3]"},
      {"concat(x, x, axis=1)", "f32[n, 20]"},
      {"concat(w, w, w)", "f32[30, 3]"},
      {"slice(x, 2, 5, axis=1)", "f32[n, 3]"},
      {"slice(x, -3, -1, axis=-1)", "f32[n, 2]"},
      {"grad(sum(x @ w), w)", "f32[10, 3]"},
      {"grad(sum(x @ w) + cast(sum(v), f32), w, v)", "f32[33]"},
      {"grad(sum(x @ w), x)", "f32[n, 10]"},                  // an input's gradient, per row
      {"grad(sum(y * y) + sum(w), y, w)", "f32[40]"},
      {"1 + 2", "i32[]"},
      {"1.5", "f32[]"},
      {"inf", "f32[]"},
      {"-inf", "f32[]"},
      {"c + 1", "i32[]"},
      {"n", "i64[]"},
      {"sum(x) / n", "f32[]"},
      {"m * n2 + 1", "i64[]"},
      {"broadcast_to(n, [n])", "i64[n]"},
      {"cast(1, f64)", "f64[]"},
  };
  for (const auto& [expr, expected] : cases) {
    EXPECT_EQ(type_of(expr), expected) << expr;
  }
}

TEST(SemaTypes, ErrorsOverThePrelude) {
  const std::pair<const char*, const char*> cases[] = {
      {"x + w", "cannot broadcast shapes [n, 10] and [10, 3] in '+'"},
      {"x @ z", "inner dimensions of '@' do not match"},
      {"i / 2", "'/' needs floating operands"},
      {"x && b", "'&&' needs bool operands but 'x' is f32[n, 10]"},
      {"!x", "'!' needs a bool operand"},
      {"-b", "'-' needs a numeric operand"},
      {"u + 300", "integer 300 does not fit in u8"},
      {"sum(x, axis=2)", "axis 2 is out of range for rank 2 in sum"},
      {"sum(x, axis=[1, -1])", "axis 1 appears twice"},
      {"mean(i)", "mean needs a floating operand"},
      {"sum(b)", "sum needs a numeric operand"},
      {"exp(i)", "exp needs a floating operand"},
      {"reshape(x, [n, 3])", "cannot reshape [n, 10] (10*n elements) to [n, 3] (3*n elements)"},
      {"reshape(x, [-1])", "the size would be 10*n"},
      {"reshape(x, [q, 10])", "unknown dimension 'q' in reshape"},
      {"x + z", "cannot broadcast shapes [n, 10] and [n2, 3]"},
      {"sum(x, axes=1)", "unknown keyword argument 'axes' for sum; expected axis, keepdims"},
      {"exp(x, y)", "exp takes 1 argument but 2 were given"},
      {"expp(x)", "unknown operation or helper 'expp'; did you mean 'exp'?"},
      {"xx + 1", "unknown name 'xx'; did you mean 'x'?"},
      {"mm + 1", "unknown name 'mm'; did you mean 'm'?"},
      {"grad(x, w)", "grad needs a scalar loss but 'x' has shape [n, 10]"},
      {"grad(sum(i), w)", "grad needs a floating loss"},
      {"grad(sum(x), i)", "grad needs floating variables but 'i' is i32[n]"},
      {"grad(sum(x * y), y, y)", "'y' appears twice in grad"},
      {"grad(sum(x), n)", "grad differentiates with respect to shared variables and inputs, named directly, but 'n'"},
      {"grad(sum(x), c)", "grad needs floating variables but 'c' is i32[]"},
      {"grad(sum(x @ w), w, w)", "'w' appears twice in grad"},
      {"take(x, y)", "take needs an integer vector of row indices"},
      {"where(x, x, x)", "where needs a bool condition"},
      {"concat(x, w)", "concat's operands differ outside axis 0"},
      {"slice(x, 0, 11, axis=1)", "slice [0, 11) is out of range"},
      {"slice(x, 0, 1)", "slice needs a static size along axis 0"},
      {"one_hot(x, 3)", "one_hot needs integer labels"},
      {"cast(x, f16)", "dtype 'f16' is reserved"},
      {"cast(x, q)", "expected a dtype"},
      {"transpose(x, [0, 0])", "permutation"},
      {"softmax(i)", "softmax needs a floating operand"},
      {"f", "'f' is a function and cannot be used as a value"},
      {"normal(seed=1)", "initializes shared variables"},
      {"[1, 2]", "a list such as [1, 2] is only allowed"},
  };
  for (const auto& [expr, expected] : cases) {
    std::string got = type_of(expr);
    EXPECT_NE(got.find(expected), std::string::npos) << expr << " gave " << got;
  }
}

TEST(SemaIr, LeavesAreSharedAndLiteralsResolved) {
  Analyzed a = analyze_text(
      "shared s: f64[3] = ones;\n"
      "fn f(bcast x: f64[3], bcast i: i32[3]) {\n"
      "  let two = 2;\n"
      "  let y = x * two + s * two + s;\n"
      "  out o: sum = y + cast(i * two, f64);\n}\n");
  ASSERT_TRUE(a.module) << a.errors.at(0);
  const ir::Function& f = a.module->functions[0];
  int inputs = 0, reads = 0, constants = 0;
  for (const ir::Node& n : f.nodes) {
    inputs += n.op == ir::Op::Input;
    reads += n.op == ir::Op::SharedRead;
    constants += n.op == ir::Op::Constant;
    if (n.op == ir::Op::Constant) {
      EXPECT_EQ(n.name, "two");
      if (n.type.dtype == ir::DType::F64) EXPECT_EQ(n.attrs.value, 2.0);
      else EXPECT_EQ(n.attrs.ivalue, 2);
    }
  }
  EXPECT_EQ(inputs, 2);
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(constants, 2);   // `two` as f64 once and as i32 once
  EXPECT_TRUE(ir::verify(*a.module).empty());
  // Let names are kept as hints.
  EXPECT_EQ(f.node(f.outputs[0].node).op, ir::Op::Add);
  bool named_y = false;
  for (const ir::Node& n : f.nodes) named_y |= n.name == "y";
  EXPECT_TRUE(named_y);
}

TEST(SemaIr, ImplicitPromotionInsertsCasts) {
  Analyzed a = analyze_text("fn f(bcast x: f32[3], bcast i: i64[3]) { out o: sum = x + i; }");
  ASSERT_TRUE(a.module);
  const ir::Function& f = a.module->functions[0];
  const ir::Node& add = f.node(f.outputs[0].node);
  EXPECT_EQ(add.op, ir::Op::Add);
  EXPECT_EQ(f.node(add.operands[1]).op, ir::Op::Cast);
  EXPECT_EQ(f.node(add.operands[1]).type.dtype, ir::DType::F32);
}

TEST(SemaErrors, LocationsAndIndependentErrors) {
  Analyzed a = analyze_text(
      "shared s: f32[2] = ones;\n"
      "fn f(scatter x: f32[n, 10], bcast y: f32[3]) {\n"
      "  let a = x + y;\n"
      "  let b = a * 2;\n"          // a failed: no follow-on error
      "  let c = wx;\n"
      "  update s = sum(x, axis=0);\n"
      "  out z: gather = x;\n"
      "}\n");
  ASSERT_FALSE(a.module);
  ASSERT_EQ(a.errors.size(), 3u) << ::testing::PrintToString(a.errors);
  EXPECT_EQ(a.errors[0], "3:13: cannot broadcast shapes [n, 10] and [3] in '+'");
  EXPECT_EQ(a.errors[1], "5:11: unknown name 'wx'; did you mean 'x'?");
  EXPECT_EQ(a.errors[2], "6:14: update of 's' needs a value of type f32[2] but this one has type f32[10]");
}

TEST(SemaErrors, DeclarationsAndModes) {
  Analyzed a = analyze_text(
      "shared s: f32[2] = ones;\n"
      "fn f(scatter x: f32[n, 10], bcast s: f32[2], scatter x: f32[n]) {\n"
      "  let q = 1;\n"
      "  let q = 2;\n"
      "  out o: mean = sum(x);\n"
      "  out p = 1 + 2;\n"
      "  out p: sum = sum(x);\n"         // x is declared twice: its uses stay silent
      "  update q = 1;\n"
      "}\n"
      "fn f(bcast y: f32) { out r: none = y; }\n");
  ASSERT_FALSE(a.module);
  std::vector<std::string> expected = {
      "2:35: parameter 's' would shadow the shared variable declared at 1:8; choose another name",
      "2:54: 'x' is already declared at 2:14",
      "4:7: 'q' is already declared at 3:7",
      "5:10: unknown mode 'mean'; expected avg, sum, prod, max, min, gather or none",
      "6:7: output 'p' has dtype i32, which cannot be averaged (avg is the default mode); give it another "
      "mode, e.g. 'out p: sum = ...' or 'out p: gather = ...'",
      "7:7: output 'p' is already declared at 6:7",
      "8:10: only shared variables can be updated, but 'q' is a let",
      "10:4: 'f' is already declared at 2:4",
  };
  EXPECT_EQ(a.errors, expected);
}

TEST(SemaErrors, Initializers) {
  Analyzed a = analyze_text(
      "shared a: f32[2] = normal(seed=1, mean=0, std=-1);\n"
      "shared b: f32[2] = uniform(seed=1, low=1, high=1);\n"
      "shared c: f32[2] = normal(std=1);\n"
      "shared d: i32[2] = 2.5;\n"
      "shared e: f32[2] = load(\"missing.npy\");\n"
      "shared g: f32[2] = ones;\n"
      "fn f(bcast x: f32[2]) { update g = x; }\n");
  ASSERT_FALSE(a.module);
  ASSERT_EQ(a.errors.size(), 5u) << ::testing::PrintToString(a.errors);
  EXPECT_EQ(a.errors[0], "1:47: std must be 0 or more, found -1");
  EXPECT_EQ(a.errors[1], "2:20: uniform needs low < high, found low=1 and high=1");
  EXPECT_EQ(a.errors[2].substr(0, 25), "3:20: normal needs seed=S");
  EXPECT_EQ(a.errors[3], "4:20: initial value 2.5 does not fit shared variable 'd' of dtype i32");
  EXPECT_EQ(a.errors[4].substr(0, 31), "5:25: cannot find \"missing.npy\"");
}

// A version 1.0 .npy file with this header and zeroed data.
void write_npy(const std::filesystem::path& path, const std::string& descr, const std::string& shape,
               bool fortran = false, size_t data_bytes = 64) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(char(header.size() & 0xff));
  out.put(char(header.size() >> 8));
  out << header << std::string(data_bytes, '\0');
}

TEST(SemaErrors, LoadChecksTheFileAgainstTheDeclaration) {
  auto dir = std::filesystem::temp_directory_path() / ("synk_sema_test_load_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_npy(dir / "w.npy", "<f4", "(3, 4)");
  write_npy(dir / "v.npy", "<i4", "(5,)");
  write_npy(dir / "d.npy", "<f8", "(3, 4)");
  write_npy(dir / "c.npy", "<c8", "(3,)");
  write_npy(dir / "f.npy", "<f4", "(3, 4)", true);
  std::ofstream(dir / "junk.npy") << "not numpy";
  auto check = [&](const std::string& decl) {
    Analyzed a = analyze_text(decl + "\nfn f(bcast x: f32[2]) { out o: none = x; }\n", dir.string());
    return a.errors.empty() ? std::string("ok") : a.errors[0];
  };
  EXPECT_EQ(check("shared w: f32[3, 4] = load(\"w.npy\");"), "ok");
  EXPECT_EQ(check("shared w: f64[rows, cols] = load(\"w.npy\");"), "ok");
  EXPECT_EQ(check("shared v: f64[n] = load(\"v.npy\");"), "ok");
  EXPECT_EQ(check("shared v: i64[rows] = load(\"v.npy\") sliceable;"), "ok");
  EXPECT_EQ(check("shared w: f32[n, n] = load(\"w.npy\");"),
            "1:28: \"w.npy\" has shape (3, 4) but shared variable 'w' is declared f32[n, n]");
  EXPECT_EQ(check("shared w: f32[3, 5] = load(\"w.npy\");"),
            "1:28: \"w.npy\" has shape (3, 4) but shared variable 'w' is declared f32[3, 5]");
  EXPECT_EQ(check("shared w: f32[12] = load(\"w.npy\");"),
            "1:26: \"w.npy\" has shape (3, 4) but shared variable 'w' is declared f32[12]");
  EXPECT_EQ(check("shared v: f32[5] = load(\"v.npy\");"),
            "1:25: \"v.npy\" holds i32 values, which do not convert safely to f32; declare 'v' as i32 or save "
            "the file as f32");
  EXPECT_TRUE(check("shared d: f32[3, 4] = load(\"d.npy\");").starts_with("1:28: \"d.npy\" holds f64 values, which do ")) << check("shared d: f32[3, 4] = load(\"d.npy\");");
  EXPECT_TRUE(check("shared c: f32[3] = load(\"c.npy\");").starts_with("1:25: \"c.npy\" holds dtype '<c8', which syn")) << check("shared c: f32[3] = load(\"c.npy\");");
  EXPECT_TRUE(check("shared f: f32[3, 4] = load(\"f.npy\");").starts_with("1:28: \"f.npy\" is stored in Fortran order; save ")) << check("shared f: f32[3, 4] = load(\"f.npy\");");
  EXPECT_EQ(check("shared j: f32[3] = load(\"junk.npy\");"), "1:25: \"junk.npy\" is not a .npy file");
  // A valid header over too few data bytes, and a directory, are found now, not when run.
  write_npy(dir / "short.npy", "<f4", "(3, 4)", false, 40);
  EXPECT_EQ(check("shared s: f32[3, 4] = load(\"short.npy\");"),
            "1:28: \"short.npy\" is truncated: shape (3, 4) of f32 needs 48 bytes of data, the file has 40");
  write_npy(dir / "exact.npy", "<f4", "(3, 4)", false, 48);
  EXPECT_EQ(check("shared s: f32[3, 4] = load(\"exact.npy\");"), "ok");
  std::filesystem::create_directories(dir / "sub.npy");
  EXPECT_EQ(check("shared s: f32[3] = load(\"sub.npy\");"),
            "1:25: \"sub.npy\" is a directory, not an .npy file (looked at " + (dir / "sub.npy").string() + ")");
  // An absolute path is used as is: the file is found and checked.
  std::string absolute = check("shared j: f32[3] = load(\"" + (dir / "w.npy").string() + "\");");
  EXPECT_NE(absolute.find("has shape (3, 4)"), std::string::npos) << absolute;
  std::filesystem::remove_all(dir);
}

TEST(SemaErrors, NoOutputs) {
  Analyzed a = analyze_text("fn f(bcast x: f32[2]) { let y = x; }\n");
  ASSERT_EQ(a.errors.size(), 1u);
  EXPECT_EQ(a.errors[0], "1:4: function 'f' has no 'out' or 'update' statement, so it computes nothing");
}

// ---- Round trip --------------------------------------------------------------------------

void expect_round_trip(const std::string& label, const std::string& text, const std::string& base_dir) {
  Analyzed first = analyze_text(text, base_dir);
  ASSERT_TRUE(first.module) << label << ": " << ::testing::PrintToString(first.errors);
  std::string printed = print_module(*first.module);
  Analyzed second = analyze_text(printed, base_dir);
  ASSERT_TRUE(second.module) << label << ": printed IR does not analyze: "
                             << ::testing::PrintToString(second.errors) << "\n" << printed;
  std::string diff;
  EXPECT_TRUE(ir::structurally_equal(*first.module, *second.module, &diff)) << label << ": " << diff << "\n"
                                                                            << printed;
  EXPECT_EQ(print_module(*second.module), printed) << label;
}

TEST(RoundTrip, EveryExample) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SYNK_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".synk") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    expect_round_trip(entry.path().filename().string(), text.str(), entry.path().parent_path().string());
    ++count;
  }
  EXPECT_GE(count, 4);
}

TEST(RoundTrip, TrainingSteps) {
  expect_round_trip("train",
                    "shared w: f32[4, 3] = normal(seed=1);\n"
                    "shared b: f64[3];\n"
                    "optimizer opt = adamax(lr=0.002, beta2=0.99, num_packs=2);\n"
                    "optimizer spare = nesterov(lr=1e-3);\n"
                    "fn train(scatter x: f64[n, 4]) {\n"
                    "  out l: avg = mean(x);\n"
                    "  minimize sum(cast(x, f32) @ w + b) over w, b using opt;\n"
                    "}\n"
                    "fn one(bcast t: f32[4, 3]) {\n"
                    "  minimize sum(w * t) over w using spare;\n"
                    "}\n",
                    ".");
}

TEST(SemaIr, TrainingStepsAreRecorded) {
  Analyzed a = analyze_text(
      "shared w: f32[4, 3];\n"
      "shared b: f32[3];\n"
      "optimizer opt = momentum(lr=0.1, momentum=0.5);\n"
      "fn train(scatter x: f32[n, 4]) {\n"
      "  minimize sum(x @ w + b) over b, w using opt;\n"
      "}\n"
      "fn again(scatter x: f32[n, 4]) {\n"
      "  minimize mean(x @ w + b) over b, w using opt;\n"
      "}\n");
  ASSERT_TRUE(a.module) << (a.errors.empty() ? std::string() : a.errors[0]);
  const ir::Module& m = *a.module;
  ASSERT_EQ(m.optimizers.size(), 1u);
  const ir::Optimizer& o = m.optimizers[0];
  EXPECT_EQ(o.rule, "momentum");
  EXPECT_EQ(o.hyper_parameters, (std::vector<std::pair<std::string, double>>{{"lr", 0.1}, {"momentum", 0.5}}));
  EXPECT_EQ(o.parameters, (std::vector<int64_t>{1, 0}));
  ASSERT_EQ(o.gradient, 2);
  EXPECT_EQ(m.shareds[2].name, "opt_grads");
  EXPECT_EQ(ir::type_str(m.shareds[2].type), "f32[15]");
  EXPECT_EQ(o.update_function(), "opt_update");
  ASSERT_EQ(m.train_steps.size(), 2u);
  EXPECT_EQ(m.train_steps[1].function, "again");
  EXPECT_EQ(m.find_train_step("train")->optimizer, 0);
  const ir::Function& f = *m.find_function("train");
  ASSERT_EQ(f.updates.size(), 1u);
  EXPECT_EQ(f.updates[0].shared, 2);
  EXPECT_EQ(f.node(f.updates[0].node).op, ir::Op::Grad);
}

TEST(RoundTrip, OpHeavyProgram) {
  expect_round_trip("ops",
                    "shared w: f32[10, 3] = uniform(seed=7, low=-0.5, high=0.5);\n"
                    "shared rows: f64[r, 3] = const(-1.25) sliceable;\n"
                    "shared count: i64 = 3;\n"
                    "fn f(scatter x: f32[n, 10], bcast y: f32[10], scatter i: i32[n], bcast k: i64[m]) {\n"
                    "  let h = relu(x @ w) ** 2 - 0.1;\n"
                    "  let p = softmax(h, axis=0);\n"
                    "  let e = where(h > 0.5 || h < -inf, exp(h), sqrt(abs(h)) / 3);\n"
                    "  out a: gather = concat(h, p, e, axis=1);\n"
                    "  out b: sum = sum(cast(argmax(h, axis=1, keepdims=true), f32), axis=[0, 1]);\n"
                    "  out c: max = max(take(transpose(w), k), axis=0);\n"
                    "  out d: none = reshape(x, [n, 5, -1]);\n"
                    "  out g: avg = grad(mean(cross_entropy(h, i)) + mean(log_softmax(h)), w);\n"
                    "  out s: min = slice(y, 1, -1) * nan;\n"
                    "  out t: sum = one_hot(k, 3, dtype=u8);\n"
                    "  out u: sum = sum(rows * 2, axis=0) + cast(count, f64) + mean(one_hot(i, 3, dtype=f64), axis=0);\n"
                    "  update count: sum = count + 1;\n"
                    "}\n",
                    ".");
}

}  // namespace
}  // namespace synk::dsl
