// The kernel entry contract shared by the CPU and CUDA dialects (see kernel_abi.h).
#include "compiler/codegen/kernel_abi.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/codegen/poly.h"

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

std::string hidden_symbol_lines(size_t symbols, const std::string& array) {
  return fmt::format("const uint64_t synk_seed = (uint64_t){0}[{1}]; (void)synk_seed;\n"
                     "const uint64_t synk_step = (uint64_t){0}[{2}]; (void)synk_step;\n"
                     "const int64_t synk_first_row = {0}[{3}]; (void)synk_first_row;",
                     array, symbols, symbols + 1, symbols + 2);
}

std::string random_prologue(const ir::Node& random) {
  const ir::TensorType& t = random.type;
  return fmt::format("const int64_t rows = {}, per_row = {};\n"
                     "const synk_rng_stream rng = synk_rng_make_stream(synk_seed, {}u, synk_step);",
                     t.rank() ? Poly::dim(t.shape[0]).c_expr() : "1",
                     Poly::product(t.shape, std::min<size_t>(1, t.rank()), t.rank()).c_expr(),
                     uint32_t(random.attrs.salt));
}

std::string random_draw(const ir::Node& random, const std::string& row, const std::string& e) {
  const bool f32 = random.type.dtype == ir::DType::F32;
  const std::string r = random.attrs.global_rows ? fmt::format("(uint64_t)(synk_first_row + {})", row)
                                                 : fmt::format("(uint64_t)({})", row);
  return fmt::format("synk_rng_{}_at_{}(rng, {}, (uint64_t)({}), {})", random.attrs.index == 1 ? "normal" : "uniform",
                     f32 ? "f32" : "f64", r, e, f32 ? "0.0f, 1.0f" : "0.0, 1.0");
}

std::string kernel_symbol(const KernelPlan& plan, const Kernel& kernel, std::string_view module_prefix) {
  if (module_prefix.empty()) return fmt::format("synk_{}_{}", plan.function.name, kernel.name);
  return fmt::format("synk_{}__{}_{}", module_prefix, plan.function.name, kernel.name);
}

}  // namespace synk::compiler
