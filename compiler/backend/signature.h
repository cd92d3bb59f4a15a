// The host half every backend shares: what the runtime is told about a compiled function (its
// signature: inputs with roles, outputs with modes, updates, symbols) and about a module (its
// shared variables, with every `load("...")` initializer made absolute, so that a worker or
// another directory finds the same file). The runtime never includes a compiler header; this is
// where the IR becomes the runtime's descriptor types, for the CPU and CUDA backends alike.
#pragma once

#include <string>

#include "compiler/passes/kernel_plan.h"
#include "ir/ir.h"
#include "runtime/call/descriptor.h"

namespace synk::compiler {

// `t` itself when the runtime can hold it; a UserError for the reserved dtypes (f16, bf16).
DType runtime_dtype(DType t);

rt::FunctionSignature make_signature(const ir::Module& module, const ir::Function& fn, const KernelPlan& plan);
rt::ModuleSpec make_module_spec(const ir::Module& module);

// `module` with every `load(path)` initializer's path made absolute: relative paths are resolved
// against `base_dir` (the directory of the .synk file; empty: the current directory) and
// normalised. Nothing else changes.
ir::Module with_absolute_load_paths(const ir::Module& module, const std::string& base_dir);

// The runtime's description of `module`'s shared variables, load paths absolute (see above).
rt::ModuleSpec module_spec(const ir::Module& module, const std::string& base_dir);

}  // namespace synk::compiler
