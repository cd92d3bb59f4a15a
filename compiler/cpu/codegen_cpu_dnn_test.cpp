// Differential tests of the CPU backend's convolutional-network ops against the reference
// evaluator (the float64 loops of ir/dnn_reference.h) on fresh random inputs: conv2d with odd
// planes, strides, asymmetric and 'same' padding, dilation, groups (depthwise too) and bias; max
// and average pooling; global average pooling; batch norm in both modes (with the running
// statistics' updates); their gradients; every one over a symbolic batch of 0, 1 and 3 rows, in
// f32 (oneDNN, synk's max pool) and f64 (reference loops), fused and unfused. A failure prints the
// seed; SYNK_TEST_SEED=<seed> replays it.
#include <cstdlib>

#include "compiler/cpu/cpu_test_util.h"

namespace synk::compiler {
namespace {

using Sizes = std::map<std::string, int64_t>;

const std::vector<Sizes> kBatches = {{{"n", 0}}, {{"n", 1}}, {{"n", 3}}};

// f32 sums of up to a few hundred products of N(0, 1) values against float64.
testing::Tolerance loose() {
  testing::Tolerance t;
  t.f32_rel = 1e-4, t.f32_abs = 2e-4;
  t.f64_rel = 1e-10, t.f64_abs = 1e-10;
  return t;
}

void check(const std::string& source_template, const std::vector<Sizes>& batches = kBatches) {
  for (const char* dtype : {"f32", "f64"}) {
    const std::string source = fmt::format(fmt::runtime(source_template), dtype);
    SCOPED_TRACE(source);
    std::optional<ir::Module> parsed = testing::parse_or_fail(source);
    if (!parsed) return;
    const ir::Module& m = *parsed;
    testing::ValueStyle style;
    style.scale = 1.0;
    for (bool fuse : {true, false}) {
      CpuCompileOptions options;
      options.fuse = fuse;
      for (size_t i = 0; i < batches.size(); ++i) {
        const uint64_t seed = testing::test_seed() + i;
        testing::CaseResult r = testing::run_differential(m, "f", batches[i], seed, style, loose(), nullptr, options);
        EXPECT_TRUE(r.failure.empty()) << "seed " << seed << ", sizes " << fmt::format("{}", batches[i])
                                       << (fuse ? "" : " (unfused)") << ": " << r.failure;
        EXPECT_TRUE(r.user_error_compiled.empty()) << r.user_error_compiled;
      }
    }
  }
}

TEST(CodegenCpuDnn, Conv2dVariants) {
  // Plain 3x3 with padding, bias and ReLU on an odd plane.
  check("shared w: {0}[4, 3, 3, 3]; shared b: {0}[4];"
        "fn f(scatter x: {0}[n, 3, 7, 5]) {{ out y: gather = relu(conv2d(x, w, b, padding=1)); }}");
  // Stride 2, asymmetric padding, a rectangular kernel.
  check("shared w: {0}[5, 2, 3, 2];"
        "fn f(scatter x: {0}[n, 2, 9, 8]) {{ out y: gather = conv2d(x, w, stride=[2, 3], padding=[0, 2, 1, 0]); }}");
  // Dilation and groups; 1x1 convolution; one channel in (oneDNN's plain format).
  check("shared w: {0}[6, 2, 3, 3]; shared w1: {0}[4, 1, 1, 1];"
        "fn f(scatter x: {0}[n, 4, 11, 10], scatter z: {0}[n, 1, 5, 6]) {{"
        " out y: gather = conv2d(x, w, dilation=[2, 1], groups=2, padding=2); out q: gather = conv2d(z, w1); }}");
  // Depthwise (groups = C) with 'same' padding and an even kernel; a kernel filling the input.
  check("shared w: {0}[6, 1, 2, 4]; shared k: {0}[2, 3, 5, 5];"
        "fn f(scatter x: {0}[n, 3, 6, 7], bcast s: {0}[1, 3, 5, 5]) {{"
        " out y: gather = conv2d(x, broadcast_to(w, [6, 1, 2, 4]), groups=3, padding=\"same\") * 2;"
        " out t: sum = conv2d(s, k); }}");
}

TEST(CodegenCpuDnn, Pooling) {
  check("fn f(scatter x: {0}[n, 3, 8, 7]) {{"
        " out a: gather = max_pool2d(x, 2); out b: gather = max_pool2d(x, 3, stride=2, padding=1);"
        " out c: gather = avg_pool2d(x, [2, 3], stride=1, padding=1, count_include_pad=false);"
        " out d: gather = avg_pool2d(relu(x), 3, padding=1); out e: gather = global_avg_pool(x);"
        " out g: gather = flatten(max_pool2d(x, [2, 3], stride=2), axis=1); }}");
}

TEST(CodegenCpuDnn, BatchNormBothModes) {
  check("shared g: {0}[3]; shared b: {0}[3]; shared rm: {0}[3]; shared rv: {0}[3];"
        "fn f(scatter x: {0}[n, 3, 4, 5]) {{"
        " out e: gather = batch_norm(x, g, b, rm, rv * rv + 0.1, eps=0.001); }}");
  // Training needs more than one value per channel: batches of 1 (4x5 planes) and 3.
  check("shared g: {0}[3]; shared b: {0}[3]; shared rm: {0}[3]; shared rv: {0}[3];"
        "fn f(scatter x: {0}[n, 3, 4, 5]) {{"
        " out t: gather = relu(batch_norm(x, g, b, rm, rv, training=true, momentum=0.2)) + 1; }}",
        {{{"n", 1}}, {{"n", 3}}});
}

TEST(CodegenCpuDnn, GradientsOfASmallCnn) {
  check("shared w1: {0}[4, 2, 3, 3]; shared b1: {0}[4]; shared g: {0}[4]; shared be: {0}[4];"
        "shared rm: {0}[4]; shared rv: {0}[4]; shared w2: {0}[2, 4, 1, 2]; shared fc: {0}[6, 3];"
        "fn f(scatter x: {0}[n, 2, 7, 6]) {{"
        " let h = relu(conv2d(x, w1, b1, padding=1));"
        " let bn = batch_norm(h, g, be, rm, rv, training=true);"
        " let p = avg_pool2d(max_pool2d(bn, 2), 1);"
        " let c = conv2d(p, w2, stride=[1, 2], dilation=1);"
        " let loss = mean(flatten(c, axis=1) @ fc) + mean(global_avg_pool(p));"
        " out l: avg = loss; out dg: avg = grad(loss, w1, b1, g, be, w2, fc); }}",
        {{{"n", 2}}, {{"n", 3}}});
}

TEST(CodegenCpuDnn, PlanHasOneLibraryStepPerConvAndFusesTheBias) {
  ir::Module m = testing::parse("shared w: f32[4, 3, 3, 3]; shared b: f32[4];"
                                "fn f(scatter x: f32[n, 3, 6, 6]) { out y: gather = relu(conv2d(x, w, b) + 1); }");
  std::unique_ptr<CpuFunction> compiled = compile_cpu_function(m, "f");
  const KernelPlan& plan = compiled->plan();
  ASSERT_EQ(plan.kernels.size(), 2u);
  EXPECT_EQ(plan.kernels[0].kind, KernelKind::Dnn);
  EXPECT_EQ(plan.kernels[1].kind, KernelKind::Pointwise);
  EXPECT_EQ(plan.kernels[1].nodes.size() >= 3, true);   // reshape view of b, add, add, relu in one loop
}

}  // namespace
}  // namespace synk::compiler
