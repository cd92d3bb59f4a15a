// The Call command's message from the master to the workers, as plain data: which function, the
// call plan's scalars, where each input and index list lives (shared-memory segment names and
// offsets, valid in any process of the group), and every rank's shared-row selection. One
// encoder and one decoder, tested as a pair (call_message_test.cpp); the call engine builds a
// message from a request and resolves a decoded one into pointers of the worker's address space.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/call/call_plan.h"
#include "runtime/call/gradient_stream.h"

namespace synk::rt {

// An index list in shared memory: a segment and a byte offset (empty segment: no list).
struct IndexListRef {
  std::string segment;
  uint64_t offset = 0;
  DType dtype = DType::I64;
  int64_t count = 0;
  bool operator==(const IndexListRef&) const = default;
};

struct InputRef {
  InputUse use{};
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string segment;   // empty for an input without elements
  bool operator==(const InputRef&) const = default;
};

struct SharedRowsRef {
  RowSelection::Kind kind = RowSelection::Kind::All;
  int64_t start = 0;
  int64_t count = 0;
  IndexListRef list;
  bool operator==(const SharedRowsRef&) const = default;
};

struct CallMessage {
  int32_t function = -1;
  int64_t num_slices = 1;
  int64_t micro_shard_rows = 0;
  // Multi-node runs (call_nodes.h): the plan's global rank count, and this node's first global
  // rank (a worker runs global rank rank_offset + its local rank). 0, 0 on one node.
  int32_t world_ranks = 0;
  int32_t rank_offset = 0;
  bool has_scattered = false;
  bool has_sliceable = false;
  bool empty_call = false;
  int64_t positions = 0;
  RowSelection::Kind select = RowSelection::Kind::All;
  int64_t select_start = 0;
  IndexListRef select_list;
  std::vector<InputRef> inputs;
  std::vector<int32_t> sliceable_slots;
  std::vector<SharedRowsRef> shared_rows;   // per rank, in rank order, when has_sliceable
  std::vector<int32_t> outputs;
  uint64_t seed = 0, step = 0;              // the random state of the call (base/rng.h)
  StreamPlan stream;                        // the gradient all-reduce during the call, if any
  bool operator==(const CallMessage&) const = default;
};

std::string encode_call_message(const CallMessage& message);

// InternalError when the bytes are truncated, have bytes left over, or carry an unknown enum value.
CallMessage decode_call_message(std::string_view bytes);

}  // namespace synk::rt
