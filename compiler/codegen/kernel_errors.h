// The user error a failed kernel becomes, the same on the CPU and CUDA backends: the function,
// the op and its place in the source, and the offending index, label or value being cast. The
// kernels report a KernelError code (codegen_cpu.h) with a position and a limit; how the
// offending value is read back differs (the CPU's failure record, a device buffer on the GPU).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "compiler/passes/kernel_plan.h"

namespace synk::compiler {

// " (line L, column C)" for a node with a source location, else "".
std::string source_position(const ir::Node& node);

// Throws the synk::UserError for `kernel` of `plan` stopping with `code` at `position` (a row or
// element) with `limit` (the axis size or number of classes); `value_of` reads the offending
// index or label, given the operand node that holds it. An unknown code is an internal error
// naming `symbol`, the kernel's entry point.
[[noreturn]] void throw_kernel_failure(const KernelPlan& plan, const Kernel& kernel, int64_t code, int64_t position,
                                       int64_t limit, const std::function<int64_t(ir::NodeId)>& value_of,
                                       const std::string& symbol);

}  // namespace synk::compiler
