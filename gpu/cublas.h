// cuBLAS, loaded with dlopen("libcublas.so.13") on first use and never linked (like the driver,
// cuda_driver.h), with only the entry points synk calls: handle creation bound to a stream and
// row-major float/double matrix products. Row-major C = op(A) op(B) is computed as the
// column-major product C^T = op(B)^T op(A)^T, which is the same memory, so no copies are needed.
// Handles use CUBLAS_DEFAULT_MATH: f32 products in true fp32 (never TF32), so results match the
// CPU backend within rounding.
#pragma once

#include <cstdint>
#include <string>

#include "gpu/driver.h"

namespace synk::rt::cuda {

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;

struct CublasApi {
  cublasStatus_t (*cublasCreate)(cublasHandle_t* handle) = nullptr;
  cublasStatus_t (*cublasDestroy)(cublasHandle_t handle) = nullptr;
  cublasStatus_t (*cublasSetStream)(cublasHandle_t handle, CUstream stream) = nullptr;
  cublasStatus_t (*cublasSetMathMode)(cublasHandle_t handle, int mode) = nullptr;
  cublasStatus_t (*cublasGetVersion)(cublasHandle_t handle, int* version) = nullptr;
  // op: 0 = N, 1 = T. Column-major, device pointers, host alpha/beta.
  cublasStatus_t (*cublasSgemm)(cublasHandle_t handle, int transa, int transb, int m, int n, int k, const float* alpha,
                                const float* a, int lda, const float* b, int ldb, const float* beta, float* c,
                                int ldc) = nullptr;
  cublasStatus_t (*cublasDgemm)(cublasHandle_t handle, int transa, int transb, int m, int n, int k, const double* alpha,
                                const double* a, int lda, const double* b, int ldb, const double* beta, double* c,
                                int ldc) = nullptr;
  const char* (*cublasGetStatusName)(cublasStatus_t status) = nullptr;
  const char* (*cublasGetStatusString)(cublasStatus_t status) = nullptr;
};

// The library, loaded once per process (no GPU needed to load it). Throws CudaError (code -1)
// naming the paths tried when it cannot be loaded.
const CublasApi& cublas_api();
// Whether cublas_api() would succeed; `reason` says why not. Never throws.
bool cublas_loadable(std::string* reason = nullptr);

// "CUBLAS_STATUS_NOT_INITIALIZED (the library was not initialized)".
std::string cublas_status_text(cublasStatus_t status);

// One handle per stream, created in the current device's context.
class CublasHandle {
 public:
  explicit CublasHandle(CUstream stream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// One cuBLAS gemm call in cuBLAS's own (column-major) terms: C = op(A) op(B), op(A) m x k.
struct ColumnMajorGemm {
  bool f64 = false;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  CUdeviceptr a = 0, b = 0, c = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// The call computing row-major C[M x N] = op(A) op(B), with op(A) M x K and op(B) K x N, lda and
// ldb the row strides of A and B as stored (their number of columns): the column-major product
// C^T = op(B)^T op(A)^T over the same memory (operands swapped, flags kept).
ColumnMajorGemm row_major_gemm(bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, CUdeviceptr a,
                               int64_t lda, CUdeviceptr b, int64_t ldb, CUdeviceptr c);

// Runs `g` on the handle's stream. `what` names the product in error messages (a dimension
// beyond cuBLAS's 32-bit limit, a failed call).
void gemm(const CublasHandle& handle, const ColumnMajorGemm& g, const std::string& what);

// gemm(handle, row_major_gemm(...), what).
void gemm_row_major(const CublasHandle& handle, bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    CUdeviceptr a, int64_t lda, CUdeviceptr b, int64_t ldb, CUdeviceptr c, const std::string& what);

}  // namespace synk::rt::cuda
