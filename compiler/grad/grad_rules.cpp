// The reverse sweep and the adjoint rule of every differentiable op (see docs/training.md for
// the formulas and the conventions at kinks and ties). A rule receives `g`, the adjoint of the
// node's result (same type as the result), and gives each active operand a contribution of
// exactly that operand's type; broadcasting is undone by summing over the broadcast axes.
#include <fmt/format.h>

#include "compiler/grad/grad_internal.h"
#include "ir/type_infer.h"

namespace synk::compiler::grad_detail {

using ir::Dim;
using ir::NodeId;
using ir::Op;
using ir::Shape;

namespace {

// `shape` with every axis in `axes` set to 1 (what keepdims=true gives).
Shape keep_shape(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape out = shape;
  for (int64_t a : axes) out[size_t(a)] = Dim::fixed(1);
  return out;
}

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  return inv;
}

}  // namespace

void Backprop::run(NodeId loss, NodeId seed) {
  contributions_[size_t(loss)].push_back(seed);
  for (NodeId id = loss; id >= 0; --id) {
    if (!active_[size_t(id)] || contributions_[size_t(id)].empty()) continue;
    propagate(id, *adjoint(id));
  }
}

std::optional<NodeId> Backprop::adjoint(NodeId id) {
  if (size_t(id) >= contributions_.size() || contributions_[size_t(id)].empty()) return std::nullopt;
  if (!summed_[size_t(id)]) summed_[size_t(id)] = w_.sum_all(contributions_[size_t(id)]);
  return summed_[size_t(id)];
}

bool Backprop::wants(const ir::Node& n, size_t operand) const {
  return active_[size_t(n.operands[operand])] && is_differentiable_edge(n, operand);
}

void Backprop::give(const ir::Node& n, size_t operand, NodeId value) {
  const NodeId target = n.operands[operand];
  SYNK_CHECK(!summed_[size_t(target)], "adjoint contributed after it was summed");
  if (!(w_.type(value) == w_.type(target)))
    synk::internal_error(fmt::format("gradient of {}: operand {} has type {} but its adjoint has {}",
                                    ir::op_name(n.op), operand, ir::type_str(w_.type(target)),
                                    ir::type_str(w_.type(value))));
  contributions_[size_t(target)].push_back(value);
}

NodeId Backprop::unbroadcast(NodeId g, const ir::TensorType& target) {
  const Shape from = w_.type(g).shape;
  const size_t lead = from.size() - target.rank();
  std::vector<int64_t> axes;
  bool keeps_size_one_axes = false;
  for (size_t d = 0; d < from.size(); ++d) {
    if (d < lead) {
      axes.push_back(int64_t(d));
    } else if (is_static_one(target.shape[d - lead]) && !is_static_one(from[d])) {
      axes.push_back(int64_t(d));
      keeps_size_one_axes = true;
    }
  }
  NodeId r = g;
  if (!axes.empty()) r = w_.reduce(Op::ReduceSum, g, axes, keeps_size_one_axes);
  return w_.cast(w_.reshape(r, target.shape), target.dtype);
}

void Backprop::propagate(NodeId id, NodeId g) {
  const ir::Node n = w_.node(id);
  const ir::DType dt = n.type.dtype;
  auto in = [&](size_t k) { return n.operands[k]; };
  auto zero = [&] { return w_.constant(0, dt); };
  auto as_float = [&](NodeId boolean) { return w_.cast(boolean, dt); };

  switch (n.op) {
    case Op::Input: case Op::SharedRead: case Op::Constant:
      return;
    case Op::Neg:
      return give(n, 0, w_.neg(g));
    case Op::Abs: {
      // sign(a), with sign(0) = 0.
      const NodeId a = in(0);
      const NodeId sign = w_.sub(as_float(w_.binary_scalar(Op::Gt, a, 0)),
                                 as_float(w_.binary_scalar(Op::Lt, a, 0)));
      return give(n, 0, w_.mul(g, sign));
    }
    case Op::Exp:
      return give(n, 0, w_.mul(g, id));
    case Op::Log:
      return give(n, 0, w_.div(g, in(0)));
    case Op::Sqrt:
      return give(n, 0, w_.div(g, w_.binary_scalar(Op::Mul, id, 2)));
    case Op::Tanh:
      return give(n, 0, w_.mul(g, w_.scalar_binary(Op::Sub, 1, w_.mul(id, id))));
    case Op::Sigmoid:
      return give(n, 0, w_.mul(g, w_.mul(id, w_.scalar_binary(Op::Sub, 1, id))));
    case Op::Log1p: case Op::Expm1: case Op::Softplus: case Op::Sin: case Op::Cos: case Op::Mod: case Op::BceWithLogits:
      return propagate_math(n, id, g);
    case Op::Relu:
      // Derivative 0 at 0; the mask reads relu's result, usually in memory (not the pre-activation).
      return give(n, 0, w_.where(w_.binary_scalar(Op::Gt, id, 0), g, zero()));
    case Op::Cast:
      return give(n, 0, w_.cast(g, w_.type(in(0)).dtype));   // float -> float only (else inactive)

    case Op::Add:
      if (wants(n, 0)) give(n, 0, unbroadcast(g, w_.type(in(0))));
      if (wants(n, 1)) give(n, 1, unbroadcast(g, w_.type(in(1))));
      return;
    case Op::Sub:
      if (wants(n, 0)) give(n, 0, unbroadcast(g, w_.type(in(0))));
      if (wants(n, 1)) give(n, 1, unbroadcast(w_.neg(g), w_.type(in(1))));
      return;
    case Op::Mul:
      if (wants(n, 0)) give(n, 0, unbroadcast(w_.mul(g, in(1)), w_.type(in(0))));
      if (wants(n, 1)) give(n, 1, unbroadcast(w_.mul(g, in(0)), w_.type(in(1))));
      return;
    case Op::Div:
      // d(a/b)/db = -(a/b)/b.
      if (wants(n, 0)) give(n, 0, unbroadcast(w_.div(g, in(1)), w_.type(in(0))));
      if (wants(n, 1)) give(n, 1, unbroadcast(w_.neg(w_.div(w_.mul(g, id), in(1))), w_.type(in(1))));
      return;
    case Op::Pow:
      return propagate_pow(n, id, g);
    case Op::Maximum: case Op::Minimum: {
      // The winner takes the adjoint; on a tie each operand takes half.
      const NodeId a = in(0), b = in(1);
      const Op wins = n.op == Op::Maximum ? Op::Gt : Op::Lt;
      const NodeId weight_a = w_.add(as_float(w_.binary(wins, a, b)),
                                     w_.binary_scalar(Op::Mul, as_float(w_.binary(Op::Eq, a, b)), 0.5));
      const NodeId to_a = w_.mul(g, weight_a);
      if (wants(n, 0)) give(n, 0, unbroadcast(to_a, w_.type(a)));
      if (wants(n, 1)) give(n, 1, unbroadcast(w_.sub(g, to_a), w_.type(b)));
      return;
    }
    case Op::Where:
      if (wants(n, 1)) give(n, 1, unbroadcast(w_.where(in(0), g, zero()), w_.type(in(1))));
      if (wants(n, 2)) give(n, 2, unbroadcast(w_.where(in(0), zero(), g), w_.type(in(2))));
      return;

    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin:
    case Op::ReduceProd:
      return propagate_reduction(n, id, g);
    case Op::MatMul:
      return propagate_matmul(n, g);
    case Op::Transpose: case Op::Reshape: case Op::BroadcastTo: case Op::Concat: case Op::Slice:
    case Op::Take: case Op::Cumsum:
      return propagate_structure(n, id, g);

    case Op::Softmax: {
      // y * (g - sum(g * y)) along the axis.
      const NodeId dot = w_.reduce(Op::ReduceSum, w_.mul(g, id), {n.attrs.axis}, true);
      return give(n, 0, w_.mul(id, w_.sub(g, dot)));
    }
    case Op::LogSoftmax: {
      // g - softmax(x) * sum(g) along the axis; softmax(x) = exp(y) with y <= 0, so stable.
      const NodeId total = w_.reduce(Op::ReduceSum, g, {n.attrs.axis}, true);
      return give(n, 0, w_.sub(g, w_.mul(w_.unary(Op::Exp, id), total)));
    }
    case Op::CrossEntropy:
      return propagate_cross_entropy(n, g);

    case Op::Conv2d: case Op::Conv2dBackwardData: case Op::Conv2dBackwardWeights: case Op::MaxPool2d:
    case Op::MaxPool2dBackward: case Op::AvgPool2d: case Op::AvgPool2dBackward:
      return propagate_window(n, g);

    default:
      synk::internal_error(fmt::format("gradient: no rule for active op {}", ir::op_name(n.op)));
  }
}

// Convolution and pooling, with the forward's window attributes. The backward ops are linear in
// each operand (max pooling's in dy, for the cells x chose), so their own adjoints, which a second
// derivative needs, are the forward ops and each other: conv2d is y = conv(x, w), backward-data
// dx = conv_w^T(dy), backward-weights dw = conv_x^T(dy).
void Backprop::propagate_window(const ir::Node& n, NodeId g) {
  auto in = [&](size_t k) { return n.operands[k]; };
  switch (n.op) {
    case Op::Conv2d:
      if (wants(n, 0)) give(n, 0, w_.add(Op::Conv2dBackwardData, {g, in(1)}, n.attrs));
      if (wants(n, 1)) give(n, 1, w_.add(Op::Conv2dBackwardWeights, {in(0), g}, n.attrs));
      return;
    case Op::Conv2dBackwardData:   // (dy, w) -> dx; g has x's type
      if (wants(n, 0)) give(n, 0, w_.add(Op::Conv2d, {g, in(1)}, n.attrs));
      if (wants(n, 1)) give(n, 1, w_.add(Op::Conv2dBackwardWeights, {g, in(0)}, n.attrs));
      return;
    case Op::Conv2dBackwardWeights:   // (x, dy) -> dw; g has w's type
      if (wants(n, 0)) give(n, 0, w_.add(Op::Conv2dBackwardData, {in(1), g}, n.attrs));
      if (wants(n, 1)) give(n, 1, w_.add(Op::Conv2d, {in(0), g}, n.attrs));
      return;
    case Op::MaxPool2d:
      // The adjoint goes to the cell each window chose (the first maximum; a NaN wins).
      return give(n, 0, w_.add(Op::MaxPool2dBackward, {in(0), g}, n.attrs));
    case Op::AvgPool2d:
      return give(n, 0, w_.add(Op::AvgPool2dBackward, {g}, n.attrs));
    case Op::AvgPool2dBackward:   // the transpose of the average: the average again
      return give(n, 0, w_.add(Op::AvgPool2d, {g}, n.attrs));
    case Op::MaxPool2dBackward: {
      // dy's adjoint is g at the cell each window chose. Where windows do not overlap, every
      // chosen cell belongs to one window, so that is the window's sum of g masked by the chosen
      // cells (the backward op of ones), an average pool of kh x kw cells times kh * kw.
      const ir::Window2d& win = n.attrs.window;
      if (win.stride_h < win.kh || win.stride_w < win.kw)
        throw synk::LocatedUserError(n.loc, fmt::format(
            "cannot differentiate the gradient of max_pool2d with overlapping windows (kernel {}x{}, "
            "stride {}): a second derivative through max pooling needs a stride of at least the kernel",
            win.kh, win.kw, win.stride_h));
      const ir::TensorType dy = w_.type(in(1));
      const NodeId chosen = w_.add(Op::MaxPool2dBackward, {in(0), w_.broadcast_to(w_.constant(1, dy.dtype), dy.shape)},
                                   n.attrs);
      ir::Attrs sum_attrs = n.attrs;
      sum_attrs.window.count_include_pad = true;
      const NodeId mean = w_.add(Op::AvgPool2d, {w_.mul(g, chosen)}, sum_attrs);
      return give(n, 1, w_.binary_scalar(Op::Mul, mean, double(win.kh * win.kw)));
    }
    default:
      synk::internal_error(fmt::format("gradient: {} is not a window op", ir::op_name(n.op)));
  }
}

void Backprop::propagate_math(const ir::Node& n, NodeId id, NodeId g) {
  auto in = [&](size_t k) { return n.operands[k]; };
  switch (n.op) {
    case Op::Log1p:
      return give(n, 0, w_.div(g, w_.binary_scalar(Op::Add, in(0), 1)));
    case Op::Expm1:
      return give(n, 0, w_.mul(g, w_.binary_scalar(Op::Add, id, 1)));
    case Op::Softplus:
      // sigmoid(x) exactly (0.5 at 0): the stable form's max and |x| kinks cancel.
      return give(n, 0, w_.mul(g, w_.unary(Op::Sigmoid, in(0))));
    case Op::Sin:
      return give(n, 0, w_.mul(g, w_.unary(Op::Cos, in(0))));
    case Op::Cos:
      return give(n, 0, w_.neg(w_.mul(g, w_.unary(Op::Sin, in(0)))));
    case Op::Mod:
      // a - b * floor(a / b): 1 for a, -floor(a / b) for b (away from the jumps).
      if (wants(n, 0)) give(n, 0, unbroadcast(g, w_.type(in(0))));
      if (wants(n, 1)) give(n, 1, unbroadcast(w_.neg(w_.mul(g, w_.binary(Op::FloorDiv, in(0), in(1)))), w_.type(in(1))));
      return;
    case Op::BceWithLogits:
      // sigmoid(z) - y for the logits, written as such (not through the stable form's kinks, whose
      // one-sided derivatives would give -y at z = 0); -z for the targets.
      if (wants(n, 0)) give(n, 0, unbroadcast(w_.mul(g, w_.sub(w_.unary(Op::Sigmoid, in(0)), in(1))), w_.type(in(0))));
      if (wants(n, 1)) give(n, 1, unbroadcast(w_.neg(w_.mul(g, in(0))), w_.type(in(1))));
      return;
    default:
      synk::internal_error(fmt::format("gradient: {} is not a math op", ir::op_name(n.op)));
  }
}

void Backprop::propagate_reduction(const ir::Node& n, NodeId id, NodeId g) {
  const NodeId a = n.operands[0];
  const ir::TensorType at = w_.type(a);
  const ir::DType dt = at.dtype;
  const std::vector<int64_t>& axes = n.attrs.axes;
  const Shape kept = keep_shape(at.shape, axes);
  const NodeId g_kept = w_.reshape(g, kept);   // the adjoint with size-1 reduced axes
  auto as_float = [&](NodeId boolean) { return w_.cast(boolean, dt); };

  switch (n.op) {
    case Op::ReduceSum:
      return give(n, 0, w_.broadcast_to(g_kept, at.shape));
    case Op::ReduceMean: {
      // Divide by the number of reduced elements: a constant, or counted at run time when a
      // reduced dimension is symbolic (sum of ones over just those dimensions).
      Shape reduced;
      for (int64_t ax : axes) reduced.push_back(at.shape[size_t(ax)]);
      const dsl::ElementCount count = dsl::element_count(reduced);
      NodeId divisor;
      if (count.symbols.empty()) {
        divisor = w_.constant(double(count.fixed), dt);
      } else {
        const NodeId ones = w_.broadcast_to(w_.constant(1, dt), reduced);
        divisor = w_.reduce(Op::ReduceSum, ones, dsl::all_axes(reduced.size()), false);
      }
      return give(n, 0, w_.broadcast_to(w_.div(g_kept, divisor), at.shape));
    }
    case Op::ReduceMax: case Op::ReduceMin: {
      // Tie rule: the adjoint is split evenly among all elements equal to the extremum.
      const NodeId y_kept = w_.reshape(id, kept);
      const NodeId mask = as_float(w_.binary(Op::Eq, a, y_kept));
      const NodeId ties = w_.reduce(Op::ReduceSum, mask, axes, true);
      return give(n, 0, w_.mul(mask, w_.div(g_kept, ties)));
    }
    case Op::ReduceProd: {
      // d prod / d a_i = product of the other elements, computed without dividing by zero:
      // with no zero in the group it is p/a_i; with exactly one zero, the product of the
      // non-zeros at the zero and 0 elsewhere; with two or more zeros, 0 everywhere.
      const NodeId zero = w_.constant(0, dt);
      const NodeId is_zero = w_.binary(Op::Eq, a, zero);
      const NodeId nonzero_a = w_.where(is_zero, w_.constant(1, dt), a);
      const NodeId nonzero_prod = w_.reduce(Op::ReduceProd, nonzero_a, axes, true);
      const NodeId zero_count = w_.reduce(Op::ReduceSum, as_float(is_zero), axes, true);
      const NodeId at_zero = w_.where(w_.binary_scalar(Op::Eq, zero_count, 1), nonzero_prod, zero);
      const NodeId elsewhere = w_.where(w_.binary_scalar(Op::Eq, zero_count, 0),
                                        w_.div(nonzero_prod, nonzero_a), zero);
      const NodeId others = w_.where(is_zero, at_zero, elsewhere);
      return give(n, 0, w_.broadcast_to(w_.mul(g_kept, others), at.shape));
    }
    default:
      synk::internal_error(fmt::format("gradient: {} is not a differentiable reduction", ir::op_name(n.op)));
  }
}

void Backprop::propagate_matmul(const ir::Node& n, NodeId g) {
  const NodeId a = n.operands[0], b = n.operands[1];
  const ir::TensorType at = w_.type(a), bt = w_.type(b);
  auto column = [&](NodeId v) { return w_.reshape(v, {w_.type(v).shape[0], Dim::fixed(1)}); };
  auto row = [&](NodeId v) { return w_.reshape(v, {Dim::fixed(1), w_.type(v).shape[0]}); };
  auto t = [&](NodeId m) { return w_.transpose(m, {1, 0}); };
  if (at.rank() == 2 && bt.rank() == 2) {          // [m,k] @ [k,n]
    if (wants(n, 0)) give(n, 0, w_.matmul(g, t(b)));
    if (wants(n, 1)) give(n, 1, w_.matmul(t(a), g));
  } else if (at.rank() == 1 && bt.rank() == 2) {   // [k] @ [k,n] -> [n]
    if (wants(n, 0)) give(n, 0, w_.matmul(b, g));
    if (wants(n, 1)) give(n, 1, w_.matmul(column(a), row(g)));
  } else if (at.rank() == 2 && bt.rank() == 1) {   // [m,k] @ [k] -> [m]
    if (wants(n, 0)) give(n, 0, w_.matmul(column(g), row(b)));
    if (wants(n, 1)) give(n, 1, w_.matmul(g, a));
  } else {                                         // [k] @ [k] -> []
    if (wants(n, 0)) give(n, 0, w_.mul(g, b));
    if (wants(n, 1)) give(n, 1, w_.mul(g, a));
  }
}

void Backprop::propagate_structure(const ir::Node& n, NodeId id, NodeId g) {
  const NodeId a = n.operands[0];
  const ir::TensorType at = w_.type(a);
  switch (n.op) {
    case Op::Transpose:
      return give(n, 0, w_.transpose(g, inverse_permutation(n.attrs.perm)));
    case Op::Reshape:
      return give(n, 0, w_.reshape(g, at.shape));
    case Op::BroadcastTo:
      return give(n, 0, unbroadcast(g, at));
    case Op::Concat: {
      int64_t offset = 0;
      for (size_t k = 0; k < n.operands.size(); ++k) {
        const int64_t size = w_.type(n.operands[k]).shape[size_t(n.attrs.axis)].size;  // static
        if (wants(n, k)) give(n, k, w_.slice(g, n.attrs.axis, offset, offset + size));
        offset += size;
      }
      return;
    }
    case Op::Cumsum:
      // y_i = sum of x_j for j <= i, so dx_j = sum of g_i for i >= j: the cumulative sum of g
      // from the other end of the axis (numpy: flip(cumsum(flip(g)))); a reversed cumsum's
      // adjoint is the forward one.
      return give(n, 0, w_.cumsum(g, n.attrs.axis, !n.attrs.reverse));
    case Op::Slice: {
      // Pad with zeros back to the operand's extent along the axis.
      const size_t axis = size_t(n.attrs.axis);
      const int64_t size = at.shape[axis].size;   // static: slice requires it
      std::vector<NodeId> pieces;
      auto zeros_of = [&](int64_t len) {
        ir::TensorType zt = at;
        zt.shape[axis] = Dim::fixed(len);
        return w_.zeros(zt);
      };
      if (n.attrs.start > 0) pieces.push_back(zeros_of(n.attrs.start));
      pieces.push_back(g);
      if (n.attrs.stop < size) pieces.push_back(zeros_of(size - n.attrs.stop));
      return give(n, 0, w_.concat(pieces, n.attrs.axis));
    }
    case Op::Take: {
      // Scatter-add of the rows' adjoints: one_hot(idx, rows)^T @ g.
      const Dim& rows = at.shape[0];
      if (rows.is_symbolic())
        throw synk::LocatedUserError(n.loc, fmt::format(
            "cannot differentiate take(x, idx) where x has a symbolic number of rows ({}): the "
            "gradient scatters into x's rows and needs their count to be static",
            ir::type_str(at)));
      // No rows to scatter into (every index is out of range, so only an empty idx runs).
      if (rows.size == 0) return give(n, 0, w_.zeros(at));
      const NodeId picks = w_.transpose(w_.one_hot(n.operands[1], rows.size, at.dtype), {1, 0});
      NodeId flat_g = g;
      if (at.rank() > 2) flat_g = w_.reshape(g, {w_.type(g).shape[0], Dim::fixed(-1)});
      return give(n, 0, w_.reshape(w_.matmul(picks, flat_g), at.shape));
    }
    default:
      synk::internal_error(fmt::format("gradient: {} is not a structural op", ir::op_name(n.op)));
  }
  (void)id;
}

// a ** b, with PyTorch's masks where the plain rules give 0 * inf.
void Backprop::propagate_pow(const ir::Node& n, NodeId id, NodeId g) {
  const ir::DType dt = n.type.dtype;
  auto zero = [&] { return w_.constant(0, dt); };
  const NodeId a = n.operands[0], b = n.operands[1];
  if (wants(n, 0)) {
    // b * a^(b-1), and 0 where b = 0 (a^0 is constant, but 0 * 0^-1 would be NaN at a = 0, as
    // PyTorch masks it too); for a constant exponent, b-1 is folded here.
    const ir::Node bn = w_.node(b);
    NodeId local;
    if (bn.op == Op::Constant && bn.type.rank() == 0 && bn.attrs.value == 0) {
      local = zero();
    } else if (bn.op == Op::Constant) {
      local = w_.mul(b, w_.binary(Op::Pow, a, w_.constant(bn.attrs.value - 1, dt)));
    } else {
      const NodeId power = w_.mul(b, w_.binary(Op::Pow, a, w_.binary_scalar(Op::Sub, b, 1)));
      local = w_.where(w_.binary(Op::Eq, b, zero()), zero(), power);
    }
    give(n, 0, unbroadcast(w_.mul(g, local), w_.type(a)));
  }
  if (wants(n, 1)) {
    // a^b * log(a), and 0 where a = 0 and b >= 0 (0 * -inf there; PyTorch masks it the same way).
    const NodeId db = w_.mul(id, w_.unary(Op::Log, a));
    const NodeId at_zero = w_.where(w_.binary(Op::Ge, b, zero()), zero(), db);
    const NodeId local = w_.where(w_.binary(Op::Eq, a, zero()), at_zero, db);
    give(n, 1, unbroadcast(w_.mul(g, local), w_.type(b)));
  }
}

void Backprop::propagate_cross_entropy(const ir::Node& n, NodeId g) {
  const NodeId logits = n.operands[0], labels = n.operands[1];
  const ir::TensorType lt = w_.type(logits);
  const NodeId g_column = w_.reshape(g, {lt.shape[0], Dim::fixed(1)});
  if (wants(n, 0)) {
    const NodeId p = w_.softmax(Op::Softmax, logits, 1);
    NodeId local;
    if (ir::is_integer(w_.type(labels).dtype)) {
      // softmax(z) - one_hot(labels).
      const Dim& classes = lt.shape[1];
      if (classes.is_symbolic())
        throw synk::LocatedUserError(n.loc, fmt::format(
            "cannot differentiate cross_entropy with class-index labels and a symbolic number of "
            "classes ({}): the gradient needs one_hot(labels, k) with a static k",
            ir::type_str(lt)));
      // A label out of range fails in this one_hot: its message names and points at the cross_entropy.
      const SourceLoc grad_loc = w_.set_loc(n.loc);
      const NodeId expected = w_.one_hot(labels, classes.size, lt.dtype, /*of_cross_entropy=*/true);
      w_.set_loc(grad_loc);
      local = w_.sub(p, expected);
    } else {
      // softmax(z) * sum(t) - t, which is softmax(z) - t for labels that sum to 1.
      const NodeId mass = w_.reduce(Op::ReduceSum, labels, {1}, true);
      local = w_.sub(w_.mul(p, mass), labels);
    }
    give(n, 0, w_.mul(g_column, local));
  }
  if (wants(n, 1)) give(n, 1, w_.neg(w_.mul(g_column, w_.softmax(Op::LogSoftmax, logits, 1))));
}

}  // namespace synk::compiler::grad_detail
