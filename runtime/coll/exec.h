// How a collective runs on each rank: the descriptor the master sends (which collective, which
// variables, the shapes the master recorded for them, the algorithm and its parameters), and the
// code every rank runs for it, the master included. The master has validated everything before
// this runs (collectives.cpp); a rank still checks that its own shapes match the master's record.
//
// Data moves through the staging area (coll_staging.h): reductions through an algorithm
// (coll_rsag, coll_hierarchical, coll_nccl) over packs of variables, everything else through
// exchange(). A rank that fails marks the collective failed, so no peer waits for it forever; the
// master then reports that rank's error and the group stays usable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/coll/ops.h"
#include "runtime/group/process_group.h"
#include "runtime/coll/staging.h"
#include "runtime/call/descriptor.h"
#include "base/wire.h"

namespace synk::rt {

class RankContext;

// AllReduceExact: a deterministic training step's exact weighted average of the variables' kept
// micro-shard values (ModuleEntry::micro_parts, runtime/coll/exact_sum.h) into the variables.
enum class CollKind : uint8_t { Broadcast, Scatter, Gather, AllGather, Reduce, AllReduce, SetValue, GetValue,
                                AllReduceExact };
const char* coll_kind_name(CollKind kind);
// Whether the collective may change the shapes of the variables on some rank.
bool coll_changes_shapes(CollKind kind);

// Auto resolves on the master (to Rsag on CPU processes); ranks never see it.
enum class CollAlgorithm : uint8_t { Auto, Rsag, Hierarchical, Nccl };
const char* coll_algorithm_name(CollAlgorithm algorithm);

struct CollVar {
  int32_t module = -1;
  int32_t var = -1;
};

struct CollDescriptor {
  CollKind kind = CollKind::AllReduce;
  CollOp op = CollOp::Sum;
  CollAlgorithm algorithm = CollAlgorithm::Rsag;
  int32_t target = 0;              // set_value / get_value: the rank
  int64_t num_packs = 1;
  uint64_t chunk_bytes = 0;        // 0: kDefaultChunkBytes
  uint64_t small_bytes = 0;        // 0: kDefaultSmallBytes
  int32_t group_size = 0;          // hierarchical
  uint8_t in_place = 1;            // reduce
  uint8_t nd_up = 1;               // gather
  uint64_t stamp = 0;              // echoed in shape reports, so stale ones are never read
  std::string staging;             // the staging segment's name
  std::vector<CollVar> vars;
  // The shapes the master recorded: one per variable, or, when per_rank_shapes, N per variable
  // at [v * N + r]. Scatter: the shape of one row (the dimensions after axis 0). Stored flat (no
  // allocation per shape: descriptors are built and decoded on every collective).
  uint8_t per_rank_shapes = 0;
  std::vector<int64_t> dims;             // every shape's dimensions, concatenated
  std::vector<uint32_t> shape_ends;      // shape s is dims[shape_ends[s-1] (0 for s = 0), shape_ends[s])
  std::vector<int64_t> scatter_rows;     // scatter: [v * N + r] rows rank r receives
  // A weighted all_reduce: rank r first scales its own values by rank_scale[r] (the op is Sum).
  std::vector<double> rank_scale;
  int64_t exact_weight = 0;        // AllReduceExact: the rows of every rank's shards together
  // Multi-node runs: AllReduce and AllReduceExact then combine the nodes' results through the
  // leaders (runtime/node/cluster.h) before the local ranks get them.
  uint8_t across_nodes = 0;

  void add_shape(std::span<const int64_t> shape) {
    dims.insert(dims.end(), shape.begin(), shape.end());
    shape_ends.push_back(uint32_t(dims.size()));
  }
  std::span<const int64_t> shape_at(size_t s) const {
    size_t begin = s == 0 ? 0 : shape_ends.at(s - 1);
    return {dims.data() + begin, shape_ends.at(s) - begin};
  }
  std::span<const int64_t> shape(size_t v, int rank, int nranks) const {
    return shape_at(per_rank_shapes ? v * size_t(nranks) + size_t(rank) : v);
  }
  // Empties every field, keeping the vectors' capacity.
  void clear();
};

// Appends the descriptor to `w`; decodes into `d` (reusing its capacity).
void encode_collective(const CollDescriptor& d, wire::Writer& w);
void decode_collective(std::string_view bytes, CollDescriptor& d);

// What only the master holds for a collective: the values it sends and where results go.
struct MasterIO {
  std::vector<Array> values;                          // set_value: the conformed new values
  Pieces scatter_stream;                              // scatter: rows of ranks 1..N-1, rank-major
  std::vector<std::vector<std::byte>> scatter_buffers;   // rows that had to be gathered or converted
  std::vector<Array> scatter_own;                     // scatter: the master's own new values
  std::vector<Array> outputs;                         // gather, get_value, reduce(in_place=false)
};

// Runs the collective on this rank (`io` on the master only).
void execute_collective(RankContext& ctx, const CollDescriptor& d, MasterIO* io);

// The kind of the Collective command (registered with the process group at start-up).
CommandKind collective_command();
// A worker's side of a Collective command: decodes the payload (inline, or in a segment when it
// was too large), runs the collective, and for shape-changing collectives reports this rank's
// shapes of the variables in its results area (even when it failed), stamped with d.stamp.
void run_collective_rank(RankContext& ctx, std::string_view payload);
// The master reads a worker's report: false when there is none for `stamp`.
bool read_shape_report(std::span<const std::byte> results, uint64_t stamp,
                       std::vector<std::vector<int64_t>>* shapes);

// Payload framing: a first byte 0 and the descriptor inline, or, for descriptors above
// kInlineDescriptorBytes, a first byte 1 and the name and size of the segment holding it.
inline constexpr size_t kInlineDescriptorBytes = size_t(512) << 10;
std::string frame_segment(const std::string& segment, size_t bytes);

}  // namespace synk::rt
