// Hierarchical copy all-reduce over shared memory (see coll_hierarchical.h).
#include "runtime/coll/hierarchical.h"

#include <algorithm>
#include <vector>

namespace synk::rt {

int hierarchy_group_size(int size, int requested) {
  if (requested > 0) return std::min(requested, size);
  int g = 1;
  while (g * g < size) ++g;
  return g;
}

void hierarchical_reduce(Staging& staging, std::span<const ReducePack> packs, const ReduceParams& params) {
  const int n = staging.size(), me = staging.rank();
  const int slots = n + 1;
  const size_t chunk_bytes = staging.slot_bytes(slots, params.chunk_cap ? params.chunk_cap : kDefaultChunkBytes);
  const int group = hierarchy_group_size(n, params.group_size);
  const int groups = (n + group - 1) / group;
  const int divisor = params.op == CollOp::Avg ? n : 0;
  std::vector<const std::byte*> sources;

  for (const ReducePack& pack : packs) {
    const size_t elem = dtype_size(pack.dtype);
    const size_t chunk = chunk_bytes / elem;
    for (size_t base = 0; base < pack.count; base += chunk) {
      const size_t count = std::min(chunk, pack.count - base);
      const size_t offset = base * elem, bytes = count * elem;
      const int buffer = int(staging.round & 1);
      auto slot = [&](int s) { return staging.slot(buffer, s, slots, chunk_bytes); };
      std::byte* result = slot(n);
      pack.input->read(offset, bytes, slot(me));
      staging.barrier();
      if (groups == 1) {
        if (me == 0) {
          sources.clear();
          for (int r = 0; r < n; ++r) sources.push_back(slot(r));
          reduce_sources(pack.dtype, params.op, sources.data(), n, result, count, divisor);
        }
      } else {
        // Up one level: each leader folds its group into its own slot (partial sums, no division).
        if (me % group == 0) {
          sources.clear();
          for (int r = me; r < std::min(me + group, n); ++r) sources.push_back(slot(r));
          if (sources.size() > 1)
            reduce_sources(pack.dtype, params.op, sources.data(), int(sources.size()), slot(me), count, 0);
        }
        staging.barrier();
        // Up to the root: rank 0 folds the leaders' partials in group order.
        if (me == 0) {
          sources.clear();
          for (int leader = 0; leader < n; leader += group) sources.push_back(slot(leader));
          reduce_sources(pack.dtype, params.op, sources.data(), int(sources.size()), result, count, divisor);
        }
      }
      staging.barrier();
      if (pack.output) pack.output->write(offset, bytes, result);
      ++staging.round;
    }
  }
}

}  // namespace synk::rt
