// The gradient all-reduce that overlaps the backward pass, as the call engine sees it. A training
// step's gradient call may ask for one update (the flat gradient) to be averaged over the ranks
// during the call: every rank then runs a helper thread that reduces the update in buckets, last
// bucket first (the backward pass finishes the last layers' gradients first), each as soon as the
// compiled function reports all its bytes final (UpdateSink). The update each rank then holds is
// the average, bit for bit what an all_reduce of the variable after the call would give.
//
// The engine only plans and drives it; the collectives layer (runtime/coll/bucket_stream.cpp),
// which sits above the engine, registers the implementation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "runtime/call/descriptor.h"

namespace synk::rt {

class ProcessGroup;
class RankContext;

// What the caller asks for (CallRequest::stream).
struct StreamRequest {
  int32_t update = -1;          // index into the signature's updates; -1: no streaming
  uint64_t bucket_bytes = 0;    // 0: kDefaultBucketBytes
};

// What every rank is told (CallMessage::stream) once the master found the call fit for it.
struct StreamPlan {
  int32_t update = -1;          // -1: the call does not stream
  uint64_t bucket_bytes = 0;
  uint64_t total_bytes = 0;     // the update's size, the same on every rank
  DType dtype = DType::F32;
  std::string staging;          // the collectives' staging segment
  // Empty: the plain average (every rank has the same rows). Else each rank's share of the rows
  // (weight_shares): each bucket is scaled by it and summed, as all_reduce_weighted does. Across
  // nodes: the shares of this node's ranks, in local rank order.
  std::vector<double> rank_scale;
  // 1: several nodes; after the node's reduction the leader's helper reduces each bucket with the
  // other leaders, as the one-buffer all_reduce across nodes does, and hands it back to the
  // node's ranks.
  uint8_t across_nodes = 0;
  bool operator==(const StreamPlan&) const = default;
};

// The bucket size when the caller gives none: docs/performance/overlap.md.
inline constexpr uint64_t kDefaultBucketBytes = uint64_t(1) << 20;

// One rank's helper for one call. Its thread starts with it; every bucket must be handed over on
// every rank (finish() or abandon()), or the peers' all-reduce waits for this rank.
class GradientStream : public UpdateSink {
 public:
  // Every byte is final: waits until the last bucket is reduced (while watching the group), and
  // rethrows the helper thread's error.
  virtual void finish() = 0;
  // After a failure on this rank: hands over every bucket as it is (the call fails, so nobody
  // keeps the result), joins the thread, never throws.
  virtual void abandon() noexcept = 0;
  // Whether begin() was called.
  virtual bool begun() const = 0;
};

struct StreamHooks {
  // The master, before the call's command: readies the staging area; returns its segment's name.
  std::string (*prepare)(ProcessGroup& group) = nullptr;
  // Every rank: starts the helper thread for `plan`.
  std::unique_ptr<GradientStream> (*start)(RankContext& ctx, const StreamPlan& plan) = nullptr;
};
void register_stream_hooks(const StreamHooks& hooks);

struct CallPlan;
struct FunctionSignature;
struct ModuleEntry;

// The master: what the call streams. Nothing (update -1) unless it was asked for and the call is
// one the helper can average in place: on the CPU, several ranks on one node, or any number on
// each of several nodes whose transport lets the helper thread call it and sums in node order
// (Cluster::sums_in_node_order: else buckets would not give the one buffer's bits),
// every rank with at most one part (the same number of rows everywhere: the plain mean an
// all_reduce with op avg computes; different numbers, or a rank without rows: the weighted mean
// of all_reduce_weighted), no micro-shards, and a float update.
StreamPlan plan_stream(ProcessGroup* group, const StreamRequest& request, const FunctionSignature& sig,
                       const ModuleEntry& module, const CallPlan& plan);

// One rank's use of the helper in one call (execute_rank): started at construction when the plan
// streams; the compiled function reports into it during run(); finish() after the run; on any
// other way out the destructor abandons it, so the peers are never left waiting.
class StreamScope {
 public:
  StreamScope(RankContext* ctx, const StreamPlan& plan);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

  void attach(CompiledFunction& fn);
  // After run(): `updates` are the function's; the streamed one is averaged on return.
  void finish(CompiledFunction& fn, std::span<Array> updates);
  // A rank without rows runs no part: `value` (a copy of the update's current value, which counts
  // for nothing: its share is 0) goes through the buckets and holds the average on return.
  void finish_without_rows(Array& value);
  bool active() const { return stream_ != nullptr; }

 private:
  const StreamPlan& plan_;
  std::unique_ptr<GradientStream> stream_;
  CompiledFunction* attached_ = nullptr;
};

}  // namespace synk::rt
