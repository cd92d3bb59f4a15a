// GPU benchmark: synk's fused kernels against the device's own copy bandwidth, measured in the
// same run. Each case is a .synk function compiled by the CUDA backend and run on arrays already
// on the GPU (CudaFunction::run_resident: the real launch path, minus host staging), so the
// figure is the generated kernels' bandwidth: bytes the case must move / time. The baseline is a
// device-to-device copy of the same size (it moves 2x its size). Target (issue 5): every fused
// pointwise and pointwise+reduction case at >= 85% of the copy's bandwidth.
//
//   cuda_fused_bench [MiB per array, default 1024] [repetitions, default 20]
// Prints "skipped: no CUDA GPU (<reason>)" and exits 0 on a machine without a GPU. Each result
// is also printed as a `RESULT <case> <ms> <GB/s>` line for bench/cuda_torch.py.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/backend_function.h"
#include "compiler/cuda/cuda_function.h"
#include "bench/bench_timing.h"
#include "bench/cuda_bench.h"
#include "dsl/frontend.h"
#include "gpu/driver.h"

namespace {

using namespace synk;
namespace cu = rt::cuda;

using bench::median_ms;

struct Case {
  std::string name;
  std::string source;                       // one function `f`
  std::vector<std::vector<int64_t>> shapes; // per input (f32)
  double bytes_per_element;                 // bytes the case must move, per element of input 0
  bool target;                              // part of the >= 85% goal
};

}  // namespace

int main(int argc, char** argv) {
  if (bench::skip_without_gpu()) return 0;
  const int64_t mib = argc > 1 ? std::atoll(argv[1]) : 1024;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  try {
    cu::CudaDevice& device = cu::CudaDevice::get();
    const cu::DeviceInfo& info = device.info();
    const cu::DriverApi& api = cu::cuda_driver();
    const int64_t n = mib * 1024 * 1024 / 4;   // f32 elements per array
    fmt::print("device: GPU {} {} ({}, {} SMs, {}), driver {}\n", info.ordinal, info.name, info.arch(), info.sm_count,
               cu::format_bytes(info.total_memory), cu::cuda_status().driver_version);
    fmt::print("arrays: {} MiB of f32 each ({} elements), median of {} runs\n\n", mib, n, reps);

    std::vector<cu::DeviceBuffer> arrays(3);
    for (size_t i = 0; i < arrays.size(); ++i) {
      arrays[i].reserve(size_t(n) * 4, fmt::format("benchmark array {}", i));
      // 0x3e 0x3e 0x3e 0x3e is about 0.186f: finite everywhere, exp and log stay tame.
      cu::cuda_check(api.cuMemsetD8Async(arrays[i].ptr(), 0x3e, size_t(n) * 4, nullptr), "filling an array");
    }
    cu::cuda_check(api.cuCtxSynchronize(), "filling the arrays");

    const double copy_ms = median_ms(reps, [&] {
      cu::cuda_check(api.cuMemcpyDtoDAsync(arrays[2].ptr(), arrays[0].ptr(), size_t(n) * 4, nullptr), "copy");
      cu::cuda_check(api.cuCtxSynchronize(), "copy");
    });
    const double copy_gbs = 2.0 * double(n) * 4 / (copy_ms * 1e6);
    fmt::print("{:<44} {:>9} {:>9} {:>8}\n", "case", "ms", "GB/s", "of copy");
    fmt::print("{:<44} {:>9.3f} {:>9.1f} {:>7.0f}%\n", "device-to-device copy (baseline)", copy_ms, copy_gbs, 100.0);
    fmt::print("RESULT copy {:.4f} {:.2f}\n", copy_ms, copy_gbs);

    const int64_t rows1k = n / 1024, rows256 = n / 256;
    std::vector<Case> cases = {
        {"pointwise z = x * y + 1", "fn f(scatter x: f32[n], scatter y: f32[n]) { out z: gather = x * y + 1.0; }",
         {{n}, {n}}, 12, true},
        {"pointwise sigmoid(x) * tanh(y) + exp(-x*x)",
         "fn f(scatter x: f32[n], scatter y: f32[n]) { out z: gather = sigmoid(x) * tanh(y) + exp(-x * x); }",
         {{n}, {n}}, 12, true},
        {"pointwise+reduce sum(x * y)", "fn f(scatter x: f32[n], scatter y: f32[n]) { out s: sum = sum(x * y); }",
         {{n}, {n}}, 8, true},
        {"pointwise+reduce max(abs(x - y))",
         "fn f(scatter x: f32[n], scatter y: f32[n]) { out s: max = max(abs(x - y)); }", {{n}, {n}}, 8, true},
        {"row reduce sum(x * y, axis=1) [n,1024]",
         "fn f(scatter x: f32[n, 1024], scatter y: f32[n, 1024]) { out s: gather = sum(x * y, axis=1); }",
         {{rows1k, 1024}, {rows1k, 1024}}, 8, true},
        {"column reduce sum(x * x, axis=0) [n,256]",
         "fn f(scatter x: f32[n, 256]) { out s: sum = sum(x * x, axis=0); }", {{rows256, 256}}, 4, true},
        {"softmax rows [n,1024]", "fn f(scatter x: f32[n, 1024]) { out s: none = softmax(x); }", {{rows1k, 1024}}, 8,
         false},
    };
    int failed = 0;
    for (const Case& c : cases) {
      ir::Module module = dsl::compile_source("bench.synk", c.source);
      std::unique_ptr<compiler::CudaFunction> fn = compiler::compile_cuda_function(module, "f");
      std::vector<rt::ArrayRef> inputs;
      for (size_t i = 0; i < c.shapes.size(); ++i)
        inputs.push_back(rt::ArrayRef{reinterpret_cast<const void*>(uintptr_t(arrays[i].ptr())), rt::DType::F32, c.shapes[i]});
      const double ms = median_ms(reps, [&] { fn->run_resident(inputs, {}); });
      const double gbs = c.bytes_per_element * double(n) / (ms * 1e6);
      const double ratio = gbs / copy_gbs;
      const bool ok = !c.target || ratio >= 0.85;
      failed += ok ? 0 : 1;
      fmt::print("{:<44} {:>9.3f} {:>9.1f} {:>7.0f}%{}\n", c.name, ms, gbs, 100 * ratio,
                 c.target ? (ok ? "  ok" : "  BELOW 85%") : "");
      std::string id = c.name;
      for (char& ch : id) if (ch == ' ') ch = '_';
      fmt::print("RESULT {} {:.4f} {:.2f}\n", id, ms, gbs);
    }
    fmt::print("\n{} of the target cases below 85% of copy bandwidth\n", failed);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "cuda_fused_bench: {}\n", e.what());
    return 1;
  }
}
