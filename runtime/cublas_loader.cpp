// Loading cuBLAS with dlopen and the row-major matrix product on top of it (see cublas_loader.h).
#include "runtime/cublas_loader.h"

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
  bool ok = true;
  auto get = [&](auto& fn, const char* name, bool required = true) {
    if (void* sym = dlsym(handle, name)) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
    } else if (required && ok) {
      l.error = fmt::format("libcublas.so.13 has no entry point {}", name);
      ok = false;
    }
  };
  get(l.api.cublasCreate, "cublasCreate_v2");
  get(l.api.cublasDestroy, "cublasDestroy_v2");
  get(l.api.cublasSetStream, "cublasSetStream_v2");
  get(l.api.cublasSetMathMode, "cublasSetMathMode");
  get(l.api.cublasGetVersion, "cublasGetVersion_v2");
  get(l.api.cublasSgemm, "cublasSgemm_v2");
  get(l.api.cublasDgemm, "cublasDgemm_v2");
  get(l.api.cublasGetStatusName, "cublasGetStatusName", false);
  get(l.api.cublasGetStatusString, "cublasGetStatusString", false);
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

void gemm_row_major(const CublasHandle& handle, bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    CUdeviceptr a, int64_t lda, CUdeviceptr b, int64_t ldb, CUdeviceptr c, const std::string& what) {
  for (int64_t v : {m, n, k, lda, ldb})
    if (v > INT_MAX)
      throw CudaError(fmt::format("{}: a dimension of {} exceeds cuBLAS's 32-bit limit", what, v), -1);
  const CublasApi& api = cublas_api();
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the flags.
  const int ta = trans_a ? 1 : 0, tb = trans_b ? 1 : 0;
  const int M = int(n), N = int(m), K = int(k);
  if (f64) {
    const double one = 1, zero = 0;
    check(api.cublasDgemm(handle.get(), tb, ta, M, N, K, &one, reinterpret_cast<const double*>(b), int(ldb),
                          reinterpret_cast<const double*>(a), int(lda), &zero, reinterpret_cast<double*>(c), M),
          what + " (cublasDgemm)");
  } else {
    const float one = 1, zero = 0;
    check(api.cublasSgemm(handle.get(), tb, ta, M, N, K, &one, reinterpret_cast<const float*>(b), int(ldb),
                          reinterpret_cast<const float*>(a), int(lda), &zero, reinterpret_cast<float*>(c), M),
          what + " (cublasSgemm)");
  }
}

}  // namespace synk::rt::cuda
