// The reference evaluator's conv2d and pooling ops (ir::is_window_op): the float64 loops of
// dnn_reference.h over the descriptors of window.h. Values stay in double, like matmul's sums; an
// empty batch (N = 0) gives an empty result without calling the loops, which need N >= 1. A
// channels_last convolution runs the same loops on permuted copies of its activations.
#include <fmt/format.h>

#include <vector>

#include "ir/dnn_reference.h"
#include "ir/evaluator_internal.h"
#include "ir/window.h"

namespace synk::dsl::eval_detail {

using ir::Op;

namespace {

// x transposed by perm, through the evaluator's Transpose.
HostTensor permuted(OpContext& ctx, const HostTensor& x, const std::vector<int64_t>& perm) {
  ir::Node t;
  t.op = Op::Transpose;
  t.type.dtype = x.dtype;
  t.attrs.perm = perm;
  const HostTensor* operand[] = {&x};
  OpContext c{t, ctx.id, operand, ctx.bindings};
  return op_impl(Op::Transpose)(c);
}

// A channels_last convolution: the NCHW one on permuted activations, its result permuted back.
HostTensor channels_last_window_op(OpContext& ctx) {
  ir::Node node = ctx.node;
  node.attrs.window.channels_last = false;
  const bool weights = node.op == Op::Conv2dBackwardWeights;
  if (!weights) node.type = ir::transposed_type(ctx.node.type, ir::kNhwcToNchw);
  std::vector<HostTensor> args;
  for (size_t i = 0; i < ctx.args.size(); ++i) {
    const bool activation = i == 0 || weights;
    args.push_back(activation ? permuted(ctx, *ctx.args[i], ir::kNhwcToNchw) : *ctx.args[i]);
  }
  std::vector<const HostTensor*> arg_ptrs;
  for (const HostTensor& a : args) arg_ptrs.push_back(&a);
  OpContext inner{node, ctx.id, arg_ptrs, ctx.bindings};
  HostTensor out = window_op(inner);
  return weights ? out : permuted(ctx, out, ir::kNchwToNhwc);
}

}  // namespace

HostTensor window_op(OpContext& ctx) {
  const ir::Node& node = ctx.node;
  if (node.attrs.window.channels_last) return channels_last_window_op(ctx);
  const ir::Window2d& win = node.attrs.window;
  auto shape_of = [&](size_t i) -> const Sizes& {
    SYNK_CHECK(i < ctx.args.size() && ctx.args[i]->shape.size() == 4,
               fmt::format("node %{} ({}) needs a rank-4 operand {}", ctx.id, ir::op_name(node.op), i));
    return ctx.args[i]->shape;
  };
  auto data = [&](size_t i) { return ctx.args[i]->data.data(); };
  const Sizes& s0 = shape_of(0);
  const int64_t n = s0[0];
  Sizes out_shape;
  // Output shapes: the node's static sizes, with the batch (axis 0 of an NCHW result) from s0.
  for (const ir::Dim& d : node.type.shape) out_shape.push_back(d.size);
  if (node.op != Op::Conv2dBackwardWeights) out_shape[0] = n;
  HostTensor out = HostTensor::filled(node.type.dtype, out_shape, 0.0);
  if (n == 0) return out;
  double* y = out.data.data();
  switch (node.op) {
    case Op::Conv2d: {
      const Sizes& ws = shape_of(1);
      dnn::reference::conv2d_forward<double>(ir::conv2d_params(win, n, s0[1], s0[2], s0[3], ws[0]), data(0), data(1),
                                             nullptr, y);
      break;
    }
    case Op::Conv2dBackwardData: {
      const Sizes& ws = shape_of(1);
      dnn::reference::conv2d_backward_data<double>(
          ir::conv2d_params(win, n, ws[1] * win.groups, win.in_h, win.in_w, ws[0]), data(0), data(1), y);
      break;
    }
    case Op::Conv2dBackwardWeights: {
      const Sizes& dys = shape_of(1);
      dnn::reference::conv2d_backward_weights<double>(ir::conv2d_params(win, n, s0[1], s0[2], s0[3], dys[1]), data(0),
                                                      data(1), y, nullptr);
      break;
    }
    case Op::MaxPool2d:
      dnn::reference::max_pool2d_forward<double>(ir::pool2d_params(node.op, win, n, s0[1], s0[2], s0[3]), data(0), y);
      break;
    case Op::MaxPool2dBackward:
      dnn::reference::max_pool2d_backward<double>(ir::pool2d_params(node.op, win, n, s0[1], s0[2], s0[3]), data(0),
                                                  data(1), y);
      break;
    case Op::AvgPool2d:
      dnn::reference::avg_pool2d_forward<double>(ir::pool2d_params(node.op, win, n, s0[1], s0[2], s0[3]), data(0), y);
      break;
    case Op::AvgPool2dBackward:
      dnn::reference::avg_pool2d_backward<double>(ir::pool2d_params(node.op, win, n, s0[1], win.in_h, win.in_w),
                                                  data(0), y);
      break;
    default:
      synk::internal_error(fmt::format("evaluator: {} is not a window op", ir::op_name(node.op)));
  }
  return out;
}

}  // namespace synk::dsl::eval_detail
