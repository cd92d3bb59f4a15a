// Tests of the in-process compiler and JIT: generated loops are vectorised for the host CPU,
// a Clang failure is an internal error naming a file that holds the source, symbols resolve,
// libm calls link, and the host target description is complete.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <fstream>
#include <regex>
#include <sstream>

#include "compiler/cpu/codegen_cpu.h"
#include "compiler/codegen/emitter.h"
#include "compiler/llvm/jit.h"
#include "compiler/lower.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

std::string assembly_of(const std::string& program) {
  ir::Module m = dsl::compile_source("t.synk", program);
  KernelPlan plan = lower(m, m.functions.at(0));
  return compile_to_assembly(generate_cpu_source(m, plan), "jit_test");
}

// The body of one function in an assembly listing (the kernel bodies are static, so their
// labels are mangled: _ZL14synk_f_k0_bodyPf...).
std::string function_asm(const std::string& text, const std::string& symbol) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\\n_ZL\\d+" + symbol + "\\w*:"))) return "";
  size_t begin = size_t(m.position(0));
  size_t end = text.find(".Lfunc_end", begin);
  return text.substr(begin, end - begin);
}

bool has_packed_float_math(const std::string& text, const char* suffix) {
  // vaddps %ymm1, ... / vmulpd %zmm ... / vfmadd213ps ...: packed (vector) arithmetic.
  std::regex packed(std::string("\\bv(add|mul|sub|max|min|fmadd\\d*|fnmadd\\d*)") + suffix + "\\s+[^\\n]*%[xyz]mm");
  return std::regex_search(text, packed);
}

TEST(Jit, HostTargetIsDescribed) {
  const JitTarget& t = host_target();
  EXPECT_FALSE(t.triple.empty());
  EXPECT_FALSE(t.cpu.empty());
  EXPECT_NE(t.compiler_version.find("LLVM 14"), std::string::npos);
#if defined(__x86_64__)
  EXPECT_NE(std::find(t.features.begin(), t.features.end(), "+sse2"), t.features.end());
#endif
#if defined(__AVX2__)
  EXPECT_NE(std::find(t.features.begin(), t.features.end(), "+avx2"), t.features.end());
#endif
}

TEST(Jit, PointwiseAndReductionLoopsAreVectorised) {
  std::string a = assembly_of("fn f(bcast x: f32[n], bcast y: f32[n]) { out z: none = relu(x * y + 1); }");
  EXPECT_TRUE(has_packed_float_math(function_asm(a, "synk_f_k0_body"), "ps")) << a;
  // A row sum (inner reduction) and a column sum (outer reduction).
  a = assembly_of("fn f(bcast x: f64[n, m]) { out r: none = sum(x * 2, axis=1); }");
  EXPECT_TRUE(has_packed_float_math(function_asm(a, "synk_f_k0_body"), "pd")) << a;
  a = assembly_of("fn f(bcast x: f32[n, m]) { out c: none = sum(x, axis=0); }");
  EXPECT_TRUE(has_packed_float_math(function_asm(a, "synk_f_k0_body"), "ps")) << a;
  // NaN-propagating max through explicit lanes.
  a = assembly_of("fn f(bcast x: f32[n]) { out c: none = max(x); }");
  EXPECT_TRUE(std::regex_search(function_asm(a, "synk_f_k0_body"), std::regex("\\bv(max|cmp\\w*|blendv)ps\\s+[^\\n]*%[xyz]mm")))
      << a;
}

TEST(Jit, ClangFailureIsAnInternalErrorNamingTheSavedSource) {
  const std::string bad = "extern \"C\" int broken( { return 0 }\n";
  try {
    compile_to_object(bad, "broken kernel");
    FAIL() << "expected an internal error";
  } catch (const synk::InternalError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("clang failed to compile generated code"), std::string::npos) << msg;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(msg, m, std::regex("saved to (\\S+\\.cpp)"))) << msg;
    std::ifstream in(m[1].str());
    std::stringstream saved;
    saved << in.rdbuf();
    EXPECT_EQ(saved.str(), bad);
    EXPECT_NE(msg.find("error:"), std::string::npos) << "Clang's own message is included: " << msg;
    std::remove(m[1].str().c_str());
  }
}

TEST(Jit, ObjectsLoadLinkLibmAndResolveSymbols) {
  std::string src = R"(
extern "C" double synk_test_exp(double x) { return __builtin_exp(x) + __builtin_tanh(x); }
extern "C" float synk_test_powf(float x, float y) { return __builtin_powf(x, y); }
)";
  auto obj = load_object(compile_to_object(src, "libm"), "libm");
  auto e = reinterpret_cast<double (*)(double)>(obj->lookup("synk_test_exp"));
  EXPECT_NEAR(e(0.5), std::exp(0.5) + std::tanh(0.5), 1e-15);
  auto p = reinterpret_cast<float (*)(float, float)>(obj->lookup("synk_test_powf"));
  EXPECT_FLOAT_EQ(p(2.f, 10.f), 1024.f);
  EXPECT_THROW(obj->lookup("no_such_symbol"), synk::InternalError);
  // The same symbol names in two objects do not clash: each lives in its own JITDylib.
  auto obj2 = load_object(compile_to_object("extern \"C\" double synk_test_exp(double x) { return 2 * x; }", "x2"), "x2");
  EXPECT_EQ(reinterpret_cast<double (*)(double)>(obj2->lookup("synk_test_exp"))(4.0), 8.0);
  EXPECT_NEAR(e(0.5), std::exp(0.5) + std::tanh(0.5), 1e-15);
}

// Distance in units in the last place between two floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = int32_t(0x80000000u - uint32_t(ia));
  if (ib < 0) ib = int32_t(0x80000000u - uint32_t(ib));
  return std::llabs(int64_t(ia) - int64_t(ib));
}

TEST(Jit, VectorisableF32MathIsAccurate) {
  std::string src = cpu::cpu_prelude() + R"(
extern "C" float t_exp(float x) { return synk_exp_f32(x); }
extern "C" float t_log(float x) { return synk_log_f32(x); }
extern "C" float t_tanh(float x) { return synk_tanh_f32(x); }
extern "C" float t_sigmoid(float x) { return synk_sigmoid_f32(x); }
extern "C" void t_exp_loop(float* __restrict__ y, const float* __restrict__ x, long n) {
  for (long i = 0; i < n; ++i) y[i] = synk_exp_f32(x[i]);
}
)";
  auto obj = load_object(compile_to_object(src, "f32math"), "f32math");
  using F = float (*)(float);
  F f_exp = reinterpret_cast<F>(obj->lookup("t_exp")), f_log = reinterpret_cast<F>(obj->lookup("t_log"));
  F f_tanh = reinterpret_cast<F>(obj->lookup("t_tanh")), f_sig = reinterpret_cast<F>(obj->lookup("t_sigmoid"));
  int64_t worst_exp = 0, worst_log = 0, worst_tanh = 0, worst_sig = 0;
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 400000; ++i) {
    uint32_t b = bits(rng);
    float x;
    std::memcpy(&x, &b, 4);
    if (!std::isfinite(x)) continue;
    float xe = std::fmod(x, 110.0f);   // the interesting range of exp
    worst_exp = std::max(worst_exp, ulps(f_exp(xe), float(std::exp(double(xe)))));
    if (x > 0) worst_log = std::max(worst_log, ulps(f_log(x), float(std::log(double(x)))));
    float xt = std::fmod(x, 12.0f);
    worst_tanh = std::max(worst_tanh, ulps(f_tanh(xt), float(std::tanh(double(xt)))));
    worst_sig = std::max(worst_sig, ulps(f_sig(xt * 8), float(1.0 / (1.0 + std::exp(-double(xt * 8))))));
  }
  EXPECT_LE(worst_exp, 2);
  EXPECT_LE(worst_log, 2);
  EXPECT_LE(worst_tanh, 3);
  EXPECT_LE(worst_sig, 4);
  const float inf = INFINITY, nan = NAN;
  EXPECT_EQ(f_exp(-inf), 0.0f);
  EXPECT_EQ(f_exp(inf), inf);
  EXPECT_EQ(f_exp(89.0f), inf);
  EXPECT_EQ(f_exp(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(f_exp(nan)));
  EXPECT_EQ(f_exp(-100.0f), float(std::exp(-100.0)));   // a subnormal result
  EXPECT_EQ(f_log(0.0f), -inf);
  EXPECT_EQ(f_log(-0.0f), -inf);
  EXPECT_TRUE(std::isnan(f_log(-1.0f)));
  EXPECT_TRUE(std::isnan(f_log(nan)));
  EXPECT_EQ(f_log(inf), inf);
  EXPECT_EQ(f_log(1.0f), 0.0f);
  EXPECT_LE(ulps(f_log(1e-40f), float(std::log(1e-40))), 2);   // a subnormal argument
  EXPECT_EQ(f_tanh(inf), 1.0f);
  EXPECT_EQ(f_tanh(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(f_tanh(nan)));
  EXPECT_TRUE(std::signbit(f_tanh(-0.0f)));
  EXPECT_EQ(f_sig(inf), 1.0f);
  EXPECT_EQ(f_sig(-inf), 0.0f);
  // And the loop around it vectorises (no call to libm's expf in it).
  std::string text = compile_to_assembly(src, "f32math");
  size_t begin = text.find("\nt_exp_loop:");
  ASSERT_NE(begin, std::string::npos);
  std::string loop = text.substr(begin, text.find(".Lfunc_end", begin) - begin);
  EXPECT_EQ(loop.find("expf"), std::string::npos) << loop;
  EXPECT_TRUE(std::regex_search(loop, std::regex("\\bv\\w*ps\\s+[^\\n]*%[yz]mm"))) << loop;
}

TEST(Jit, CompileTimesAreRecorded) {
  compile_to_object("extern \"C\" int one() { return 1; }", "times");
  CompileTimes t = last_compile_times();
  EXPECT_GT(t.frontend, 0);
  EXPECT_GE(t.optimize, 0);
  EXPECT_GT(t.codegen, 0);
}

}  // namespace
}  // namespace synk::compiler
