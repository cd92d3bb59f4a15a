// A small helper that appends typed nodes to an ir::Function, for the passes that synthesize
// whole subgraphs: the gradient pass (grad.cpp) and the optimizer update rules
// (update_rules.cpp). Every node it creates is typed by dsl::infer_type, the one place where
// the IR's typing rules live, so synthesized graphs can never disagree with sema or the verifier;
// a rejected node is a bug in the caller (InternalError), never the user's fault. Trivial
// requests (a reshape, broadcast or cast to the type a value already has) return the value
// itself so that generated graphs stay readable in `--emit=ir-grad`.
#pragma once

#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"

namespace synk::compiler::grad_detail {

class NodeWriter {
 public:
  // New nodes get `loc` (the source of the construct they implement).
  NodeWriter(ir::Function& fn, SourceLoc loc) : fn_(fn), loc_(loc) {}
  // The source new nodes get from here on (returns the previous one).
  SourceLoc set_loc(SourceLoc loc) { return std::exchange(loc_, loc); }

  // Copies, not references: appending a node may move the function's node storage, and
  // expressions such as `w.f(w.mul(a, b), w.type(c))` evaluate their arguments in any order.
  ir::TensorType type(ir::NodeId id) const { return fn_.node(id).type; }
  ir::Node node(ir::NodeId id) const { return fn_.node(id); }

  // Appends `op` with these operands; `requested` as in dsl::infer_type.
  ir::NodeId add(ir::Op op, std::vector<ir::NodeId> operands, ir::Attrs attrs = {},
                 const ir::TensorType* requested = nullptr, std::string name = {});

  ir::NodeId input(int64_t param_index);
  ir::NodeId shared_read(int64_t shared_index, const ir::TensorType& type);
  ir::NodeId constant(double value, ir::DType dtype);      // a float or integer scalar, made once
  ir::NodeId zeros(const ir::TensorType& type);            // broadcast of a scalar 0

  ir::NodeId unary(ir::Op op, ir::NodeId x);
  ir::NodeId binary(ir::Op op, ir::NodeId a, ir::NodeId b);
  ir::NodeId add(ir::NodeId a, ir::NodeId b) { return binary(ir::Op::Add, a, b); }
  ir::NodeId sub(ir::NodeId a, ir::NodeId b) { return binary(ir::Op::Sub, a, b); }
  ir::NodeId mul(ir::NodeId a, ir::NodeId b) { return binary(ir::Op::Mul, a, b); }
  ir::NodeId div(ir::NodeId a, ir::NodeId b) { return binary(ir::Op::Div, a, b); }
  ir::NodeId neg(ir::NodeId x) { return unary(ir::Op::Neg, x); }
  // `x op c` with c a scalar constant of x's dtype.
  ir::NodeId binary_scalar(ir::Op op, ir::NodeId x, double c);
  ir::NodeId scalar_binary(ir::Op op, double c, ir::NodeId x);
  ir::NodeId where(ir::NodeId cond, ir::NodeId a, ir::NodeId b);
  ir::NodeId cast(ir::NodeId x, ir::DType dtype);           // x itself when already that dtype

  ir::NodeId reduce(ir::Op op, ir::NodeId x, std::vector<int64_t> axes, bool keepdims);
  ir::NodeId reshape(ir::NodeId x, const ir::Shape& shape); // x itself when already that shape
  ir::NodeId broadcast_to(ir::NodeId x, const ir::Shape& shape);
  ir::NodeId transpose(ir::NodeId x, std::vector<int64_t> perm);
  ir::NodeId matmul(ir::NodeId a, ir::NodeId b);
  ir::NodeId concat(std::span<const ir::NodeId> xs, int64_t axis);   // x itself for one piece
  ir::NodeId slice(ir::NodeId x, int64_t axis, int64_t start, int64_t stop);
  ir::NodeId one_hot(ir::NodeId labels, int64_t num_classes, ir::DType dtype, bool of_cross_entropy = false);
  ir::NodeId softmax(ir::Op op, ir::NodeId x, int64_t axis);   // Softmax or LogSoftmax
  ir::NodeId cumsum(ir::NodeId x, int64_t axis, bool reverse);

  // Sum of one or more values of one type, left to right.
  ir::NodeId sum_all(std::span<const ir::NodeId> terms);

 private:
  ir::Function& fn_;
  SourceLoc loc_;
  // Constants this writer made, by dtype and bit pattern (so 0.0 and -0.0 stay apart).
  std::map<std::pair<ir::DType, uint64_t>, ir::NodeId> constants_;
};

// True when `d` is the static size 1.
inline bool is_static_one(const ir::Dim& d) { return !d.is_symbolic() && d.size == 1; }

}  // namespace synk::compiler::grad_detail
