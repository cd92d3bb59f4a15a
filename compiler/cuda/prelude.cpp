// The fixed part of every generated CUDA translation unit: fixed-width types (NVRTC has no
// <stdint.h>), the scalar helpers the fused expressions call, with the meaning of
// scalar_semantics.cpp and the CPU prelude (integers wrap, float max/min propagate NaN,
// float-to-integer casts of NaN, infinities or out-of-range values are reported, never
// undefined), warp-shuffle block reductions, 16-byte vectors and the failure reporter.
// Math is CUDA's own (expf, logf, tanhf, powf: accurate versions unless --use_fast_math).
#include "compiler/cuda/codegen_cuda.h"
#include "base/rng.h"
#include "compiler/codegen/scalar_semantics.h"

namespace synk::compiler {

namespace {

// The libm builtins math_prelude() and the emitter write, as CUDA's functions.
std::string math_builtins() {
  return R"PRELUDE(#define __builtin_log1pf log1pf
#define __builtin_log1p log1p
#define __builtin_expm1f expm1f
#define __builtin_expm1 expm1
#define __builtin_sinf sinf
#define __builtin_sin sin
#define __builtin_cosf cosf
#define __builtin_cos cos
#define __builtin_floorf floorf
#define __builtin_floor floor
#define __builtin_ceilf ceilf
#define __builtin_ceil ceil
#define __builtin_rintf rintf
#define __builtin_rint rint
#define __builtin_fmodf fmodf
#define __builtin_fmod fmod
#define __builtin_copysignf copysignf
#define __builtin_copysign copysign
)PRELUDE";
}

}  // namespace

const std::string& cuda_prelude() {
  static const std::string text = R"PRELUDE(// Unused helpers and constants are expected (every kernel gets the whole prelude).
#pragma nv_diag_suppress 177
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

// base/philox.h: the random ops' draws (device code uses explicitly rounded intrinsics).
#define SYNK_RNG_STD_INCLUDES 0
)PRELUDE" + philox_kernel_text() + R"PRELUDE(
// The CPU generator's expression text uses these GCC builtins; map them to CUDA's.
#define __builtin_fabsf fabsf
#define __builtin_fabs fabs
#define __builtin_sqrtf sqrtf
#define __builtin_sqrt sqrt
#define __builtin_nanf(s) __int_as_float(0x7fc00000)
#define __builtin_nan(s) __longlong_as_double(0x7ff8000000000000LL)
#define __builtin_inff() __int_as_float(0x7f800000)
#define __builtin_inf() __longlong_as_double(0x7ff0000000000000LL)

#define SYNK_INLINE static __device__ __forceinline__
// Float selects test `cond & synk_keep` (the CPU's guard against LLVM 14's NaN-blind
// select folds, compiler/codegen/emitter.h); on the GPU it is a plain true.
#define synk_keep true

)PRELUDE" + math_builtins() + scalar_prelude("powf", "pow") + R"PRELUDE(
SYNK_INLINE float synk_exp_f32(float x) { return expf(x); }
SYNK_INLINE double synk_exp_f64(double x) { return exp(x); }
SYNK_INLINE float synk_log_f32(float x) { return logf(x); }
SYNK_INLINE double synk_log_f64(double x) { return log(x); }
SYNK_INLINE float synk_tanh_f32(float x) { return tanhf(x); }
SYNK_INLINE double synk_tanh_f64(double x) { return tanh(x); }
)PRELUDE" + sigmoid_and_cast_prelude("fabsf", "fabs") + math_prelude() + R"PRELUDE(
// A kernel's failure record, all zeros at the start of a call: err[0] the first code
// (KernelError), err[1] the complement of the smallest failing position (a max of complements, so
// that zero means "none"), err[2] the limit that was exceeded.
SYNK_INLINE void synk_fail(unsigned long long* err, long long code, long long position, long long limit) {
  atomicCAS(err, 0ull, (unsigned long long)code);
  atomicMax(err + 1, ~(unsigned long long)position);
  err[2] = (unsigned long long)limit;
}

// Loop helpers: the global thread index and the grid's stride, in 64 bits.
SYNK_INLINE int64_t synk_thread() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
SYNK_INLINE int64_t synk_threads() { return (int64_t)gridDim.x * blockDim.x; }
SYNK_INLINE bool synk_aligned16(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// V consecutive elements, aligned to their size, so one load or store moves them (16 bytes).
template <class T, int V> struct __align__(sizeof(T) * V) SynkVec { T v[V]; };

// Shuffles for every value type (bool and uint8_t travel as int).
template <class T> SYNK_INLINE T synk_shfl_down(T v, int offset) { return __shfl_down_sync(0xffffffffu, v, offset); }
template <> __device__ __forceinline__ bool synk_shfl_down<bool>(bool v, int offset) {
  return __shfl_down_sync(0xffffffffu, (int)v, offset) != 0;
}
template <> __device__ __forceinline__ uint8_t synk_shfl_down<uint8_t>(uint8_t v, int offset) {
  return (uint8_t)__shfl_down_sync(0xffffffffu, (int)v, offset);
}
template <class T> SYNK_INLINE T synk_shfl(T v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }
template <> __device__ __forceinline__ bool synk_shfl<bool>(bool v, int lane) { return __shfl_sync(0xffffffffu, (int)v, lane) != 0; }
template <> __device__ __forceinline__ uint8_t synk_shfl<uint8_t>(uint8_t v, int lane) {
  return (uint8_t)__shfl_sync(0xffffffffu, (int)v, lane);
}

// Combines v over the whole block (blockDim.x a multiple of 32, at most 1024) and returns the
// result to every thread: shuffles within each warp, one partial per warp through shared memory,
// then every warp reduces the partials itself (no second barrier). Call from all threads.
template <class T, class F> static __device__ T synk_block_reduce(T v, T identity, F combine) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = combine(v, synk_shfl_down(v, o));
  __syncthreads();   // earlier readers of `partial` are done
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = combine(v, synk_shfl_down(v, o));
  return synk_shfl(v, 0);
}

// argmax pairs: index -1 means "no element yet". The larger value wins, a NaN beats every number,
// and between equals (or two NaNs) the smaller index wins: numpy's first maximum.
template <class T> SYNK_INLINE void synk_argmax_combine(T& v, int64_t& i, T v2, int64_t i2) {
  if (i2 < 0) return;
  bool take;
  if (i < 0) {
    take = true;
  } else {
    const bool nan1 = v != v, nan2 = v2 != v2;
    if (nan1 || nan2) take = nan2 && (!nan1 || i2 < i);
    else take = v2 > v || (v2 == v && i2 < i);
  }
  if (take) { v = v2; i = i2; }
}
template <class T> static __device__ void synk_block_argmax(T& v, int64_t& i) {
  __shared__ T pv[32];
  __shared__ int64_t pi[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) synk_argmax_combine(v, i, synk_shfl_down(v, o), synk_shfl_down(i, o));
  __syncthreads();
  if (lane == 0) { pv[warp] = v; pi[warp] = i; }
  __syncthreads();
  if (lane < warps) { v = pv[lane]; i = pi[lane]; } else { i = -1; }
  for (int o = 16; o > 0; o >>= 1) synk_argmax_combine(v, i, synk_shfl_down(v, o), synk_shfl_down(i, o));
  v = synk_shfl(v, 0);
  i = synk_shfl(i, 0);
}

// The length of each split of `count` elements over `splits` blocks, a multiple of `step`
// (threads times vector width), so every split but the last starts vector-aligned.
SYNK_INLINE int64_t synk_split_chunk(int64_t count, int64_t splits, int64_t step) {
  int64_t c = (count + splits - 1) / splits;
  return (c + step - 1) / step * step;
}
)PRELUDE";
  return text;
}

}  // namespace synk::compiler
