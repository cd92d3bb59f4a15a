// The host side of a GPU-compiled function (see cuda_function.h): compile through NVRTC at
// construction, load into the device on the first run, then per call: argument checks, device
// buffers, staging, launches, copies back and the failure records.
#include "compiler/backend/signature.h"
#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/kernel_errors.h"
#include "compiler/cuda/cuda_function.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/source_hash.h"
#include "gpu/cublas.h"
#include "gpu/driver.h"

namespace synk::compiler {

namespace cu = rt::cuda;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

int threads_for(int64_t per_team) {
  int t = 32;
  while (t < kCudaMaxThreads && t < per_team) t *= 2;
  return t;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

// The real device: this process's GPU through the driver, one non-blocking stream shared by every
// CudaFunction of the process, and one cuBLAS handle on that stream.
class GpuExecutor : public CudaExecutor {
 public:
  GpuExecutor() : device_(cu::CudaDevice::get()), api_(cu::cuda_driver()) {
    cu::cuda_check(api_.cuStreamCreate(&stream_, cu::kStreamNonBlocking), "creating the synk stream");
  }
  std::string describe() override {
    const cu::DeviceInfo& i = device_.info();
    return fmt::format("GPU {} ({}, {})", i.ordinal, i.name, i.arch());
  }
  int sm_count() override { return device_.info().sm_count; }
  DevicePtr allocate(size_t bytes, const std::string& what) override {
    current();
    DevicePtr p = 0;
    const size_t want = std::max<size_t>(bytes, 256);   // cuMemAlloc(0) is an error
    cu::CUresult r = api_.cuMemAlloc(&p, want);
    if (r == cu::kCudaErrorOutOfMemory) {
      size_t free_bytes = 0, total_bytes = 0;
      api_.cuMemGetInfo(&free_bytes, &total_bytes);
      throw cu::CudaError(fmt::format("out of GPU memory on {}: cannot allocate {} for {} ({} free of {})", describe(),
                                      cu::format_bytes(want), what, cu::format_bytes(free_bytes),
                                      cu::format_bytes(total_bytes)), r);
    }
    cu::cuda_check(r, fmt::format("cuMemAlloc of {} for {}", cu::format_bytes(want), what));
    return p;
  }
  void release(DevicePtr p) noexcept override {
    if (p) api_.cuMemFree(p);
  }
  void copy_to_device(DevicePtr dst, const void* src, size_t bytes) override {
    cu::cuda_check(api_.cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoDAsync");
  }
  void copy_to_host(void* dst, DevicePtr src, size_t bytes) override {
    cu::cuda_check(api_.cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoHAsync");
  }
  void fill(DevicePtr dst, unsigned char value, size_t bytes) override {
    cu::cuda_check(api_.cuMemsetD8Async(dst, value, bytes, stream_), "cuMemsetD8Async");
  }
  void* load(const std::string& source, const std::vector<char>& image, const std::vector<std::string>& symbols,
             std::vector<void*>* functions) override {
    (void)source;
    current();
    cu::CUmodule module = nullptr;
    std::vector<char> log(8192, '\0');
    int options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSize};
    void* values[] = {log.data(), reinterpret_cast<void*>(uintptr_t(log.size() - 1))};
    cu::CUresult r = api_.cuModuleLoadDataEx(&module, image.data(), 2, options, values);
    if (r != cu::kCudaSuccess)
      synk::internal_error(fmt::format("loading a module into {} failed: {}{}{}", describe(), cu::cuda_error_text(r),
                                      log[0] ? ": " : "", log.data()));
    for (const std::string& s : symbols) {
      cu::CUfunction f = nullptr;
      cu::cuda_check(api_.cuModuleGetFunction(&f, module, s.c_str()), "finding kernel " + s + " in the loaded module");
      functions->push_back(f);
    }
    return module;
  }
  void unload(void* module) noexcept override {
    if (module) api_.cuModuleUnload(static_cast<cu::CUmodule>(module));
  }
  cu::CUresult launch(void* function, int64_t grid_x, int64_t grid_y, int threads, void** args) override {
    return api_.cuLaunchKernel(static_cast<cu::CUfunction>(function), unsigned(grid_x), unsigned(grid_y), 1,
                               unsigned(threads), 1, 1, 0, stream_, args, nullptr);
  }
  void gemm(const cu::ColumnMajorGemm& g, const std::string& what) override {
    if (!cublas_) cublas_ = std::make_unique<cu::CublasHandle>(stream_);
    cu::gemm(*cublas_, g, what);
  }
  cu::CUresult synchronize() override { return api_.cuStreamSynchronize(stream_); }
  void current() { device_.make_current(); }

 private:
  cu::CudaDevice& device_;
  const cu::DriverApi& api_;
  cu::CUstream stream_ = nullptr;
  std::unique_ptr<cu::CublasHandle> cublas_;
};

// The target for this process's GPU without initialising CUDA here (the probe runs in a child).
CudaTarget default_target() {
  std::string reason;
  if (!cu::cuda_available(&reason))
    throw synk::UserError("cannot compile for the GPU: no CUDA GPU (" + reason + "); give an explicit target");
  const cu::CudaStatus& status = cu::cuda_status();
  int ordinal = 0;
  if (const char* env = std::getenv("SYNK_CUDA_DEVICE"); env && *env) ordinal = std::atoi(env);
  if (ordinal < 0 || size_t(ordinal) >= status.device_sm.size()) ordinal = 0;
  int sm = status.device_sm.at(size_t(ordinal));
  return choose_cuda_target(sm / 10, sm % 10);
}

// Device memory that grows on demand and is reused across calls. Running out is the user's
// problem (too much data): a synk::UserError naming the function, the size and the use.
class ExecBuffer {
 public:
  ExecBuffer() = default;
  ExecBuffer(const ExecBuffer&) = delete;
  ExecBuffer& operator=(const ExecBuffer&) = delete;
  ~ExecBuffer() { reset(); }
  void reserve(CudaExecutor& exec, size_t bytes, const std::string& function, const std::string& what) {
    if (ptr_ && bytes <= capacity_) return;
    reset();
    exec_ = &exec;
    try {
      ptr_ = exec.allocate(bytes, what);
    } catch (const cu::CudaError& e) {
      if (e.out_of_memory()) throw synk::UserError(fmt::format("function '{}': {}", function, e.what()));
      throw;
    }
    capacity_ = bytes;
  }
  CudaExecutor::DevicePtr ptr() const { return ptr_; }
  void reset() noexcept {
    if (ptr_ && exec_) exec_->release(ptr_);
    ptr_ = 0;
    capacity_ = 0;
  }

 private:
  CudaExecutor* exec_ = nullptr;
  CudaExecutor::DevicePtr ptr_ = 0;
  size_t capacity_ = 0;
};

}  // namespace

namespace {
CudaExecutor* g_default_executor = nullptr;
std::optional<CudaTarget> g_default_target;
}  // namespace

void set_default_cuda_executor(CudaExecutor* executor, std::optional<CudaTarget> target) {
  g_default_executor = executor;
  g_default_target = executor ? target : std::nullopt;
}

CudaExecutor& gpu_executor() {
  static std::mutex mutex;
  static GpuExecutor* executor = nullptr;   // lives as long as the process, like the CUDA context
  std::lock_guard<std::mutex> lock(mutex);
  if (!executor) executor = new GpuExecutor;
  executor->current();
  return *executor;
}

CudaLaunchConfig cuda_launch_config(const CudaKernelLaunch& launch, int64_t work, int64_t reduced, int sm_count) {
  CudaLaunchConfig c;
  sm_count = std::max(sm_count, 1);
  const int64_t max_blocks = int64_t(sm_count) * 32;
  const int64_t width = std::max(launch.vector_width, 1);
  if (launch.kind == CudaLaunchKind::Blas || work <= 0) {
    c.skip = true;
    return c;
  }
  switch (launch.kind) {
    case CudaLaunchKind::Blas: return c;
    case CudaLaunchKind::Flat:
      c.threads = kCudaMaxThreads;
      c.grid_x = std::clamp<int64_t>(ceil_div(work, c.threads * width), 1, max_blocks);
      return c;
    case CudaLaunchKind::RowTeams: {
      c.threads = threads_for(ceil_div(reduced, width));
      if (launch.splittable && work < 4 * sm_count) {
        // Few outputs, long rows: split each row over blocks until the GPU is full, but keep
        // at least 16 vector steps per thread in each part.
        const int64_t min_part = int64_t(c.threads) * width * 16;
        c.splits = std::clamp<int64_t>(std::min(ceil_div(4 * sm_count, work), reduced / min_part), 1, 65535);
      }
      c.grid_x = std::clamp<int64_t>(work * c.splits, 1, max_blocks);
      if (c.splits > 1) c.counters = work;
      break;
    }
    case CudaLaunchKind::Columns: {
      c.threads = kCudaMaxThreads;
      c.grid_x = std::max<int64_t>(ceil_div(work, c.threads), 1);
      if (launch.splittable && c.grid_x < 4 * sm_count)
        c.splits = std::clamp<int64_t>(std::min(ceil_div(4 * sm_count, c.grid_x), reduced / 64), 1, 65535);
      c.grid_y = c.splits;
      if (c.splits > 1) c.counters = c.grid_x;
      break;
    }
  }
  if (c.splits > 1) c.scratch_bytes = round_up(c.counters * 4, 16) + work * c.splits * launch.partial_bytes;
  return c;
}

struct CudaFunction::State {
  CudaExecutor* exec = nullptr;
  void* module = nullptr;
  std::vector<void*> functions;           // per launch (null for cuBLAS)
  std::vector<ExecBuffer> buffers;        // per plan buffer (Alias buffers stay empty)
  std::vector<CudaExecutor::DevicePtr> pointers;   // per plan buffer, this call
  std::vector<ExecBuffer> scratch;        // per launch
  ExecBuffer failures;                    // 4 words per launch
  std::vector<unsigned long long> failures_host;
  std::vector<int64_t> syms_arg;
  ~State() {
    if (module && exec) exec->unload(module);
  }
};

CudaFunction::CudaFunction(const ir::Module& module, KernelPlan plan, CudaProgram program,
                           const CudaCompileOptions& options)
    : plan_(std::move(plan)), program_(std::move(program)), options_(options) {
  if (env_flag("SYNK_CUDA_SYNC")) options_.sync_after_each_launch = true;
  if (!options_.executor && g_default_executor) {
    options_.executor = g_default_executor;
    if (!options_.target) options_.target = g_default_target;
  }
  const ir::Function* fn = module.find_function(plan_.function.name);
  signature_ = make_signature(module, fn ? *fn : plan_.function, plan_);
  binding_.emplace(module, plan_);
  bool any_kernel = std::any_of(program_.launches.begin(), program_.launches.end(),
                                [](const CudaKernelLaunch& l) { return l.kind != CudaLaunchKind::Blas; });
  if (options_.prebuilt) {
    if (any_kernel) use_prebuilt(*options_.prebuilt);
  } else {
    target_ = options_.target ? *options_.target : default_target();
    if (any_kernel) {
      CachedCudaBinary bin = nvrtc_compile_cached(program_.source, "synk_" + plan_.function.name, target_,
                                                  options_.nvrtc, options_.use_disk_cache);
      image_ = std::move(bin.binary.image);
      from_disk_cache_ = bin.from_disk_cache;
    }
  }
  shapes_.assign(plan_.buffers.size(), {});
}

CudaFunction::~CudaFunction() = default;

void CudaFunction::use_prebuilt(const CudaImageSet& set) {
  const uint64_t hash = source_hash(program_.source);
  if (hash != set.source_hash)
    synk::internal_error(fmt::format("function '{}': the artifact's GPU images were compiled from other CUDA code (hash "
                                    "{:016x}, this program's synk generates {:016x}); rebuild the artifact with the synkc of "
                                    "the synk it links", plan_.function.name, set.source_hash, hash));
  CudaDeviceProps device;
  if (options_.target) {   // tests (the emulator): the device the target names, any driver
    device.cc_major = options_.target->sm / 10;
    device.cc_minor = options_.target->sm % 10;
  } else {
    // The fork-safe probe: this process may not initialise CUDA yet (a master before fork()).
    std::string reason;
    if (!cu::cuda_available(&reason))
      throw synk::UserError(fmt::format("function '{}': no CUDA GPU to run it on ({})", plan_.function.name, reason));
    const cu::CudaStatus& status = cu::cuda_status();
    size_t ordinal = 0;
    if (std::optional<int> selected = cu::CudaDevice::selected()) ordinal = size_t(*selected);
    else if (const char* env = std::getenv("SYNK_CUDA_DEVICE"); env && *env) ordinal = size_t(std::atoi(env));
    if (ordinal >= status.device_sm.size()) ordinal = 0;
    device.cc_major = status.device_sm.at(ordinal) / 10;
    device.cc_minor = status.device_sm.at(ordinal) % 10;
    device.driver_version = status.driver_version;
    device.name = fmt::format("GPU {}", ordinal);
  }
  const CudaImage& image = set.images.at(select_cuda_image(set, device));
  target_ = CudaTarget{image.sm, !image.ptx, image.arch_specific};
  image_.assign(image.bytes(), image.bytes() + image.byte_count());
}

CudaExecutor& CudaFunction::executor() const { return options_.executor ? *options_.executor : gpu_executor(); }

void CudaFunction::load_module() {
  auto state = std::make_unique<State>();
  state->exec = &executor();
  std::vector<std::string> symbols;
  for (const CudaKernelLaunch& l : program_.launches)
    if (l.kind != CudaLaunchKind::Blas) symbols.push_back(l.symbol);
  std::vector<void*> loaded;
  if (!symbols.empty()) state->module = state->exec->load(program_.source, image_, symbols, &loaded);
  size_t next = 0;
  for (const CudaKernelLaunch& l : program_.launches)
    state->functions.push_back(l.kind == CudaLaunchKind::Blas ? nullptr : loaded.at(next++));
  state->buffers = std::vector<ExecBuffer>(plan_.buffers.size());
  state->pointers.assign(plan_.buffers.size(), 0);
  state->scratch = std::vector<ExecBuffer>(program_.launches.size());
  state->syms_arg.assign(plan_.symbols.size() + kHiddenSymbols, 0);   // SynkSyms: symbols, random state
  state_ = std::move(state);
}

void CudaFunction::prepare(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds, bool resident) {
  const ir::Function& fn = plan_.function;
  binding_->bind(inputs, shareds);
  if (!state_) load_module();
  State& st = *state_;
  CudaExecutor& exec = *st.exec;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    const Buffer& buffer = plan_.buffers[b];
    shapes_[b] = binding_->shape_of(buffer.type.shape);
    if (buffer.kind == Buffer::Kind::Alias) continue;
    const rt::ArrayRef* given = buffer.kind == Buffer::Kind::Input    ? &inputs[size_t(buffer.index)]
                                : buffer.kind == Buffer::Kind::Shared ? &shareds[size_t(buffer.index)]
                                                                      : nullptr;
    if (given && resident) {
      st.pointers[b] = CudaExecutor::DevicePtr(reinterpret_cast<uintptr_t>(given->data));
      continue;
    }
    int64_t n = 1;
    for (int64_t d : shapes_[b]) n *= d;
    const size_t bytes = size_t(n) * rt::dtype_size(runtime_dtype(buffer.type.dtype));
    st.buffers[b].reserve(exec, bytes, fn.name,
                          fmt::format("{} buffer b{} ({} {})", buffer_kind_name(buffer.kind), b,
                                      ir::dtype_name(buffer.type.dtype), shape_text(shapes_[b])));
    st.pointers[b] = st.buffers[b].ptr();
    if (given && bytes > 0) exec.copy_to_device(st.pointers[b], given->data, bytes);
  }
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    size_t target = b;
    while (plan_.buffers[target].kind == Buffer::Kind::Alias) target = size_t(plan_.buffers[target].index);
    st.pointers[b] = st.pointers[target];
  }
  const std::vector<int64_t>& syms = binding_->values();
  for (size_t s = 0; s < syms.size(); ++s) st.syms_arg[s] = syms[s];
  st.syms_arg[syms.size()] = int64_t(rng_.seed);
  st.syms_arg[syms.size() + 1] = int64_t(rng_.step);
  st.syms_arg[syms.size() + 2] = rng_.first_row;
  st.failures_host.assign(4 * program_.launches.size(), 0);
  const size_t failure_bytes = st.failures_host.size() * sizeof(unsigned long long);
  st.failures.reserve(exec, failure_bytes, fn.name, "kernel failure records");
  if (failure_bytes > 0) exec.fill(st.failures.ptr(), 0, failure_bytes);
}

void CudaFunction::finish_call(const std::function<void()>& copies) {
  State& st = *state_;
  copies();
  const size_t failure_bytes = st.failures_host.size() * sizeof(unsigned long long);
  if (failure_bytes > 0) st.exec->copy_to_host(st.failures_host.data(), st.failures.ptr(), failure_bytes);
  if (cu::CUresult r = st.exec->synchronize(); r != cu::kCudaSuccess) {
    std::vector<std::string> names;
    for (const CudaKernelLaunch& l : program_.launches) names.push_back(l.symbol.empty() ? "cuBLAS" : l.symbol);
    throw cu::CudaError(fmt::format("function '{}' failed on {}: {} (kernels in this call: {}; set SYNK_CUDA_SYNC=1 "
                                    "to find which one)",
                                    plan_.function.name, st.exec->describe(), cu::cuda_error_text(r),
                                    fmt::join(names, ", ")), r);
  }
  check_failures();
}

void CudaFunction::run(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds,
                       std::span<rt::Array> outputs, std::span<rt::Array> updates) {
  const ir::Function& fn = plan_.function;
  check_result_counts(fn, outputs.size(), updates.size());
  prepare(inputs, shareds, false);
  launch_all();
  finish_call([&] {
    auto copy_out = [&](rt::Array& dst, ir::NodeId node) {
      const int b = plan_.node_buffer.at(size_t(node));
      const ir::TensorType& t = fn.node(node).type;
      dst.resize(runtime_dtype(t.dtype), binding_->shape_of(t.shape));
      if (!dst.bytes.empty()) state_->exec->copy_to_host(dst.bytes.data(), state_->pointers.at(size_t(b)), dst.bytes.size());
    };
    for (size_t o = 0; o < fn.outputs.size(); ++o) copy_out(outputs[o], fn.outputs[o].node);
    for (size_t u = 0; u < fn.updates.size(); ++u) copy_out(updates[u], fn.updates[u].node);
  });
}

void CudaFunction::run_resident(std::span<const rt::ArrayRef> inputs, std::span<const rt::ArrayRef> shareds) {
  prepare(inputs, shareds, true);
  launch_all();
  finish_call([] {});
}

rt::ArrayRef CudaFunction::device_result(size_t index) const {
  const ir::Function& fn = plan_.function;
  if (!state_ || index >= fn.outputs.size() + fn.updates.size())
    synk::internal_error(fmt::format("function '{}': no device result {}", fn.name, index));
  const ir::NodeId node = index < fn.outputs.size() ? fn.outputs[index].node : fn.updates[index - fn.outputs.size()].node;
  const ir::TensorType& t = fn.node(node).type;
  const CudaExecutor::DevicePtr p = state_->pointers.at(size_t(plan_.node_buffer.at(size_t(node))));
  return rt::ArrayRef{reinterpret_cast<const void*>(uintptr_t(p)), runtime_dtype(t.dtype), binding_->shape_of(t.shape)};
}

void CudaFunction::launch_all() {
  State& st = *state_;
  CudaExecutor& exec = *st.exec;
  const int sms = exec.sm_count();
  for (size_t li = 0; li < program_.launches.size(); ++li) {
    const CudaKernelLaunch& l = program_.launches[li];
    const Kernel& k = plan_.kernels.at(size_t(l.kernel));
    const ir::Node& root = plan_.function.node(k.roots.at(0));
    if (l.kind == CudaLaunchKind::Blas) {
      run_blas(l);
      continue;
    }
    const int64_t work = binding_->count_of(l.work), reduced = binding_->count_of(l.reduced);
    if (l.empty_reduction_error && reduced == 0) {
      exec.synchronize();
      throw synk::UserError(fmt::format("function '{}': {}{}: cannot reduce over an empty axis; {} has no identity",
                                       plan_.function.name, ir::op_name(root.op), source_position(root), ir::op_name(root.op)));
    }
    CudaLaunchConfig c = cuda_launch_config(l, work, reduced, sms);
    if (c.skip) continue;
    CudaExecutor::DevicePtr scratch = 0;
    if (c.splits > 1) {
      st.scratch[li].reserve(exec, size_t(c.scratch_bytes), plan_.function.name,
                             fmt::format("the partial results of kernel {}", l.symbol));
      scratch = st.scratch[li].ptr();
      exec.fill(scratch, 0, size_t(c.counters) * 4);
    }
    std::vector<void*> args;
    for (int b : l.params) args.push_back(&st.pointers.at(size_t(b)));
    CudaExecutor::DevicePtr err = st.failures.ptr() + 4 * sizeof(unsigned long long) * li;
    long long splits = c.splits;
    args.push_back(st.syms_arg.data());
    args.push_back(&err);
    args.push_back(&scratch);
    args.push_back(&splits);
    cu::cuda_check(exec.launch(st.functions[li], c.grid_x, c.grid_y, c.threads, args.data()),
                   fmt::format("launching kernel {} of function '{}' ({}, grid {}x{}, {} threads)", l.symbol,
                               plan_.function.name, cuda_launch_kind_name(l.kind), c.grid_x, c.grid_y, c.threads));
    if (options_.sync_after_each_launch)
      cu::cuda_check(exec.synchronize(), fmt::format("kernel {} of function '{}' ({}: {})", l.symbol, plan_.function.name,
                                                     kernel_kind_name(k.kind), node_str(nullptr, plan_.function, k.roots[0])));
  }
}

void CudaFunction::run_blas(const CudaKernelLaunch& l) {
  const Kernel& k = plan_.kernels.at(size_t(l.kernel));
  const ir::Node& mm = plan_.function.node(k.roots[0]);
  const bool f64 = mm.type.dtype == ir::DType::F64;
  const std::vector<int64_t>& as = shapes_.at(size_t(k.matmul_a));
  const std::vector<int64_t>& bs = shapes_.at(size_t(k.matmul_b));
  const int c_buffer = k.outputs.at(0);
  int64_t c_size = 1;
  for (int64_t d : shapes_.at(size_t(c_buffer))) c_size *= d;
  if (c_size == 0) return;
  State& st = *state_;
  const CudaExecutor::DevicePtr a = st.pointers.at(size_t(k.matmul_a)), b = st.pointers.at(size_t(k.matmul_b));
  const CudaExecutor::DevicePtr c = st.pointers.at(size_t(c_buffer));
  const int64_t K = as.size() == 1 ? as[0] : (k.trans_a ? as[0] : as[1]);
  if (K == 0) {   // an empty sum: cuBLAS with k = 0 is not guaranteed to write C
    st.exec->fill(c, 0, size_t(c_size) * (f64 ? 8 : 4));
    return;
  }
  // Vectors are 1 x K (left) or K x 1 (right) matrices.
  const int64_t M = as.size() == 1 ? 1 : (k.trans_a ? as[1] : as[0]);
  const int64_t N = bs.size() == 1 ? 1 : (k.trans_b ? bs[0] : bs[1]);
  const int64_t lda = as.size() == 1 ? as[0] : as[1];
  const int64_t ldb = bs.size() == 1 ? 1 : bs[1];
  st.exec->gemm(cu::row_major_gemm(f64, as.size() == 2 && k.trans_a, bs.size() == 2 && k.trans_b, M, N, K, a, lda, b, ldb, c),
                fmt::format("matmul {} of function '{}'{}", k.name, plan_.function.name, source_position(mm)));
  if (options_.sync_after_each_launch)
    cu::cuda_check(st.exec->synchronize(), fmt::format("cuBLAS matmul {} of function '{}'", k.name, plan_.function.name));
}

void CudaFunction::check_failures() {
  State& st = *state_;
  for (size_t li = 0; li < program_.launches.size(); ++li) {
    const unsigned long long code = st.failures_host[4 * li];
    if (code == 0) continue;
    const int64_t position = int64_t(~st.failures_host[4 * li + 1]);
    const int64_t limit = int64_t(st.failures_host[4 * li + 2]);
    const Kernel& k = plan_.kernels.at(size_t(program_.launches[li].kernel));
    // The offending index or label, read back from its device buffer.
    auto value_at = [&](ir::NodeId node) -> int64_t {
      const int b = plan_.node_buffer.at(size_t(node));
      const ir::DType t = plan_.function.node(node).type.dtype;
      const size_t size = ir::dtype_size(t);
      unsigned char bytes[8] = {0};
      st.exec->copy_to_host(bytes, st.pointers.at(size_t(b)) + size * size_t(position), size);
      cu::cuda_check(st.exec->synchronize(), "reading a failing index back");
      if (t == ir::DType::I32) { int32_t v; std::memcpy(&v, bytes, 4); return v; }
      if (t == ir::DType::I64) { int64_t v; std::memcpy(&v, bytes, 8); return v; }
      return bytes[0];
    };
    throw_kernel_failure(plan_, k, int64_t(code), position, limit, value_at, program_.launches[li].symbol);
  }
}

BackendChoice choose_backend(std::string_view requested) {
  BackendChoice choice;
  if (requested == "cpu") return choice;
  if (requested != "auto" && requested != "cuda" && requested != "gpu")
    throw synk::UserError(fmt::format("backend '{}' is not one of auto, cpu, cuda", requested));
  std::string reason;
  if (cu::cuda_available(&reason)) {
    choice.backend = Backend::Cuda;
    return choice;
  }
  if (requested != "auto") throw synk::UserError("backend 'cuda' was requested but there is no CUDA GPU: " + reason);
  choice.reason = reason;
  static std::once_flag printed;
  std::call_once(printed, [&] { std::cerr << "synk: running on the CPU: no CUDA GPU (" << reason << ")\n"; });
  return choice;
}

}  // namespace synk::compiler
