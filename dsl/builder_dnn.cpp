// The C++ builder's convolutional-network operations: conv2d, max_pool2d, avg_pool2d,
// global_avg_pool, batch_norm and flatten(x, axis), each the counterpart of sema's handler
// (dsl/sema_dnn.cpp, dsl/sema_batch_norm.cpp): the same window attributes, the same composition
// of ordinary ops for a bias, a global pool and batch norm, the same checks, and the same node
// order. sema evaluates every argument of such a call before it writes any node of its own, and
// batch_norm(training=true) writes its running statistics' updates right after its result; the
// builder's trees get that order through ExprNode::before and ::after (builder_internal.h).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dsl/builder.h"
#include "dsl/builder_internal.h"
#include "ir/type_infer.h"

namespace synk::dsl {

using builder_detail::describe;
using builder_detail::ExprNode;
using builder_detail::immediate;
using builder_detail::make_op;
using builder_detail::require;
using builder_detail::shape_arg;
using ir::DType;
using ir::Op;

namespace {

using NodePtr = std::shared_ptr<const ExprNode>;

void at_least(int64_t value, int64_t minimum, const std::string& what) {
  if (value < minimum) throw UserError(fmt::format("{} must be at least {}, found {}", what, minimum, value));
}

// x as an NCHW tensor with static C, H, W (the batch may be a symbol), as sema's check_nchw.
void check_nchw(const ExprNode& x, const char* op, const char* role) {
  if (!ir::is_float(x.type.dtype))
    throw UserError(fmt::format("{} needs a floating {} but the {} is {}", op, role, role, describe(x)));
  if (x.type.rank() != 4)
    throw UserError(fmt::format("{} needs its {} as [N, C, H, W] (rank 4) but the {} is {}", op, role, role,
                                describe(x)));
  for (size_t d = 1; d < 4; ++d)
    if (x.type.shape[d].is_symbolic())
      throw UserError(fmt::format("{} needs static C, H and W but the {} is {} (only the batch N may be a symbol)", op,
                                  role, describe(x)));
}

Expr column(const Expr& c, bool planes) {
  return planes ? reshape(c, ShapeArg{c.shape()[0].size, 1, 1}) : c;
}

}  // namespace

Padding::Padding(const char* mode) {
  if (mode == nullptr || std::string_view(mode) != "same")
    throw UserError(fmt::format("conv2d's padding must be an integer, a list or \"same\", found '{}'",
                                mode ? mode : "null"));
  same_ = true;
}

// ---- conv2d -------------------------------------------------------------------------------

static Expr conv2d_impl(const Expr& x_expr, const Expr& w_expr, const Expr* bias, const Conv2dOptions& o) {
  const NodePtr& x = require(x_expr, "conv2d");
  const NodePtr& w = require(w_expr, "conv2d");
  if (bias) require(*bias, "conv2d");
  at_least(o.stride.h, 1, "conv2d's stride"), at_least(o.stride.w, 1, "conv2d's stride");
  at_least(o.dilation.h, 1, "conv2d's dilation"), at_least(o.dilation.w, 1, "conv2d's dilation");
  at_least(o.groups, 1, "conv2d's groups");
  for (int64_t p : o.padding.pads())
    if (p < 0) throw UserError(fmt::format("conv2d's padding must not be negative, found {}", p));
  check_nchw(*x, "conv2d", "input");
  const ir::TensorType& wt = w->type;
  if (!ir::is_float(wt.dtype) || wt.rank() != 4 ||
      std::any_of(wt.shape.begin(), wt.shape.end(), [](const ir::Dim& d) { return d.is_symbolic(); }))
    throw UserError(fmt::format("conv2d needs static floating weights [O, C/groups, kh, kw] but the weights are {}",
                                describe(*w)));
  if (x->type.dtype != wt.dtype)
    throw UserError(fmt::format("conv2d needs weights of the input's dtype: the weights are {} but the input is {}",
                                describe(*w), describe(*x)));
  ir::Attrs attrs;
  ir::Window2d& win = attrs.window;
  win.kh = wt.shape[2].size, win.kw = wt.shape[3].size;
  win.stride_h = o.stride.h, win.stride_w = o.stride.w;
  win.dilation_h = o.dilation.h, win.dilation_w = o.dilation.w;
  win.groups = o.groups;
  win.in_h = x->type.shape[2].size, win.in_w = x->type.shape[3].size;
  std::array<int64_t, 4> pads = o.padding.pads();
  if (o.padding.is_same()) {
    if (win.stride_h != 1 || win.stride_w != 1)
      throw UserError(fmt::format("conv2d's padding=\"same\" needs stride 1 (as in PyTorch), found stride [{}, {}]",
                                  win.stride_h, win.stride_w));
    const int64_t th = win.dilation_h * (win.kh - 1), tw = win.dilation_w * (win.kw - 1);
    pads = {th / 2, th - th / 2, tw / 2, tw - tw / 2};
  }
  win.pad_top = pads[0], win.pad_bottom = pads[1], win.pad_left = pads[2], win.pad_right = pads[3];
  Expr y = make_op(Op::Conv2d, {immediate(x), immediate(w)}, attrs);
  if (!bias) return y;
  const ir::Dim& out = y.shape()[1];
  const ir::TensorType& bt = bias->type();
  if (bt.rank() != 1 || !(bt.shape[0] == out) || bt.dtype != y.dtype())
    throw UserError(fmt::format("conv2d's bias must be {}[{}] (one per output channel) but the bias is {}",
                                ir::dtype_name(y.dtype()), out.size, describe(*bias->node())));
  return builder_detail::with_sequence(add(y, column(*bias, true)), {x, w, bias->node()}, {});
}

Expr conv2d(const Expr& x, const Expr& w, const Conv2dOptions& options) { return conv2d_impl(x, w, nullptr, options); }

Expr conv2d(const Expr& x, const Expr& w, const Expr& bias, const Conv2dOptions& options) {
  return conv2d_impl(x, w, &bias, options);
}

// ---- Pooling ------------------------------------------------------------------------------

static Expr pool2d(Op op, const Expr& x_expr, Pair2d kernel, std::optional<int64_t> stride, int64_t padding,
                   bool include_pad) {
  const char* name = op == Op::MaxPool2d ? "max_pool2d" : "avg_pool2d";
  const NodePtr& x = require(x_expr, name);
  at_least(kernel.h, 1, fmt::format("{}'s kernel", name));
  at_least(kernel.w, 1, fmt::format("{}'s kernel", name));
  if (stride) at_least(*stride, 1, fmt::format("{}'s stride", name));
  if (padding < 0) throw UserError(fmt::format("{}'s padding must not be negative, found {}", name, padding));
  if (!stride) {
    if (kernel.h != kernel.w)
      throw UserError(fmt::format("{} with a non-square kernel needs an explicit stride (one stride for both axes)",
                                  name));
    stride = kernel.h;   // PyTorch's default: the kernel size
  }
  check_nchw(*x, name, "input");
  ir::Attrs attrs;
  ir::Window2d& win = attrs.window;
  win.kh = kernel.h, win.kw = kernel.w;
  win.stride_h = win.stride_w = *stride;
  win.pad_top = win.pad_bottom = win.pad_left = win.pad_right = padding;
  win.in_h = x->type.shape[2].size, win.in_w = x->type.shape[3].size;
  win.count_include_pad = op == Op::AvgPool2d ? include_pad : true;
  return make_op(op, {immediate(x)}, attrs);
}

Expr max_pool2d(const Expr& x, Pair2d kernel, const MaxPool2dOptions& o) {
  return pool2d(Op::MaxPool2d, x, kernel, o.stride, o.padding, true);
}

Expr avg_pool2d(const Expr& x, Pair2d kernel, const AvgPool2dOptions& o) {
  return pool2d(Op::AvgPool2d, x, kernel, o.stride, o.padding, o.count_include_pad);
}

Expr global_avg_pool(const Expr& x_expr, bool keepdims) {
  const NodePtr& x = require(x_expr, "global_avg_pool");
  check_nchw(*x, "global_avg_pool", "input");
  ir::Attrs attrs;
  attrs.axes = {2, 3};
  attrs.keepdims = keepdims;
  return make_op(Op::ReduceMean, {immediate(x)}, attrs);
}

Expr flatten(const Expr& x_expr, int64_t axis) {
  const NodePtr& x = require(x_expr, "flatten");
  ir::Shape shape;
  if (axis != 0) {
    std::string why;
    auto a = normalize_axis(axis, x->type.rank(), &why);
    if (!a) throw UserError(fmt::format("{} in flatten: the operand has type {}", why, describe(*x)));
    shape.assign(x->type.shape.begin(), x->type.shape.begin() + *a);
  }
  shape.push_back(ir::Dim::fixed(-1));
  ir::TensorType requested{x->type.dtype, shape};
  return make_op(Op::Reshape, {immediate(x)}, {}, &requested);
}

// ---- batch_norm ---------------------------------------------------------------------------

namespace {

void check_batch_norm_operands(const std::vector<NodePtr>& v, const BatchNormOptions& o) {
  if (!(o.momentum >= 0 && o.momentum <= 1))
    throw UserError(fmt::format("batch_norm's momentum must be in [0, 1], found {}", o.momentum));
  if (!(o.eps >= 0) || !std::isfinite(float(o.eps)))
    throw UserError(fmt::format("batch_norm's eps must be a finite number >= 0, found {}", o.eps));
  const ExprNode& x = *v[0];
  if (!ir::is_float(x.type.dtype) || (x.type.rank() != 2 && x.type.rank() != 4) || x.type.shape[1].is_symbolic())
    throw UserError(fmt::format("batch_norm needs a floating input [N, C, H, W] or [N, C] with a static C, but the "
                                "input is {}", describe(x)));
  const ir::Dim channels = x.type.shape[1];
  const char* roles[] = {"", "gamma", "beta", "running mean", "running variance"};
  for (size_t i = 1; i < 5; ++i)
    if (v[i]->type.rank() != 1 || !(v[i]->type.shape[0] == channels) || v[i]->type.dtype != x.type.dtype)
      throw UserError(fmt::format("batch_norm's {} must be {}[{}] (one per channel of the input, {}) but it is {}",
                                  roles[i], ir::dtype_name(x.type.dtype), channels.size, describe(x),
                                  describe(*v[i])));
}

// The shared variable batch_norm(training=true) updates, as sema's named_shared.
int64_t updated_shared(const ExprNode& n, const char* what) {
  if (n.kind != ExprNode::Kind::Shared)
    throw UserError(fmt::format("batch_norm(training=true) updates its {}, so it must be a shared variable (an Expr "
                                "from ModuleBuilder::shared); found {}", what, describe(n)));
  return n.index;
}

}  // namespace

Expr batch_norm(const Expr& x_expr, const Expr& gamma, const Expr& beta, const Expr& running_mean,
                const Expr& running_var, const BatchNormOptions& o) {
  std::vector<NodePtr> v;
  for (const Expr* e : {&x_expr, &gamma, &beta, &running_mean, &running_var}) v.push_back(require(*e, "batch_norm"));
  check_batch_norm_operands(v, o);
  const ir::TensorType& xt = v[0]->type;
  const bool planes = xt.rank() == 4;
  const Axes stats = planes ? Axes{0, 2, 3} : Axes{0};
  auto inverse_std = [&](const Expr& var) { return div(1.0, sqrt(add(var, o.eps))); };
  if (!o.training) {   // y = x * (gamma / sqrt(rv + eps)) + (beta - rm * that)
    const Expr scale = mul(gamma, inverse_std(running_var));
    const Expr shift = sub(beta, mul(running_mean, scale));
    const Expr shift_column = column(shift, planes);
    std::vector<NodePtr> first = v;   // sema's order: the arguments, scale, shift, shift's column
    for (const Expr* e : {&scale, &shift, &shift_column}) first.push_back(e->node());
    return builder_detail::with_sequence(add(mul(x_expr, column(scale, planes)), shift_column), first, {});
  }
  const int64_t plane = planes ? xt.shape[2].size * xt.shape[3].size : 1;
  const bool symbolic =
      xt.shape[0].is_symbolic() || (planes && (xt.shape[2].is_symbolic() || xt.shape[3].is_symbolic()));
  if (!symbolic && xt.shape[0].size * plane < 2)
    throw UserError(fmt::format("batch_norm(training=true) needs more than one value per channel, but the input is {}",
                                describe(*v[0])));
  const int64_t rm = updated_shared(*v[3], "running mean");
  const int64_t rv = updated_shared(*v[4], "running variance");
  if (rm == rv)
    throw UserError(fmt::format("batch_norm(training=true) updates its running mean and running variance apart, but "
                                "'{}' is given for both; declare one shared variable for each", v[3]->name));
  const Expr mean_ = mean(x_expr, stats);
  const Expr centered = sub(x_expr, column(mean_, planes));
  const Expr var_ = mean(mul(centered, centered), stats);
  const Expr beta_column = column(beta, planes);
  const Expr y = add(mul(centered, column(mul(gamma, inverse_std(var_)), planes)), beta_column);
  // The values per channel, for the unbiased variance: N * H * W, counted at run time when symbolic.
  Expr count = Expr(double(xt.shape[0].size * plane));
  if (symbolic) {
    ir::Shape ones = planes ? ir::Shape{xt.shape[0], xt.shape[2], xt.shape[3]} : ir::Shape{xt.shape[0]};
    count = sum(broadcast_to(cast(Expr(1.0), xt.dtype), shape_arg(ones)), Axes::list(all_axes(ones.size())));
  }
  const Expr unbiased = mul(var_, div(count, sub(count, 1.0)));
  auto running = [&](const Expr& old, const Expr& batch) {   // sema writes the batch's share first
    const Expr fresh = mul(Expr(o.momentum), batch);
    return builder_detail::with_sequence(add(mul(Expr(1 - o.momentum), old), fresh), {fresh.node()}, {});
  };
  const Expr next_mean = running(running_mean, mean_);
  const Expr next_var = running(running_var, unbiased);
  std::vector<NodePtr> first = v;   // sema's order: the arguments, the variance, beta's column
  first.push_back(var_.node());
  first.push_back(beta_column.node());
  return builder_detail::with_sequence(y, first,
                                       {{unbiased.node(), -1}, {next_mean.node(), rm}, {next_var.node(), rv}});
}

}  // namespace synk::dsl
