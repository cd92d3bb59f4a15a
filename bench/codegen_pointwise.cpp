// Benchmark: fused pointwise kernels over 64 MiB arrays against single-core memcpy of the same
// bytes, measured in the same run (target: >= 80% of memcpy bandwidth), and the same chain of
// ops compiled fused vs one kernel per op (what fusion saves). Prints a table of ratios and
// writes codegen_pointwise.csv to the build directory. Best of N repetitions after a warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "compiler/cpu/cpu_function.h"
#include "bench/bench_timing.h"
#include "dsl/frontend.h"

namespace {

using namespace synk;

using synk::bench::best_seconds;

rt::Array random_f32(int64_t n, uint64_t seed) {
  rt::Array a;
  a.resize(rt::DType::F32, {n});
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = d(rng);
  return a;
}

struct Row {
  std::string name;
  double seconds = 0;
  double bytes = 0;       // bytes read + written by the kernel
  double memcpy_gbps = 0; // baseline in the same run
};

}  // namespace

int main() {
  const int64_t n = 16 * 1024 * 1024;   // 16 Mi f32 = 64 MiB per array
  const int reps = 15;
  rt::Array x = random_f32(n, 1), y = random_f32(n, 2);
  std::vector<std::byte> dst(size_t(n) * 4);
  std::memset(dst.data(), 1, dst.size());
  double memcpy_s = best_seconds(reps, [&] { std::memcpy(dst.data(), x.bytes.data(), dst.size()); });
  const double memcpy_bytes = 2.0 * double(dst.size());   // read + write
  const double memcpy_gbps = memcpy_bytes / memcpy_s / 1e9;

  ir::Module m = dsl::compile_source("bench.synk", R"(
fn one_input(bcast x: f32[n]) { out y: none = relu(x * 2 + 1); }
fn two_inputs(bcast x: f32[n], bcast y: f32[n]) { out z: none = maximum(x * y + x, 0.5); }
fn chain(bcast x: f32[n]) { let a = x * 2; let b = a + 1; let c = relu(b); let d = c * c; out y: none = d - x; }
fn sigmoid_of(bcast x: f32[n]) { out y: none = sigmoid(x); }
fn tanh_of(bcast x: f32[n]) { out y: none = tanh(x); }
)");
  std::vector<Row> rows;
  // Kernel and memcpy alternate, best of `reps` each, so both see the same machine (it may be
  // shared): each row's ratio is against the memcpy measured beside it.
  auto measure = [&](const std::string& label, const std::string& fn_name, bool fuse, int inputs, double bytes) {
    compiler::CpuCompileOptions opts;
    opts.fuse = fuse;
    auto f = compiler::compile_cpu_function(m, fn_name, opts);
    std::vector<rt::ArrayRef> in{x.ref()};
    if (inputs == 2) in.push_back(y.ref());
    std::vector<rt::Array> outs(1), ups;
    double kernel_s = 1e30, copy_s = 1e30;
    f->run(in, {}, outs, ups);
    for (int r = 0; r < reps; ++r) {
      copy_s = std::min(copy_s, best_seconds(0, [&] { std::memcpy(dst.data(), x.bytes.data(), dst.size()); }));
      kernel_s = std::min(kernel_s, best_seconds(0, [&] { f->run(in, {}, outs, ups); }));
    }
    rows.push_back({label, kernel_s, bytes, memcpy_bytes / copy_s / 1e9});
    return kernel_s;
  };
  const double mib64 = double(n) * 4;
  measure("fused relu(x*2+1)", "one_input", true, 1, 2 * mib64);
  measure("fused max(x*y+x,.5)", "two_inputs", true, 2, 3 * mib64);
  measure("fused sigmoid(x)", "sigmoid_of", true, 1, 2 * mib64);
  measure("fused tanh(x)", "tanh_of", true, 1, 2 * mib64);
  double fused_chain = measure("chain of 5 ops, fused", "chain", true, 1, 2 * mib64);
  double unfused_chain = measure("chain of 5 ops, unfused", "chain", false, 1, 2 * mib64);

  fmt::print("memcpy 64 MiB (single core): {:.2f} ms, {:.2f} GB/s (read + write)\n", memcpy_s * 1e3, memcpy_gbps);
  fmt::print("{:<28} {:>10} {:>10} {:>12} {:>10}\n", "kernel", "ms", "GB/s", "memcpy GB/s", "ratio");
  for (const Row& r : rows) {
    double gbps = r.bytes / r.seconds / 1e9;
    fmt::print("{:<28} {:>10.2f} {:>10.2f} {:>12.2f} {:>9.0f}%\n", r.name, r.seconds * 1e3, gbps, r.memcpy_gbps,
               100 * gbps / r.memcpy_gbps);
  }
  fmt::print("unfused / fused time for the 5-op chain: {:.2f}x\n", unfused_chain / fused_chain);

  std::ofstream csv(SYNK_BENCH_OUT_DIR "/codegen_pointwise.csv");
  csv << "kernel,ms,gbps,memcpy_gbps,fraction_of_memcpy\n";
  for (const Row& r : rows) {
    double gbps = r.bytes / r.seconds / 1e9;
    csv << fmt::format("{},{:.4f},{:.3f},{:.3f},{:.4f}\n", r.name, r.seconds * 1e3, gbps, r.memcpy_gbps, gbps / r.memcpy_gbps);
  }
  csv << fmt::format("unfused_over_fused,{:.4f},,,\n", unfused_chain / fused_chain);
  fmt::print("wrote {}/codegen_pointwise.csv\n", SYNK_BENCH_OUT_DIR);
  return 0;
}
