// Random programs, compiled and compared with the reference evaluator: DAGs of pointwise ops,
// broadcasts, where and keepdims reductions over inputs of shapes [n, 4], [n, 1], [1, 4], [4]
// and [], so that fusion meets shapes and sharing patterns nobody wrote a test for. Each program
// is printed on failure with the seed (SYNK_TEST_SEED replays the whole run). A few programs of
// each generator also go through the ahead-of-time GPU path (synkc's: NVRTC CUBIN for sm_80 and
// sm_90, PTX of the newest, the load path's image checks), when NVRTC can be loaded.
#include <optional>
#include <random>
#include <regex>

#include "compiler/cpu/cpu_test_util.h"
#include "compiler/cuda/codegen_cuda.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/lower.h"

namespace synk::compiler {
namespace {

struct Var {
  std::string name;
  int rows;   // 0: no row axis, 1: size-1 row axis, 2: n rows
  int cols;   // 0: no column axis (then rank <= 1 only via rows), 1: size 1, 4: four
};

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

// Static shapes ([4, 4], [4, 1], [1, 4]) with the structural ops: transposes (views inside
// fused kernels), reshape round trips (aliases), slices of concats, matmuls (BLAS, transposes
// folded), softmax and log_softmax, keepdims reductions.
std::string random_structural_program(std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return size_t(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  struct V { std::string name; int r, c; };
  std::vector<V> vars = {{"x", 4, 4}, {"y", 4, 4}, {"c", 4, 1}, {"r", 1, 4}};
  std::string body;
  const int lets = 3 + int(pick(7));
  auto any = [&] { return vars[pick(vars.size())]; };
  for (int i = 0; i < lets; ++i) {
    std::string name = fmt::format("t{}", i);
    V a = any(), b = any();
    std::string expr;
    V res{name, a.r, a.c};
    switch (pick(9)) {
      case 0: expr = fmt::format("transpose({})", a.name); res = {name, a.c, a.r}; break;
      case 1:
        if (a.r == 4 && a.c == 4) { expr = fmt::format("reshape(reshape({}, [2, 8]) * 2, [4, 4])", a.name); break; }
        expr = fmt::format("tanh({})", a.name);
        break;
      case 2: {
        V b2 = any();
        while (b2.c != a.c) b2 = any();
        if (a.r == 4 && b2.r == 4) {
          expr = fmt::format("slice(concat({}, {}, axis=0), {}, {}, axis=0)", a.name, b2.name, 2, 6);
          break;
        }
        expr = fmt::format("sigmoid({})", a.name);
        break;
      }
      case 3: {
        V b2 = any();
        while (b2.r != 4) b2 = any();
        if (a.c == 4) { expr = fmt::format("({} @ {}) * 0.25", a.name, b2.name); res = {name, a.r, b2.c}; break; }
        expr = fmt::format("abs({})", a.name);
        break;
      }
      case 4: expr = fmt::format("{}({}, axis={})", pick(2) ? "softmax" : "log_softmax", a.name, pick(2)); break;
      case 5: {
        int axis = int(pick(2));
        const char* f[] = {"sum", "mean", "max", "min"};
        expr = fmt::format("{}({}, axis={}, keepdims=true)", f[pick(4)], a.name, axis);
        res = {name, axis == 0 ? 1 : a.r, axis == 1 ? 1 : a.c};
        break;
      }
      case 6:
        expr = fmt::format("where({} > {}, {}, {})", a.name, b.name, b.name, a.name);
        res = {name, std::max(a.r, b.r), std::max(a.c, b.c)};
        break;
      default: {
        const char* f[] = {"+", "-", "*"};
        expr = fmt::format("{} {} {}", a.name, f[pick(3)], b.name);
        res = {name, std::max(a.r, b.r), std::max(a.c, b.c)};
      }
    }
    body += fmt::format("  let {} = {};\n", name, expr);
    vars.push_back(res);
  }
  std::vector<std::string> outs;
  for (int i = 0; i < lets; ++i) {
    std::string name = fmt::format("t{}", i);
    size_t after = body.find(fmt::format("  let t{} =", i + 1));
    if (after == std::string::npos || !std::regex_search(body.substr(after), std::regex("\\b" + name + "\\b")))
      outs.push_back(name);
  }
  for (size_t o = 0; o < outs.size(); ++o) body += fmt::format("  out o{}: none = {};\n", o, outs[o]);
  return "fn f(bcast x: f64[4, 4], bcast y: f64[4, 4], bcast c: f64[4, 1], bcast r: f64[1, 4]) {\n" + body + "}\n";
}

// A generated program's module; a generator bug (a program the front end rejects) is a failure
// that names the program, and the caller moves on to the next one.
std::optional<ir::Module> parse_generated(const std::string& source) {
  try {
    return testing::parse(source);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "generated program does not compile: " << e.what() << "\n" << source;
    return std::nullopt;
  }
}

TEST(CodegenCpuRandom, StructuralProgramsAgreeWithTheReference) {
  std::mt19937_64 rng(testing::test_seed() ^ 0x5eed);
  for (int p = 0; p < 40; ++p) {
    std::string source = random_structural_program(rng);
    if (std::getenv("SYNK_RANDOM_PRINT")) std::fputs(source.c_str(), stderr);
    std::optional<ir::Module> parsed = parse_generated(source);
    if (!parsed) continue;
    const ir::Module& m = *parsed;
    // Every other program unfused: one kernel per op, so temporaries share storage slots.
    CpuCompileOptions options;
    options.fuse = p % 2 == 0;
    testing::CaseResult r = testing::run_differential(m, "f", {}, rng(), {.scale = 1.5}, {}, nullptr, options);
    EXPECT_TRUE(r.failure.empty()) << "program " << p << " (SYNK_TEST_SEED=" << testing::test_seed() << "): "
                                   << r.failure << "\n" << source;
  }
}

TEST(CodegenCpuRandom, ProgramsAgreeWithTheReference) {
  std::mt19937_64 rng(testing::test_seed());
  const int programs = 40;
  for (int p = 0; p < programs; ++p) {
    std::vector<std::string> outputs;
    std::string source = random_program(rng, &outputs);
    std::optional<ir::Module> parsed = parse_generated(source);
    if (!parsed) continue;
    const ir::Module& m = *parsed;
    for (int64_t n : {0, 1, 5, 17}) {
      uint64_t seed = rng();
      CpuCompileOptions options;
      options.fuse = p % 2 == 0;
      testing::CaseResult r;
      try {   // a compiler error names no program: the message below does
        r = testing::run_differential(m, "f", {{"n", n}}, seed, {.scale = 1.5}, {}, nullptr, options);
      } catch (const std::exception& e) {
        r.failure = std::string("threw: ") + e.what();
      }
      EXPECT_TRUE(r.failure.empty()) << "program " << p << " (SYNK_TEST_SEED=" << testing::test_seed() << "), n=" << n
                                     << ": " << r.failure << "\n" << source;
    }
  }
}

TEST(CodegenCpuRandom, ProgramsCompileTheAheadOfTimeGpuWay) {
  std::string reason;
  if (!nvrtc_available(&reason)) GTEST_SKIP() << "NVRTC cannot be loaded: " << reason;
  std::mt19937_64 rng(testing::test_seed() ^ 0xc0da);
  int images = 0;
  for (int p = 0; p < 8; ++p) {   // 3 NVRTC compiles each: a few seconds
    std::vector<std::string> outputs;
    const std::string source = p % 2 == 0 ? random_program(rng, &outputs) : random_structural_program(rng);
    std::optional<ir::Module> parsed = parse_generated(source);
    if (!parsed) continue;
    const ir::Module& m = *parsed;
    CudaProgram program = generate_cuda_program(m, lower(m, *m.find_function("f")));
    CudaImageSet set = compile_cuda_images(program.source, fmt::format("random{}", p), default_cuda_archs(), {},
                                           /*use_disk_cache=*/false);
    for (const CudaImage& image : set.images) {
      EXPECT_EQ(cuda_image_problem(image), "") << image.name() << ", program " << p << " (SYNK_TEST_SEED="
                                               << testing::test_seed() << "):\n" << source;
      ++images;
    }
  }
  EXPECT_GT(images, 0);
}

}  // namespace
}  // namespace synk::compiler
