// Arrays across nodes (across_nodes.h): serialisation of arrays for the Cluster's byte exchanges
// and the element-wise reduction of their values.
#include "runtime/coll/across_nodes.h"

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

void all_reduce_across_nodes(std::vector<Array>& arrays, CollOp op, const char* what) {
  Cluster& cl = *cluster();
  const NodeOp wire_op = node_op(op);
  for (Array& a : arrays) {
    const bool half = a.dtype == DType::F16 || a.dtype == DType::BF16;
    Array wide;
    if (half) wide = converted(a, DType::F32);
    Array& x = half ? wide : a;
    cross_node(what, [&] { cl.all_reduce(x.bytes.data(), size_t(x.size()), x.dtype, wire_op); });
    if (op == CollOp::Avg) scale_values(x.dtype, x.bytes.data(), size_t(x.size()), 1.0 / cl.nodes());
    if (half) a = converted(wide, a.dtype);
  }
}

void broadcast_across_nodes(std::vector<Array>& arrays, int root, const char* what) {
  Cluster& cl = *cluster();
  std::string bytes = cl.node() == root ? encode_arrays(arrays) : std::string();
  cross_node(what, [&] { cl.broadcast(bytes, root); });
  if (cl.node() != root) arrays = decode_arrays(bytes);
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
