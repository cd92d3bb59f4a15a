// The elementwise reductions of the collectives (SEMANTICS section 7): avg (the plain mean over
// ranks), sum, prod, max and min, for every dtype, over any number of sources combined strictly in
// the order given (rank order for every algorithm here), so the same inputs always give the same
// bits. Compiled with -O3 (see runtime/CMakeLists.txt): these loops are the collectives' compute.
//
// Integers wrap on overflow like the hardware; avg is only defined for floating-point dtypes and
// bool only for max and min (the master rejects the rest before any rank moves).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/call/descriptor.h"

namespace synk::rt {

enum class CollOp : uint8_t { Avg, Sum, Prod, Max, Min };

const char* coll_op_name(CollOp op);
std::optional<CollOp> parse_coll_op(std::string_view name);
// Whether `op` is defined for `dtype`; if not, `why` says so (for the master's UsageError).
bool coll_op_supports(CollOp op, DType dtype, const char** why = nullptr);

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i], left to right, for i < count.
// `dst` may be srcs[0] (in-place accumulation) but must not overlap any other source. For Avg the
// sources are summed and, when `divisor` > 0, the sum is divided by it (a partial sum of a
// hierarchy passes 0 and the final stage the number of ranks).
void reduce_sources(DType dtype, CollOp op, const std::byte* const* srcs, int nsrc, std::byte* dst,
                    size_t count, int divisor);

// x[i] *= factor for i < count, in double and rounded once to the dtype (F32, F64); factor 0
// writes zeros (so a NaN or inf there contributes nothing to a weighted reduction).
void scale_values(DType dtype, std::byte* x, size_t count, double factor);

// memcpy for copies to and from the staging area. On AMD CPUs glibc 2.36's memcpy (rep movsb)
// drops to ~3 GB/s when the destination sits a few bytes past the source modulo 4096, which is
// exactly a page-aligned staging slot copied into a malloc'd buffer (docs/performance/collectives.md;
// Zen 3 and later announce fast short rep movsb but run it 20x slower on a misaligned
// destination): there a plain vector loop (AVX2 where the CPU has it, SSE2 otherwise) copies.
// On Intel CPUs rep movsb has no such cliff and, writing whole lines without reading them first,
// beat the loop by 10-25% for 64 KiB-16 MiB all-reduces on a Xeon host: there glibc's memcpy copies.
void copy_bytes(std::byte* dst, const std::byte* src, size_t n);

}  // namespace synk::rt
