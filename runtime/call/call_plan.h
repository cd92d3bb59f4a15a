// Planning a data-parallel call, with no processes involved (unit-testable): every check of
// SEMANTICS section 9 that can be made on the master before any worker moves, and the exact
// integer splitting rule of section 2 that tells each rank which rows and slices it computes.
//
// Vocabulary: a *position* is an entry of the batch (0..P-1); rank r owns positions
// split(P, N, r). A *full* scattered input reads row map(position) (start + position for a count
// or range, list[position] for an index list); a *positional* input (role Minibatch, or a Data
// flagged minibatch) reads row = position; a broadcast input is passed whole. Sliceable shared
// variables have their own rows on each rank, chosen by batch_s (or all of them) and split by
// num_slices with the same rule.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/call/descriptor.h"

namespace synk::rt {

// Rows [floor(r*L/N), floor((r+1)*L/N)) in exact integer arithmetic.
std::pair<int64_t, int64_t> split_range(int64_t length, int64_t parts, int64_t part);

// A list of row indices somewhere in memory (a std::vector copied by the caller, or a Data).
struct IndexSource {
  const void* data = nullptr;
  DType dtype = DType::I64;
  int64_t count = 0;
  int64_t at(int64_t i) const;
};

// One row selection as given by the caller (batch, or one entry of batch_s).
struct RowSelection {
  enum class Kind : uint8_t { All, Count, Range, List } kind = Kind::All;
  int64_t start = 0, stop = 0;       // Count: [0, stop); Range: [start, stop)
  IndexSource list;                  // List
};

// What the master knows about one argument of the call.
struct InputInfo {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  bool minibatch = false;            // the Data is flagged minibatch
  std::string data_name;             // for messages; may be empty
  bool missing = false;              // an empty Data handle was passed
};

struct PlanRequest {
  const FunctionSignature* signature = nullptr;
  const ModuleSpec* module = nullptr;
  int nranks = 1;
  std::vector<InputInfo> inputs;
  RowSelection batch;                          // kind All: no batch given
  std::vector<RowSelection> batch_s;           // empty: none; one for all ranks; or one per rank
  int64_t num_slices = 1;
  int64_t micro_shard_rows = 0;                // > 0: a deterministic step's micro-shards (below)
  std::vector<std::string> output_subset;      // empty: every output
  // The shape of module shared variable `var` on rank `rank`, as the master tracks it.
  std::function<const std::vector<int64_t>&(int rank, int var)> shared_shape;
};

enum class InputUse : uint8_t { Full, Positional, Broadcast };

// Rows of the sliceable shared variables one rank uses, before slicing.
struct SharedRows {
  RowSelection::Kind kind = RowSelection::Kind::All;   // All, Range (start) or List
  int64_t start = 0;
  int64_t count = 0;
  IndexSource list;
};

struct CallPlan {
  int nranks = 1;
  int64_t num_slices = 1;
  // Deterministic training steps (docs/training.md): the positions are cut into micro-shards of
  // this many rows, [k*m, (k+1)*m), fixed whatever the rank count; each rank runs whole shards (a
  // contiguous run of them, split_range over the shard count), one part per shard, and num_slices
  // has no effect. With no scattered input each rank cuts its own shared-row selection instead.
  int64_t micro_shard_rows = 0;
  std::vector<InputUse> inputs;                // per signature input
  bool has_scattered = false;                  // any Full or Positional input
  int64_t positions = 0;                       // P
  RowSelection::Kind select = RowSelection::Kind::All;   // how positions map to full rows
  int64_t select_start = 0;                    // All / Count / Range: row = start + position
  IndexSource select_list;                     // List: row = list[position]
  bool has_sliceable = false;
  std::vector<int32_t> sliceable_slots;        // indices into signature.shareds_read
  std::vector<SharedRows> shared_rows;         // per rank, when has_sliceable
  std::vector<int32_t> outputs;                // output indices to return, in order
  bool empty_call = false;                     // nothing selected anywhere: rank 0 runs 0 rows once
};

// One run() on one rank: positions [pos_lo, pos_hi) and offsets [sh_lo, sh_hi) into the rank's
// shared-row selection; `weight` is its row count for `avg` (1 when nothing is scattered).
struct Part {
  int64_t pos_lo = 0, pos_hi = 0;
  int64_t sh_lo = 0, sh_hi = 0;
  int64_t weight = 0;
};

// Checks a signature against its module when a function is registered (UsageError).
void validate_signature(const FunctionSignature& sig, const ModuleSpec& module);

// Validates every argument and option of a call and plans it (UsageError on any problem).
CallPlan plan_call(const PlanRequest& request);

// The parts rank `rank` runs, in slice (or micro-shard) order (parts with no rows are left out).
std::vector<Part> rank_parts(const CallPlan& plan, int rank);
// Each rank's total weight (the sum of its parts' weights), in rank order, except that an empty
// call weighs 0 everywhere (CallResult::rank_weights).
std::vector<int64_t> rank_weights(const CallPlan& plan);
// Each weight divided by their sum: the factors by which all_reduce_weighted scales each rank's
// values before it adds them (one definition, so that a streamed gradient gets the same bits).
std::vector<double> weight_shares(std::span<const double> weights);

}  // namespace synk::rt
