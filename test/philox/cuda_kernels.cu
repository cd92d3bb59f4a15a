// philox.h compiled the way synk's generated CUDA kernels are: NVRTC, no standard headers, a
// prelude with the fixed-width typedefs (as compiler/cuda/prelude.cpp has). philox_test.cpp
// compiles this with NVRTC to PTX for compute_80 and compute_90, with and without
// --use_fast_math, checks the PTX for approximate or contractible floating-point instructions and
// assembles it with ptxas. No GPU is needed (none runs it).
#pragma nv_diag_suppress 177
typedef unsigned char uint8_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#include "philox.h"

#include "fs_abi.h"

#define FILL_FN static __device__ __forceinline__
#define FILL_LOOP(e) for (uint64_t e = threadIdx.x; e < cols; e += blockDim.x)
#include "fill_rows.h"

// A block per row (grid-stride over rows), the block's threads over the row's elements.
extern "C" __global__ void philox_fill(FsRequest rq, const void* x, void* out) {
  const synk_rng_stream s = synk_rng_make_stream(rq.seed, rq.salt, rq.step);
  for (uint64_t row = rq.row0 + blockIdx.x; row < rq.row0 + rq.rows; row += gridDim.x) fill_row(&rq, s, row, x, out);
}
