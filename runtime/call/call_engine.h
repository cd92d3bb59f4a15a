// The call engine: runs a data-parallel call of a registered function on every rank and reduces
// the results (SEMANTICS sections 2 to 6). The master plans and validates the call
// (call_plan.h), encodes a descriptor, and runs its own share while the workers run theirs; each
// rank gathers its own rows straight from the Data segments, runs its slices, accumulates
// outputs and updates per mode, and leaves its partials in its results area; the master reduces
// them. Updates are applied at the end of the call in every rank, only when every rank succeeded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/call/call_plan.h"
#include "runtime/call/gradient_stream.h"
#include "runtime/group/process_group.h"
#include "runtime/data/data.h"
#include "runtime/call/descriptor.h"

namespace synk::rt {

class ProcessGroup;
class RankContext;

// A call as the API layer hands it to the engine.
struct CallRequest {
  int32_t function = -1;
  std::vector<Data> inputs;
  RowSelection batch;                      // kind All: none given
  Data batch_data;                         // when the batch index list lives in a Data
  std::vector<int64_t> batch_list;         // when it was given as a list
  std::vector<RowSelection> batch_s;       // list selections point into batch_s_lists
  std::vector<std::vector<int64_t>> batch_s_lists;
  int64_t num_slices = 1;
  // > 0: a deterministic training step's micro-shards (CallPlan::micro_shard_rows). The float
  // `avg` updates are then kept per shard on each rank (ModuleEntry::micro_parts), not applied:
  // the step's exact all-reduce (runtime/coll/exact_sum.h) combines them into the variables.
  int64_t micro_shard_rows = 0;
  std::vector<std::string> output_subset;
  // A training step's gradient: average this update over the ranks during the call, overlapped
  // with the computation, when the call allows it (gradient_stream.h; CallResult::update_reduced).
  StreamRequest stream;
};

// What a call gives back: the reduced outputs in output-subset order, and each rank's weight in
// the call's `avg` reductions (its row count over all its slices; 1 per rank when nothing is
// scattered; 0 on every rank when the call selected no rows at all).
struct CallResult {
  std::vector<Array> outputs;
  std::vector<int64_t> rank_weights;
  // The streamed update (CallRequest::stream) is the ranks' average already on every rank.
  bool update_reduced = false;
};

// Runs the call on the group (or on the master alone when `group` is null: N = 1).
// UsageError before anything runs; RankError when a rank failed (updates are then dropped on
// every rank).
CallResult run_call(ProcessGroup* group, const CallRequest& request);

// The kind of the Call command (registered with the process group at start-up).
CommandKind call_command();
// Worker side of a Call command.
void worker_execute_call(RankContext& ctx, std::string_view payload);
// Applies (or drops) the updates a worker computed in the last call.
void settle_pending_updates(bool commit);

}  // namespace synk::rt
