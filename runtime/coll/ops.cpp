// Elementwise reductions for the collectives (see coll_ops.h). The loops work on blocks that fit
// in L1 so an N-source reduction reads every source once and keeps the accumulator hot; each inner
// loop is a plain two-operand loop the compiler vectorises.
#include "runtime/coll/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "runtime/data/dtype.h"
#include <fmt/format.h>

#include "base/enum_names.h"
#include "base/errors.h"

namespace synk::rt {

namespace {
constexpr EnumName<CollOp> kCollOpNames[] = {
    {CollOp::Avg, "avg"}, {CollOp::Sum, "sum"}, {CollOp::Prod, "prod"}, {CollOp::Max, "max"}, {CollOp::Min, "min"},
};
}  // namespace

const char* coll_op_name(CollOp op) { return enum_name(kCollOpNames, op); }

std::optional<CollOp> parse_coll_op(std::string_view name) { return enum_from_name(kCollOpNames, name); }

bool coll_op_supports(CollOp op, DType dtype, const char** why) {
  if (op == CollOp::Avg && !is_float(dtype)) {
    if (why) *why = "avg is only defined for floating-point variables (use sum and divide)";
    return false;
  }
  if (dtype == DType::Bool && op != CollOp::Max && op != CollOp::Min) {
    if (why) *why = "bool variables support only max (any) and min (all)";
    return false;
  }
  return true;
}

void scale_values(DType dtype, std::byte* x, size_t count, double factor) {
  if (factor == 0.0) {
    std::memset(x, 0, count * dtype_size(dtype));
    return;
  }
  if (factor == 1.0) return;
  if (dtype == DType::F32) {
    auto* v = reinterpret_cast<float*>(x);
    for (size_t i = 0; i < count; ++i) v[i] = float(double(v[i]) * factor);
  } else if (dtype == DType::F64) {
    auto* v = reinterpret_cast<double*>(x);
    for (size_t i = 0; i < count; ++i) v[i] *= factor;
  } else {
    throw InternalError(fmt::format("scale_values: dtype {} is not a floating-point runtime dtype", dtype_name(dtype)));
  }
}

namespace {

constexpr size_t kBlockBytes = 8192;

template <class T>
struct Add {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));   // wraps, no UB
    else return a + b;
  }
};
template <class T>
struct Mul {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
    else return a * b;
  }
};
// NaN propagates whichever rank holds it, as numpy's max/min and the call engine's max/min outputs
// (runtime/call/reduce.cpp); `b != b` is false for integers and folds away.
template <class T>
struct Max {
  static T apply(T a, T b) { return (a < b || b != b) ? b : a; }
};
template <class T>
struct Min {
  static T apply(T a, T b) { return (b < a || b != b) ? b : a; }
};

// out[i] = a[i] op b[i]; `out` may equal `a`.
template <class T, class Op>
void combine(T* out, const T* a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], b[i]);
}

template <class T, class Op>
void reduce_typed(const std::byte* const* srcs, int nsrc, std::byte* dst_bytes, size_t count, int divisor) {
  T* dst = reinterpret_cast<T*>(dst_bytes);
  if (nsrc == 1) {
    if (dst_bytes != srcs[0]) copy_bytes(dst_bytes, srcs[0], count * sizeof(T));
  } else {
    constexpr size_t block = kBlockBytes / sizeof(T);
    for (size_t start = 0; start < count; start += block) {
      size_t n = std::min(block, count - start);
      const T* s0 = reinterpret_cast<const T*>(srcs[0]) + start;
      combine<T, Op>(dst + start, s0, reinterpret_cast<const T*>(srcs[1]) + start, n);
      for (int s = 2; s < nsrc; ++s)
        combine<T, Op>(dst + start, dst + start, reinterpret_cast<const T*>(srcs[s]) + start, n);
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (divisor > 0) {
      const T d = T(divisor);
      for (size_t i = 0; i < count; ++i) dst[i] = dst[i] / d;
    }
  }
}

template <class T>
void reduce_op(CollOp op, const std::byte* const* srcs, int nsrc, std::byte* dst, size_t count, int divisor) {
  switch (op) {
    case CollOp::Avg: return reduce_typed<T, Add<T>>(srcs, nsrc, dst, count, divisor);
    case CollOp::Sum: return reduce_typed<T, Add<T>>(srcs, nsrc, dst, count, 0);
    case CollOp::Prod: return reduce_typed<T, Mul<T>>(srcs, nsrc, dst, count, 0);
    case CollOp::Max: return reduce_typed<T, Max<T>>(srcs, nsrc, dst, count, 0);
    case CollOp::Min: return reduce_typed<T, Min<T>>(srcs, nsrc, dst, count, 0);
  }
}

__attribute__((target("avx2"))) void copy_avx2(std::byte* dst, const std::byte* src, size_t n) {
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, n - i);
}

void copy_sse2(std::byte* dst, const std::byte* src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, n - i);
}

const bool g_has_avx2 = __builtin_cpu_supports("avx2");
const bool g_rep_movsb_is_safe = __builtin_cpu_is("intel");

}  // namespace

void copy_bytes(std::byte* dst, const std::byte* src, size_t n) {
  if (n < 2048 || g_rep_movsb_is_safe) std::memcpy(dst, src, n);   // short: glibc's best path anywhere
  else if (g_has_avx2) copy_avx2(dst, src, n);
  else copy_sse2(dst, src, n);
}

void reduce_sources(DType dtype, CollOp op, const std::byte* const* srcs, int nsrc, std::byte* dst,
                    size_t count, int divisor) {
  if (nsrc < 1) throw InternalError("reduce_sources: no sources");
  if (count == 0) return;
  switch (dtype) {
    case DType::F32: return reduce_op<float>(op, srcs, nsrc, dst, count, divisor);
    case DType::F64: return reduce_op<double>(op, srcs, nsrc, dst, count, divisor);
    case DType::I32: return reduce_op<int32_t>(op, srcs, nsrc, dst, count, divisor);
    case DType::I64: return reduce_op<int64_t>(op, srcs, nsrc, dst, count, divisor);
    case DType::U8: return reduce_op<uint8_t>(op, srcs, nsrc, dst, count, divisor);
    case DType::Bool:
      // One byte, 0 or 1: max is "any", min is "all".
      if (op == CollOp::Max) return reduce_typed<uint8_t, Max<uint8_t>>(srcs, nsrc, dst, count, 0);
      if (op == CollOp::Min) return reduce_typed<uint8_t, Min<uint8_t>>(srcs, nsrc, dst, count, 0);
      throw InternalError("reduce_sources: bool supports only max and min");
    case DType::F16:
    case DType::BF16: break;   // reserved: never the dtype of a runtime array
  }
  throw InternalError(fmt::format("reduce_sources: {} values have no runtime representation", dtype_name(dtype)));
}

}  // namespace synk::rt
