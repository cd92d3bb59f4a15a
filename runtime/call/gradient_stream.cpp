// The engine's side of the overlapped gradient all-reduce (gradient_stream.h): the hooks the
// collectives layer registers, the master's decision whether a call streams, and the per-rank
// scope that starts, feeds and always ends the helper.
#include "runtime/call/gradient_stream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/call/call_plan.h"
#include "runtime/call/registry.h"
#include "runtime/group/backend.h"
#include "runtime/group/process_group.h"
#include "runtime/node/cluster.h"

namespace synk::rt {

namespace {
StreamHooks g_hooks;
}  // namespace

void register_stream_hooks(const StreamHooks& hooks) { g_hooks = hooks; }

namespace {

// Why buckets across nodes would not keep the one buffer's bits, or the helper could not call
// MPI; null when they stream. Buckets keep the bits when every cross-node sum, of a bucket or of
// the whole update, adds in node order whatever its length (Cluster::sums_in_node_order).
const char* why_not_across_nodes(const Cluster& cl, uint64_t update_bytes) {
  if (!cl.serialized_threads()) return "MPI granted less than MPI_THREAD_SERIALIZED, so the helper thread cannot call it";
  if (!cl.sums_in_node_order(update_bytes))
    return "more than 16 nodes: float sums go to MPI_Allreduce, whose order of additions depends on the length";
  return nullptr;
}

// The call takes the one all_reduce after it. SYNK_VERBOSE=1 says why, once per function and reason.
StreamPlan falls_back(const FunctionSignature& sig, const char* why) {
  static const bool verbose = [] {
    const char* v = std::getenv("SYNK_VERBOSE");
    return v && *v && std::string(v) != "0";
  }();
  static std::set<std::pair<std::string, std::string>> told;
  if (verbose && told.emplace(sig.name, why).second)
    std::fprintf(stderr, "synk: '%s' with overlap takes the one all_reduce after the call: %s\n", sig.name.c_str(), why);
  return StreamPlan{};
}

}  // namespace

StreamPlan plan_stream(ProcessGroup* group, const StreamRequest& request, const FunctionSignature& sig,
                       const ModuleEntry& module, const CallPlan& plan) {
  StreamPlan none;
  const Cluster* nodes = cluster();
  if (request.update < 0) return none;
  if (size_t(request.update) >= sig.updates.size())
    throw InternalError(fmt::format("call of '{}': update #{} to stream, but it has {} updates", sig.name,
                                    request.update, sig.updates.size()));
  if (!g_hooks.start || !g_hooks.prepare || !group) return none;
  if (plan.micro_shard_rows > 0 || plan.empty_call) return none;   // a deterministic step asks for none
  if (active_backend() != Backend::Cpu)
    return falls_back(sig, "the GPU backend (NCCL on a stream of its own is not built yet)");
  const std::vector<int64_t> weights = rank_weights(plan);
  if (weights.empty() || std::none_of(weights.begin(), weights.end(), [](int64_t w) { return w > 0; })) return none;
  for (int r = 0; r < plan.nranks; ++r)
    if (rank_parts(plan, r).size() > 1) return falls_back(sig, "num_slices > 1");
  const Array& value = module.values.at(size_t(sig.updates[size_t(request.update)].shared));
  if (!(value.dtype == DType::F32 || value.dtype == DType::F64) || value.bytes.empty())
    return falls_back(sig, "the gradient is not a non-empty f32 or f64 variable");
  if (nodes) {
    if (const char* why = why_not_across_nodes(*nodes, value.bytes.size())) return falls_back(sig, why);
  } else if (group->size() < 2) {
    return falls_back(sig, "a single rank: nothing to average");
  }
  StreamPlan p;
  p.update = request.update;
  p.bucket_bytes = request.bucket_bytes > 0 ? request.bucket_bytes : kDefaultBucketBytes;
  p.total_bytes = value.bytes.size();
  p.dtype = value.dtype;
  // The step's one-buffer reduction (TrainStep::reduce_gradient) weighs unequal rows the same way.
  if (std::any_of(weights.begin(), weights.end(), [&](int64_t w) { return w != weights.front(); })) {
    p.rank_scale = weight_shares(std::vector<double>(weights.begin(), weights.end()));
    if (nodes) {   // all_reduce_weighted across nodes scales by the global shares too
      const auto first = p.rank_scale.begin() + ptrdiff_t(cluster_node()) * group->size();
      p.rank_scale = std::vector<double>(first, first + group->size());
    }
  }
  p.across_nodes = nodes ? 1 : 0;
  p.staging = g_hooks.prepare(*group);
  return p;
}

StreamScope::StreamScope(RankContext* ctx, const StreamPlan& plan) : plan_(plan) {
  if (plan.update < 0) return;
  if (!ctx || !g_hooks.start) throw InternalError("a streamed call reached a rank without the stream's helper");
  stream_ = g_hooks.start(*ctx, plan);
}

StreamScope::~StreamScope() {
  if (attached_) attached_->stream_update(-1, nullptr);
  if (stream_) stream_->abandon();
}

void StreamScope::attach(CompiledFunction& fn) {
  if (!stream_) return;
  fn.stream_update(plan_.update, stream_.get());
  attached_ = &fn;
}

void StreamScope::finish_without_rows(Array& value) {
  if (!stream_) return;
  stream_->begin(value.bytes.data(), value.bytes.size());
  stream_->finish();
  stream_.reset();
}

void StreamScope::finish(CompiledFunction& fn, std::span<Array> updates) {
  if (!stream_) return;
  fn.stream_update(-1, nullptr);
  attached_ = nullptr;
  if (!stream_->begun()) {
    Array& value = updates[size_t(plan_.update)];
    stream_->begin(value.bytes.data(), value.bytes.size());
  }
  stream_->finish();
  stream_.reset();
}

}  // namespace synk::rt
