// The request that the random fill of fill_rows.h serves, shared by the host test
// (philox_test.cpp), the freestanding CPU-kernel build (freestanding_kernels.cpp) and the CUDA
// build (cuda_kernels.cu), so that the test can compare their draws bit for bit. Plain C types
// only, since all three include it.
#ifndef SYNK_PHILOX_FS_ABI_H
#define SYNK_PHILOX_FS_ABI_H

enum FsKind {
  FS_UNIFORM_F32,   // a, b = low, high; out float
  FS_UNIFORM_F64,   // a, b = low, high; out double
  FS_NORMAL_F32,    // a, b = mean, std; out float
  FS_NORMAL_F64,    // a, b = mean, std; out double
  FS_BERNOULLI,     // a = p; out uint8_t
  FS_DROPOUT_F32,   // a = p; x float; out float
  FS_DROPOUT_F64,   // a = p; x double; out double
};

// Rows [row0, row0 + rows) of a rows-by-cols tensor, row-major in out (and x).
struct FsRequest {
  int kind;
  unsigned long long seed, step, row0, rows, cols;
  unsigned int salt;
  double a, b;
};

#endif
