// NodeWriter (grad_node_writer.h): appends nodes typed by dsl::infer_type. Any rejection is a bug
// in the pass that asked for the node, reported as an internal error naming the op and operands.
#include "compiler/grad/node_writer.h"

#include <bit>

#include <fmt/format.h>

#include "ir/type_infer.h"

namespace synk::compiler::grad_detail {

using ir::NodeId;
using ir::Op;

NodeId NodeWriter::add(Op op, std::vector<NodeId> operands, ir::Attrs attrs,
                       const ir::TensorType* requested, std::string name) {
  std::vector<ir::TensorType> operand_types;
  for (NodeId o : operands) operand_types.push_back(type(o));
  dsl::InferResult r = dsl::infer_type(op, operand_types, attrs, requested);
  if (!r.ok()) {
    std::vector<std::string> types;
    for (const ir::TensorType& t : operand_types) types.push_back(ir::type_str(t));
    synk::internal_error(fmt::format("function '{}': cannot build {} on ({}): {}", fn_.name,
                                    ir::op_name(op), fmt::join(types, ", "), r.error));
  }
  ir::Node n;
  n.op = op;
  n.type = *r.type;
  n.operands = std::move(operands);
  n.attrs = std::move(attrs);
  n.name = std::move(name);
  n.loc = loc_;
  return fn_.add(std::move(n));
}

NodeId NodeWriter::input(int64_t param_index) {
  ir::Attrs a;
  a.index = param_index;
  const ir::TensorType t = fn_.params.at(size_t(param_index)).type;
  return add(Op::Input, {}, a, &t);
}

NodeId NodeWriter::shared_read(int64_t shared_index, const ir::TensorType& type) {
  ir::Attrs a;
  a.index = shared_index;
  return add(Op::SharedRead, {}, a, &type);
}

NodeId NodeWriter::constant(double value, ir::DType dtype) {
  const auto key = std::make_pair(dtype, std::bit_cast<uint64_t>(value));
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  ir::Attrs a;
  if (ir::is_float(dtype)) a.value = value;
  else a.ivalue = int64_t(value);
  const ir::TensorType t{dtype, {}};
  return constants_[key] = add(Op::Constant, {}, a, &t);
}

NodeId NodeWriter::zeros(const ir::TensorType& type) {
  return broadcast_to(constant(0, type.dtype), type.shape);
}

NodeId NodeWriter::unary(Op op, NodeId x) { return add(op, {x}); }

NodeId NodeWriter::binary(Op op, NodeId a, NodeId b) { return add(op, {a, b}); }

NodeId NodeWriter::binary_scalar(Op op, NodeId x, double c) {
  return binary(op, x, constant(c, type(x).dtype));
}

NodeId NodeWriter::scalar_binary(Op op, double c, NodeId x) {
  return binary(op, constant(c, type(x).dtype), x);
}

NodeId NodeWriter::where(NodeId cond, NodeId a, NodeId b) { return add(Op::Where, {cond, a, b}); }

NodeId NodeWriter::cast(NodeId x, ir::DType dtype) {
  if (type(x).dtype == dtype) return x;
  const ir::TensorType t{dtype, type(x).shape};
  return add(Op::Cast, {x}, {}, &t);
}

NodeId NodeWriter::reduce(Op op, NodeId x, std::vector<int64_t> axes, bool keepdims) {
  ir::Attrs a;
  a.axes = std::move(axes);
  a.keepdims = keepdims;
  return add(op, {x}, a);
}

NodeId NodeWriter::reshape(NodeId x, const ir::Shape& shape) {
  if (type(x).shape == shape) return x;
  const ir::TensorType t{type(x).dtype, shape};
  return add(Op::Reshape, {x}, {}, &t);
}

NodeId NodeWriter::broadcast_to(NodeId x, const ir::Shape& shape) {
  if (type(x).shape == shape) return x;
  const ir::TensorType t{type(x).dtype, shape};
  return add(Op::BroadcastTo, {x}, {}, &t);
}

NodeId NodeWriter::transpose(NodeId x, std::vector<int64_t> perm) {
  ir::Attrs a;
  a.perm = std::move(perm);
  return add(Op::Transpose, {x}, a);
}

NodeId NodeWriter::matmul(NodeId a, NodeId b) { return add(Op::MatMul, {a, b}); }

NodeId NodeWriter::concat(std::span<const NodeId> xs, int64_t axis) {
  SYNK_CHECK(!xs.empty(), "concat of nothing");
  if (xs.size() == 1) return xs[0];
  ir::Attrs a;
  a.axis = axis;
  return add(Op::Concat, std::vector<NodeId>(xs.begin(), xs.end()), a);
}

NodeId NodeWriter::slice(NodeId x, int64_t axis, int64_t start, int64_t stop) {
  const ir::Dim d = type(x).shape.at(size_t(axis));
  if (start == 0 && !d.is_symbolic() && d.size == stop) return x;
  ir::Attrs a;
  a.axis = axis;
  a.start = start;
  a.stop = stop;
  return add(Op::Slice, {x}, a);
}

NodeId NodeWriter::one_hot(NodeId labels, int64_t num_classes, ir::DType dtype, bool of_cross_entropy) {
  ir::Attrs a;
  a.num_classes = num_classes;
  a.of_cross_entropy = of_cross_entropy;
  const ir::TensorType t{dtype, {}};
  return add(Op::OneHot, {labels}, a, &t);
}

NodeId NodeWriter::softmax(Op op, NodeId x, int64_t axis) {
  ir::Attrs a;
  a.axis = axis;
  return add(op, {x}, a);
}

NodeId NodeWriter::cumsum(NodeId x, int64_t axis, bool reverse) {
  ir::Attrs a;
  a.axis = axis;
  a.reverse = reverse;
  return add(Op::Cumsum, {x}, a);
}

NodeId NodeWriter::sum_all(std::span<const NodeId> terms) {
  SYNK_CHECK(!terms.empty(), "sum of no terms");
  NodeId total = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) total = add(total, terms[i]);
  return total;
}

}  // namespace synk::compiler::grad_detail
