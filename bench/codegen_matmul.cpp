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

// c = op(a) b for s x s row-major matrices, straight through OpenBLAS.
void gemm(CBLAS_TRANSPOSE ta, int s, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, s, s, s, 1.f, a, s, b, s, 0.f, c, s);
}
void gemm(CBLAS_TRANSPOSE ta, int s, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, ta, CblasNoTrans, s, s, s, 1.0, a, s, b, s, 0.0, c, s);
}

struct Timings {
  double synk_s, blas_s;
};

// One s x s product through the synk function `f` and through BLAS directly, on the same random
// operands (drawn from `seed` and seed + 1), each the best of `reps` runs.
template <class T>
Timings time_against_blas(compiler::CpuFunction& f, CBLAS_TRANSPOSE ta, rt::DType dt, int64_t s, uint64_t seed,
                          int reps) {
  rt::Array a = random_matrix<T>(dt, s, s, seed), b = random_matrix<T>(dt, s, s, seed + 1);
  std::vector<rt::ArrayRef> in{a.ref(), b.ref()};
  std::vector<rt::Array> out(1), ups;
  std::vector<T> c(size_t(s * s));
  Timings t;
  t.synk_s = best_seconds(reps, [&] { f.run(in, {}, out, ups); });
  t.blas_s = best_seconds(reps, [&] { gemm(ta, int(s), a.data<T>(), b.data<T>(), c.data()); });
  return t;
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
    auto report = [&](const std::string& name, Timings t) {
      fmt::print("{:<22} {:>6} {:>10.3f} {:>10.3f} {:>12.3f}\n", name, s, t.synk_s * 1e3, t.blas_s * 1e3,
                 t.synk_s / t.blas_s);
      csv << fmt::format("{},{},{:.4f},{:.4f},{:.4f}\n", name, s, t.synk_s * 1e3, t.blas_s * 1e3, t.synk_s / t.blas_s);
    };
    report("f32 a@b", time_against_blas<float>(*f32, CblasNoTrans, rt::DType::F32, s, 1, reps));
    report("f32 transpose(a)@b", time_against_blas<float>(*f32t, CblasTrans, rt::DType::F32, s, 1, reps));
    report("f64 a@b", time_against_blas<double>(*f64, CblasNoTrans, rt::DType::F64, s, 3, reps));
  }
  fmt::print("wrote {}/codegen_matmul.csv\n", SYNK_BENCH_OUT_DIR);
  return 0;
}
