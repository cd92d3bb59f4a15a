// Differential tests of the CPU code generator for the math ops of issue 16 against the reference
// evaluator (float64), on fresh random inputs: softplus, log1p, expm1, sin, cos, floor, ceil,
// round, sign, '%', floor_divide, binary_cross_entropy_with_logits, cumsum and sema's compositions
// (clip, logsumexp, argmin, var, std, norm, stack, expand_dims, squeeze), over f32, f64 and the integer
// types where defined, with odd, size-1 and empty shapes, broadcasting, NaN and infinities. An
// integer division by zero must fail on both sides with a user error that names the source line.
// A failure prints the seed; SYNK_TEST_SEED=<seed> replays it.
#include <cstdlib>

#include "compiler/cpu/cpu_test_util.h"

namespace synk::compiler {
namespace {

using namespace testing;   // the differential harness (cpu_test_util.h)

const std::vector<Sizes> kVectorSizes = {{{"n", 0}}, {{"n", 1}}, {{"n", 7}}, {{"n", 33}}, {{"n", 300}}};

TEST(CodegenCpuMath, UnaryFloat) {
  // Then large magnitudes (softplus is x there, expm1 overflows), and NaN / inf / 0 / huge values.
  check_float_differential(
      "fn f(bcast x: {0}[n, 3]) {{ out a: none = softplus(x); out b: none = log1p(x); out c: none = expm1(x); "
      "out d: none = sin(x); out e: none = cos(x); out g: none = floor(x); out h: none = ceil(x); "
      "out i: none = round(x); out j: none = sign(x); }}",
      kVectorSizes, 40, {{.scale = 60}, {.scale = 1, .special_fraction = 0.3}});
}

// Selects over selects with other NaN rules: relu and a hand-written relu keep NaN, `where(r > 0,
// r, 0)` turns it into 0. LLVM 14 folded such pairs as if NaN could not occur (NaN instead of 0,
// -0 instead of 0); scripts/fuzz-compiler.py --diff found the first. NaN, infinities and zeros
// among the inputs, in vectorised and scalar loops.
TEST(CodegenCpuMath, SelectsOfSelectsKeepTheirNanRules) {
  check_float_differential(
      "fn f(bcast x: {0}[n, 3]) {{ let r = relu(x); let h = where(x < 0, 0, x); let g = where(x >= 0, x, 0); "
      "out a: none = where(r > 0, r, 0); out b: none = where(h > 0, h, 0); "
      "out c: none = where(where(g < 0, 0, g) >= 0, g, 0); out d: none = where(maximum(x, 0) > 0, maximum(x, 0), 0); "
      "out e: none = where(relu(r) < 1, 1, relu(r)); }}",
      kVectorSizes, 300, {{.scale = 1, .special_fraction = 0.3}, {.scale = 1, .special_fraction = 0.9}});
}

TEST(CodegenCpuMath, RoundIsHalfToEven) {
  // Values on the halves: scale 0 would be all zeros, so build them from integers.
  for (const char* t : kFloatTypes)
    check_differential(fmt::format("fn f(bcast k: i32[n]) {{ let x = cast(k, {0}) + 0.5; out a: none = round(x); "
                      "out b: none = round(-x); out c: none = round(x * 0.5); }}", t),
          "f", kVectorSizes, {.int_low = -9, .int_high = 9});
}

TEST(CodegenCpuMath, UnaryInteger) {
  for (const char* t : kIntTypes)
    check_differential(fmt::format("fn f(bcast x: {0}[n, 2]) {{ out a: none = sign(x); out b: none = floor(x); "
                      "out c: none = ceil(x); out d: none = round(x); }}", t),
          "f", kVectorSizes, {.int_low = -128, .int_high = 127});
}

TEST(CodegenCpuMath, FloorDivisionAndRemainder) {
  check_float_differential(
      "fn f(bcast x: {0}[n, 3], bcast y: {0}[3]) {{ out a: none = x % y; out b: none = floor_divide(x, y); "
      "out c: none = mod(y, x); out d: none = x % 1.5; out e: none = floor_divide(x, -0.75); }}",
      kVectorSizes, 60, {{.scale = 1, .special_fraction = 0.3}});
  // Integers: divisors are kept nonzero by taking them from positive and negative ranges.
  for (const char* t : {"i32", "i64"})
    check_differential(fmt::format("fn f(bcast x: {0}[n, 3], bcast y: {0}[3]) {{ let d = where(y == 0, 7, y); "
                      "out a: none = x % d; out b: none = floor_divide(x, d); out c: none = x % -3; "
                      "out e: none = floor_divide(x, -1); }}", t),
          "f", kVectorSizes, {.int_low = -50, .int_high = 50});
  check_differential("fn f(bcast x: u8[n], bcast y: u8[n]) { let d = where(y == 0, 3, y); out a: none = x % d; "
        "out b: none = floor_divide(x, d); }", "f", kVectorSizes, {.int_low = 0, .int_high = 255});
  // The edges: INT_MIN // -1 wraps as in numpy (no trap), INT_MIN % -1 is 0.
  check_differential("fn f(bcast x: i32[n]) { out a: none = floor_divide(x, -1); out b: none = x % -1; out c: none = x % 2147483647; }",
        "f", {{{"n", 64}}}, {.int_low = -2147483648LL, .int_high = 2147483647LL});
}

TEST(CodegenCpuMath, IntegerDivisionByZeroIsAUserErrorNamingTheLine) {
  for (const char* op : {"x % y", "floor_divide(x, y)"}) {
    const std::string src =
        fmt::format("fn f(bcast x: i32[n], bcast y: i32[n]) {{\n  out a: none = {};\n}}", op);
    // Values in [0, 0]: every divisor is zero.
    const testing::CaseResult r = check_differential(src, "f", {{{"n", 5}}}, {.int_low = 0, .int_high = 0});
    EXPECT_NE(r.user_error_compiled.find("integer division by zero"), std::string::npos) << r.user_error_compiled;
    EXPECT_NE(r.user_error_compiled.find("line 2"), std::string::npos) << r.user_error_compiled;
    EXPECT_NE(r.user_error_reference.find("integer division by zero"), std::string::npos) << r.user_error_reference;
  }
}

TEST(CodegenCpuMath, BinaryCrossEntropyWithLogits) {
  // Specials without huge finite values: the reference carries f32 intermediates (z * 30) in
  // float64, so an overflow to inf in f32 would differ from it before the op is reached.
  check_float_differential(
      "fn f(bcast z: {0}[n, 3], bcast y: {0}[3]) {{ out a: none = binary_cross_entropy_with_logits(z, sigmoid(y)); "
      "out b: none = binary_cross_entropy_with_logits(z * 30.0, 1.0); "
      "out c: none = mean(binary_cross_entropy_with_logits(z, 0.0), axis=0); }}",
      kVectorSizes, 40, {{.scale = 1, .special_fraction = 0.3, .huge_specials = false}});
}

TEST(CodegenCpuMath, ClipAndSign) {
  for (const char* t : {"f32", "f64", "i32", "i64"})
    check_differential(fmt::format("fn f(bcast x: {0}[n, 3], bcast lo: {0}[3]) {{ out a: none = clip(x, lo, 5); "
                      "out b: none = clip(x, -1, 1); out c: none = clip(x, 3, -3); }}", t),
          "f", kVectorSizes, {.scale = 3, .int_low = -9, .int_high = 9});
  check_differential("fn f(bcast x: f64[n]) { out a: none = clip(x, -1.0, 1.0); }", "f", {{{"n", 50}}},
        {.scale = 1, .special_fraction = 0.3});
}

TEST(CodegenCpuMath, Reductions) {
  for (const char* t : kFloatTypes) {
    std::string src = fmt::format(
        "fn f(bcast x: {0}[n, 5]) {{ out a: none = logsumexp(x, axis=1); out b: none = logsumexp(x * 100.0, axis=1, "
        "keepdims=true); out c: none = var(x, axis=1); out d: none = std(x, axis=1, ddof=1); "
        "out e: none = norm(x, axis=1); out g: none = norm(x); out h: none = argmin(x, axis=1); "
        "out i: none = var(x, axis=[1], keepdims=true); }}", t);
    check_differential(src, "f", {{{"n", 1}}, {{"n", 7}}, {{"n", 40}}}, {}, {.f32_rel = 1e-4, .f32_abs = 1e-4});
    // No huge finite values: squares of 1e30 overflow f32 but not the float64 reference.
    check_differential(src, "f", {{{"n", 20}}}, {.scale = 1, .special_fraction = 0.2, .huge_specials = false},
          {.f32_rel = 1e-4, .f32_abs = 1e-4});
  }
  // Over the symbolic (possibly empty) axis.
  check_differential("fn f(bcast x: f64[n, 3]) { out a: none = var(x, axis=0, ddof=1); out b: none = norm(x, axis=0); "
        "out c: none = std(x, axis=0); }", "f", {{{"n", 0}}, {{"n", 2}}, {{"n", 33}}});
  for (const char* t : kIntTypes)
    check_differential(fmt::format("fn f(bcast x: {0}[n, 4]) {{ out a: none = argmin(x, axis=1); out b: none = argmin(x, axis=0, "
                      "keepdims=true); }}", t),
          "f", {{{"n", 1}}, {{"n", 9}}}, {.int_low = -128, .int_high = 127});
}

TEST(CodegenCpuMath, Cumsum) {
  // Every axis of ranks 1 to 3, both directions, the scanned axis symbolic (so empty and length
  // 1 too) or static (5, or 1), fused producers and a transpose feeding it.
  const testing::Tolerance long_sums{.f32_rel = 1e-4, .f32_abs = 1e-3};   // f32 partial sums of 300 terms
  for (const char* t : kFloatTypes) {
    std::string src = fmt::format(
        "fn f(bcast x: {0}[n, 5], bcast y: {0}[2, n, 3], bcast z: {0}[n, 1]) {{ out a: none = cumsum(x, axis=1); "
        "out b: none = cumsum(x, axis=0); out c: none = cumsum(x * 2.0 + 1.0, axis=-1, reverse=true); "
        "out d: none = cumsum(y, axis=1); out e: none = cumsum(y, 0, reverse=true); out g: none = cumsum(y); "
        "out h: none = cumsum(transpose(x), axis=1, reverse=true); out i: none = cumsum(z, axis=1); "
        "out j: none = cumsum(z, axis=0, reverse=true); out k: none = cumsum(sum(x, axis=1)); }}", t);
    check_differential(src, "f", kVectorSizes, {}, long_sums);
    // NaN / inf / -0.0 (numpy keeps a leading -0.0). No huge finite values: f32 partial sums of
    // 3e38 overflow where the float64 reference's do not.
    check_differential(src, "f", {{{"n", 40}}}, {.scale = 1, .special_fraction = 0.3, .huge_specials = false},
                       long_sums);
  }
  // Integers keep their dtype and wrap on overflow as numpy's do.
  const std::pair<const char*, testing::ValueStyle> ints[] = {
      {"i32", {.int_low = -2147483648LL, .int_high = 2147483647LL}},
      {"i64", {.int_low = -4000000000000000000LL, .int_high = 4000000000000000000LL}},
      {"u8", {.int_low = 0, .int_high = 255}}};
  for (const auto& [t, style] : ints)
    check_differential(fmt::format("fn f(bcast x: {0}[n, 5]) {{ out a: none = cumsum(x, axis=1); "
                                   "out b: none = cumsum(x, axis=0, reverse=true); out c: none = cumsum(x % 7, 0); }}", t),
                       "f", kVectorSizes, style);
}

TEST(CodegenCpuMath, ShapeOps) {
  for (const char* t : {"f32", "i64", "bool"})
    check_differential(fmt::format("fn f(bcast x: {0}[n, 3], bcast y: {0}[n, 3]) {{ out a: none = stack([x, y], axis=1); "
                      "out b: none = stack([x, y, x]); out c: none = stack([x], axis=-1); out d: none = expand_dims(x, 0); "
                      "out e: none = squeeze(expand_dims(y, 2), 2); out g: none = squeeze(expand_dims(x, -1)); }}", t),
          "f", kVectorSizes, {.int_low = -5, .int_high = 5});
}

}  // namespace
}  // namespace synk::compiler
