// The bridge between the compiler's Graph IR and the runtime's descriptor types: which runtime
// dtype, role and reduce mode an IR one maps to, the runtime's ModuleSpec for an IR module (with
// every `load("...")` initializer made absolute, so that a worker or another directory finds the
// same file), and conversions between the reference evaluator's HostTensor (float64 values) and
// the runtime's typed arrays. The runtime never includes a compiler header; this file is where
// the two meet (with compiler/cpu_function.h, which builds a compiled function's signature).
#pragma once

#include <string>

#include "dsl/evaluator.h"
#include "dsl/ir.h"
#include "runtime/descriptor.h"

namespace synk::compiler {

// Throws dsl::UserError for dtypes the runtime has no type for (f16, bf16).
rt::DType runtime_dtype(ir::DType t);
ir::DType ir_dtype(rt::DType t);
rt::Role runtime_role(ir::Role r);
rt::ReduceMode runtime_mode(ir::ReduceMode m);

// `module` with every `load(path)` initializer's path made absolute: relative paths are resolved
// against `base_dir` (the directory of the .synk file; empty: the current directory) and
// normalised. Nothing else changes.
ir::Module with_absolute_load_paths(const ir::Module& module, const std::string& base_dir);

// The runtime's description of `module`'s shared variables, load paths absolute (see above).
rt::ModuleSpec module_spec(const ir::Module& module, const std::string& base_dir);

// A HostTensor's values in the runtime's typed layout (floats rounded to the dtype, integers
// converted exactly) and back. Throws dsl::UserError for f16/bf16.
rt::Array to_array(const dsl::HostTensor& tensor);
dsl::HostTensor to_host_tensor(const rt::ArrayRef& array);
inline dsl::HostTensor to_host_tensor(const rt::Array& array) { return to_host_tensor(array.ref()); }

}  // namespace synk::compiler
