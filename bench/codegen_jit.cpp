// Benchmark: how long it takes to get a callable function from the IR of a typical 10-op
// function: cold (lower + generate C++ + Clang + LLVM codegen + load; targets <= 50 ms), from
// the on-disk cache (lower + generate + hash + read + load; target <= 1 ms) and from the
// process's own table. The first compile of the process (LLVM and JIT start-up) is reported on
// its own. Prints a table and writes codegen_jit.csv. Uses a private cache directory.
// SYNK_BENCH_VERBOSE=1 also prints the CPU time of every cold compile (to see the spread).
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_timing.h"
#include "compiler/cpu/codegen_cpu.h"
#include "compiler/cpu/cpu_function.h"
#include "compiler/llvm/jit.h"
#include "compiler/lower.h"
#include "dsl/frontend.h"

namespace {

using namespace synk;

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);   // the JIT compiles on several threads
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Wall seconds; the process's CPU seconds (every compiling thread) go to *cpu (the machine may be
// shared, and CPU time is what the compiler itself costs).
double seconds(const std::function<void()>& fn, double* cpu = nullptr) {
  double c0 = cpu_now();
  auto t0 = std::chrono::steady_clock::now();
  fn();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cpu) *cpu = cpu_now() - c0;
  return wall;
}

// A typical function: ten ops (matmul, bias, tanh, pointwise, two reductions, softmax...).
std::string program(int variant) {
  return fmt::format(R"(
fn f(bcast x: f32[n, 64], bcast w: f32[64, 16], bcast b: f32[16]) {{
  let h = tanh(x @ w + b * {});
  let p = softmax(h);
  out loss: none = mean(sum(p * h, axis=1) - max(h, axis=1));
  out act: none = relu(h - 0.5) * 2;
}}
)", variant + 1);
}

}  // namespace

int main() {
  std::string dir = fmt::format("/tmp/synk-bench-cache-{}", ::getpid());
  setenv("SYNK_CACHE_DIR", dir.c_str(), 1);
  const int reps = 15;
  // The first compile pays for LLVM's and the JIT's start-up.
  ir::Module first = dsl::compile_source("bench.synk", program(1000));
  double first_s = seconds([&] { compiler::compile_cpu_function(first, "f"); });

  std::vector<double> cold, disk, memory, cold_cpu, disk_cpu, memory_cpu;
  for (int i = 0; i < reps; ++i) {
    // A distinct constant per repetition: a real miss every time.
    ir::Module m = dsl::compile_source("bench.synk", program(i));
    double c = 0;
    cold.push_back(seconds([&] { compiler::compile_cpu_function(m, "f"); }, &c));
    cold_cpu.push_back(c);
    compiler::clear_memory_cache_for_tests();
    disk.push_back(seconds([&] {
      auto f = compiler::compile_cpu_function(m, "f");
      if (f->cache_outcome() != compiler::CacheOutcome::DiskHit) std::abort();
    }, &c));
    disk_cpu.push_back(c);
    memory.push_back(seconds([&] {
      auto f = compiler::compile_cpu_function(m, "f");
      if (f->cache_outcome() != compiler::CacheOutcome::MemoryHit) std::abort();
    }, &c));
    memory_cpu.push_back(c);
  }
  // The pieces of a cold compile, for the record.
  ir::Module m = dsl::compile_source("bench.synk", program(5000));
  compiler::KernelPlan plan;
  std::string source;
  double lower_s = seconds([&] { plan = compiler::lower(m, m.functions[0]); });
  double generate_s = seconds([&] { source = compiler::generate_cpu_source(m, plan); });
  std::vector<char> object;
  double clang_llvm_s = seconds([&] { object = compiler::compile_to_object(source, "bench"); });
  compiler::CompileTimes cpu = compiler::last_compile_times();
  std::string symbol;
  for (const compiler::Kernel& k : plan.kernels)
    if (symbol.empty() && !compiler::kernel_is_library_call(plan, k)) symbol = compiler::kernel_symbol(plan, k);
  double load_s = seconds([&] { compiler::load_object(object, "bench")->lookup(symbol); });

  if (std::getenv("SYNK_BENCH_VERBOSE")) for (double c : cold_cpu) fmt::print("cold cpu {:.1f} ms\n", c * 1e3);
  struct Row { const char* name; double wall; double cpu; double target; };
  const double na = -1;
  std::vector<Row> rows = {
      {"first compile in process", first_s, na, 0},
      {"cold compile (median)", synk::bench::median_of(cold), synk::bench::median_of(cold_cpu), 0.050},
      {"disk cache hit (median)", synk::bench::median_of(disk), synk::bench::median_of(disk_cpu), 0.001},
      {"process cache hit (median)", synk::bench::median_of(memory), synk::bench::median_of(memory_cpu), 0},
      {"  lower()", lower_s, na, 0},
      {"  generate C++", generate_s, na, 0},
      {"  Clang + LLVM -> object", clang_llvm_s, cpu.frontend + cpu.optimize + cpu.codegen, 0},
      {"    Clang front end", na, cpu.frontend, 0},
      {"    LLVM passes", na, cpu.optimize, 0},
      {"    LLVM code generation", na, cpu.codegen, 0},
      {"  load + link + lookup", load_s, na, 0},
  };
  auto ms = [](double s) { return s < 0 ? std::string("") : fmt::format("{:.3f}", s * 1e3); };
  std::ofstream csv(SYNK_BENCH_OUT_DIR "/codegen_jit.csv");
  csv << "step,wall_ms,cpu_ms,target_ms\n";
  fmt::print("{:<30} {:>10} {:>10} {:>10}\n", "step", "wall ms", "CPU ms", "target ms");
  for (const Row& r : rows) {
    std::string target = r.target > 0 ? fmt::format("{:.0f}", r.target * 1e3) : "";
    fmt::print("{:<30} {:>10} {:>10} {:>10}\n", r.name, ms(r.wall), ms(r.cpu), target);
    csv << fmt::format("{},{},{},{}\n", r.name, ms(r.wall), ms(r.cpu), target);
  }
  fmt::print("source: {} lines, {} kernels; object: {} bytes\n", std::count(source.begin(), source.end(), '\n'),
             plan.kernels.size(), object.size());
  fmt::print("wrote {}/codegen_jit.csv\n", SYNK_BENCH_OUT_DIR);
  std::string cmd = "rm -rf " + dir;
  return std::system(cmd.c_str()) == 0 ? 0 : 1;
}
