// The kernel entry contract shared by the CPU and CUDA dialects (see kernel_abi.h).
#include "compiler/codegen/kernel_abi.h"

#include <algorithm>

#include <fmt/format.h>

namespace synk::compiler {

bool kernel_uses_blas(const KernelPlan& plan, const Kernel& kernel) {
  if (kernel.kind != KernelKind::MatMul) return false;
  ir::DType t = plan.function.node(kernel.roots[0]).type.dtype;
  return t == ir::DType::F32 || t == ir::DType::F64;
}

bool kernel_is_library_call(const KernelPlan& plan, const Kernel& kernel) {
  return kernel.kind == KernelKind::Dnn || kernel_uses_blas(plan, kernel);
}

std::vector<int> kernel_buffer_params(const Kernel& kernel) {
  std::vector<int> params;
  for (const std::vector<int>* list : {&kernel.outputs, &kernel.inputs})
    for (int b : *list)
      if (std::find(params.begin(), params.end(), b) == params.end()) params.push_back(b);
  return params;
}

std::string kernel_symbol(const KernelPlan& plan, const Kernel& kernel, std::string_view module_prefix) {
  if (module_prefix.empty()) return fmt::format("synk_{}_{}", plan.function.name, kernel.name);
  return fmt::format("synk_{}__{}_{}", module_prefix, plan.function.name, kernel.name);
}

}  // namespace synk::compiler
