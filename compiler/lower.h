// The compiler's pipeline from a typed IR function to a kernel plan, in one place (lower.cpp):
// read lower() and you know every pass and its order.
#pragma once

#include <ostream>
#include <string>

#include "compiler/passes/kernel_plan.h"
#include "ir/ir.h"

namespace synk::compiler {

struct LowerOptions {
  std::ostream* print_after_all = nullptr;   // when set, the IR after every pass goes here
  bool fuse = true;                          // false: one kernel per op (benchmarks, debugging)
  // The CPU backend's layout pass (passes.h, convert_to_channels_last): convolutions on NHWC.
  // Off for the CUDA backend, whose convolutions take NCHW.
  bool channels_last = false;
  // FusionOptions::sibling_column_sums (the CPU backend's reduce kernels).
  bool sibling_column_sums = false;
};

// The options of the CPU backend's plans (every CPU path uses them, so the AOT check that
// regenerates a linked artifact's code gets the same code). SYNK_CONV_LAYOUT=nchw turns the
// channels-last pass off in a JIT-compiled function (with_environment), for comparisons.
LowerOptions cpu_lower_options(bool with_environment = false);

// Runs the passes over `fn` (a function of `module`) and fuses the result into kernels.
// Throws synk::UserError for programs the code generators cannot handle, synk::InternalError when
// a pass breaks an IR invariant (checked with ir::verify after every pass).
KernelPlan lower(const ir::Module& module, const ir::Function& fn, const LowerOptions& options = {});

}  // namespace synk::compiler
