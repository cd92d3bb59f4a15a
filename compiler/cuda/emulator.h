// The CUDA emulator for tests: runs the CUDA that codegen_cuda generates on the CPU, behind the
// CudaExecutor interface, so that CudaFunction's whole host path (buffers, staging, launch
// configurations, split reductions, failure records, the row-major cuBLAS call as column-major
// gemm) and the runtime's GPU backend are tested on machines without a GPU. The generated source
// is compiled by the host C++ compiler against a small model of CUDA: blocks one after another,
// the threads of a block as cooperative fibers (swapcontext) that switch at __syncthreads and at
// warp shuffles, which exchange values through a per-warp buffer. A thread that skips a barrier
// others wait at is reported as divergence. It cannot show races, memory-model or performance
// problems. Test-only (included by compiler/cuda/cuda_exec_test.cpp and cuda_group_test.cpp; not
// under AddressSanitizer, whose stacks do not follow swapcontext).
#pragma once

#include <dlfcn.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/cuda/cuda_function.h"
#include "gpu/driver.h"

namespace synk::compiler::emulator {

namespace cu = rt::cuda;

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Prepended to the generated source (whose own fixed-width typedefs are removed: <cstdint> has them).
inline const char* const kEmulationHeader = R"EMU(#include <math.h>
#include <stdint.h>
#include <string.h>
struct synk_emu_dim3 { unsigned x, y, z; };
extern "C" {
synk_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
void (*synk_emu_barrier)(int warp_only);
unsigned long long synk_emu_slots[1024];
}
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) alignas(n)
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
inline void __syncthreads() { synk_emu_barrier(0); }
inline void __threadfence() {}
template <class T> T synk_emu_exchange(T v, int from, bool absolute) {
  unsigned long long raw = 0, got;
  memcpy(&raw, &v, sizeof(T));
  const unsigned me = threadIdx.x, base = me & ~31u, lane = me & 31u;
  synk_emu_slots[me] = raw;
  synk_emu_barrier(1);
  const unsigned src = absolute ? unsigned(from) : lane + unsigned(from);
  got = src < 32 && base + src < blockDim.x ? synk_emu_slots[base + src] : raw;
  synk_emu_barrier(1);
  T out;
  memcpy(&out, &got, sizeof(T));
  return out;
}
template <class T> T __shfl_down_sync(unsigned, T v, int offset) { return synk_emu_exchange(v, offset, false); }
template <class T> T __shfl_sync(unsigned, T v, int lane) { return synk_emu_exchange(v, lane, true); }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
  unsigned long long old = *p; if (old == cmp) *p = v; return old; }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  unsigned long long old = *p; if (v > old) *p = v; return old; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned old = *p; *p = old + v; return old; }
)EMU";

struct Dim3 { unsigned x, y, z; };

// Cooperative fibers for the threads of one block.
struct Scheduler {
  enum State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };
  struct Fiber {
    ucontext_t context;
    std::vector<char> stack;
    State state = Runnable;
  };
  std::vector<Fiber> fibers;
  ucontext_t home;
  int current = -1;
  Dim3* thread_idx = nullptr;
  void (*entry)(void**) = nullptr;
  void** args = nullptr;
  std::string divergence;
};
inline Scheduler scheduler;

inline void fiber_main() {
  scheduler.entry(scheduler.args);
  scheduler.fibers[size_t(scheduler.current)].state = Scheduler::Done;
}

inline void emu_barrier(int warp_only) {
  Scheduler::Fiber& f = scheduler.fibers[size_t(scheduler.current)];
  f.state = warp_only ? Scheduler::AtWarpBarrier : Scheduler::AtBlockBarrier;
  swapcontext(&f.context, &scheduler.home);
}

// Runs every thread of one block to completion; returns false (with scheduler.divergence) when
// threads wait at a barrier that the others never reach.
inline bool run_block(unsigned threads) {
  scheduler.fibers.resize(threads);
  for (unsigned i = 0; i < threads; ++i) {
    Scheduler::Fiber& f = scheduler.fibers[i];
    if (f.stack.empty()) f.stack.resize(256 * 1024);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.data();
    f.context.uc_stack.ss_size = f.stack.size();
    f.context.uc_link = &scheduler.home;
    makecontext(&f.context, fiber_main, 0);
    f.state = Scheduler::Runnable;
  }
  for (;;) {
    for (unsigned i = 0; i < threads; ++i) {
      if (scheduler.fibers[i].state != Scheduler::Runnable) continue;
      scheduler.current = int(i);
      *scheduler.thread_idx = Dim3{i, 0, 0};
      swapcontext(&scheduler.home, &scheduler.fibers[i].context);
    }
    size_t done = 0, at_block = 0;
    bool released = false;
    for (const Scheduler::Fiber& f : scheduler.fibers) {
      done += f.state == Scheduler::Done;
      at_block += f.state == Scheduler::AtBlockBarrier;
    }
    if (done == threads) return true;
    if (at_block == threads) {
      for (Scheduler::Fiber& f : scheduler.fibers) f.state = Scheduler::Runnable;
      released = true;
    }
    for (unsigned w = 0; w * 32 < threads; ++w) {
      bool all = true;
      for (unsigned i = w * 32; i < std::min(threads, w * 32 + 32); ++i)
        all &= scheduler.fibers[i].state == Scheduler::AtWarpBarrier;
      if (!all) continue;
      for (unsigned i = w * 32; i < std::min(threads, w * 32 + 32); ++i) scheduler.fibers[i].state = Scheduler::Runnable;
      released = true;
    }
    if (!released) {
      scheduler.divergence = fmt::format("barrier divergence: {} of {} threads finished, {} wait at __syncthreads, the "
                                         "rest at a warp shuffle", done, threads, at_block);
      return false;
    }
  }
}

struct EmuModule {
  void* handle = nullptr;
  std::filesystem::path dir;
};

class EmulatorExecutor : public CudaExecutor {
 public:
  size_t memory_limit = size_t(1) << 34;   // allocations past this fail like a full GPU
  std::string describe() override { return "the CUDA emulator"; }
  int sm_count() override { return 2; }
  DevicePtr allocate(size_t bytes, const std::string& what) override {
    if (bytes > memory_limit)
      throw cu::CudaError(fmt::format("out of GPU memory on {}: cannot allocate {} for {}", describe(),
                                      cu::format_bytes(bytes), what), cu::kCudaErrorOutOfMemory);
    void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
    std::memset(p, 0xA5, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);   // garbage, like fresh device memory
    return DevicePtr(reinterpret_cast<uintptr_t>(p));
  }
  void release(DevicePtr p) noexcept override { std::free(reinterpret_cast<void*>(uintptr_t(p))); }
  void copy_to_device(DevicePtr dst, const void* src, size_t bytes) override { std::memcpy(ptr(dst), src, bytes); }
  void copy_to_host(void* dst, DevicePtr src, size_t bytes) override { std::memcpy(dst, ptr(src), bytes); }
  void fill(DevicePtr dst, unsigned char value, size_t bytes) override { std::memset(ptr(dst), value, bytes); }

  void* load(const std::string& source, const std::vector<char>&, const std::vector<std::string>& symbols,
             std::vector<void*>* functions) override {
    auto* m = new EmuModule;
    static int counter = 0;
    m->dir = std::filesystem::temp_directory_path() / fmt::format("synk-emu-{}-{}", ::getpid(), counter++);
    std::filesystem::create_directories(m->dir);
    std::string text = std::regex_replace(source, std::regex("\\ntypedef [a-z ]+ u?int(8|32|64)_t;"), "\n");
    text = kEmulationHeader + text + wrappers(source);
    std::ofstream(m->dir / "k.cpp") << text;
    const std::string cmd = fmt::format("c++ -std=c++17 -O1 -w -fno-strict-aliasing -shared -fPIC '{}' -o '{}' > '{}' 2>&1",
                                        (m->dir / "k.cpp").string(), (m->dir / "k.so").string(),
                                        (m->dir / "log.txt").string());
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error("the emulator could not compile the generated CUDA: " + read_text(m->dir / "log.txt"));
    m->handle = dlopen((m->dir / "k.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m->handle) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    // The mapping outlives the file: remove it now, or worker ranks (which leave with _exit,
    // never unloading) leave their directories in /tmp.
    std::filesystem::remove_all(m->dir);
    for (const std::string& s : symbols) functions->push_back(dlsym(m->handle, (s + "__emu").c_str()));
    return m;
  }
  void unload(void* module) noexcept override {
    auto* m = static_cast<EmuModule*>(module);
    dlclose(m->handle);
    std::filesystem::remove_all(m->dir);
    delete m;
  }
  int64_t launches = 0;                     // kernels run so far (tests check the GPU path ran)
  cu::CUresult launch(void* function, int64_t grid_x, int64_t grid_y, int threads, void** args) override {
    ++launches;
    // The module that holds `function` holds the emulated built-ins too.
    Dl_info info;
    if (!function || !dladdr(function, &info)) return 400;   // CUDA_ERROR_INVALID_HANDLE
    void* so = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    auto* block_idx = static_cast<Dim3*>(dlsym(so, "blockIdx"));
    auto* block_dim = static_cast<Dim3*>(dlsym(so, "blockDim"));
    auto* grid_dim = static_cast<Dim3*>(dlsym(so, "gridDim"));
    scheduler.thread_idx = static_cast<Dim3*>(dlsym(so, "threadIdx"));
    *static_cast<void (**)(int)>(dlsym(so, "synk_emu_barrier")) = emu_barrier;
    dlclose(so);
    if (threads % 32 != 0 || threads > kCudaMaxThreads || grid_x < 1 || grid_y < 1) return 1;   // INVALID_VALUE
    scheduler.entry = reinterpret_cast<void (*)(void**)>(function);
    scheduler.args = args;
    *grid_dim = Dim3{unsigned(grid_x), unsigned(grid_y), 1};
    *block_dim = Dim3{unsigned(threads), 1, 1};
    for (int64_t y = 0; y < grid_y; ++y)
      for (int64_t x = 0; x < grid_x; ++x) {
        *block_idx = Dim3{unsigned(x), unsigned(y), 0};
        if (!run_block(unsigned(threads))) {
          failure_ = scheduler.divergence;
          return 719;   // CUDA_ERROR_LAUNCH_FAILED, reported at the next synchronisation
        }
      }
    return 0;
  }
  void gemm(const cu::ColumnMajorGemm& g, const std::string&) override {
    auto at = [&](DevicePtr base, int64_t i) {
      return g.f64 ? static_cast<double*>(ptr(base))[i] : double(static_cast<float*>(ptr(base))[i]);
    };
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p)
          sum += at(g.a, g.trans_a ? p + i * g.lda : i + p * g.lda) * at(g.b, g.trans_b ? j + p * g.ldb : p + j * g.ldb);
        if (g.f64) static_cast<double*>(ptr(g.c))[i + j * g.ldc] = sum;
        else static_cast<float*>(ptr(g.c))[i + j * g.ldc] = float(sum);
      }
  }
  cu::CUresult synchronize() override {
    if (failure_.empty()) return 0;
    std::cout << "[ EMULATOR ] " << failure_ << "\n";
    failure_.clear();
    return 719;
  }

 private:
  static void* ptr(DevicePtr p) { return reinterpret_cast<void*>(uintptr_t(p)); }
  // extern "C" void <kernel>__emu(void** a): unpacks the launch arguments like cuLaunchKernel.
  static std::string wrappers(const std::string& source) {
    std::string out;
    std::regex kernel(R"(extern "C" __global__ void __launch_bounds__\(\d+\) (\w+)\(([^)]*)\) \{)");
    for (std::sregex_iterator it(source.begin(), source.end(), kernel), end; it != end; ++it) {
      std::vector<std::string> casts;
      std::stringstream params((*it)[2].str());
      std::string param;
      while (std::getline(params, param, ',')) {
        param = std::regex_replace(param, std::regex("__restrict__"), "");
        const size_t space = param.find_last_of(' ');
        casts.push_back(fmt::format("*({}*)a[{}]", param.substr(0, space), casts.size()));
      }
      out += fmt::format("extern \"C\" void {0}__emu(void** a) {{ {0}({1}); }}\n", (*it)[1].str(), fmt::join(casts, ", "));
    }
    return out;
  }
  std::string failure_;
};

}  // namespace synk::compiler::emulator
