// Reduce-scatter + all-gather over shared memory (see coll_rsag.h).
#include "runtime/coll_rsag.h"

#include <algorithm>
#include <vector>

namespace synk::rt {

namespace {

// Rank r's part [lo, hi) of a chunk of n elements: boundaries on 64-byte multiples, so two ranks
// never write the same cache line of the result slot.
void my_part(size_t n, size_t elem, int rank, int size, size_t* lo, size_t* hi) {
  const size_t align = std::max<size_t>(64 / elem, 1);
  auto boundary = [&](int r) {
    if (r >= size) return n;
    size_t b = size_t((unsigned __int128)n * unsigned(r) / unsigned(size));
    return b - b % align;
  };
  *lo = boundary(rank);
  *hi = boundary(rank + 1);
}

}  // namespace

void rsag_reduce(Staging& staging, std::span<const ReducePack> packs, const ReduceParams& params) {
  const int n = staging.size(), me = staging.rank();
  const int slots = n + 1;   // one per rank, then the result
  const size_t chunk_bytes = staging.slot_bytes(slots, params.chunk_cap ? params.chunk_cap : kDefaultChunkBytes);
  const size_t small_bytes = params.small_bytes ? params.small_bytes : kDefaultSmallBytes;
  const int divisor = params.op == CollOp::Avg ? n : 0;
  std::vector<const std::byte*> sources(static_cast<size_t>(n)), part(static_cast<size_t>(n));
  thread_local std::vector<std::byte> scratch;

  for (const ReducePack& pack : packs) {
    const size_t elem = dtype_size(pack.dtype);
    const size_t chunk = chunk_bytes / elem;
    const bool small = pack.count * elem <= std::min(small_bytes, chunk_bytes);
    for (size_t base = 0; base < pack.count; base += chunk) {
      const size_t count = std::min(chunk, pack.count - base);
      const size_t offset = base * elem, bytes = count * elem;
      const int buffer = int(staging.round & 1);
      for (int r = 0; r < n; ++r) sources[size_t(r)] = staging.slot(buffer, r, slots, chunk_bytes);
      pack.input->read(offset, bytes, staging.slot(buffer, me, slots, chunk_bytes));
      staging.barrier();
      if (small) {
        // Every rank that wants the result reduces the whole chunk itself.
        if (pack.output) {
          std::byte* dst = pack.output->contiguous(offset, bytes);
          if (!dst) {
            scratch.resize(bytes);
            dst = scratch.data();
          }
          reduce_sources(pack.dtype, params.op, sources.data(), n, dst, count, divisor);
          if (dst == scratch.data()) pack.output->write(offset, bytes, dst);
        }
      } else {
        size_t lo, hi;
        my_part(count, elem, me, n, &lo, &hi);
        std::byte* result = staging.slot(buffer, n, slots, chunk_bytes);
        if (hi > lo) {
          for (int r = 0; r < n; ++r) part[size_t(r)] = sources[size_t(r)] + lo * elem;
          reduce_sources(pack.dtype, params.op, part.data(), n, result + lo * elem, hi - lo, divisor);
        }
        staging.barrier();
        if (pack.output) pack.output->write(offset, bytes, result);
      }
      ++staging.round;
    }
  }
}

}  // namespace synk::rt
