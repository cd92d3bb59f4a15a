// Benchmark: matrix products through a synk-compiled function (argument checks, symbol binding,
// output allocation, then OpenBLAS) against calling cblas_sgemm/dgemm directly on the same
// arrays, in the same run (target: within 10%). Also a transposed operand, which the plan folds
// into the BLAS call instead of copying. Prints a table and writes codegen_matmul.csv.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "compiler/cpu/cpu_function.h"
#include "dsl/frontend.h"
#include "bench/bench_timing.h"

namespace {

using namespace synk;

using bench::best_seconds;

template <class T>
rt::Array random_matrix(rt::DType dt, int64_t r, int64_t c, uint64_t seed) {
  rt::Array a;
  a.resize(dt, {r, c});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0, 1);
  for (int64_t i = 0; i < r * c; ++i) a.data<T>()[i] = T(d(rng));
  return a;
}

}  // namespace

int main() {
  ir::Module m = dsl::compile_source("bench.synk", R"(
fn mm32(bcast a: f32[n, k], bcast b: f32[k, m]) { out c: none = a @ b; }
fn mm32t(bcast a: f32[k, n], bcast b: f32[k, m]) { out c: none = transpose(a) @ b; }
fn mm64(bcast a: f64[n, k], bcast b: f64[k, m]) { out c: none = a @ b; }
)");
  auto f32 = compiler::compile_cpu_function(m, "mm32");
  auto f32t = compiler::compile_cpu_function(m, "mm32t");
  auto f64 = compiler::compile_cpu_function(m, "mm64");
  std::ofstream csv(SYNK_BENCH_OUT_DIR "/codegen_matmul.csv");
  csv << "case,size,synk_ms,cblas_ms,ratio\n";
  fmt::print("{:<22} {:>6} {:>10} {:>10} {:>12}\n", "case", "size", "synk ms", "cblas ms", "synk/cblas");
  for (int64_t s : {64, 256, 512, 1024}) {
    const int reps = s <= 256 ? 50 : 8;
    std::vector<rt::Array> out(1), ups;
    auto report = [&](const std::string& name, double synk_s, double blas_s) {
      fmt::print("{:<22} {:>6} {:>10.3f} {:>10.3f} {:>12.3f}\n", name, s, synk_s * 1e3, blas_s * 1e3, synk_s / blas_s);
      csv << fmt::format("{},{},{:.4f},{:.4f},{:.4f}\n", name, s, synk_s * 1e3, blas_s * 1e3, synk_s / blas_s);
    };
    {
      rt::Array a = random_matrix<float>(rt::DType::F32, s, s, 1), b = random_matrix<float>(rt::DType::F32, s, s, 2);
      std::vector<rt::ArrayRef> in{a.ref(), b.ref()};
      std::vector<float> c(size_t(s * s));
      double synk_s = best_seconds(reps, [&] { f32->run(in, {}, out, ups); });
      double blas_s = best_seconds(reps, [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s), int(s), int(s), 1.f, a.data<float>(), int(s),
                    b.data<float>(), int(s), 0.f, c.data(), int(s));
      });
      report("f32 a@b", synk_s, blas_s);
      double synk_t = best_seconds(reps, [&] { f32t->run(in, {}, out, ups); });
      double blas_t = best_seconds(reps, [&] {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(s), int(s), int(s), 1.f, a.data<float>(), int(s),
                    b.data<float>(), int(s), 0.f, c.data(), int(s));
      });
      report("f32 transpose(a)@b", synk_t, blas_t);
    }
    {
      rt::Array a = random_matrix<double>(rt::DType::F64, s, s, 3), b = random_matrix<double>(rt::DType::F64, s, s, 4);
      std::vector<rt::ArrayRef> in{a.ref(), b.ref()};
      std::vector<double> c(size_t(s * s));
      double synk_s = best_seconds(reps, [&] { f64->run(in, {}, out, ups); });
      double blas_s = best_seconds(reps, [&] {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s), int(s), int(s), 1.0, a.data<double>(), int(s),
                    b.data<double>(), int(s), 0.0, c.data(), int(s));
      });
      report("f64 a@b", synk_s, blas_s);
    }
  }
  fmt::print("wrote {}/codegen_matmul.csv\n", SYNK_BENCH_OUT_DIR);
  return 0;
}
