// Arrays across nodes (across_nodes.h): serialisation of arrays for the Cluster's byte exchanges
// and the element-wise reduction of their values.
#include "runtime/coll/across_nodes.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/wire.h"
#include "runtime/data/dtype.h"
#include "runtime/node/cluster.h"

namespace synk::rt {
namespace {

std::string encode_arrays(const std::vector<Array>& arrays) {
  wire::Writer w;
  w.pod<uint32_t>(uint32_t(arrays.size()));
  for (const Array& a : arrays) {
    w.pod<uint8_t>(uint8_t(a.dtype));
    w.vec(a.shape);
    w.str(std::string_view(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size()));
  }
  return w.take();
}

std::vector<Array> decode_arrays(const std::string& bytes) {
  wire::Reader r(bytes);
  std::vector<Array> arrays(r.pod<uint32_t>());
  for (Array& a : arrays) {
    DType dtype = DType(r.pod<uint8_t>());
    std::vector<int64_t> shape = r.vec<int64_t>();
    std::string data = r.str();
    a.resize(dtype, std::move(shape));
    if (data.size() != a.bytes.size()) throw InternalError("arrays across nodes: size mismatch");
    std::memcpy(a.bytes.data(), data.data(), data.size());
  }
  return arrays;
}

Array converted(const Array& a, DType to) {
  Array out;
  out.resize(to, a.shape);
  convert_elements(a.bytes.data(), a.dtype, out.bytes.data(), to, a.size());
  return out;
}

}  // namespace

NodeOp node_op(CollOp op) {
  switch (op) {
    case CollOp::Avg:
    case CollOp::Sum: return NodeOp::Sum;
    case CollOp::Prod: return NodeOp::Prod;
    case CollOp::Max: return NodeOp::Max;
    case CollOp::Min: return NodeOp::Min;
  }
  throw InternalError("node_op: unknown op");
}

namespace {

// Up to this many bytes a reduction in node order over 3 or more nodes gathers every node's
// elements in one round instead of two rounds of parts (docs/performance/collectives.md).
constexpr size_t kOneRoundBytes = size_t(2) << 10;

// Floating-point sums and products depend on the order of their operands.
bool order_matters(DType dtype, CollOp op) {
  return (dtype == DType::F32 || dtype == DType::F64) && op != CollOp::Max && op != CollOp::Min;
}

// Max and min of floats are not left to MPI: MPI_MAX / MPI_MIN may drop a NaN, depending on which
// node holds it (and on each node differently), where synk's arithmetic propagates it from any node.
bool nan_sensitive(DType dtype, CollOp op) {
  return (dtype == DType::F32 || dtype == DType::F64) && (op == CollOp::Max || op == CollOp::Min);
}

// Reduce-scatter and all-gather between the leaders with synk's arithmetic: node n reduces part n
// of the buffer over every node in node order, then every node gets every reduced part. Element
// i is x_0[i] op x_1[i] op ... whatever the length, so pieces (the overlapped step's buckets)
// give the bits of the whole, with any MPI.
void reduce_parts_in_node_order(Cluster& cl, std::byte* data, size_t count, DType dtype, CollOp op) {
  const size_t elem = dtype_size(dtype);
  const int nodes = cl.nodes(), me = cl.node();
  thread_local std::vector<size_t> bounds;
  thread_local std::vector<std::byte> gathered;
  thread_local std::vector<const std::byte*> sources;
  bounds.resize(size_t(nodes) + 1);
  for (int n = 0; n <= nodes; ++n)
    bounds[size_t(n)] = size_t((unsigned __int128)count * unsigned(n) / unsigned(nodes)) * elem;
  const size_t mine = bounds[size_t(me) + 1] - bounds[size_t(me)];
  gathered.resize(mine * size_t(nodes));
  cl.exchange_parts(data, bounds, gathered.data());
  sources.clear();
  for (int n = 0; n < nodes; ++n) sources.push_back(gathered.data() + size_t(n) * mine);
  reduce_sources(dtype, op == CollOp::Avg ? CollOp::Sum : op, sources.data(), nodes, data + bounds[size_t(me)],
                 mine / elem, 0);
  cl.all_gather_parts(data, bounds);
}

// One round: every node's elements to every node, each reducing them all in node order.
void reduce_gathered_in_node_order(Cluster& cl, std::byte* data, size_t count, DType dtype, CollOp op) {
  const size_t bytes = count * dtype_size(dtype);
  thread_local std::vector<std::byte> gathered;
  thread_local std::vector<const std::byte*> sources;
  gathered.resize(bytes * size_t(cl.nodes()));
  cl.all_gather_equal(data, bytes, gathered.data());
  sources.clear();
  for (int n = 0; n < cl.nodes(); ++n) sources.push_back(gathered.data() + size_t(n) * bytes);
  reduce_sources(dtype, op == CollOp::Avg ? CollOp::Sum : op, sources.data(), cl.nodes(), data, count, 0);
}

}  // namespace

void reduce_over_nodes(void* data, size_t count, DType dtype, CollOp op) {
  Cluster& cl = *cluster();
  std::byte* bytes_at = static_cast<std::byte*>(data);
  const size_t bytes = count * dtype_size(dtype);
  const bool nan = nan_sensitive(dtype, op);
  const bool in_order = (order_matters(dtype, op) || nan) && cl.splits_over_nodes(bytes);
  if (cl.gather_beats_all_reduce(bytes) || (in_order && bytes <= kOneRoundBytes) || (nan && !in_order))
    return reduce_gathered_in_node_order(cl, bytes_at, count, dtype, op);
  if (in_order) return reduce_parts_in_node_order(cl, bytes_at, count, dtype, op);
  cl.all_reduce(data, count, dtype, node_op(op));
}

void all_reduce_across_nodes(std::vector<Array>& arrays, CollOp op, const char* what) {
  Cluster& cl = *cluster();
  for (Array& a : arrays) {
    const bool half = a.dtype == DType::F16 || a.dtype == DType::BF16;
    Array wide;
    if (half) wide = converted(a, DType::F32);
    Array& x = half ? wide : a;
    cross_node(what, [&] { reduce_over_nodes(x.bytes.data(), size_t(x.size()), x.dtype, op); });
    if (op == CollOp::Avg) scale_values(x.dtype, x.bytes.data(), size_t(x.size()), 1.0 / cl.nodes());
    if (half) a = converted(wide, a.dtype);
  }
}

void all_reduce_values_across_nodes(std::span<Array* const> arrays, std::span<const std::string* const> names,
                                    CollOp op, const char* what) {
  Cluster& cl = *cluster();
  cross_node(what, [&] {
    for (size_t v = 0; v < arrays.size(); ++v) {
      Array& a = *arrays[v];
      try {
        reduce_over_nodes(a.bytes.data(), size_t(a.size()), a.dtype, op);
      } catch (const LengthMismatch& e) {
        throw UsageError(fmt::format("{}; this node's ranks hold '{}' as {}{}: either it has another shape on "
                                     "another node (across nodes every rank's value must have the same shape), or "
                                     "the leaders are not in the same collective (one made a call or collective "
                                     "the others did not; SYNK_CHECK_NODES=1 names what each did)",
                                     e.what(), *names[v], dtype_name(a.dtype), shape_string(a.shape)));
      }
    }
  });
  if (op == CollOp::Avg)
    for (Array* a : arrays) scale_values(a->dtype, a->bytes.data(), size_t(a->size()), 1.0 / cl.nodes());
}

void broadcast_across_nodes(std::vector<Array>& arrays, int root, const char* what) {
  Cluster& cl = *cluster();
  std::string bytes = cl.node() == root ? encode_arrays(arrays) : std::string();
  cross_node(what, [&] { cl.broadcast(bytes, root); });
  if (cl.node() != root) arrays = decode_arrays(bytes);
}

std::vector<Array> scatter_across_nodes(const std::vector<std::vector<Array>>& per_node, int root, const char* what) {
  Cluster& cl = *cluster();
  std::vector<std::string> parts;
  if (cl.node() == root)
    for (const std::vector<Array>& arrays : per_node) parts.push_back(encode_arrays(arrays));
  std::string mine;
  cross_node(what, [&] { mine = cl.scatter(parts, root); });
  return decode_arrays(mine);
}

std::vector<Array> concat_across_nodes(const std::vector<Array>& mine, const std::vector<std::string>& names,
                                       const char* what) {
  const std::vector<std::vector<Array>> all = all_gather_across_nodes(mine, what);
  std::vector<Array> out(mine.size());
  for (size_t v = 0; v < mine.size(); ++v) {
    const Array& first = all[0].at(v);
    std::vector<int64_t> shape = first.shape;
    if (shape.empty()) throw InternalError(fmt::format("{}: a scalar cannot be concatenated", what));
    shape[0] = 0;
    for (size_t n = 0; n < all.size(); ++n) {
      const Array& a = all[n].at(v);
      if (a.dtype != first.dtype || a.shape.size() != first.shape.size() ||
          !std::equal(a.shape.begin() + 1, a.shape.end(), first.shape.begin() + 1))
        throw UsageError(fmt::format("{}: '{}' is {}{} on node {} but {}{} on node 0; across nodes the values "
                                     "must agree past axis 0", what, names.at(v), dtype_name(a.dtype),
                                     shape_string(a.shape), n, dtype_name(first.dtype), shape_string(first.shape)));
      shape[0] += a.shape[0];
    }
    out[v].resize(first.dtype, shape);
    size_t at = 0;
    for (size_t n = 0; n < all.size(); ++n) {
      const Array& a = all[n][v];
      std::memcpy(out[v].bytes.data() + at, a.bytes.data(), a.bytes.size());
      at += a.bytes.size();
    }
  }
  return out;
}

std::vector<std::vector<Array>> all_gather_across_nodes(const std::vector<Array>& mine, const char* what) {
  Cluster& cl = *cluster();
  std::vector<std::string> all;
  const std::string bytes = encode_arrays(mine);
  cross_node(what, [&] { all = cl.all_gather(bytes); });
  std::vector<std::vector<Array>> out;
  for (const std::string& b : all) out.push_back(decode_arrays(b));
  return out;
}

}  // namespace synk::rt
