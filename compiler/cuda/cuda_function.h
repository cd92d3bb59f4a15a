// A function compiled for the GPU, as the runtime sees it (rt::CompiledFunction): the kernel plan,
// the CUDA program (codegen_cuda.h) compiled by NVRTC (nvrtc.h), and the host code that runs it
// on this process's GPU: it binds symbolic dims from the argument shapes, stages the inputs and
// shared values (rows already selected by the call engine) into device buffers kept across calls,
// launches every kernel on one stream (cuBLAS for float matrix products) with a launch check
// that names the kernel, copies outputs and updates back, and turns the kernels' failure records
// into the same user errors as the CPU backend.
//
// With pre-built images (an ahead-of-time artifact) nothing is compiled: the image is chosen for
// the device by select_cuda_image. Compiling needs no GPU (NVRTC only; the architecture comes from the fork-safe probe or is
// given explicitly); the module is loaded into the device on the first run() in each process, so
// a function built before the fork runs in every rank. Set SYNK_CUDA_SYNC=1 to synchronise after
// every launch, so that a fault inside a kernel is reported with that kernel's name.
//
// Backend choice: choose_backend("auto") gives the GPU when cuda_available(), else the CPU, and
// prints the reason for the CPU once per process.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/backend/symbol_binding.h"
#include "compiler/cuda/codegen_cuda.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/passes/kernel_plan.h"
#include "compiler/cuda/nvrtc.h"
#include "ir/ir.h"
#include "gpu/cublas.h"
#include "runtime/call/descriptor.h"

namespace synk::compiler {

// What a CudaFunction needs from a device, in the order it calls them on one stream: the real GPU
// (gpu_executor(): the CUDA driver and cuBLAS) or, in tests, an emulator that runs the generated
// kernels on the CPU (cuda_emulator_test_util.h), so the whole host path is tested without a GPU.
class CudaExecutor {
 public:
  using DevicePtr = rt::cuda::CUdeviceptr;
  virtual ~CudaExecutor() = default;
  virtual std::string describe() = 0;                  // "GPU 0 (NVIDIA H100 80GB HBM3, sm_90)"
  virtual int sm_count() = 0;
  // Throws rt::cuda::CudaError; out_of_memory() when the device is full (the message names
  // `bytes` and `what`).
  virtual DevicePtr allocate(size_t bytes, const std::string& what) = 0;
  virtual void release(DevicePtr p) noexcept = 0;
  virtual void copy_to_device(DevicePtr dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, DevicePtr src, size_t bytes) = 0;   // done after synchronize()
  virtual void fill(DevicePtr dst, unsigned char value, size_t bytes) = 0;
  // Loads a compiled program; `functions` receives one handle per symbol.
  virtual void* load(const std::string& source, const std::vector<char>& image, const std::vector<std::string>& symbols,
                     std::vector<void*>* functions) = 0;
  virtual void unload(void* module) noexcept = 0;
  // Queues a kernel; returns the CUresult of the launch itself.
  virtual rt::cuda::CUresult launch(void* function, int64_t grid_x, int64_t grid_y, int threads, void** args) = 0;
  virtual void gemm(const rt::cuda::ColumnMajorGemm& g, const std::string& what) = 0;
  // Waits for everything queued; returns the first asynchronous failure.
  virtual rt::cuda::CUresult synchronize() = 0;
};

// The process's GPU (bound on first use); throws rt::cuda::CudaError when there is none.
CudaExecutor& gpu_executor();

// Tests: every CudaFunction compiled without an explicit executor afterwards (in this process
// and in workers it forks) runs on `executor`, compiled for `target`: the CUDA emulator in place
// of a GPU, so that the runtime's GPU backend is tested end to end without one. Null: the GPU.
void set_default_cuda_executor(CudaExecutor* executor, std::optional<CudaTarget> target);

struct CudaCompileOptions {
  bool use_disk_cache = true;
  std::optional<CudaTarget> target;     // default: from the GPU this process will use
  NvrtcOptions nvrtc = nvrtc_options_from_env();
  bool sync_after_each_launch = false;  // also set by SYNK_CUDA_SYNC=1
  CudaExecutor* executor = nullptr;     // default: gpu_executor()
  // Ahead-of-time images (an artifact's, cuda_images.h): the one for this process's GPU is
  // loaded and NVRTC is never used. Their source hash must match the regenerated program.
  std::shared_ptr<const CudaImageSet> prebuilt;
};

class CudaFunction : public rt::CompiledFunction {
 public:
  CudaFunction(const ir::Module& module, KernelPlan plan, CudaProgram program, const CudaCompileOptions& options);
  ~CudaFunction() override;
  CudaFunction(const CudaFunction&) = delete;
  CudaFunction& operator=(const CudaFunction&) = delete;

  const rt::FunctionSignature& signature() const override { return signature_; }
  void set_random_state(const RngState& state) override { rng_ = state; }
  // Throws synk::UserError for bad arguments, data errors (an index out of range...) and device
  // out-of-memory (naming the size); rt::cuda::CudaError for driver failures (naming the kernel).
  void run(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
           std::span<rt::Array> outputs, std::span<rt::Array> updates) override;

  // The same computation on arrays already on this process's GPU (no staging, no copy back):
  // each ArrayRef's `data` is a device pointer (CUdeviceptr). Outputs and updates stay on the
  // device, readable through device_result() until the next call. For benchmarks, and for
  // device-resident data once the runtime keeps shared variables on the GPU.
  void run_resident(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds);
  // Device address and shape of output `index` (updates follow the outputs) of the last call.
  rt::ArrayRef device_result(size_t index) const;

  const KernelPlan& plan() const { return plan_; }
  const CudaProgram& program() const { return program_; }
  const CudaTarget& target() const { return target_; }
  bool from_disk_cache() const { return from_disk_cache_; }

 private:
  struct State;   // device-side state (module, buffers), created on the first run()
  CudaExecutor& executor() const;
  void use_prebuilt(const CudaImageSet& set);   // chooses target_ and image_ for this device
  void load_module();
  // Binds symbols, allocates buffers, and stages inputs and shared values (or, when resident,
  // takes their device addresses).
  void prepare(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds, bool resident);
  void finish_call(const std::function<void()>& copies);
  void launch_all();
  void run_blas(const CudaKernelLaunch& launch);
  void check_failures();

  KernelPlan plan_;
  RngState rng_;
  CudaProgram program_;
  CudaCompileOptions options_;
  CudaTarget target_;
  std::vector<char> image_;                 // CUBIN or PTX
  bool from_disk_cache_ = false;
  rt::FunctionSignature signature_;
  std::optional<SymbolBinding> binding_;   // argument checks and the symbols' values of this call
  std::unique_ptr<State> state_;
  // Per call.
  std::vector<std::vector<int64_t>> shapes_;   // per buffer
};

// How one kernel is launched for given sizes (pure arithmetic, so it is tested without a GPU):
// `work` and `reduced` are the products of CudaKernelLaunch::work / reduced for the call.
struct CudaLaunchConfig {
  int64_t grid_x = 1, grid_y = 1;
  int threads = kCudaMaxThreads;
  int64_t splits = 1;
  int64_t counters = 0;        // arrival counters at the start of scratch (splits > 1)
  int64_t scratch_bytes = 0;   // counters (rounded up to 16 bytes) then the partials
  bool skip = false;           // nothing to compute (no outputs)
};
CudaLaunchConfig cuda_launch_config(const CudaKernelLaunch& launch, int64_t work, int64_t reduced, int sm_count);

// backend=auto|cpu|cuda.
enum class Backend { Cpu, Cuda };
struct BackendChoice {
  Backend backend = Backend::Cpu;
  std::string reason;   // why the CPU was chosen under "auto" (empty otherwise)
};
// "auto": the GPU when cuda_available(), else the CPU (the reason printed to stderr once per
// process). "cuda": the GPU, or synk::UserError with the reason. "cpu": the CPU. Anything else:
// synk::UserError naming the accepted values.
BackendChoice choose_backend(std::string_view requested);

}  // namespace synk::compiler
