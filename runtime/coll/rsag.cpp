// Reduce-scatter + all-gather over shared memory (see coll_rsag.h).
//
// Pipelined: a round's barrier serves two rounds. After the barrier that makes round k's inputs
// visible, each rank reduces its part of round k into the result slot of round k's buffer, then
// fills its slot of round k+1 (the other buffer, whose previous readers all passed the barrier
// before), then waits at the next barrier, after which round k's result is complete and round
// k+1's inputs are visible: it copies round k's result out and reduces round k+1. So R rounds take
// R + 1 barriers instead of 2R. Round k+2 reuses round k's buffer only after the barrier that
// follows every rank's copy-out of round k.
//
// A rank's own part of a chunk never goes through the staging area: nobody else reads that part of
// its slot, so it reduces it straight from its own memory and writes the result straight back,
// copying in and out only the parts the others reduce (a third less memory traffic on 2 ranks).
#include "runtime/coll/rsag.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "runtime/trace/trace.h"

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

// One chunk of one pack.
struct Round {
  const ReducePack* pack;
  size_t base, count;   // elements
  bool small;           // every rank reduces the whole chunk itself
  size_t lo = 0, hi = 0;              // this rank's part (elements within the chunk)
  const std::byte* own = nullptr;     // this rank's part in its own memory, when contiguous there
};

}  // namespace

void rsag_reduce(Staging& staging, std::span<const ReducePack> packs, const ReduceParams& params) {
  const int n = staging.size(), me = staging.rank();
  const int slots = n + 1;   // one per rank, then the result
  const size_t chunk_bytes = staging.slot_bytes(slots, params.chunk_cap ? params.chunk_cap : kDefaultChunkBytes);
  const size_t small_bytes = std::min(params.small_bytes ? params.small_bytes : kDefaultSmallBytes, chunk_bytes);
  const int divisor = params.op == CollOp::Avg ? n : 0;

  thread_local std::vector<Round> rounds;
  thread_local std::vector<const std::byte*> sources;
  thread_local std::vector<std::byte> scratch;
  rounds.clear();
  sources.resize(size_t(n));
  for (const ReducePack& pack : packs) {
    const size_t elem = dtype_size(pack.dtype), chunk = chunk_bytes / elem;
    const bool small = pack.count * elem <= small_bytes;
    for (size_t base = 0; base < pack.count; base += chunk) {
      Round r{&pack, base, std::min(chunk, pack.count - base), small};
      if (!small) {
        my_part(r.count, elem, me, n, &r.lo, &r.hi);
        if (r.hi > r.lo) r.own = pack.input->contiguous((base + r.lo) * elem, (r.hi - r.lo) * elem);
      }
      rounds.push_back(r);
    }
  }
  if (rounds.empty()) return;
  const uint64_t first = staging.round;
  auto buffer = [&](size_t k) { return int((first + k) & 1); };
  auto fill = [&](size_t k) {
    const Round& r = rounds[k];
    const size_t elem = dtype_size(r.pack->dtype), offset = r.base * elem;
    std::byte* slot = staging.slot(buffer(k), me, slots, chunk_bytes);
    if (!r.own) {
      r.pack->input->read(offset, r.count * elem, slot);
      return;
    }
    r.pack->input->read(offset, r.lo * elem, slot);
    r.pack->input->read(offset + r.hi * elem, (r.count - r.hi) * elem, slot + r.hi * elem);
  };

  fill(0);
  staging.barrier();
  for (size_t k = 0; k < rounds.size(); ++k) {
    const Round& r = rounds[k];
    const ReducePack& pack = *r.pack;
    const size_t elem = dtype_size(pack.dtype), offset = r.base * elem, bytes = r.count * elem;
    const int b = buffer(k);
    trace::Span round_span(trace::Category::Collective, "rsag round");
    if (round_span.active())
      round_span.set_detail(fmt::format("round {} of {}, {} elements{}", k + 1, rounds.size(), r.count,
                                        r.small ? ", small: every rank reduces it" : ""),
                            int64_t(bytes));
    std::byte* result = staging.slot(b, n, slots, chunk_bytes);
    if (r.small) {
      // Every rank that wants the result reduces the whole chunk itself, in rank order.
      if (pack.output) {
        for (int q = 0; q < n; ++q) sources[size_t(q)] = staging.slot(b, q, slots, chunk_bytes);
        std::byte* dst = pack.output->contiguous(offset, bytes);
        if (!dst) {
          scratch.resize(bytes);
          dst = scratch.data();
        }
        reduce_sources(pack.dtype, params.op, sources.data(), n, dst, r.count, divisor);
        if (dst == scratch.data()) pack.output->write(offset, bytes, dst);
      }
    } else if (r.hi > r.lo) {
      const size_t lo = r.lo * elem, part = (r.hi - r.lo) * elem;
      for (int q = 0; q < n; ++q) sources[size_t(q)] = staging.slot(b, q, slots, chunk_bytes) + lo;
      if (r.own) sources[size_t(me)] = r.own;
      reduce_sources(pack.dtype, params.op, sources.data(), n, result + lo, r.hi - r.lo, divisor);
      if (r.own && pack.output) pack.output->write(offset + lo, part, result + lo);
    }
    const bool last = k + 1 == rounds.size();
    if (!last) fill(k + 1);
    if (!last || !r.small) staging.barrier();
    if (!r.small && pack.output) {
      if (r.own) {   // our own part is written already
        pack.output->write(offset, r.lo * elem, result);
        pack.output->write(offset + r.hi * elem, (r.count - r.hi) * elem, result + r.hi * elem);
      } else {
        pack.output->write(offset, bytes, result);
      }
    }
  }
  staging.round = first + rounds.size();
}

}  // namespace synk::rt
