// Loading cuBLAS with dlopen and the row-major matrix product on top of it (see cublas_loader.h).
#include "gpu/cublas.h"

#include "gpu/dl.h"

#include <dlfcn.h>

#include <climits>
#include <mutex>

#include <fmt/format.h>

namespace synk::rt::cuda {
namespace {

struct LoadedCublas {
  CublasApi api;
  std::string error;
};

LoadedCublas load_cublas() {
  LoadedCublas l;
  void* handle = open_cuda_library("libcublas.so.13", "", &l.error);
  if (!handle) return l;
  SymbolTable table(handle, "libcublas.so.13");
  auto get = [&](auto& fn, const char* name, bool required = true) { table.resolve(fn, name, required); };
  get(l.api.cublasCreate, "cublasCreate_v2");
  get(l.api.cublasDestroy, "cublasDestroy_v2");
  get(l.api.cublasSetStream, "cublasSetStream_v2");
  get(l.api.cublasSetMathMode, "cublasSetMathMode");
  get(l.api.cublasGetVersion, "cublasGetVersion_v2");
  get(l.api.cublasSgemm, "cublasSgemm_v2");
  get(l.api.cublasDgemm, "cublasDgemm_v2");
  get(l.api.cublasGetStatusName, "cublasGetStatusName", false);
  get(l.api.cublasGetStatusString, "cublasGetStatusString", false);
  l.error = table.error();
  return l;
}

const LoadedCublas& loaded() {
  static const LoadedCublas l = load_cublas();
  return l;
}

void check(cublasStatus_t status, const std::string& what) {
  if (status != 0) throw CudaError(fmt::format("{}: {}", what, cublas_status_text(status)), -1);
}

}  // namespace

const CublasApi& cublas_api() {
  const LoadedCublas& l = loaded();
  if (!l.error.empty()) throw CudaError("cuBLAS is not usable: " + l.error, -1);
  return l.api;
}

bool cublas_loadable(std::string* reason) {
  const LoadedCublas& l = loaded();
  if (reason) *reason = l.error;
  return l.error.empty();
}

std::string cublas_status_text(cublasStatus_t status) {
  const LoadedCublas& l = loaded();
  if (l.error.empty() && l.api.cublasGetStatusName && l.api.cublasGetStatusString)
    return fmt::format("{} ({})", l.api.cublasGetStatusName(status), l.api.cublasGetStatusString(status));
  return fmt::format("cuBLAS status {}", status);
}

CublasHandle::CublasHandle(CUstream stream) {
  const CublasApi& api = cublas_api();
  check(api.cublasCreate(&handle_), "cublasCreate");
  check(api.cublasSetStream(handle_, stream), "cublasSetStream");
  check(api.cublasSetMathMode(handle_, 0 /* CUBLAS_DEFAULT_MATH */), "cublasSetMathMode");
}

CublasHandle::~CublasHandle() {
  if (handle_) cublas_api().cublasDestroy(handle_);
}

ColumnMajorGemm row_major_gemm(bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, CUdeviceptr a,
                               int64_t lda, CUdeviceptr b, int64_t ldb, CUdeviceptr c) {
  // C^T (N x M) = op(B)^T (N x K) op(A)^T (K x M): operands and sizes swap, the flags swap with them.
  return ColumnMajorGemm{.f64 = f64, .trans_a = trans_b, .trans_b = trans_a, .m = n, .n = m, .k = k,
                         .a = b, .b = a, .c = c, .lda = ldb, .ldb = lda, .ldc = n};
}

void gemm(const CublasHandle& handle, const ColumnMajorGemm& g, const std::string& what) {
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc})
    if (v > INT_MAX)
      throw CudaError(fmt::format("{}: a dimension of {} exceeds cuBLAS's 32-bit limit", what, v), -1);
  const CublasApi& api = cublas_api();
  const int ta = g.trans_a ? 1 : 0, tb = g.trans_b ? 1 : 0;
  if (g.f64) {
    const double one = 1, zero = 0;
    check(api.cublasDgemm(handle.get(), ta, tb, int(g.m), int(g.n), int(g.k), &one, reinterpret_cast<const double*>(g.a),
                          int(g.lda), reinterpret_cast<const double*>(g.b), int(g.ldb), &zero,
                          reinterpret_cast<double*>(g.c), int(g.ldc)),
          what + " (cublasDgemm)");
  } else {
    const float one = 1, zero = 0;
    check(api.cublasSgemm(handle.get(), ta, tb, int(g.m), int(g.n), int(g.k), &one, reinterpret_cast<const float*>(g.a),
                          int(g.lda), reinterpret_cast<const float*>(g.b), int(g.ldb), &zero,
                          reinterpret_cast<float*>(g.c), int(g.ldc)),
          what + " (cublasSgemm)");
  }
}

void gemm_row_major(const CublasHandle& handle, bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    CUdeviceptr a, int64_t lda, CUdeviceptr b, int64_t ldb, CUdeviceptr c, const std::string& what) {
  gemm(handle, row_major_gemm(f64, trans_a, trans_b, m, n, k, a, lda, b, ldb, c), what);
}

}  // namespace synk::rt::cuda
