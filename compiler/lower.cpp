// The pass pipeline, top to bottom. Every pass is a function from IR to IR (passes.h), run
// through run_pass(), which verifies the result and dumps it for --print-after-all. Fusion then
// turns the cleaned-up IR into a kernel plan that the code generators consume.
#include "compiler/lower.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "base/errors.h"
#include "compiler/dnn/dnn.h"
#include "compiler/grad/grad.h"
#include "compiler/passes/passes.h"
#include "dsl/frontend.h"

namespace synk::compiler {
namespace {

// The function inside a copy of its module, so the standard printer and verifier apply.
ir::Module with_function(const ir::Module& module, const ir::Function& fn) {
  ir::Module m;
  m.shareds = module.shareds;
  m.functions = {fn};
  return m;
}

void check_and_dump(const char* pass, const ir::Module& module, const ir::Function& fn,
                    const LowerOptions& options) {
  // The function alone (copying it into a module of its own for each pass cost more than the passes).
  std::vector<std::string> problems = ir::verify_function(module, fn);
  if (!problems.empty())
    synk::internal_error(fmt::format("after pass '{}' on function '{}': {}", pass, fn.name, fmt::join(problems, "; ")));
  if (options.print_after_all)
    *options.print_after_all << fmt::format("// *** IR after {} (fn {}) ***\n", pass, fn.name)
                             << dsl::print_module(with_function(module, fn));
}

ir::Function run_pass(const char* name, ir::Function (*pass)(const ir::Function&), const ir::Function& fn,
                      const ir::Module& module, const LowerOptions& options) {
  ir::Function out = pass(fn);
  check_and_dump(name, module, out, options);
  return out;
}

}  // namespace

LowerOptions cpu_lower_options(bool with_environment) {
  LowerOptions options;
  options.channels_last = true;
  options.sibling_column_sums = true;
  if (with_environment) {
    const char* v = std::getenv("SYNK_CONV_LAYOUT");
    const std::string s = v ? v : "";
    if (s == "nchw") options.channels_last = false;
    else if (!s.empty() && s != "nhwc" && s != "auto")
      throw synk::UserError("SYNK_CONV_LAYOUT = '" + s + "': expected nhwc (the default) or nchw");
    // Read by the convolution library when a layer runs: checked here too, so that a misspelt
    // value is refused when any function is compiled.
    dnn::onednn::check_conv_algorithm_environment();
  }
  return options;
}

KernelPlan lower(const ir::Module& module, const ir::Function& input, const LowerOptions& options) {
  ir::Function fn = input;
  fn = expand_gradients(module, fn);                      // grad(...) becomes ordinary IR
  check_and_dump("grad", module, fn, options);
  fn = run_pass("simplify", simplify, fn, module, options);
  fn = run_pass("constant-fold", fold_constants, fn, module, options);
  fn = run_pass("simplify", simplify, fn, module, options);     // folding exposes x*1, x+0 again
  fn = run_pass("cse", eliminate_common_subexpressions, fn, module, options);
  fn = run_pass("dce", eliminate_dead_nodes, fn, module, options);
  fn = run_pass("distribute-sums", distribute_sums, fn, module, options);
  fn = run_pass("cse", eliminate_common_subexpressions, fn, module, options);   // the sums it adds that exist
  fn = run_pass("dce", eliminate_dead_nodes, fn, module, options);
  if (options.channels_last) {
    fn = run_pass("channels-last", convert_to_channels_last, fn, module, options);
    fn = run_pass("simplify", simplify, fn, module, options);   // transposes that meet cancel
    fn = run_pass("cse", eliminate_common_subexpressions, fn, module, options);
    fn = run_pass("dce", eliminate_dead_nodes, fn, module, options);
  }
  KernelPlan plan = fuse_kernels(module, fn, FusionOptions{options.fuse, options.sibling_column_sums});
  if (options.print_after_all) {
    *options.print_after_all << fmt::format("// *** kernel plan after fusion (fn {}) ***\n", fn.name);
    print_plan(module, plan, *options.print_after_all);
  }
  return plan;
}

}  // namespace synk::compiler
