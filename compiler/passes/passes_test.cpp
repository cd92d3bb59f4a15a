// Unit tests of the passes: each rewrite on small programs (what is removed, what is kept), and
// the kernel groupings fusion produces, written as "kind[ops]" lists so the expected plan reads
// like the rule it checks. Numerical agreement of the same programs is codegen_cpu_test's job.
#include <gtest/gtest.h>

#include <sstream>

#include <fmt/format.h>

#include "compiler/emit.h"
#include "compiler/lower.h"
#include "compiler/passes/passes.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

ir::Module parse(const std::string& text) { return dsl::compile_source("t.synk", text); }

// The ops of a function's nodes in order, leaves and constants as "in"/"c".
std::string ops(const ir::Function& fn) {
  std::vector<std::string> out;
  for (const ir::Node& n : fn.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::SharedRead) out.push_back("in");
    else if (n.op == ir::Op::Constant) out.push_back(ir::is_float(n.type.dtype) ? fmt::format("c{}", n.attrs.value)
                                                                             : fmt::format("c{}", n.attrs.ivalue));
    else out.push_back(ir::op_name(n.op));
  }
  return fmt::format("{}", fmt::join(out, " "));
}

ir::Function cleaned(const ir::Module& m) {
  ir::Function fn = m.functions.at(0);
  fn = simplify(fn);
  fn = fold_constants(fn);
  fn = simplify(fn);
  fn = eliminate_common_subexpressions(fn);
  return eliminate_dead_nodes(fn);
}

// "pointwise[mul add relu] reduce[exp sum]": each kernel's kind and the ops it computes
// (leaves, constants and views of buffers are left out).
std::string groups(const KernelPlan& plan) {
  std::vector<std::string> out;
  for (const Kernel& k : plan.kernels) {
    std::vector<std::string> names;
    for (ir::NodeId id : k.nodes) {
      ir::Op op = plan.function.node(id).op;
      if (op != ir::Op::Constant) names.push_back(ir::op_name(op));
    }
    std::string flags = k.kind == KernelKind::MatMul ? fmt::format("{}{}", k.trans_a ? "^Ta" : "", k.trans_b ? "^Tb" : "") : "";
    out.push_back(fmt::format("{}{}[{}]", kernel_kind_name(k.kind), flags, fmt::join(names, " ")));
  }
  return fmt::format("{}", fmt::join(out, " "));
}

std::string plan_of(const std::string& program, bool fuse = true) {
  ir::Module m = parse(program);
  LowerOptions options;
  options.fuse = fuse;
  return groups(lower(m, m.functions.at(0), options));
}

std::string cpu_plan_of(const std::string& program) {
  ir::Module m = parse(program);
  return groups(lower(m, m.functions.at(0), cpu_lower_options()));
}

TEST(Simplify, AlgebraicIdentities) {
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = x * 1 + 0 - 0; }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = 1 * (0 + x) / 1; }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: i32[n]) { out y: none = -(-x); }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: bool[n]) { out y: none = !!x; }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f64[n]) { out y: none = cast(x, f64); }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = x ** 1; out z: none = x ** 2; }"))), "in mul");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n, 3]) { out y: none = transpose(transpose(x)); }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[2, 3, 4]) { out y: none = transpose(transpose(x, [1, 2, 0]), [1, 2, 0]); }"))),
            "in transpose");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n, 6]) { out y: none = reshape(reshape(x, [n, 2, 3]), [n, 6]); }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[4, 6]) { out y: none = slice(x, 0, 6, axis=1); }"))), "in");
  // Not identities: x * 0 is NaN for infinite x, x - x too; x + 1 is real work.
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = x * 0; }"))), "in c0 mul");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = x - x; }"))), "in sub");
}

TEST(ConstantFold, FoldsScalarsWithTheResultDtype) {
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f64[n]) { out y: none = x * (2.0 + 3.0); }"))), "in c5 mul");
  // f32 folding rounds to float: 0.1 + 0.2 in f32 is not the f64 sum.
  ir::Function fn = cleaned(parse("fn f(bcast x: f32[n]) { out y: none = x + (0.1 + 0.2); }"));
  ASSERT_EQ(fn.nodes.at(1).op, ir::Op::Constant);
  EXPECT_EQ(fn.nodes[1].attrs.value, double(float(double(float(0.1)) + double(float(0.2)))));
  // Integers wrap in their dtype.
  fn = cleaned(parse("fn f(bcast x: i32[n]) { out y: none = x + (2147483647 + 1); }"));
  ASSERT_EQ(fn.nodes.at(1).op, ir::Op::Constant);
  EXPECT_EQ(fn.nodes[1].attrs.ivalue, -2147483648LL);
  // A constant condition picks its branch (broadcast to the result's shape where needed).
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = where(2 > 1, x, exp(x)); }"))), "in");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n], bcast y: f32[3, n]) { out z: none = where(1 > 2, y, x); }"))),
            "in broadcast_to");
  // A cast that would fail at run time is left for run time to report.
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: i32[n]) { out y: none = x + cast(1e30, i32); }"))), "in c1e+30 cast add");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = x * exp(0.0) + (sqrt(4.0) - 2); }"))), "in");
}

TEST(Cse, MergesEqualNodesOnly) {
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = exp(x) + exp(x); }"))), "in exp add");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = sum(x, axis=0) + sum(x); }"))), "in sum add");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n, 3]) { out y: none = sum(x, axis=0) + sum(x, axis=0, keepdims=true); }"))),
            "in sum sum add");
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n]) { out y: none = maximum(x, nan) + maximum(x, nan); }"))), "in cnan maximum add");
}

TEST(Dce, DropsWhatNoResultNeeds) {
  EXPECT_EQ(ops(cleaned(parse("fn f(bcast x: f32[n], bcast y: f32[n]) { let unused = exp(y) * 3; out z: none = x; }"))), "in");
  ir::Function fn = cleaned(parse("shared w: f32[3]; fn f(bcast x: f32[3]) { let a = exp(x); update w = w + 1; }"));
  EXPECT_EQ(ops(fn), "in c1 add");
  EXPECT_EQ(fn.params.size(), 1u) << "params stay: they are the signature";
}

TEST(DistributeSums, BatchNormsBackwardSumsTheTermsItAlreadyHas) {
  // d = g*k + xc*v + xc*v is read by dx and summed: the sum becomes k*sum(g) + v*sum(xc) +
  // v*sum(xc), sum(g) is the output b (the same keepdims: the sums must be equal nodes), and d is
  // computed inside dx's kernel instead of written.
  const std::string bn = "fn f(bcast g: f32[n, 8], bcast x: f32[n, 8], bcast k: f32[8]) { let xc = x - mean(x, axis=0); "
                         "let v = sum(g * xc, axis=0); let d = g * k + xc * v + xc * v; out b: none = sum(g, axis=0, keepdims=true); "
                         "out dx: none = d - sum(-d, axis=0, keepdims=true) / 7; }";
  const std::string before = ops(cleaned(parse(bn)));
  EXPECT_EQ(before, "in mean sub in mul sum in mul mul add add sum neg sum c7 div sub");
  ir::Function fn = eliminate_dead_nodes(eliminate_common_subexpressions(distribute_sums(cleaned(parse(bn)))));
  EXPECT_EQ(ops(fn), "in mean sub in mul sum in mul mul add add sum sum reshape mul reshape mul add add neg c7 div sub")
      << "sum(-d) is gone; sum(xc) and the factors reshaped to the sum's axes come in";
  EXPECT_EQ(plan_of(bn), "reduce[mean] reduce[sub mul sum] reduce[sum] reduce[sub sum] "
                         "pointwise[sub mul mul add add mul mul add add neg div sub]");
  // On the CPU the three sums over the rows (g * xc, g, xc) take one pass.
  EXPECT_EQ(cpu_plan_of(bn), "reduce[mean] reduce[sub mul sum sum sum] pointwise[sub mul mul add add mul mul add add neg div sub]");
}

TEST(DistributeSums, OnlyWhereItSavesAPass) {
  auto unchanged = [](const std::string& program) {
    const ir::Function fn = cleaned(parse(program));
    return ops(eliminate_dead_nodes(eliminate_common_subexpressions(distribute_sums(fn)))) == ops(fn);
  };
  // The operand has no other reader: its sum is one pass over g and x already.
  EXPECT_TRUE(unchanged("fn f(bcast g: f32[n, 8], bcast x: f32[n, 8], bcast k: f32[8]) { "
                        "out b: none = sum(g, axis=0); out s: none = sum(g * k + x, axis=0); }"));
  // A new sum of an expensive value would write that value where it was computed inside d's
  // readers (exp(x) here; Fusion.SharedValuesAreComputedOnce has the same shape).
  EXPECT_TRUE(unchanged("fn f(bcast g: f32[n, 8], bcast x: f32[n, 8], bcast k: f32[8]) { let d = g * k + exp(x); "
                        "out a: none = sum(g, axis=0); out s: none = sum(d, axis=0); out y: none = d; }"));
  // Two sums that do not exist yet would be two passes for the one saved.
  EXPECT_TRUE(unchanged("fn f(bcast g: f32[n, 8], bcast x: f32[n, 8], bcast k: f32[8]) { let d = g * k + x * 2; "
                        "out s: none = sum(d, axis=0); out y: none = d; }"));
  // A factor that varies along the summed axis stays inside the sum.
  EXPECT_TRUE(unchanged("fn f(bcast g: f32[n, 8], bcast x: f32[n, 8], bcast k: f32[n, 1]) { let d = g * k + x; "
                        "out a: none = sum(g, axis=0); out s: none = sum(d, axis=0); out y: none = d; }"));
  // Integers (no rounding to change, but not what the rule is for) and products of two arrays.
  EXPECT_TRUE(unchanged("fn f(bcast g: i32[n, 8], bcast x: i32[n, 8]) { let d = g * 3 + x; "
                        "out a: none = sum(g, axis=0); out s: none = sum(d, axis=0); out y: none = d; }"));
  EXPECT_TRUE(unchanged("fn f(bcast g: f32[n, 8], bcast x: f32[n, 8]) { let d = g * x; "
                        "out a: none = sum(g, axis=0); out s: none = sum(d, axis=0); out y: none = d; }"));
  // The same program with a static factor: distributed (the control for the refusals above).
  EXPECT_FALSE(unchanged("fn f(bcast g: f32[n, 8], bcast x: f32[n, 8], bcast k: f32[8]) { let d = g * k + x; "
                         "out a: none = sum(g, axis=0); out s: none = sum(d, axis=0); out y: none = d; }"));
}

TEST(Fusion, PointwiseChainsAndDagsAreOneKernel) {
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n], bcast y: f32[n]) { out z: none = relu(x * y + 1) - exp(y); }"),
            "pointwise[mul add relu exp sub]");
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 3], bcast b: f32[3]) { let a = x + b; out z: none = a * a + tanh(a); }"),
            "pointwise[add mul tanh add]");
  // Views of buffers are index arithmetic inside the kernel.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, n]) { out z: none = x + transpose(x) * 2; }"), "pointwise[transpose mul add]");
}

// A long run of lets, each used once, would be one fused expression as deep as the run, which the
// emitters build recursively (20,000 lets overflowed the stack): every 256 levels is a stored value.
TEST(Fusion, ALongChainOfLetsIsCutIntoKernelsOfBoundedDepth) {
  std::string program = "fn f(bcast x: f32[n]) {\n  let a0 = x;\n";
  for (int i = 1; i <= 600; ++i) program += fmt::format("  let a{} = a{} * 1.5 + x;\n", i, i - 1);
  program += "  out z: none = a600;\n}\n";
  ir::Module m = parse(program);
  const KernelPlan plan = lower(m, m.functions.at(0), LowerOptions{});
  // Rule 5 merges the pieces back into one loop, which stores a value every 256 levels: the
  // emitters then reach no deeper than that from any stored value.
  size_t stored = 0;
  for (const Kernel& k : plan.kernels) stored += k.roots.size();
  EXPECT_EQ(stored, 5u) << "1,200 levels, a value stored every 256 and the output";
}

TEST(Fusion, PointwiseFeedingAReductionFusesIntoIt) {
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 3]) { out s: none = sum(exp(x) * 2, axis=1); }"), "reduce[exp mul sum]");
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n], bcast y: i64[n]) { out a: none = mean(cast(x > 0 && y == 1, f32)); }"),
            "reduce[gt eq and cast mean]");
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 5]) { out a: none = argmax(x * x, axis=1); }"), "argmax[mul argmax]");
}

TEST(Fusion, SharedValuesAreComputedOnce) {
  // e feeds a reduction and a pointwise kernel: it gets a buffer. The pointwise kernel also
  // depends on the reduction, so merging e's kernel into it would be a cycle: three kernels.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n]) { let e = exp(x); out y: none = e / sum(e); }"),
            "pointwise[exp] reduce[sum] pointwise[div]");
  // Two reductions of the same expression share its buffer.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n]) { let e = exp(x) * 3; out a: none = sum(e); out b: none = max(e); }"),
            "pointwise[exp mul] reduce[sum] reduce[max]");
}

TEST(Fusion, CheapArithmeticOnOneArrayIsRecomputedInEachConsumer) {
  // Batch norm's x - mean over a static channel count: each consumer reads x instead of the
  // difference (the same bytes), so the difference is never written.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 8]) { let c = x - mean(x, axis=0); let v = mean(c * c, axis=0); "
                    "out y: none = c / sqrt(v + 1); out s: none = sum(c * 2, axis=0); }"),
            "reduce[mean] reduce[sub mul mean] pointwise[sub add sqrt div] reduce[sub mul sum]");
  // Two arrays of its size would be two streams instead of one: the difference is written once.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 8], bcast z: f32[n, 8]) { let c = x - z; out a: none = sum(c, axis=0); "
                    "out b: none = sum(c * c, axis=1); }"),
            "pointwise[sub] reduce[sum] reduce[mul sum]");
  // A broadcast operand of symbolic size is no per-channel statistic that stays in cache.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 8]) { let c = x - mean(x, axis=1, keepdims=true); "
                    "out a: none = sum(c, axis=0); out b: none = sum(c * c, axis=0); }"),
            "reduce[mean] pointwise[sub] reduce[sum] reduce[mul sum]");
  // Expensive ops are computed once (SharedValuesAreComputedOnce).
}

TEST(Fusion, ReluGradientKeepsNoPreActivation) {
  // The mask of relu's gradient reads relu's result (a matmul operand, in memory anyway), so
  // (x @ w) * x is computed inside relu's kernel and never written.
  ir::Module m = parse("shared w: f32[4, 4];\n"
                       "fn f(bcast x: f32[n, 4]) { let h = relu((x @ w) * x); out g: none = grad(sum(h @ w), w); }");
  const KernelPlan plan = lower(m, m.functions.at(0), LowerOptions{});
  EXPECT_EQ(groups(plan), "matmul[matmul] pointwise[] pointwise[broadcast_to] matmul^Tb[transpose matmul] "
                          "pointwise[mul relu gt where mul] matmul^Ta[transpose matmul] matmul^Ta[transpose matmul] "
                          "pointwise[add]");
  int relu_kernel_stores = -1;
  for (const Kernel& k : plan.kernels)
    for (ir::NodeId id : k.nodes)
      if (plan.function.node(id).op == ir::Op::Relu) relu_kernel_stores = int(k.outputs.size());
  EXPECT_EQ(relu_kernel_stores, 2) << "relu's result and the masked gradient, not the pre-activation";
}

TEST(Fusion, SiblingColumnSumsShareOnePassOnTheCpu) {
  // Batch norm's backward: sum(g) and sum(g * xc) over every row, independent, both reading g.
  const std::string bn = "fn f(bcast g: f32[n, 8], bcast x: f32[n, 8]) { let xc = x - mean(x, axis=0); "
                         "out a: none = sum(g, axis=0); out b: none = sum(g * xc, axis=0); }";
  EXPECT_EQ(plan_of(bn), "reduce[mean] reduce[sum] reduce[sub mul sum]");
  EXPECT_EQ(cpu_plan_of(bn), "reduce[mean] reduce[sub sum mul sum]");
  // Three siblings, a mean among them, keepdims or not: one kernel.
  EXPECT_EQ(cpu_plan_of("fn f(bcast g: f32[n, 4, 8]) { out a: none = sum(g, axis=[0, 1]); "
                        "out b: none = mean(g * g, axis=[0, 1], keepdims=true); out c: none = sum(exp(g), axis=[0, 1]); }"),
            "reduce[sum mul mean exp sum]");
  // Not merged: one needs the other, row sums, a symbolic row, different shapes, nothing shared.
  EXPECT_EQ(cpu_plan_of("fn f(bcast x: f32[n, 8]) { out v: none = sum(x - sum(x, axis=0), axis=0); }"),
            "reduce[sum] reduce[sub sum]");
  EXPECT_EQ(cpu_plan_of("fn f(bcast x: f32[8, n]) { out a: none = sum(x, axis=1); out b: none = sum(x * x, axis=1); }"),
            "reduce[sum] reduce[mul sum]");
  EXPECT_EQ(cpu_plan_of("fn f(bcast x: f32[8, n]) { out a: none = sum(x, axis=0); out b: none = sum(x * x, axis=0); }"),
            "reduce[sum] reduce[mul sum]");
  EXPECT_EQ(cpu_plan_of("fn f(bcast r: f32[1, 4]) { out a: none = sum(r, axis=0); out b: none = mean(r * r, axis=0); }"),
            "reduce[sum] reduce[mul mean]");   // a single row: nothing to share (found by CodegenCpuRandom)
  EXPECT_EQ(cpu_plan_of("fn f(bcast x: f32[n, 8], bcast y: f32[n, 4]) { out a: none = sum(x, axis=0); "
                        "out b: none = sum(y, axis=0); }"),
            "reduce[sum] reduce[sum]");
}

TEST(Fusion, MultiOutputMerges) {
  // Vertical: b consumes a element for element, and a is an output too: one loop, two stores.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n]) { let a = exp(x); out o1: none = a; out o2: none = a * 2 + 1; }"),
            "pointwise[exp mul add]");
  // Horizontal: two outputs reading the same input.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 4]) { out o1: none = x * 2; out o2: none = tanh(x); }"), "pointwise[mul tanh]");
  // Different shapes do not merge.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 4]) { out o1: none = x * 2; out o2: none = sum(x, axis=0) + 1; }"),
            "pointwise[mul] reduce[sum] pointwise[add]");
}

TEST(Fusion, MatmulGoesToBlasWithTransposesFolded) {
  EXPECT_EQ(plan_of("fn f(bcast a: f32[n, k], bcast b: f32[k, m]) { out c: none = relu(a @ b + 1); }"),
            "matmul[matmul] pointwise[add relu]");
  EXPECT_EQ(plan_of("fn f(bcast a: f32[k, n], bcast b: f32[m, k]) { out c: none = transpose(a) @ transpose(b); }"),
            "matmul^Ta^Tb[transpose transpose matmul]");
  // An operand that is an expression is computed into a buffer first.
  EXPECT_EQ(plan_of("fn f(bcast a: f32[n, k], bcast b: f32[k, m]) { out c: none = exp(a) @ b; }"),
            "pointwise[exp] matmul[matmul]");
  // A transpose of an expression: the expression gets the buffer, the transpose still folds.
  EXPECT_EQ(plan_of("fn f(bcast a: f32[k, n], bcast b: f32[k, m]) { out c: none = transpose(a * 2) @ b; }"),
            "pointwise[mul] matmul^Ta[transpose matmul]");
}

TEST(Fusion, WholeArrayOpsAndAliases) {
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 4], bcast l: i32[n]) { out a: none = mean(cross_entropy(x * 2, l)); }"),
            "pointwise[mul] cross_entropy[cross_entropy] reduce[mean]");
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 4]) { out a: none = softmax(x) * 3; }"), "softmax[softmax] pointwise[mul]");
  // A reshape is an alias of its operand's buffer: no copy kernel.
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n, 6]) { out a: none = sum(reshape(exp(x), [n, 2, 3]), axis=2); }"),
            "pointwise[exp] reduce[sum]");
  // A concatenation computes its pointwise operands itself...
  EXPECT_EQ(plan_of("fn f(bcast x: f32[2, 3], bcast y: f32[4, 3]) { out a: none = exp(concat(x * 2, exp(y))); }"),
            "concat[mul exp concat] pointwise[exp]");
  // ...except along axis 0 into an output or update (a flat gradient): its operands get buffers,
  // so that it is a pure copy the CPU backend elides (the operands' kernels write in place).
  EXPECT_EQ(plan_of("fn f(bcast x: f32[2, 3], bcast y: f32[4, 3]) { out a: none = concat(x * 2, exp(y)); }"),
            "pointwise[mul] pointwise[exp] concat[concat]");
}

TEST(Fusion, CanBeTurnedOff) {
  EXPECT_EQ(plan_of("fn f(bcast x: f32[n]) { out y: none = relu(x * 2 + 1); }", false),
            "pointwise[mul] pointwise[add] pointwise[relu]");
}

TEST(Fusion, GradBeforeTheGradientPassIsAUserError) {
  ir::Module m = parse("shared w: f32[3]; fn f(bcast x: f32[3]) { out g: none = grad(sum(w * x), w); }");
  EXPECT_THROW(fuse_kernels(m, m.functions[0]), synk::UserError);
  // lower() runs the gradient pass first, so the same program compiles.
  EXPECT_NO_THROW(lower(m, m.functions[0]));
}

TEST(Emit, StagesAndPrintAfterAll) {
  ir::Module m = parse("fn f(bcast x: f32[n]) { out y: none = exp(x * 1) + 2; }");
  std::ostringstream out, dump;
  EmitOptions options;
  options.print_after_all = true;
  options.pass_dump = &dump;
  emit(m, "ir-fused", out, options);
  EXPECT_NE(out.str().find("kernel k0 pointwise"), std::string::npos) << out.str();
  for (const char* pass : {"grad", "simplify", "constant-fold", "cse", "dce"})
    EXPECT_NE(dump.str().find(fmt::format("IR after {} (fn f)", pass)), std::string::npos) << pass << "\n" << dump.str();
  EXPECT_NE(dump.str().find("kernel plan after fusion"), std::string::npos);
  std::ostringstream cpp;
  emit(m, "cpp", cpp, {});
  EXPECT_NE(cpp.str().find("extern \"C\" int64_t synk_f_k0("), std::string::npos);
  EXPECT_EQ(cpp.str().find("#include <cmath>"), std::string::npos);
  EXPECT_THROW(emit(m, "no-such-stage", out, {}), synk::UserError);
}

}  // namespace
}  // namespace synk::compiler
