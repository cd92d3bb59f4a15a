// A compiled function that runs on the device of the group it is called in: the CPU
// (CpuFunction) or the GPU (CudaFunction), by rt::active_backend() in the calling rank. The JIT
// API registers these, so that one jit::Module works unchanged under synk::fork(n, Backend::Cpu)
// and Backend::Gpu, whether its functions were created before or after the fork: the function is
// compiled for the backend active when it is created, and for the other one the first time it
// runs there (each rank compiles its own copy, a kernel-cache hit after the first). Both
// backends derive the signature from the same kernel plan, so it does not depend on the backend.
//
// Shared variables stay in host memory (the runtime's copies); on the GPU, CudaFunction stages
// the shared values a call reads and the inputs to the device on every call and copies outputs
// and updates back (docs/gpu.md, "Known limits").
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "compiler/cuda/cuda_function.h"
#include "ir/ir.h"
#include "runtime/group/backend.h"
#include "runtime/call/descriptor.h"

namespace synk::compiler {

// Lowers, generates, compiles (or finds in the cache) function `name` of `module` for the GPU.
// (The CPU's counterpart, compile_cpu_function, needs the JIT: compiler/llvm/.)
std::unique_ptr<CudaFunction> compile_cuda_function(const ir::Module& module, const std::string& name,
                                                    const CudaCompileOptions& options = {});

class BackendFunction : public rt::CompiledFunction {
 public:
  // Builds the CPU version (compile_cpu_function, which needs the JIT: passed in so that this
  // file stays in the LLVM-free core library).
  using CpuFactory = std::function<std::unique_ptr<rt::CompiledFunction>()>;

  // Compiles for rt::active_backend() now: a synk::UserError when that backend cannot compile it.
  BackendFunction(std::shared_ptr<const ir::Module> module, std::string name, CpuFactory make_cpu,
                  CudaCompileOptions cuda_options = {});

  const rt::FunctionSignature& signature() const override { return signature_; }
  void run(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
           std::span<rt::Array> outputs, std::span<rt::Array> updates) override;
  void set_random_state(const RngState& state) override { rng_ = state; }
  // Passed on to the version that runs.
  bool stream_update(int update, rt::UpdateSink* sink) override {
    stream_update_ = sink ? update : -1;
    sink_ = sink;
    return sink != nullptr;
  }

  // The version for `backend` (Cpu or Gpu), compiled on first use.
  rt::CompiledFunction& version(rt::Backend backend);
  bool has_version(rt::Backend backend) const { return backend == rt::Backend::Gpu ? bool(gpu_) : bool(cpu_); }

 private:
  std::shared_ptr<const ir::Module> module_;
  std::string name_;
  CpuFactory make_cpu_;
  CudaCompileOptions cuda_options_;
  std::mutex mutex_;
  std::unique_ptr<rt::CompiledFunction> cpu_, gpu_;
  rt::FunctionSignature signature_;
  RngState rng_;   // handed to the version that runs
  int stream_update_ = -1;
  rt::UpdateSink* sink_ = nullptr;
};

}  // namespace synk::compiler
