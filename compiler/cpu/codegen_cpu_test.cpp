// Differential tests of the CPU code generator: every op, every dtype and every fusion pattern,
// compiled through the real pipeline (passes, fusion, C++ generation, in-process Clang, JIT) and
// compared with the reference evaluator (float64) on fresh random inputs. Sizes include odd
// lengths, size-1 and empty dimensions; value styles include NaN, infinities and huge values.
// A failure prints the seed; SYNK_TEST_SEED=<seed> replays it.
#include <cstdlib>

#include "compiler/cpu/cpu_test_util.h"

namespace synk::compiler {
namespace {

using namespace testing;   // the differential harness (cpu_test_util.h)

// Each test binary gets its own kernel cache so tests never depend on the user's.
const std::vector<Sizes> kVectorSizes = {{{"n", 0}}, {{"n", 1}}, {{"n", 7}}, {{"n", 33}}, {{"n", 1000}}};
const std::vector<Sizes> kMatrixSizes = {{{"n", 0}, {"m", 3}}, {{"n", 1}, {"m", 1}}, {{"n", 5}, {"m", 7}},
                                         {{"n", 17}, {"m", 33}}, {{"n", 4}, {"m", 0}}};
const char* const kNumericTypes[] = {"f32", "f64", "i32", "i64", "u8"};

// ---- pointwise ops, every dtype ------------------------------------------------------------------

TEST(CodegenCpuOps, UnaryFloat) {
  // Then large magnitudes: exp overflows to inf, sigmoid saturates, tanh is +-1, log of inf.
  check_float_differential(
      "fn f(bcast x: {0}[n, 3]) {{ out a: none = -x; out b: none = abs(x); out c: none = exp(x); "
      "out d: none = log(x); out e: none = sqrt(x); out g: none = tanh(x); out h: none = sigmoid(x); "
      "out i: none = relu(x); }}",
      kVectorSizes, 40, {{.scale = 200}, {.scale = 1, .special_fraction = 0.3}});
}

TEST(CodegenCpuOps, UnaryInteger) {
  for (const char* t : kIntTypes)
    check_differential(fmt::format("fn f(bcast x: {0}[n, 3]) {{ out a: none = -x; out b: none = abs(x); out c: none = relu(x); }}", t),
          "f", kVectorSizes, {.int_low = -128, .int_high = 127});
  check_differential("fn f(bcast x: i32[n]) { out a: none = -x; out b: none = abs(x); }", "f", {{{"n", 50}}},
        {.int_low = -2147483648LL, .int_high = 2147483647LL});
  check_differential("fn f(bcast x: bool[n, 2]) { out a: none = !x; out b: none = !!x; }", "f", kVectorSizes);
}

TEST(CodegenCpuOps, BinaryArithmetic) {
  for (const char* t : kNumericTypes) {
    bool flt = std::string(t)[0] == 'f';
    std::string src = fmt::format(
        "fn f(bcast x: {0}[n, 3], bcast y: {0}[3]) {{ out a: none = x + y; out b: none = y - x; out c: none = x * y; "
        "out d: none = maximum(x, y); out e: none = minimum(y, x); {1} }}", t,
        flt ? "out g: none = x / y;" : "");
    check_differential(src, "f", kVectorSizes, {.int_low = -50, .int_high = 200});
    if (flt) check_differential(src, "f", {{{"n", 60}}}, {.scale = 1, .special_fraction = 0.3});
  }
  // Wrap-around at the edges of each integer range.
  check_differential("fn f(bcast x: i32[n], bcast y: i32[n]) { out a: none = x + y; out b: none = x * y; out c: none = x - y; }",
        "f", {{{"n", 64}}}, {.int_low = -2147483648LL, .int_high = 2147483647LL});
  check_differential("fn f(bcast x: u8[n], bcast y: u8[n]) { out a: none = x + y; out b: none = x * y; out c: none = x - y; }",
        "f", {{{"n", 64}}}, {.int_low = 0, .int_high = 255});
}

TEST(CodegenCpuOps, Power) {
  for (const char* t : kFloatTypes)
    check_differential(fmt::format("fn f(bcast x: {0}[n], bcast y: {0}[n]) {{ out a: none = abs(x) ** y; out b: none = x ** y; "
                      "out c: none = x ** 2; out d: none = x ** 1; out e: none = pow(x, 3); }}", t),
          "f", kVectorSizes, {.scale = 1.5});
  for (const char* t : kIntTypes)
    check_differential(fmt::format("fn f(bcast x: {0}[n], bcast y: {0}[n]) {{ out a: none = x ** y; out b: none = x ** 2; }}", t),
          "f", kVectorSizes, {.int_low = -3, .int_high = 9});
}

TEST(CodegenCpuOps, ComparisonsAndLogic) {
  for (const char* t : kNumericTypes)
    check_differential(fmt::format("fn f(bcast x: {0}[n, 2], bcast y: {0}[n, 1]) {{ out a: none = x == y; out b: none = x != y; "
                      "out c: none = x < y; out d: none = x <= y; out e: none = x > y; out g: none = x >= y; }}", t),
          "f", kVectorSizes, {.scale = 1, .int_low = -2, .int_high = 2, .special_fraction = 0.2});
  check_differential("fn f(bcast a: bool[n, 3], bcast b: bool[3]) { out x: none = a && b; out y: none = a || b; "
        "out z: none = !(a && !b) || a; }", "f", kVectorSizes);
  for (const char* t : kNumericTypes)
    check_differential(fmt::format("fn f(bcast c: bool[n, 1], bcast x: {0}[n, 4], bcast y: {0}[4]) {{ out a: none = where(c, x, y); "
                      "out b: none = where(x > y, x, y); }}", t), "f", kVectorSizes);
}

TEST(CodegenCpuOps, Casts) {
  const char* all[] = {"f32", "f64", "i32", "i64", "u8", "bool"};
  for (const char* from : all) {
    std::string outs;
    for (const char* to : all) {
      bool float_to_int = from[0] == 'f' && to[0] != 'f' && std::string(to) != "bool";
      // Float to integer casts of out-of-range values are errors: keep values in range here.
      outs += fmt::format("out o_{0}: none = cast({1}, {0}); ", to, float_to_int ? "x * 0.5" : "x");
    }
    check_differential(fmt::format("fn f(bcast x: {}[n, 2]) {{ {} }}", from, outs), "f", kVectorSizes,
          {.scale = 40, .int_low = 0, .int_high = 120});
  }
  check_differential("fn f(bcast x: f32[n]) { out a: none = cast(x, i32); out b: none = cast(x, u8); }", "f",
        {{{"n", 100}}}, {.scale = 100, .int_low = 0, .int_high = 0});
}

TEST(CodegenCpuOps, CastOfNanOrOutOfRangeIsAUserErrorOnBothSides) {
  // 1e30 does not fit i32: the reference and the kernel both refuse.
  ir::Module m = testing::parse("fn f(bcast x: f32[n]) { out a: none = cast(x * 1e30, i32); }");
  testing::CaseResult r = run_differential(m, "f", {{"n", 5}}, testing::test_seed(), {.scale = 1});
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_NE(r.user_error_compiled.find("function 'f': cast (line 1, column 39): a value (NaN, infinite or out of range) "
                                      "cannot be converted to i32"), std::string::npos) << r.user_error_compiled;
  check_differential("fn f(bcast x: f64[n]) { out a: none = cast(x, i64); out b: none = cast(x, u8); }", "f", {{{"n", 30}}},
        {.special_fraction = 0.5}, {}, true);
}

// ---- broadcasting ------------------------------------------------------------------------------

TEST(CodegenCpuBroadcast, Shapes) {
  check_differential("fn f(bcast x: f32[n, 1], bcast y: f32[1, m]) { out a: none = x * y + 1; }", "f", kMatrixSizes);
  check_differential("fn f(bcast x: f64[m], bcast y: f64[n, m], bcast s: f64) { out a: none = (x - y) * s; out b: none = s - x; }",
        "f", kMatrixSizes);
  check_differential("fn f(bcast x: f32[2, 1, m], bcast y: f32[n, 1], bcast z: f32[1]) { out a: none = x + y * z; }", "f", kMatrixSizes);
  check_differential("fn f(bcast c: bool[n, 1, 1], bcast x: i32[1, m, 1], bcast y: i32[3]) { out a: none = where(c, x, y); }",
        "f", kMatrixSizes);
  check_differential("fn f(bcast x: f32) { out a: none = exp(x) + 1; out b: none = x; }", "f", {{}});
  check_differential("fn f(bcast x: f32[1, 1]) { out a: none = x * 3; }", "f", {{}});
}

// ---- reductions ----------------------------------------------------------------------------------

TEST(CodegenCpuReduce, EveryOpEveryAxis) {
  testing::Tolerance tol{.f32_rel = 1e-4, .f32_abs = 2e-4};
  // axis=[0, 1] keeps a static row of 5 under reduced outer axes: the four-partial-rows form.
  const char* axes[] = {"", ", axis=0", ", axis=1", ", axis=2", ", axis=[0, 1]", ", axis=[0, 2]", ", axis=[1, 2]",
                        ", axis=-1"};
  for (const char* t : kFloatTypes)
    for (const char* ax : axes)
      for (const char* kd : {"", ", keepdims=true"})
        check_differential(fmt::format("fn f(bcast x: {0}[n, m, 5]) {{ out a: none = sum(x{1}{2}); out b: none = mean(x{1}{2}); "
                          "out c: none = prod(x * 0.3 + 1{1}{2}); out d: none = max(x{1}{2}); out e: none = min(x{1}{2}); }}",
                          t, ax, kd),
              "f", {{{"n", 3}, {"m", 4}}, {{"n", 1}, {"m", 19}}, {{"n", 6}, {"m", 1}}}, {}, tol);
  for (const char* t : kIntTypes)
    check_differential(fmt::format("fn f(bcast x: {0}[n, m]) {{ out a: none = sum(x, axis=0); out b: none = sum(x); "
                      "out c: none = prod(x, axis=1); out d: none = max(x, axis=1); out e: none = min(x); }}", t),
          "f", kMatrixSizes, {.int_low = -5, .int_high = 5});
}

TEST(CodegenCpuReduce, BoolAndSmallIntegers) {
  check_differential("fn f(bcast b: bool[n, m]) { out a: none = max(b, axis=1); out c: none = min(b, axis=0); out d: none = max(b); "
        "out e: none = argmax(b, axis=1); out g: none = sum(cast(b, i32), axis=0); }", "f", kMatrixSizes);
  check_differential("fn f(bcast x: u8[n]) { out s: sum = sum(x); out p: none = prod(x); out m: none = max(x); }", "f",
        kVectorSizes, {.int_low = 0, .int_high = 255});
}

TEST(CodegenCpuReduce, LongRowsAndColumns) {
  testing::Tolerance tol{.f32_rel = 1e-4, .f32_abs = 1e-3};
  check_differential("fn f(bcast x: f32[n, m]) { out a: none = sum(x, axis=1); out b: none = sum(x, axis=0); out c: none = max(x); }",
        "f", {{{"n", 3}, {"m", 4099}}, {{"n", 2049}, {"m", 3}}, {{"n", 1}, {"m", 1}}}, {}, tol);
  check_differential("fn f(bcast x: f64[n]) { out a: none = sum(x); out b: none = mean(x); out c: none = min(x); }", "f",
        {{{"n", 100003}}});
  // Columns of a static row (batch norm's per-channel sums over NHWC): four partial rows.
  check_differential("fn f(bcast x: f32[n, 16]) { out a: none = sum(x, axis=0); out b: none = max(x, axis=0); "
        "out c: none = mean(x * x, axis=0, keepdims=true); }", "f", {{{"n", 4099}}, {{"n", 2}}, {{"n", 7}}}, {}, tol);
  // Rows unrolled by four with a remainder of 0 to 3 (one outer dim), and outer dims that do not
  // collapse into one (a slice along the middle one), which take the rows one at a time.
  for (int64_t n : {1, 4, 9, 10, 4099})
    check_differential("fn f(bcast x: f32[n, 5, 16]) { let y = slice(x, 1, 4, axis=1); out a: none = sum(x * x, axis=[0, 1]); "
          "out b: none = sum(y, axis=[0, 1]); out c: none = mean(y * 2, axis=[0, 1], keepdims=true); }", "f",
          {{{"n", n}}}, {}, tol);
}

TEST(CodegenCpuReduce, EmptyAxes) {
  // sum of nothing is 0, prod 1, mean NaN; max/min have no identity: a user error on both sides.
  check_differential("fn f(bcast x: f32[n, m]) { out a: none = sum(x, axis=0); out b: none = prod(x, axis=0); "
        "out c: none = mean(x, axis=0); }", "f", {{{"n", 0}, {"m", 3}}, {{"n", 3}, {"m", 0}}});
  check_differential("fn f(bcast x: f32[n, m]) { out a: none = max(x, axis=0); }", "f", {{{"n", 0}, {"m", 3}}}, {}, {}, true);
  check_differential("fn f(bcast x: i32[n]) { out a: none = argmax(x, axis=0); }", "f", {{{"n", 0}}}, {}, {}, true);
}

TEST(CodegenCpuReduce, NanPropagation) {
  check_differential("fn f(bcast x: f64[n, m]) { out a: none = max(x, axis=1); out b: none = min(x, axis=0); "
        "out c: none = sum(x, axis=1); out d: none = argmax(x, axis=1); out e: none = maximum(x, 0.0); }",
        "f", kMatrixSizes, {.special_fraction = 0.2, .huge_specials = false});
}

TEST(CodegenCpuReduce, ArgMax) {
  for (const char* t : kNumericTypes)
    for (int axis = 0; axis < 3; ++axis)
      check_differential(fmt::format("fn f(bcast x: {0}[n, m, 3]) {{ out a: none = argmax(x, axis={1}); "
                        "out b: none = argmax(x * 2, axis={1}, keepdims=true); }}", t, axis),
            "f", {{{"n", 4}, {"m", 5}}, {{"n", 1}, {"m", 9}}}, {.int_low = 0, .int_high = 3});
  // An axis of static size 1: the answer is 0 without looking.
  check_differential("fn f(bcast x: f32[n, 1]) { out a: none = argmax(x, axis=1); out b: none = argmax(x, axis=0); }", "f",
        {{{"n", 6}}, {{"n", 1}}});
}

// ---- structure -----------------------------------------------------------------------------------

TEST(CodegenCpuStructure, MatMulEveryRankAndTranspose) {
  testing::Tolerance tol{.f32_rel = 1e-4, .f32_abs = 1e-4};
  for (const char* t : {"f32", "f64", "i32", "i64"}) {
    check_differential(fmt::format("fn f(bcast a: {0}[n, k], bcast b: {0}[k, m], bcast v: {0}[k], bcast w: {0}[n]) {{ "
                      "out mm: none = a @ b; out mv: none = a @ v; out vm: none = v @ b; out vv: none = v @ v; "
                      "out tm: none = transpose(a) @ w; out tt: none = transpose(b) @ transpose(a); "
                      "out ta: none = transpose(a) @ a; out wa: none = w @ a; }}", t),
          "f", {{{"n", 5}, {"k", 7}, {"m", 3}}, {{"n", 1}, {"k", 1}, {"m", 1}}, {{"n", 33}, {"k", 64}, {"m", 17}},
                {{"n", 4}, {"k", 0}, {"m", 3}}, {{"n", 0}, {"k", 3}, {"m", 2}}},
          {.scale = 1, .int_low = -4, .int_high = 4}, tol);
  }
  check_differential("fn f(bcast a: f32[n, k], bcast b: f32[k, m]) { out c: none = relu(a @ b + 1) @ transpose(b); }", "f",
        {{{"n", 9}, {"k", 4}, {"m", 6}}}, {.scale = 1}, tol);
}

TEST(CodegenCpuStructure, TransposeSliceReshapeConcat) {
  check_differential("fn f(bcast x: f32[n, m, 3]) { out a: none = transpose(x); out b: none = transpose(x, [1, 0, 2]) * 2; "
        "out c: none = exp(transpose(x, [2, 0, 1])); }", "f", kMatrixSizes);
  check_differential("fn f(bcast x: f64[n, 6]) { out a: none = slice(x, 1, 4, axis=1); out b: none = slice(x, 2, 6, axis=1) + 1; "
        "out c: none = slice(transpose(x), 0, 3) * slice(transpose(x), 3, 6); }", "f", kVectorSizes);
  check_differential("fn f(bcast x: i32[n, 6]) { out a: none = reshape(x, [n, 2, 3]); out b: none = reshape(x * 2, [n, -1]); "
        "out d: none = reshape(x, [3, n, 2]) + 1; out e: none = sum(reshape(x, [2, n, 3]), axis=1); }", "f", kVectorSizes);
  check_differential("fn f(bcast x: f32[4, 6]) { out b: none = reshape(x * 2, [-1]); out c: none = flatten(transpose(x)) + 1; "
        "out d: none = reshape(transpose(x), [2, 12]) * 3; }", "f", {{}});
  check_differential("fn f(bcast x: f32[3, 2], bcast y: f32[5, 2], bcast z: f32[3, 4]) { out a: none = concat(x, y, axis=0); "
        "out b: none = concat(x * 2, z, x, axis=1); out c: none = concat(exp(x), -y); }", "f", {{}});
  check_differential("fn f(bcast x: f64[n, 2], bcast z: f64[n, 3]) { out b: none = concat(x * 2, z, x, axis=1); "
        "out c: none = sum(concat(z, exp(x), axis=1), axis=1); }", "f", kVectorSizes);
}

TEST(CodegenCpuStructure, TakeAndOneHot) {
  check_differential("fn f(bcast x: f32[m, 3], bcast i: i64[n]) { out a: none = take(x, i); out b: none = take(x * 2, i) + 1; }",
        "f", {{{"n", 5}, {"m", 100}}, {{"n", 0}, {"m", 3}}, {{"n", 9}, {"m", 21}}}, {.int_low = 0, .int_high = 2});
  check_differential("fn f(bcast l: i32[n]) { out a: none = one_hot(l, 4); out b: none = one_hot(l, 4, dtype=f64) * 3; }", "f",
        kVectorSizes, {.int_low = 0, .int_high = 3});
  // Out of range (and negative) indices are user errors on both sides.
  check_differential("fn f(bcast x: f32[m, 3], bcast i: i32[n]) { out a: none = take(x, i); }", "f",
        {{{"n", 20}, {"m", 3}}}, {.int_low = -3, .int_high = 5}, {}, true);
  check_differential("fn f(bcast l: i64[n]) { out a: none = one_hot(l, 3); }", "f", {{{"n", 20}}}, {.int_low = -1, .int_high = 4},
        {}, true);
}

TEST(CodegenCpuStructure, SoftmaxFamily) {
  testing::Tolerance tol{.f32_rel = 1e-4, .f32_abs = 1e-5};
  for (const char* t : kFloatTypes) {
    check_differential(fmt::format("fn f(bcast x: {0}[n, m]) {{ out a: none = softmax(x); out b: none = log_softmax(x); "
                      "out c: none = softmax(x, axis=0); out d: none = log_softmax(x * 3, axis=0); }}", t),
          "f", kMatrixSizes, {.scale = 5}, tol);
    check_differential(fmt::format("fn f(bcast x: {0}[n, m, 3]) {{ out a: none = softmax(x, axis=1); out b: none = log_softmax(x, axis=1); }}",
                      t), "f", {{{"n", 2}, {"m", 5}}}, {.scale = 50}, tol);
    check_differential(fmt::format("fn f(bcast x: {0}[n, m], bcast l: i32[n], bcast p: {0}[n, m]) {{ "
                      "out a: none = cross_entropy(x, l); out b: none = cross_entropy(x, softmax(p)); "
                      "out c: none = mean(cross_entropy(x * 10, l)); }}", t),
          "f", {{{"n", 7}, {"m", 4}}, {{"n", 1}, {"m", 1}}, {{"n", 0}, {"m", 4}}, {{"n", 50}, {"m", 10}}},
          {.scale = 3, .int_low = 0, .int_high = 0}, tol);
  }
  // Labels past the classes, or negative, fail on both sides. (Labels drawn from [-1, 5] over 3
  // classes were all valid for 0.6% of seeds, e.g. 134267275.)
  for (const ValueStyle labels : {ValueStyle{.int_low = 3, .int_high = 5}, ValueStyle{.int_low = -3, .int_high = -1}})
    check_differential("fn f(bcast x: f32[n, m], bcast l: i64[n]) { out a: none = cross_entropy(x, l); }", "f",
          {{{"n", 6}, {"m", 3}}}, labels, {}, true);
  // Infinite and NaN logits propagate the same way in both.
  check_differential("fn f(bcast x: f64[n, m]) { out a: none = softmax(x); out b: none = log_softmax(x); }", "f",
        {{{"n", 20}, {"m", 3}}}, {.special_fraction = 0.2});
}

// ---- fusion patterns -----------------------------------------------------------------------------

TEST(CodegenCpuFusion, Patterns) {
  testing::Tolerance tol{.f32_rel = 1e-4, .f32_abs = 2e-4};
  // A long chain, a DAG with a shared subexpression, a multi-output kernel.
  check_differential("fn f(bcast x: f32[n, m], bcast y: f32[m]) { let a = x * y + 1; let b = tanh(a) * a - sigmoid(y); "
        "out c: none = relu(b) / (abs(a) + 1); out d: none = a; out e: none = b * 2; }", "f", kMatrixSizes, {}, tol);
  // A pointwise DAG feeding reductions (one pass each) and a reduction feeding pointwise work.
  check_differential("fn f(bcast x: f64[n, m]) { let z = x - mean(x, axis=1, keepdims=true); out v: none = mean(z * z, axis=1); "
        "out s: none = sum(exp(x) * 2, axis=0); out t: none = x / sum(abs(x) + 1); }", "f", kMatrixSizes);
  // A difference recomputed by each of its consumers (batch norm's x - mean): two reductions, a
  // pointwise output, and the difference as an output too. `s` sums 1000 terms of about 4 whose
  // exact total is about 0: float32's rounding of partial sums that reach ~sqrt(n) * 4 leaves
  // ~1e-4 absolute (a CI seed gave 2.3e-4 against -4e-13), so its bound is absolute.
  const testing::Tolerance centered_sum{.f32_rel = 1e-4, .f32_abs = 2e-3};
  check_differential("fn f(bcast x: f32[n, 8]) { let c = x - mean(x, axis=0); let v = mean(c * c, axis=0); "
        "out y: none = c / sqrt(v + 1); out s: none = sum(c * 2, axis=0); out d: none = c; }", "f", kVectorSizes, {},
        centered_sum);
  // Sibling column sums in one pass (sum, mean, keepdims, three roots), over f32 and f64.
  check_differential("fn f(bcast g: f32[n, 4, 8], bcast x: f32[n, 4, 8]) { let xc = x - mean(x, axis=[0, 1]); "
        "out a: none = sum(g, axis=[0, 1]); out b: none = mean(g * xc, axis=[0, 1], keepdims=true); "
        "out c: none = sum(exp(g) - xc, axis=[0, 1]); }", "f", kVectorSizes, {}, tol);
  check_differential("fn f(bcast g: f64[n, 3]) { out a: none = sum(g, axis=0); out b: none = mean(g * g, axis=0); }",
        "f", kVectorSizes);
  // A sum distributed over its operand's terms (batch norm's backward): sum(g) exists, sum(xc) is
  // new, and the operand d is computed inside the pointwise output, never written; f32 and f64.
  // v is small, as batch norm's is (it carries 1/N): with v ~ 50 the sum of d cancels to a few
  // digits in any order of additions, and no tolerance would tell a fault from rounding.
  for (const char* t : kFloatTypes)
    check_differential(fmt::format("fn f(bcast g: {0}[n, 3, 8], bcast x: {0}[n, 3, 8], bcast k: {0}[8]) {{ "
          "let xc = x - mean(x, axis=[0, 1]); let v = sum(g * xc, axis=[0, 1]) * 0.001; let d = g * k + xc * v + xc * v; "
          "out b: none = sum(g, axis=[0, 1]); out dx: none = d - sum(-d, axis=[0, 1], keepdims=true) / 7; }}", t),
          "f", kVectorSizes, {}, tol);
  // The same value read by several kernels, and a value both output and reduced.
  check_differential("fn f(bcast x: f32[n]) { let e = exp(x); out a: none = e; out b: none = sum(e); out c: none = max(e) + e; }",
        "f", kVectorSizes, {}, tol);
  // Views inside fused kernels: transposes and slices of buffers and of expressions.
  check_differential("fn f(bcast x: f32[n, n], bcast y: f32[4, n]) { let a = x + transpose(x); out b: none = a * transpose(exp(x)); "
        "out c: none = sum(slice(y, 1, 3) * transpose(slice(transpose(y), 0, 2, axis=1)), axis=0); }", "f",
        {{{"n", 1}}, {{"n", 6}}, {{"n", 0}}}, {}, tol);
  // Constants everywhere: folding, simplification, broadcast constants as outputs.
  check_differential("fn f(bcast x: f32[n]) { out a: none = x * 1 + 0; out b: none = (2 + 3) * x ** 1; out c: none = -(-x); "
        "out d: none = 2.0 * 3.0; out e: none = x * 0 + 7; }", "f", kVectorSizes);
  // Same output twice, an input as an output.
  check_differential("fn f(bcast x: f64[n], bcast y: f64[n]) { let s = x + y; out a: none = s; out b: none = s; out c: none = x; }",
        "f", kVectorSizes);
}

TEST(CodegenCpuFusion, SharedVariablesAndUpdates) {
  check_differential("shared w: f32[m, 3]; shared b: f32[3]; shared k: i32[] = 0;\n"
        "fn step(bcast x: f32[n, m]) { let y = x @ w + b; out loss: none = mean(y * y); "
        "update w = w - 0.1 * transpose(x) @ y; update b = b * 0.5; update k: max = k + 1; }",
        "step", {{{"n", 4}, {"m", 5}}, {{"n", 0}, {"m", 2}}}, {.scale = 1}, {.f32_rel = 1e-4, .f32_abs = 1e-4});
  check_differential("shared v: f64[4]; fn f(bcast x: f64[4]) { update v = v + x; out o: none = v; }", "f", {{}});
}

TEST(CodegenCpuFusion, Gradients) {
  check_differential("shared w: f64[4, 3]; shared b: f64[3];\n"
        "fn g(bcast x: f64[n, 4], bcast l: i32[n]) { let loss = mean(cross_entropy(tanh(x @ w + b), l)); "
        "out gw: none = grad(loss, w); out all: none = grad(loss, w, b); }",
        "g", {{{"n", 6}}, {{"n", 1}}}, {.scale = 1, .int_low = 0, .int_high = 2});
}

// ---- calling convention --------------------------------------------------------------------------

TEST(CodegenCpuCall, WrongArgumentsAreUserErrorsNamingTheArgument) {
  ir::Module m = testing::parse("fn f(scatter x: f32[n, 3], scatter y: f32[n]) { out z: gather = x * 2 + 1; out w: gather = y; }");
  auto fn = compile_cpu_function(m, "f");
  rt::Array x, y, bad;
  x.resize(rt::DType::F32, {4, 3});
  y.resize(rt::DType::F32, {4});
  std::vector<rt::Array> outs(2), ups;
  auto run = [&](std::vector<rt::ArrayRef> in) -> std::string {
    try {
      fn->run(in, {}, outs, ups);
    } catch (const synk::UserError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(run({x.ref(), y.ref()}), "");
  bad.resize(rt::DType::F64, {4, 3});
  EXPECT_NE(run({bad.ref(), y.ref()}).find("argument 'x' of function 'f': expected dtype f32, got f64"), std::string::npos);
  bad.resize(rt::DType::F32, {4});
  EXPECT_NE(run({bad.ref(), y.ref()}).find("argument 'x' of function 'f': expected rank 2"), std::string::npos);
  bad.resize(rt::DType::F32, {4, 2});
  EXPECT_NE(run({bad.ref(), y.ref()}).find("dimension 1 must be 3"), std::string::npos);
  bad.resize(rt::DType::F32, {5});
  std::string msg = run({x.ref(), bad.ref()});
  EXPECT_NE(msg.find("argument 'y'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("symbol 'n' is 4"), std::string::npos) << msg;
  EXPECT_NE(run({x.ref()}).find("takes 2 inputs, got 1"), std::string::npos);
}

TEST(CodegenCpuCall, TemporariesShareStorageWhenTheirLifetimesDoNotOverlap) {
  // Unfused, a chain of six ops has five temporaries, but at most two are alive at once; a
  // reshape keeps its base alive as long as the alias is read.
  ir::Module m = testing::parse("fn f(bcast x: f32[n, 4]) { let a = x * 2; let b = a + 1; let c = relu(b); "
                                "let d = c * c; let e = reshape(d - x, [4, n]); out y: none = exp(e) + 1; }");
  auto fn = compile_cpu_function(m, "f", {.fuse = false});
  EXPECT_EQ(fn->temp_slot_count(), 2u);
  for (int64_t n : {3, 0, 50, 7}) {
    testing::CaseResult r = run_differential(m, "f", {{"n", n}}, testing::test_seed() + uint64_t(n), {}, {}, nullptr,
                                             {.fuse = false});
    EXPECT_TRUE(r.failure.empty()) << "n=" << n << ": " << r.failure;
  }
  // Fused, the same function needs no temporary at all... except the reshape's base.
  EXPECT_LE(compile_cpu_function(m, "f")->temp_slot_count(), 1u);
}

TEST(CodegenCpuCall, RepeatedCallsReuseBuffersAndSeeNewShapes) {
  ir::Module m = testing::parse("fn f(bcast x: f32[n]) { let e = exp(x); out a: none = sum(e); out b: none = e * 2 - 1; }");
  auto fn = compile_cpu_function(m, "f");
  std::mt19937_64 rng(testing::test_seed());
  for (int64_t n : {5, 1000, 0, 17, 17}) {
    dsl::HostTensor x = testing::random_tensor(m.functions[0].params[0].type, {{"n", n}}, rng);
    dsl::EvalResult want = dsl::evaluate(m, "f", std::vector<dsl::HostTensor>{x}, {});
    rt::Array xa = testing::to_array(x);
    std::vector<rt::ArrayRef> in{xa.ref()};
    std::vector<rt::Array> outs(2), ups;
    fn->run(in, {}, outs, ups);
    EXPECT_EQ(testing::compare("a", want.outputs[0], outs[0], {.f32_rel = 1e-4, .f32_abs = 1e-3}), "") << "n=" << n;
    EXPECT_EQ(testing::compare("b", want.outputs[1], outs[1]), "") << "n=" << n;
  }
}

}  // namespace
}  // namespace synk::compiler
