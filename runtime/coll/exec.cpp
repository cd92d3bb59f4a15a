// Per-rank execution of the collectives (see coll_exec.h).
#include "runtime/coll/exec.h"
#include "runtime/coll/bucket_stream.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/coll/exact_sum.h"
#include "runtime/coll/across_nodes.h"
#include "runtime/coll/hierarchical.h"
#include "runtime/coll/nccl.h"
#include "runtime/coll/rsag.h"
#include "runtime/data/dtype.h"
#include "runtime/group/process_group.h"
#include "runtime/call/registry.h"
#include "runtime/trace/trace.h"
#include "base/wire.h"

namespace synk::rt {

const char* coll_kind_name(CollKind kind) {
  switch (kind) {
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Scatter: return "scatter";
    case CollKind::Gather: return "gather";
    case CollKind::AllGather: return "all_gather";
    case CollKind::Reduce: return "reduce";
    case CollKind::AllReduce: return "all_reduce";
    case CollKind::SetValue: return "set_value";
    case CollKind::GetValue: return "get_value";
    case CollKind::AllReduceExact: return "exact all_reduce";
  }
  return "?";
}

bool coll_changes_shapes(CollKind kind) {
  return kind == CollKind::Broadcast || kind == CollKind::Scatter || kind == CollKind::AllGather ||
         kind == CollKind::SetValue;
}

const char* coll_algorithm_name(CollAlgorithm algorithm) {
  switch (algorithm) {
    case CollAlgorithm::Auto: return "auto";
    case CollAlgorithm::Rsag: return "rsag";
    case CollAlgorithm::Hierarchical: return "hierarchical";
    case CollAlgorithm::Nccl: return "nccl";
  }
  return "?";
}

// --- Descriptor encoding ------------------------------------------------------------------------

void CollDescriptor::clear() {
  kind = CollKind::AllReduce;
  op = CollOp::Sum;
  algorithm = CollAlgorithm::Rsag;
  target = 0;
  num_packs = 1;
  chunk_bytes = small_bytes = 0;
  group_size = 0;
  in_place = nd_up = 1;
  stamp = 0;
  per_rank_shapes = 0;
  staging.clear();
  vars.clear();
  dims.clear();
  shape_ends.clear();
  scatter_rows.clear();
  rank_scale.clear();
  exact_weight = 0;
  across_nodes = 0;
}

namespace {
// The descriptor's scalars, in one piece (one append, one read).
struct Header {
  CollKind kind;
  CollOp op;
  CollAlgorithm algorithm;
  uint8_t in_place, nd_up, per_rank_shapes, across_nodes;
  int32_t target, group_size;
  int64_t num_packs;
  uint64_t chunk_bytes, small_bytes, stamp;
  int64_t exact_weight;
};
}  // namespace

void encode_collective(const CollDescriptor& d, wire::Writer& w) {
  w.pod(Header{d.kind, d.op, d.algorithm, d.in_place, d.nd_up, d.per_rank_shapes, d.across_nodes, d.target, d.group_size,
               d.num_packs, d.chunk_bytes, d.small_bytes, d.stamp, d.exact_weight});
  w.str(d.staging);
  w.vec(d.vars);
  w.vec(d.dims);
  w.vec(d.shape_ends);
  w.vec(d.scatter_rows);
  w.vec(d.rank_scale);
}

void decode_collective(std::string_view bytes, CollDescriptor& d) {
  wire::Reader r(bytes);
  const Header h = r.pod<Header>();
  d.kind = h.kind;
  d.op = h.op;
  d.algorithm = h.algorithm;
  d.in_place = h.in_place;
  d.nd_up = h.nd_up;
  d.per_rank_shapes = h.per_rank_shapes;
  d.across_nodes = h.across_nodes;
  d.target = h.target;
  d.group_size = h.group_size;
  d.num_packs = h.num_packs;
  d.chunk_bytes = h.chunk_bytes;
  d.small_bytes = h.small_bytes;
  d.stamp = h.stamp;
  d.exact_weight = h.exact_weight;
  r.str_into(d.staging);
  r.vec_into(d.vars);
  r.vec_into(d.dims);
  r.vec_into(d.shape_ends);
  r.vec_into(d.scatter_rows);
  r.vec_into(d.rank_scale);
  if (!r.done()) throw InternalError("collective descriptor: trailing bytes");
  for (size_t s = 0; s < d.shape_ends.size(); ++s)
    if (d.shape_ends[s] > d.dims.size() || (s > 0 && d.shape_ends[s] < d.shape_ends[s - 1]))
      throw InternalError("collective descriptor: corrupt shapes");
}

std::string frame_segment(const std::string& segment, size_t bytes) {
  wire::Writer w;
  w.pod<uint8_t>(1);
  w.str(segment);
  w.pod<uint64_t>(bytes);
  return w.take();
}

namespace {

std::string_view unframe(RankContext& ctx, std::string_view payload) {
  if (payload.empty()) throw InternalError("collective: empty payload");
  if (payload[0] == '\0') return payload.substr(1);
  wire::Reader r(payload.substr(1));
  std::string segment = r.str();
  uint64_t bytes = r.pod<uint64_t>();
  return std::string_view(reinterpret_cast<const char*>(ctx.map(segment)), bytes);
}

// --- Per-rank helpers ---------------------------------------------------------------------------

std::vector<int64_t> as_vector(std::span<const int64_t> s) { return {s.begin(), s.end()}; }

// Storage reused by every collective of this process (no allocation per call once warm).
struct Scratch {
  std::vector<Pieces> pieces;
  std::vector<ReducePack> packs;
  std::vector<size_t> members;
  std::vector<uint8_t> grouped;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

struct Job {
  RankContext& ctx;
  const CollDescriptor& d;
  MasterIO* io;
  Staging staging;
  int me, n;

  Array& value(size_t v) const {
    const CollVar& cv = d.vars[v];
    return module_on_rank(ctx, cv.module).values.at(size_t(cv.var));
  }
  const SharedSpec& spec(size_t v) const {
    const CollVar& cv = d.vars[v];
    return module_on_rank(ctx, cv.module).spec.shareds.at(size_t(cv.var));
  }
  size_t bytes_of(size_t v, std::span<const int64_t> shape) const {
    size_t count = 1;
    for (int64_t dim : shape) count *= size_t(dim);
    return count * dtype_size(spec(v).dtype);
  }
  // The master's record must match what this rank holds.
  void check_own_shape(size_t v, std::span<const int64_t> expected) const {
    const Array& a = value(v);
    if (!std::equal(a.shape.begin(), a.shape.end(), expected.begin(), expected.end()))
      throw InternalError(fmt::format("{}: shared variable '{}' on rank {} has shape {}, but the master "
                                      "recorded {}", coll_kind_name(d.kind), spec(v).name, me,
                                      shape_string(a.shape), shape_string(as_vector(expected))));
  }
  ReduceParams params() const {
    return ReduceParams{d.op, size_t(d.chunk_bytes), size_t(d.small_bytes), d.group_size};
  }
  size_t chunk_cap() const { return size_t(d.chunk_bytes); }

  void run();
  void reduce();
  void reduce_exact();
  void reduce_flat(DType dtype, CollOp op, void* data, size_t count);
  void across_nodes_flat(DType dtype, CollOp op, void* data, size_t count);
  void across_nodes_values();
  void broadcast_flat(void* data, size_t bytes);
  void broadcast();
  void scatter();
  void gather();
  void all_gather();
  void set_value();
  void get_value();
};

void Job::run() {
  switch (d.kind) {
    case CollKind::Reduce: return reduce();
    case CollKind::AllReduce:
      if (n > 1) {
        reduce();
      } else if (!d.rank_scale.empty()) {   // one rank per node: its scaled values are the node's sum
        for (size_t v = 0; v < d.vars.size(); ++v)
          scale_values(spec(v).dtype, value(v).bytes.data(), size_t(value(v).size()), d.rank_scale.at(0));
      }
      if (d.across_nodes) across_nodes_values();
      return;
    case CollKind::AllReduceExact: return reduce_exact();
    case CollKind::Broadcast: return broadcast();
    case CollKind::Scatter: return scatter();
    case CollKind::Gather: return gather();
    case CollKind::AllGather: return all_gather();
    case CollKind::SetValue: return set_value();
    case CollKind::GetValue: return get_value();
  }
}

// Reductions: variables grouped by dtype (in order of first appearance); each group's
// concatenation is split into num_packs packs of nearly equal element counts (boundaries may fall
// inside a variable); each pack is reduced as one flat buffer.
void Job::reduce() {
  // Across nodes only the master needs the node's result (it all-reduces it with the other
  // nodes and hands the total to every local rank): the workers skip copying it out, so the node
  // runs reduce-scatter, the cross-node step, and one all-gather (the broadcast).
  const bool wants_result = (d.kind == CollKind::AllReduce && !d.across_nodes) || me == 0;
  const bool separate_output = d.kind == CollKind::Reduce && me == 0 && !d.in_place;
  if (separate_output) io->outputs.resize(d.vars.size());
  for (size_t v = 0; v < d.vars.size(); ++v) {
    check_own_shape(v, d.shape(v, me, n));
    if (separate_output) io->outputs[v].resize(spec(v).dtype, as_vector(d.shape(v, me, n)));
  }
  if (!d.rank_scale.empty())   // all_reduce is in place: the scaled values are overwritten by the sum
    for (size_t v = 0; v < d.vars.size(); ++v)
      scale_values(spec(v).dtype, value(v).bytes.data(), size_t(value(v).size()), d.rank_scale.at(size_t(me)));
  Scratch& sc = scratch();
  // Every pack takes two Pieces; reserve them all first so their addresses stay put.
  const size_t most = 2 * d.vars.size() * size_t(d.num_packs);
  if (sc.pieces.size() < most) sc.pieces.resize(most);
  size_t used = 0;
  auto fresh = [&]() -> Pieces& {
    Pieces& p = sc.pieces[used++];
    p.clear();
    return p;
  };
  sc.packs.clear();
  sc.grouped.assign(d.vars.size(), 0);
  for (size_t first = 0; first < d.vars.size(); ++first) {
    if (sc.grouped[first]) continue;
    const DType dtype = spec(first).dtype;
    const size_t elem = dtype_size(dtype);
    sc.members.clear();
    size_t total = 0;
    for (size_t v = first; v < d.vars.size(); ++v)
      if (!sc.grouped[v] && spec(v).dtype == dtype) {
        sc.grouped[v] = 1;
        sc.members.push_back(v);
        total += size_t(value(v).size());
      }
    const uint64_t packs = uint64_t(d.num_packs);
    auto boundary = [&](uint64_t p) {
      return total <= UINT64_MAX / packs ? size_t(total * p / packs)
                                         : size_t((unsigned __int128)total * p / packs);
    };
    for (uint64_t p = 0; p < packs; ++p) {
      const size_t lo = boundary(p), hi = boundary(p + 1);
      if (hi == lo) continue;
      Pieces& in = fresh();
      Pieces* out = wants_result ? &fresh() : nullptr;
      size_t at = 0;   // element offset of member v in the group's concatenation
      for (size_t v : sc.members) {
        const size_t count = size_t(value(v).size());
        const size_t a = std::max(lo, at), b = std::min(hi, at + count);
        if (a < b) {
          in.add(value(v).bytes.data() + (a - at) * elem, (b - a) * elem);
          if (out) {
            Array& dst = separate_output ? io->outputs[v] : value(v);
            out->add(dst.bytes.data() + (a - at) * elem, (b - a) * elem);
          }
        }
        at += count;
      }
      sc.packs.push_back(ReducePack{dtype, hi - lo, &in, out});
    }
  }
  switch (d.algorithm) {
    case CollAlgorithm::Rsag: return rsag_reduce(staging, sc.packs, params());
    case CollAlgorithm::Hierarchical: return hierarchical_reduce(staging, sc.packs, params());
    case CollAlgorithm::Nccl: return nccl_reduce(ctx, sc.packs, d.op, d.kind == CollKind::Reduce);
    case CollAlgorithm::Auto: break;
  }
  throw InternalError("collective: unresolved algorithm");
}

// The exact all-reduce (exact_sum.h) of every variable's micro-shard values on this rank, all
// variables in one flat buffer per pass: the exponents (max of int32), then the fixed-point sums
// (sum of int64), both through rsag; then every rank finishes the same integers into the values.
void Job::reduce_exact() {
  thread_local std::vector<exact::Terms> terms;
  thread_local std::vector<int32_t> exps;
  thread_local std::vector<int64_t> sums;
  terms.resize(d.vars.size());
  size_t total = 0;
  for (size_t v = 0; v < d.vars.size(); ++v) {
    check_own_shape(v, d.shape(v, me, n));
    exact::Terms& t = terms[v];
    t.dtype = spec(v).dtype;
    t.count = size_t(value(v).size());
    t.parts.clear();
    t.weights.clear();
    const ModuleEntry& module = module_on_rank(ctx, d.vars[v].module);
    auto kept = module.micro_parts.find(d.vars[v].var);
    for (size_t k = 0; kept != module.micro_parts.end() && k < kept->second.used; ++k) {
      const Array& part = kept->second.values[k];
      if (part.dtype != t.dtype || size_t(part.size()) != t.count)
        throw InternalError(fmt::format("exact all_reduce: a kept shard of '{}' holds {}{}, the variable {}{}",
                                        spec(v).name, dtype_name(part.dtype), shape_string(part.shape),
                                        dtype_name(t.dtype), shape_string(value(v).shape)));
      t.parts.push_back(part.bytes.data());
      t.weights.push_back(kept->second.weights[k]);
    }
    total += t.count;
  }
  if (total == 0) return;
  const int bits = exact::precision_bits(d.exact_weight);
  exps.assign(total, 0);
  for (size_t v = 0, at = 0; v < d.vars.size(); at += terms[v].count, ++v) exact::max_exponents(terms[v], exps.data() + at);
  reduce_flat(DType::I32, CollOp::Max, exps.data(), total);
  across_nodes_flat(DType::I32, CollOp::Max, exps.data(), total);
  sums.resize(total);
  for (size_t v = 0, at = 0; v < d.vars.size(); at += terms[v].count, ++v)
    exact::fixed_sums(terms[v], exps.data() + at, bits, sums.data() + at);
  reduce_flat(DType::I64, CollOp::Sum, sums.data(), total);
  across_nodes_flat(DType::I64, CollOp::Sum, sums.data(), total);
  for (size_t v = 0, at = 0; v < d.vars.size(); at += terms[v].count, ++v)
    exact::finish(terms[v].dtype, exps.data() + at, sums.data() + at, terms[v].count, bits, d.exact_weight,
                  value(v).bytes.data());
}

// One flat buffer reduced in place on every rank through rsag (one rank: it is the result).
void Job::reduce_flat(DType dtype, CollOp op, void* data, size_t count) {
  if (n == 1) return;
  Pieces values;
  values.add(static_cast<std::byte*>(data), count * dtype_size(dtype));
  const ReducePack pack{dtype, count, &values, &values};
  ReduceParams p = params();
  p.op = op;
  rsag_reduce(staging, std::span(&pack, 1), p);
}

// Multi-node runs (d.across_nodes): this node's reduction, already on every local rank, is
// reduced over the nodes' leaders (runtime/node/cluster.h) and handed back to the local ranks.
// Integer max and sum are exact, so the exact all-reduce stays independent of the rank count.
void Job::across_nodes_flat(DType dtype, CollOp op, void* data, size_t count) {
  if (!d.across_nodes) return;
  if (me == 0) cross_node(coll_kind_name(d.kind), [&] { reduce_over_nodes(data, count, dtype, op); });
  broadcast_flat(data, count * dtype_size(dtype));
}

// The same for an all_reduce: each node's result (in the variables) is combined over the nodes by
// the master, avg as a sum of the nodes' averages divided by the node count (every node has the
// same number of ranks), then the master's values go to the local ranks.
void Job::across_nodes_values() {
  if (me == 0) {
    thread_local std::vector<Array*> values;
    thread_local std::vector<const std::string*> names;
    values.clear();
    names.clear();
    for (size_t v = 0; v < d.vars.size(); ++v) {
      values.push_back(&value(v));
      names.push_back(&spec(v).name);
    }
    all_reduce_values_across_nodes(values, names, d.op, coll_kind_name(d.kind));
  }
  if (n > 1) broadcast();
}

void Job::broadcast_flat(void* data, size_t bytes) {
  broadcast_from_first(staging, static_cast<std::byte*>(data), bytes, chunk_cap());
}

void Job::broadcast() {
  std::vector<uint64_t> lengths(size_t(n), 0);
  Pieces mine, dest;
  for (size_t v = 0; v < d.vars.size(); ++v) {
    std::span<const int64_t> shape = d.shape(v, 0, n);
    lengths[0] += bytes_of(v, shape);
    if (me == 0) {
      check_own_shape(v, shape);
      mine.add(value(v).bytes.data(), value(v).bytes.size());
    } else {
      value(v).resize(spec(v).dtype, as_vector(shape));
      dest.add(value(v).bytes.data(), value(v).bytes.size());
    }
  }
  exchange(staging, ExchangeSpec{lengths, &mine, [this](int s) { return s != me; },
                                 [&dest](int, size_t off, size_t bytes, const std::byte* data) {
                                   dest.write(off, bytes, data);
                                 },
                                 chunk_cap()});
}

void Job::scatter() {
  // Rank r >= 1 receives window [start[r], start[r] + length[r]) of the master's stream.
  std::vector<uint64_t> start(size_t(n), 0), length(size_t(n), 0);
  uint64_t total = 0;
  for (int r = 1; r < n; ++r) {
    start[size_t(r)] = total;
    for (size_t v = 0; v < d.vars.size(); ++v)
      length[size_t(r)] += uint64_t(d.scatter_rows[v * size_t(n) + size_t(r)]) * bytes_of(v, d.shape_at(v));
    total += length[size_t(r)];
  }
  Pieces dest;
  if (me > 0) {
    for (size_t v = 0; v < d.vars.size(); ++v) {
      std::vector<int64_t> shape = as_vector(d.shape_at(v));
      shape.insert(shape.begin(), d.scatter_rows[v * size_t(n) + size_t(me)]);
      value(v).resize(spec(v).dtype, shape);
      dest.add(value(v).bytes.data(), value(v).bytes.size());
    }
  }
  std::vector<uint64_t> lengths(size_t(n), 0);
  lengths[0] = total;
  const uint64_t lo = start[size_t(me)], hi = lo + length[size_t(me)];
  exchange(staging, ExchangeSpec{lengths, me == 0 ? &io->scatter_stream : nullptr,
                                 [this](int) { return me != 0; },
                                 [&](int, size_t off, size_t bytes, const std::byte* data) {
                                   uint64_t a = std::max<uint64_t>(off, lo), b = std::min<uint64_t>(off + bytes, hi);
                                   if (a < b) dest.write(size_t(a - lo), size_t(b - a), data + (a - off));
                                 },
                                 chunk_cap()});
  if (me == 0)
    for (size_t v = 0; v < d.vars.size(); ++v) value(v) = std::move(io->scatter_own[v]);
}

void Job::gather() {
  std::vector<uint64_t> lengths(size_t(n), 0);
  for (int r = 1; r < n; ++r)
    for (size_t v = 0; v < d.vars.size(); ++v) lengths[size_t(r)] += bytes_of(v, d.shape(v, r, n));
  Pieces mine;
  std::vector<Pieces> dest(static_cast<size_t>(n));
  for (size_t v = 0; v < d.vars.size(); ++v) check_own_shape(v, d.shape(v, me, n));
  if (me > 0) {
    for (size_t v = 0; v < d.vars.size(); ++v) mine.add(value(v).bytes.data(), value(v).bytes.size());
  } else {
    io->outputs.resize(d.vars.size());
    for (size_t v = 0; v < d.vars.size(); ++v) {
      std::vector<int64_t> shape = as_vector(d.shape(v, 0, n));
      if (d.nd_up) {
        shape.insert(shape.begin(), n);
      } else {
        for (int r = 1; r < n; ++r) shape[0] += d.shape(v, r, n)[0];
      }
      Array& out = io->outputs[v];
      out.resize(spec(v).dtype, shape);
      size_t at = 0;
      for (int r = 0; r < n; ++r) {
        size_t bytes = bytes_of(v, d.shape(v, r, n));
        if (r == 0 && bytes) std::memcpy(out.bytes.data(), value(v).bytes.data(), bytes);
        else dest[size_t(r)].add(out.bytes.data() + at, bytes);
        at += bytes;
      }
    }
  }
  exchange(staging, ExchangeSpec{lengths, &mine, [this](int) { return me == 0; },
                                 [&dest](int s, size_t off, size_t bytes, const std::byte* data) {
                                   dest[size_t(s)].write(off, bytes, data);
                                 },
                                 chunk_cap()});
}

void Job::all_gather() {
  std::vector<uint64_t> lengths(size_t(n), 0);
  for (int r = 0; r < n; ++r)
    for (size_t v = 0; v < d.vars.size(); ++v) lengths[size_t(r)] += bytes_of(v, d.shape(v, r, n));
  Pieces mine;
  std::vector<Pieces> dest(static_cast<size_t>(n));
  std::vector<Array> out(d.vars.size());
  for (size_t v = 0; v < d.vars.size(); ++v) {
    check_own_shape(v, d.shape(v, me, n));
    mine.add(value(v).bytes.data(), value(v).bytes.size());
    std::vector<int64_t> shape = as_vector(d.shape(v, 0, n));
    for (int r = 1; r < n; ++r) shape[0] += d.shape(v, r, n)[0];
    out[v].resize(spec(v).dtype, shape);
    size_t at = 0;
    for (int r = 0; r < n; ++r) {
      size_t bytes = bytes_of(v, d.shape(v, r, n));
      if (r == me && bytes) std::memcpy(out[v].bytes.data() + at, value(v).bytes.data(), bytes);
      else dest[size_t(r)].add(out[v].bytes.data() + at, bytes);
      at += bytes;
    }
  }
  exchange(staging, ExchangeSpec{lengths, &mine, [this](int s) { return s != me; },
                                 [&dest](int s, size_t off, size_t bytes, const std::byte* data) {
                                   dest[size_t(s)].write(off, bytes, data);
                                 },
                                 chunk_cap()});
  for (size_t v = 0; v < d.vars.size(); ++v) value(v) = std::move(out[v]);
}

void Job::set_value() {
  std::vector<uint64_t> lengths(size_t(n), 0);
  Pieces mine, dest;
  for (size_t v = 0; v < d.vars.size(); ++v) {
    lengths[0] += bytes_of(v, d.shape_at(v));
    if (me == 0) mine.add(io->values[v].bytes.data(), io->values[v].bytes.size());
    if (me == d.target) {
      value(v).resize(spec(v).dtype, as_vector(d.shape_at(v)));
      dest.add(value(v).bytes.data(), value(v).bytes.size());
    }
  }
  exchange(staging, ExchangeSpec{lengths, &mine, [this](int) { return me == d.target; },
                                 [&dest](int, size_t off, size_t bytes, const std::byte* data) {
                                   dest.write(off, bytes, data);
                                 },
                                 chunk_cap()});
}

void Job::get_value() {
  std::vector<uint64_t> lengths(size_t(n), 0);
  Pieces mine, dest;
  if (me == 0) io->outputs.resize(d.vars.size());
  for (size_t v = 0; v < d.vars.size(); ++v) {
    lengths[size_t(d.target)] += bytes_of(v, d.shape_at(v));
    if (me == d.target) {
      check_own_shape(v, d.shape_at(v));
      mine.add(value(v).bytes.data(), value(v).bytes.size());
    }
    if (me == 0) {
      io->outputs[v].resize(spec(v).dtype, as_vector(d.shape_at(v)));
      dest.add(io->outputs[v].bytes.data(), io->outputs[v].bytes.size());
    }
  }
  exchange(staging, ExchangeSpec{lengths, &mine, [this](int) { return me == 0; },
                                 [&dest](int, size_t off, size_t bytes, const std::byte* data) {
                                   dest.write(off, bytes, data);
                                 },
                                 chunk_cap()});
}

void report_shapes(RankContext& ctx, const CollDescriptor& d) {
  if (!coll_changes_shapes(d.kind)) return;
  wire::Writer w;
  w.pod(d.stamp);
  w.pod<uint64_t>(d.vars.size());
  for (const CollVar& cv : d.vars) w.vec(module_on_rank(ctx, cv.module).values.at(size_t(cv.var)).shape);
  std::byte* out = ctx.results(w.bytes().size());
  std::memcpy(out, w.bytes().data(), w.bytes().size());
}

}  // namespace

void execute_collective(RankContext& ctx, const CollDescriptor& d, MasterIO* io) {
  std::span<std::byte> segment = ctx.map_writable(d.staging);
  Job job{ctx, d, io, Staging(ctx, segment.data(), segment.size()), ctx.rank(), ctx.size()};
  trace::Span span(trace::Category::Collective, coll_kind_name(d.kind));
  if (span.active()) {
    int64_t bytes = 0;
    try {   // a missing variable is the job's error to report, with the staging area failed
      for (size_t v = 0; v < d.vars.size(); ++v) bytes += int64_t(job.value(v).bytes.size());
    } catch (...) {
      bytes = -1;
    }
    span.set_detail(fmt::format("{} variable{}, {}", d.vars.size(), d.vars.size() == 1 ? "" : "s",
                                coll_algorithm_name(d.algorithm)),
                    bytes);
  }
  try {
    job.run();
  } catch (const RankError& e) {
    if (!e.group_lost()) job.staging.fail();   // group lost: the segment is gone already
    throw;
  } catch (...) {
    job.staging.fail();
    throw;
  }
}

void run_collective_rank(RankContext& ctx, std::string_view payload) {
  thread_local CollDescriptor d;
  decode_collective(unframe(ctx, payload), d);
  try {
    execute_collective(ctx, d, nullptr);
  } catch (...) {
    report_shapes(ctx, d);
    throw;
  }
  report_shapes(ctx, d);
}

bool read_shape_report(std::span<const std::byte> results, uint64_t stamp,
                       std::vector<std::vector<int64_t>>* shapes) {
  if (results.size() < sizeof(uint64_t)) return false;
  wire::Reader r(std::string_view(reinterpret_cast<const char*>(results.data()), results.size()));
  if (r.pod<uint64_t>() != stamp) return false;
  uint64_t count = r.pod<uint64_t>();
  if (count > results.size()) return false;
  shapes->resize(count);
  for (auto& s : *shapes) s = r.vec<int64_t>();
  return true;
}

// Registered with the process group when the program starts (see process_group.h).
const CommandKind kCollectiveCommand = register_command("collective", run_collective_rank);
[[maybe_unused]] const bool kBucketStreamRegistered = register_bucket_stream();

CommandKind collective_command() { return kCollectiveCommand; }

}  // namespace synk::rt
