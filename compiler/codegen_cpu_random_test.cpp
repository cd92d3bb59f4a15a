// Random programs, compiled and compared with the reference evaluator: DAGs of pointwise ops,
// broadcasts, where and keepdims reductions over inputs of shapes [n, 4], [n, 1], [1, 4], [4]
// and [], so that fusion meets shapes and sharing patterns nobody wrote a test for. Each program
// is printed on failure with the seed (SYNK_TEST_SEED replays the whole run).
#include <random>
#include <regex>

#include "compiler/cpu_test_util.h"

namespace synk::compiler {
namespace {

const bool kCacheDirSet = [] {
  setenv("SYNK_CACHE_DIR", SYNK_BINARY_DIR "/kernel-cache-tests", 0);
  return true;
}();

struct Var {
  std::string name;
  int rows;   // 0: no row axis, 1: size-1 row axis, 2: n rows
  int cols;   // 0: no column axis (then rank <= 1 only via rows), 1: size 1, 4: four
};

std::string shape_of(const Var& v) {
  if (v.rows == 0 && v.cols == 0) return "[]";
  if (v.rows == 0) return fmt::format("[{}]", v.cols);
  return fmt::format("[{}, {}]", v.rows == 2 ? "n" : "1", v.cols);
}

Var broadcast(const std::string& name, const Var& a, const Var& b) {
  Var r{name, std::max(a.rows, b.rows), std::max(a.cols, b.cols)};
  if (r.rows > 0 && r.cols == 0) r.cols = 1;
  return r;
}

std::string random_program(std::mt19937_64& rng, std::vector<std::string>* outputs) {
  auto pick = [&](size_t n) { return size_t(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  std::vector<Var> vars = {{"x", 2, 4}, {"c", 2, 1}, {"r", 1, 4}, {"v", 0, 4}, {"s", 0, 0}};
  std::string body;
  const int lets = 3 + int(pick(8));
  for (int i = 0; i < lets; ++i) {
    std::string name = fmt::format("t{}", i);
    const Var& a = vars[pick(vars.size())];
    const Var& b = vars[pick(vars.size())];
    Var result;
    std::string expr;
    switch (pick(6)) {
      case 0: {
        const char* f[] = {"tanh", "sigmoid", "abs", "-", "relu", "exp(tanh"};
        size_t k = pick(6);
        expr = k == 5 ? fmt::format("exp(tanh({}))", a.name) : fmt::format("{}({})", f[k], a.name);
        result = Var{name, a.rows, a.cols};
        break;
      }
      case 1: case 2: {
        const char* f[] = {"+", "-", "*"};
        expr = fmt::format("{} {} {}", a.name, f[pick(3)], b.name);
        result = broadcast(name, a, b);
        break;
      }
      case 3:
        expr = fmt::format("{}({}, {})", pick(2) ? "maximum" : "minimum", a.name, b.name);
        result = broadcast(name, a, b);
        break;
      case 4: {
        const Var& c = vars[pick(vars.size())];
        expr = fmt::format("where({} > {}, {}, {})", a.name, b.name, c.name, a.name);
        result = broadcast(name, broadcast(name, a, b), c);
        break;
      }
      default: {
        const char* f[] = {"sum", "mean", "max", "min"};
        if (a.rows == 0) {   // rank <= 1: reduce everything
          expr = fmt::format("{}({})", f[pick(4)], a.name);
          result = Var{name, 0, 0};
        } else {
          int axis = int(pick(2));
          expr = fmt::format("{}({}, axis={}, keepdims=true)", f[pick(4)], a.name, axis);
          result = Var{name, axis == 0 ? 1 : a.rows, axis == 1 ? 1 : a.cols};
        }
      }
    }
    result.name = name;
    body += fmt::format("  let {} = {};\n", name, expr);
    vars.push_back(result);
  }
  // Outputs: every let nothing else reads (so no node is dead: the evaluator runs dead nodes and
  // may fail in them, compiled code drops them), plus maybe one read by others too.
  std::vector<std::string> outs;
  for (int i = 0; i < lets; ++i) {
    std::string name = fmt::format("t{}", i);
    std::regex use("\\b" + name + "\\b");
    size_t after = body.find(fmt::format("  let t{} =", i + 1));
    if (after == std::string::npos || !std::regex_search(body.substr(after), use)) outs.push_back(name);
  }
  if (pick(2)) outs.push_back(vars[5 + pick(size_t(lets))].name);
  for (size_t o = 0; o < outs.size(); ++o) {
    body += fmt::format("  out o{}: none = {};\n", o, outs[o]);
    outputs->push_back(outs[o]);
  }
  return "fn f(bcast x: f64[n, 4], bcast c: f64[n, 1], bcast r: f64[1, 4], bcast v: f64[4], bcast s: f64) {\n" +
         body + "}\n";
}

TEST(CodegenCpuRandom, ProgramsAgreeWithTheReference) {
  std::mt19937_64 rng(testing::test_seed());
  const int programs = 40;
  for (int p = 0; p < programs; ++p) {
    std::vector<std::string> outputs;
    std::string source = random_program(rng, &outputs);
    ir::Module m;
    try {
      m = testing::parse(source);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "generated program does not compile: " << e.what() << "\n" << source;
      continue;
    }
    for (int64_t n : {0, 1, 5, 17}) {
      uint64_t seed = rng();
      testing::CaseResult r = testing::run_differential(m, "f", {{"n", n}}, seed, {.scale = 1.5});
      EXPECT_TRUE(r.failure.empty()) << "program " << p << " (SYNK_TEST_SEED=" << testing::test_seed() << "), n=" << n
                                     << ": " << r.failure << "\n" << source;
    }
  }
}

}  // namespace
}  // namespace synk::compiler
