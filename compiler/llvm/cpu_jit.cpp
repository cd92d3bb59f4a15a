// The JIT path to a CpuFunction: lower one function of a module, generate its C++ kernels, and
// compile them in process on a few threads (or find them in the kernel cache). Kept out of
// cpu_function.cpp so that running a function compiled ahead of time (synkc's host stubs) never
// links LLVM.
#include <fmt/format.h>

#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/llvm/jit.h"
#include "compiler/lower.h"

namespace synk::compiler {

std::unique_ptr<CpuFunction> compile_cpu_function(const ir::Module& module, const std::string& name,
                                                  const CpuCompileOptions& options) {
  const ir::Function* fn = module.find_function(name);
  if (!fn) throw synk::UserError(fmt::format("no function named '{}'", name));
  LowerOptions lower_options = cpu_lower_options(true);
  lower_options.fuse = options.fuse;
  KernelPlan plan = lower(module, *fn, lower_options);
  CpuSourceParts parts = generate_cpu_source_parts(module, plan);
  std::string source = parts.joined();
  KernelCode code;
  if (CpuFunction::needs_kernel_code(plan)) {
    // The kernels in a few translation units, compiled on as many threads on a cache miss.
    CachedCompile compiled = compile_cached(split_translation_units(parts, jit_compile_threads()),
                                            "synk_" + plan.function.name, options.use_disk_cache);
    std::shared_ptr<LoadedObject> object = compiled.object;
    code.lookup = [object](const std::string& symbol) { return object->lookup(symbol); };
    code.keep_alive = object;
    code.outcome = compiled.outcome;
  }
  return std::make_unique<CpuFunction>(module, std::move(plan), std::move(source), std::move(code));
}

}  // namespace synk::compiler
