// BackendFunction (backend_function.h): one function, a version per backend, chosen per call.
#include "compiler/backend_function.h"

#include <fmt/format.h>

#include "base/diagnostics.h"
#include "compiler/lower.h"

namespace synk::compiler {

BackendFunction::BackendFunction(std::shared_ptr<const ir::Module> module, std::string name, CpuFactory make_cpu,
                                 CudaCompileOptions cuda_options)
    : module_(std::move(module)), name_(std::move(name)), make_cpu_(std::move(make_cpu)),
      cuda_options_(std::move(cuda_options)) {
  signature_ = version(rt::active_backend()).signature();
}

rt::CompiledFunction& BackendFunction::version(rt::Backend backend) {
  std::lock_guard lock(mutex_);
  if (backend == rt::Backend::Gpu) {
    if (!gpu_) gpu_ = compile_cuda_function(*module_, name_, cuda_options_);
    return *gpu_;
  }
  if (!cpu_) {
    cpu_ = make_cpu_();
    if (!cpu_) synk::internal_error(fmt::format("BackendFunction: no CPU version of function '{}' was built", name_));
  }
  return *cpu_;
}

void BackendFunction::run(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
                          std::span<rt::Array> outputs, std::span<rt::Array> updates) {
  rt::CompiledFunction& v = version(rt::active_backend());
  v.set_random_state(rng_);
  v.stream_update(stream_update_, sink_);
  struct Unset {
    rt::CompiledFunction& v;
    ~Unset() { v.stream_update(-1, nullptr); }
  } unset{v};
  v.run(inputs, shareds, outputs, updates);
}

std::unique_ptr<CudaFunction> compile_cuda_function(const ir::Module& module, const std::string& name,
                                                    const CudaCompileOptions& options) {
  const ir::Function* fn = module.find_function(name);
  if (!fn) throw synk::UserError(fmt::format("no function named '{}'", name));
  KernelPlan plan = lower(module, *fn);
  CudaProgram program = generate_cuda_program(module, plan);
  return std::make_unique<CudaFunction>(module, std::move(plan), std::move(program), options);
}

}  // namespace synk::compiler
