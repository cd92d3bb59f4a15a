// Reduce-scatter + all-gather over the shared-memory staging area: the default algorithm of
// reduce and all_reduce between CPU processes.
//
// Per round (one chunk of every pack, double-buffered): every rank copies its chunk into its own
// slot; after a barrier, rank r reduces the r-th part of the chunk over all N slots, in rank order,
// into the result slot (so the N ranks reduce in parallel and each element is reduced once); after
// a second barrier every rank that wants the result copies it out. Bandwidth-optimal for shared
// memory (each rank moves its data in and the result out once, and reads 1/N of everyone's), and
// deterministic: element i is always x_0[i] op x_1[i] op ... op x_{N-1}[i], whatever the chunking,
// so every run and every rank gets the same bits. Small buffers skip the reduce-scatter: every rank
// reduces the whole chunk itself after one barrier (same order, same bits, one barrier fewer).
#pragma once

#include <span>

#include "runtime/coll/staging.h"

namespace synk::rt {

void rsag_reduce(Staging& staging, std::span<const ReducePack> packs, const ReduceParams& params);

}  // namespace synk::rt
