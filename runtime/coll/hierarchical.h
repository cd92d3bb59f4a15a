// Hierarchical copy all-reduce (TensorFlow's HierarchicalCopyAllReduce, seeds/004) over the
// shared-memory staging area: ranks form groups of `group_size` consecutive ranks; per round every
// rank copies its chunk into its slot, each group's first rank (its leader) reduces the group's
// slots into its own, rank 0 reduces the leaders' partials into the result slot, and every rank
// that wants the result copies it back: reduce up the hierarchy, broadcast back down the same
// path. Deterministic (always the same tree: ((x0 op x1) op (x2 op x3)) for groups of two), but
// not the same bits as the flat rank order of coll_rsag when floating-point rounding differs.
// Leaders and the root work serially, so on shared memory it is slower than reduce-scatter; it
// exists for comparison and for topologies where a hierarchy is cheaper.
#pragma once

#include <span>

#include "runtime/coll/staging.h"

namespace synk::rt {

// Ranks per group used for `size` ranks when `requested` is 0: the ceiling of sqrt(size).
int hierarchy_group_size(int size, int requested);

void hierarchical_reduce(Staging& staging, std::span<const ReducePack> packs, const ReduceParams& params);

}  // namespace synk::rt
