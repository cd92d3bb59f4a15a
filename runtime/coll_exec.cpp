// Per-rank execution of the collectives (see coll_exec.h).
#include "runtime/coll_exec.h"

#include <cstring>
#include <deque>

#include <fmt/format.h>

#include "runtime/coll_hierarchical.h"
#include "runtime/coll_nccl.h"
#include "runtime/coll_rsag.h"
#include "runtime/dtype.h"
#include "runtime/process_group.h"
#include "runtime/wire.h"

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

std::string encode_collective(const CollDescriptor& d) {
  wire::Writer w;
  w.pod(d.kind);
  w.pod(d.op);
  w.pod(d.algorithm);
  w.pod(d.target);
  w.pod(d.num_packs);
  w.pod(d.chunk_bytes);
  w.pod(d.small_bytes);
  w.pod(d.group_size);
  w.pod(d.in_place);
  w.pod(d.nd_up);
  w.pod(d.stamp);
  w.str(d.staging);
  w.vec(d.vars);
  w.pod(d.per_rank_shapes);
  w.pod<uint64_t>(d.shapes.size());
  for (const auto& s : d.shapes) w.vec(s);
  w.vec(d.scatter_rows);
  return w.take();
}

CollDescriptor decode_collective(std::string_view bytes) {
  wire::Reader r(bytes);
  CollDescriptor d;
  d.kind = r.pod<CollKind>();
  d.op = r.pod<CollOp>();
  d.algorithm = r.pod<CollAlgorithm>();
  d.target = r.pod<int32_t>();
  d.num_packs = r.pod<int64_t>();
  d.chunk_bytes = r.pod<uint64_t>();
  d.small_bytes = r.pod<uint64_t>();
  d.group_size = r.pod<int32_t>();
  d.in_place = r.pod<uint8_t>();
  d.nd_up = r.pod<uint8_t>();
  d.stamp = r.pod<uint64_t>();
  d.staging = r.str();
  d.vars = r.vec<CollVar>();
  d.per_rank_shapes = r.pod<uint8_t>();
  uint64_t nshapes = r.pod<uint64_t>();
  if (nshapes > bytes.size()) throw InternalError("collective descriptor: corrupt shape count");
  d.shapes.resize(nshapes);
  for (auto& s : d.shapes) s = r.vec<int64_t>();
  d.scatter_rows = r.vec<int64_t>();
  if (!r.done()) throw InternalError("collective descriptor: trailing bytes");
  return d;
}

std::string frame_inline(const std::string& descriptor) {
  std::string out(1, '\0');
  out += descriptor;
  return out;
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

struct Job {
  RankContext& ctx;
  const CollDescriptor& d;
  MasterIO* io;
  Staging staging;
  int me, n;

  Array& value(size_t v) const {
    const CollVar& cv = d.vars[v];
    return ctx.module(cv.module).values.at(size_t(cv.var));
  }
  const SharedSpec& spec(size_t v) const {
    const CollVar& cv = d.vars[v];
    return ctx.module(cv.module).spec.shareds.at(size_t(cv.var));
  }
  size_t bytes_of(size_t v, const std::vector<int64_t>& shape) const {
    return size_t(shape_size(shape)) * dtype_size(spec(v).dtype);
  }
  // The master's record must match what this rank holds.
  void check_own_shape(size_t v, const std::vector<int64_t>& expected) const {
    const Array& a = value(v);
    if (a.shape != expected)
      throw InternalError(fmt::format("{}: shared variable '{}' on rank {} has shape {}, but the master "
                                      "recorded {}", coll_kind_name(d.kind), spec(v).name, me,
                                      shape_string(a.shape), shape_string(expected)));
  }
  ReduceParams params() const {
    return ReduceParams{d.op, size_t(d.chunk_bytes), size_t(d.small_bytes), d.group_size};
  }
  size_t chunk_cap() const { return size_t(d.chunk_bytes); }

  void run();
  void reduce();
  void broadcast();
  void scatter();
  void gather();
  void all_gather();
  void set_value();
  void get_value();
};

void Job::run() {
  switch (d.kind) {
    case CollKind::Reduce:
    case CollKind::AllReduce: return reduce();
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
  const bool wants_result = d.kind == CollKind::AllReduce || me == 0;
  const bool separate_output = d.kind == CollKind::Reduce && me == 0 && !d.in_place;
  if (separate_output) io->outputs.resize(d.vars.size());
  for (size_t v = 0; v < d.vars.size(); ++v) {
    check_own_shape(v, d.shape(v, me, n));
    if (separate_output) io->outputs[v].resize(spec(v).dtype, d.shape(v, me, n));
  }
  std::deque<Pieces> pieces;   // stable addresses for the packs
  std::vector<ReducePack> packs;
  std::vector<bool> grouped(d.vars.size(), false);
  for (size_t first = 0; first < d.vars.size(); ++first) {
    if (grouped[first]) continue;
    const DType dtype = spec(first).dtype;
    const size_t elem = dtype_size(dtype);
    std::vector<size_t> members;
    size_t total = 0;
    for (size_t v = first; v < d.vars.size(); ++v)
      if (!grouped[v] && spec(v).dtype == dtype) {
        grouped[v] = true;
        members.push_back(v);
        total += size_t(value(v).size());
      }
    for (int64_t p = 0; p < d.num_packs; ++p) {
      const size_t lo = size_t((unsigned __int128)total * uint64_t(p) / uint64_t(d.num_packs));
      const size_t hi = size_t((unsigned __int128)total * uint64_t(p + 1) / uint64_t(d.num_packs));
      if (hi == lo) continue;
      Pieces& in = pieces.emplace_back();
      Pieces* out = wants_result ? &pieces.emplace_back() : nullptr;
      size_t at = 0;   // element offset of member v in the group's concatenation
      for (size_t v : members) {
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
      packs.push_back(ReducePack{dtype, hi - lo, &in, out});
    }
  }
  switch (d.algorithm) {
    case CollAlgorithm::Rsag: return rsag_reduce(staging, packs, params());
    case CollAlgorithm::Hierarchical: return hierarchical_reduce(staging, packs, params());
    case CollAlgorithm::Nccl: return nccl_reduce(ctx, packs, d.op, d.kind == CollKind::Reduce);
    case CollAlgorithm::Auto: break;
  }
  throw InternalError("collective: unresolved algorithm");
}

void Job::broadcast() {
  std::vector<uint64_t> lengths(size_t(n), 0);
  Pieces mine, dest;
  for (size_t v = 0; v < d.vars.size(); ++v) {
    const std::vector<int64_t>& shape = d.shape(v, 0, n);
    lengths[0] += bytes_of(v, shape);
    if (me == 0) {
      check_own_shape(v, shape);
      mine.add(value(v).bytes.data(), value(v).bytes.size());
    } else {
      value(v).resize(spec(v).dtype, shape);
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
      length[size_t(r)] += uint64_t(d.scatter_rows[v * size_t(n) + size_t(r)]) * bytes_of(v, d.shapes[v]);
    total += length[size_t(r)];
  }
  Pieces dest;
  if (me > 0) {
    for (size_t v = 0; v < d.vars.size(); ++v) {
      std::vector<int64_t> shape = d.shapes[v];
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
      std::vector<int64_t> shape = d.shape(v, 0, n);
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
    std::vector<int64_t> shape = d.shape(v, 0, n);
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
    lengths[0] += bytes_of(v, d.shapes[v]);
    if (me == 0) mine.add(io->values[v].bytes.data(), io->values[v].bytes.size());
    if (me == d.target) {
      value(v).resize(spec(v).dtype, d.shapes[v]);
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
    lengths[size_t(d.target)] += bytes_of(v, d.shapes[v]);
    if (me == d.target) {
      check_own_shape(v, d.shapes[v]);
      mine.add(value(v).bytes.data(), value(v).bytes.size());
    }
    if (me == 0) {
      io->outputs[v].resize(spec(v).dtype, d.shapes[v]);
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
  for (const CollVar& cv : d.vars) w.vec(ctx.module(cv.module).values.at(size_t(cv.var)).shape);
  std::byte* out = ctx.results(w.bytes().size());
  std::memcpy(out, w.bytes().data(), w.bytes().size());
}

}  // namespace

void execute_collective(RankContext& ctx, const CollDescriptor& d, MasterIO* io) {
  std::span<std::byte> segment = ctx.map_writable(d.staging);
  Job job{ctx, d, io, Staging(ctx, segment.data(), segment.size()), ctx.rank(), ctx.size()};
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
  CollDescriptor d = decode_collective(unframe(ctx, payload));
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

}  // namespace synk::rt
