// The compiler's stages as text (see emit.h). Each stage runs the same lower() pipeline the JIT
// uses, so what synkc prints is exactly what gets compiled.
#include "compiler/emit.h"

#include <algorithm>

#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cuda/codegen_cuda.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/grad/grad.h"
#include "dsl/frontend.h"
#include "compiler/lower.h"
#include "compiler/pipeline.h"

namespace synk::compiler {

const std::vector<std::string>& emit_stages() {
  static const std::vector<std::string> stages = {"ir-grad", "ir-fused", "cpp", "cuda", "ptx"};
  return stages;
}

namespace {

// One function's PTX (NVRTC; a synk::UserError when it cannot be loaded).
std::string ptx_text(const ir::Module& module, const KernelPlan& plan, const EmitOptions& options) {
  CudaProgram program = generate_cuda_program(module, plan);
  const bool any_kernel = std::any_of(program.launches.begin(), program.launches.end(),
                                      [](const CudaKernelLaunch& l) { return l.kind != CudaLaunchKind::Blas; });
  if (!any_kernel) return "// function " + plan.function.name + ": no kernels (every step is a cuBLAS call)\n";
  const int arch = options.ptx_arch ? options.ptx_arch : default_cuda_archs().back();
  CachedCudaBinary bin = nvrtc_compile_cached(program.source, "synk_" + plan.function.name, CudaTarget{arch, false},
                                              nvrtc_options_from_env());
  return std::string(bin.binary.image.data());
}

}  // namespace

void emit(const ir::Module& module, const std::string& stage, std::ostream& out, const EmitOptions& options) {
  const auto& stages = emit_stages();
  if (std::find(stages.begin(), stages.end(), stage) == stages.end()) {
    std::string known;
    for (const std::string& s : stages) known += (known.empty() ? "" : ", ") + s;
    throw synk::UserError("--emit=" + stage + " is not a compiler stage (known after ir: " + known + ")");
  }
  // A training function's optimizer becomes its update function first (pipeline.h).
  ir::Module expanded = module;
  prepare_module(expanded);
  if (stage == "ir-grad") {
    out << dsl::print_module(expand_gradients(expanded));
    return;
  }
  // The CPU stages show the CPU backend's plan (channels-last convolutions); cuda and ptx the
  // CUDA backend's.
  const bool cuda = stage == "cuda" || stage == "ptx";
  LowerOptions lower_options = cuda ? LowerOptions{} : cpu_lower_options(true);
  if (options.print_after_all) lower_options.print_after_all = options.pass_dump;
  bool first = true;
  for (const ir::Function& fn : expanded.functions) {
    KernelPlan plan = lower(expanded, fn, lower_options);
    if (!first) out << "\n";
    first = false;
    if (stage == "ir-fused") print_plan(expanded, plan, out);
    else if (stage == "cuda") out << generate_cuda(expanded, plan);
    else if (stage == "ptx") out << ptx_text(expanded, plan, options);
    else out << generate_cpu_source(expanded, plan);
  }
}

void check_program(const ir::Module& module) {
  ir::Module expanded = module;
  prepare_module(expanded);
  (void)expand_gradients(expanded);
}

}  // namespace synk::compiler
