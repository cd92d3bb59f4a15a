// The all_reduce of one small variable (a loss, a metric, a scalar hyperparameter) in one cache-line
// transfer each way: the master's value travels inside the command (kInlinePayloadBytes), each
// worker's inside its completion (kInlineResultBytes). The broadcast of one is the command alone. A worker reduces as soon as it has every
// value (on 2 ranks: at once; on more, after the other workers published theirs), and the master
// when the completions arrive. No staging area, no barrier.
//
// The result is the bits of the staging path's small rounds (runtime/coll/rsag.cpp): every rank
// reduces every rank's value in rank order with reduce_sources. The master has validated the call
// (collectives.cpp) and chooses this path only where it gives the same result: one variable of at
// most kInlineValueBytes, no per-rank weights, one node.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/coll/ops.h"
#include "runtime/data/dtype.h"
#include "runtime/group/process_group.h"

namespace synk::rt {

// The largest variable the inline path takes (after the 12-byte request in the command).
inline constexpr size_t kInlineValueBytes = 32;

// Which variable, and how; also what the command carries before the master's value.
struct InlineCollective {
  int32_t module = -1;
  int32_t var = -1;
  CollOp op = CollOp::Sum;
  DType dtype = DType::F32;
  uint16_t count = 0;              // elements
  size_t bytes() const { return size_t(count) * dtype_size(dtype); }
};

// Runs the all_reduce on every rank of `group` (the master's part included) in place. Throws
// RankError naming the ranks that failed.
void inline_all_reduce(ProcessGroup& group, const InlineCollective& request, const char* what);
// The master's value of the variable to every worker, whose value has the same shape already (the
// caller checks its record): one command, no shape report (`op` is unused).
void inline_broadcast(ProcessGroup& group, const InlineCollective& request, const char* what);

}  // namespace synk::rt
