// Semantic analysis of the convolutional-network operations (docs/language.md, "Convolutional
// networks"): conv2d, max_pool2d, avg_pool2d, global_avg_pool, batch_norm and flatten(x, axis=).
// conv2d and the pools become window nodes (ir::Window2d attributes, checked by ir/window.cpp);
// a conv bias, global_avg_pool, batch_norm and flatten become ordinary IR (broadcast adds,
// reductions, pointwise ops, a reshape) so that they fuse with their neighbours and differentiate
// with the existing rules. batch_norm(training=true) also adds the updates of its running
// statistics to the function. The backward window ops are accepted with every attribute spelled
// out: the IR printer writes them after the gradient pass, and that text must read back.
#include <algorithm>
#include <array>
#include <fmt/format.h>

#include "dsl/sema.h"
#include "ir/type_infer.h"

namespace synk::dsl::sema {

using ir::DType;
using ir::Op;

namespace {

constexpr const char* kWindowBuiltins[] = {
    "conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool", "batch_norm",
    "conv2d_backward_data", "conv2d_backward_weights", "max_pool2d_backward", "avg_pool2d_backward"};

}  // namespace

bool is_window_builtin(std::string_view name) {
  return std::find(std::begin(kWindowBuiltins), std::end(kWindowBuiltins), name) != std::end(kWindowBuiltins);
}

Value FunctionAnalyzer::call_window_builtin(const ast::Expr& e) {
  const std::string& f = e.text;
  if (f == "conv2d") return call_conv2d(e);
  if (f == "max_pool2d") return call_pool2d(e, Op::MaxPool2d);
  if (f == "avg_pool2d") return call_pool2d(e, Op::AvgPool2d);
  if (f == "global_avg_pool") return call_global_avg_pool(e);
  if (f == "batch_norm") return call_batch_norm(e);
  if (f == "conv2d_backward_data") return call_window_backward(e, Op::Conv2dBackwardData);
  if (f == "conv2d_backward_weights") return call_window_backward(e, Op::Conv2dBackwardWeights);
  if (f == "max_pool2d_backward") return call_window_backward(e, Op::MaxPool2dBackward);
  return call_window_backward(e, Op::AvgPool2dBackward);
}

// ---- Arguments ----------------------------------------------------------------------------

std::optional<std::array<int64_t, 2>> FunctionAnalyzer::pair_argument(const ast::Expr& written, const char* what,
                                                                      int64_t at_least) {
  const ast::Expr& arg = literal_argument(written);
  auto v = int_list_argument(arg, what, true);
  if (!v) return std::nullopt;
  if (v->size() != 1 && v->size() != 2) {
    error(arg.loc, fmt::format("{} must be an integer or a pair [h, w], found '{}'", what, expr_text(arg)));
    return std::nullopt;
  }
  std::array<int64_t, 2> out{(*v)[0], v->back()};
  for (int64_t x : out)
    if (x < at_least) {
      error(arg.loc, fmt::format("{} must be at least {}, found {}", what, at_least, x));
      return std::nullopt;
    }
  return out;
}

// padding: an integer, [h, w], [top, bottom, left, right] or "same" (a nullopt array: pads are
// computed once the kernel is known). Sets *same for "same".
std::optional<std::array<int64_t, 4>> FunctionAnalyzer::padding_argument(const ast::Expr& written, const char* op,
                                                                         bool* same) {
  const ast::Expr& arg = literal_argument(written);
  *same = false;
  if (arg.kind == ast::ExprKind::StringLiteral) {
    if (arg.text == "same") {
      *same = true;
      return std::array<int64_t, 4>{0, 0, 0, 0};
    }
    error(arg.loc, fmt::format("{}'s padding must be an integer, a list or \"same\", found '{}'", op, expr_text(arg)));
    return std::nullopt;
  }
  std::string what = fmt::format("{}'s padding", op);
  auto v = int_list_argument(arg, what.c_str(), true);
  if (!v) return std::nullopt;
  if (v->size() != 1 && v->size() != 2 && v->size() != 4) {
    error(arg.loc, fmt::format("{} must be an integer, [h, w] or [top, bottom, left, right], found '{}'", what,
                               expr_text(arg)));
    return std::nullopt;
  }
  for (int64_t x : *v)
    if (x < 0) {
      error(arg.loc, fmt::format("{} must not be negative, found {}", what, x));
      return std::nullopt;
    }
  const std::vector<int64_t>& p = *v;
  if (p.size() == 1) return std::array<int64_t, 4>{p[0], p[0], p[0], p[0]};
  if (p.size() == 2) return std::array<int64_t, 4>{p[0], p[0], p[1], p[1]};
  return std::array<int64_t, 4>{p[0], p[1], p[2], p[3]};
}

// x as an NCHW tensor with static C, H, W (the batch may be a symbol); reports at the argument.
bool FunctionAnalyzer::check_nchw(const Value& x, const ast::Expr& arg, const char* op, const char* role) {
  std::string text = expr_text(arg);
  if (!ir::is_float(x.type.dtype)) {
    error(arg.loc, fmt::format("{} needs a floating {} but '{}' is {}", op, role, text, ir::type_str(x.type)));
    return false;
  }
  if (x.type.rank() != 4) {
    error(arg.loc, fmt::format("{} needs its {} as [N, C, H, W] (rank 4) but '{}' is {}", op, role, text,
                               ir::type_str(x.type)));
    return false;
  }
  for (size_t d = 1; d < 4; ++d)
    if (x.type.shape[d].is_symbolic()) {
      error(arg.loc, fmt::format("{} needs static C, H and W but '{}' is {} (only the batch N may be a symbol)", op,
                                 text, ir::type_str(x.type)));
      return false;
    }
  return true;
}

// ---- conv2d -------------------------------------------------------------------------------

Value FunctionAnalyzer::call_conv2d(const ast::Expr& e) {
  if (!check_arguments(e, 2, 3, {"stride", "padding", "dilation", "groups"})) return Value::error();
  Value x = operand(*e.args[0]);
  Value w = operand(*e.args[1]);
  Value b = e.args.size() == 3 ? operand(*e.args[2]) : Value{};
  ir::Window2d win;
  std::optional<std::array<int64_t, 2>> stride = std::array<int64_t, 2>{1, 1}, dilation = stride;
  std::optional<int64_t> groups = 1;
  std::optional<std::array<int64_t, 4>> padding = std::array<int64_t, 4>{0, 0, 0, 0};
  bool same = false;
  const ast::Expr* padding_arg = keyword(e, "padding");
  if (const ast::Expr* a = keyword(e, "stride")) stride = pair_argument(*a, "conv2d's stride", 1);
  if (const ast::Expr* a = keyword(e, "dilation")) dilation = pair_argument(*a, "conv2d's dilation", 1);
  if (const ast::Expr* a = keyword(e, "groups")) {
    groups = int_argument(*a, "conv2d's groups");
    if (groups && *groups < 1) {
      error(a->loc, fmt::format("conv2d's groups must be at least 1, found {}", *groups));
      groups.reset();
    }
  }
  if (padding_arg) padding = padding_argument(*padding_arg, "conv2d", &same);
  if (!stride || !dilation || !groups || !padding || x.failed() || w.failed() || (e.args.size() == 3 && b.failed()))
    return Value::error();
  if (!check_nchw(x, *e.args[0], "conv2d", "input")) return Value::error();
  std::string wtext = expr_text(*e.args[1]);
  if (!ir::is_float(w.type.dtype) || w.type.rank() != 4 ||
      std::any_of(w.type.shape.begin(), w.type.shape.end(), [](const ir::Dim& d) { return d.is_symbolic(); })) {
    error(e.args[1]->loc, fmt::format("conv2d needs static floating weights [O, C/groups, kh, kw] but '{}' is {}",
                                      wtext, ir::type_str(w.type)));
    return Value::error();
  }
  if (x.type.dtype != w.type.dtype) {
    error(e.args[1]->loc, fmt::format("conv2d needs weights of the input's dtype: '{}' is {} but '{}' is {}", wtext,
                                      ir::type_str(w.type), expr_text(*e.args[0]), ir::type_str(x.type)));
    return Value::error();
  }
  win.kh = w.type.shape[2].size, win.kw = w.type.shape[3].size;
  win.stride_h = (*stride)[0], win.stride_w = (*stride)[1];
  win.dilation_h = (*dilation)[0], win.dilation_w = (*dilation)[1];
  win.groups = *groups;
  win.in_h = x.type.shape[2].size, win.in_w = x.type.shape[3].size;
  if (same) {
    if (win.stride_h != 1 || win.stride_w != 1) {
      error(padding_arg->loc, fmt::format("conv2d's padding=\"same\" needs stride 1 (as in PyTorch), found stride "
                                          "[{}, {}]", win.stride_h, win.stride_w));
      return Value::error();
    }
    const int64_t th = win.dilation_h * (win.kh - 1), tw = win.dilation_w * (win.kw - 1);
    padding = std::array<int64_t, 4>{th / 2, th - th / 2, tw / 2, tw - tw / 2};
  }
  win.pad_top = (*padding)[0], win.pad_bottom = (*padding)[1], win.pad_left = (*padding)[2];
  win.pad_right = (*padding)[3];
  ir::Attrs attrs;
  attrs.window = win;
  Value y = apply(Op::Conv2d, {x, w}, attrs, e.loc);
  if (y.failed() || e.args.size() < 3) return y;
  // The bias: a broadcast add of [O, 1, 1], which fuses with what follows (ReLU, ...).
  const ir::Dim& out = y.type.shape[1];
  if (b.type.rank() != 1 || !(b.type.shape[0] == out) || b.type.dtype != y.type.dtype) {
    error(e.args[2]->loc, fmt::format("conv2d's bias must be {}[{}] (one per output channel) but '{}' is {}",
                                      ir::dtype_name(y.type.dtype), out.size, expr_text(*e.args[2]),
                                      ir::type_str(b.type)));
    return Value::error();
  }
  ir::TensorType column{b.type.dtype, {out, ir::Dim::fixed(1), ir::Dim::fixed(1)}};
  Value rb = apply(Op::Reshape, {b}, ir::Attrs{}, e.args[2]->loc, &column);
  return pointwise(Op::Add, {y, rb}, e.loc);
}

// ---- Pooling ------------------------------------------------------------------------------

Value FunctionAnalyzer::call_pool2d(const ast::Expr& e, Op op) {
  const char* name = op == Op::MaxPool2d ? "max_pool2d" : "avg_pool2d";
  bool ok = op == Op::MaxPool2d ? check_arguments(e, 2, 2, {"stride", "padding"})
                                : check_arguments(e, 2, 2, {"stride", "padding", "count_include_pad"});
  if (!ok) return Value::error();
  Value x = operand(*e.args[0]);
  std::string kernel_what = fmt::format("{}'s kernel", name);
  auto kernel = pair_argument(*e.args[1], kernel_what.c_str(), 1);
  std::optional<int64_t> stride, padding = 0;
  std::optional<bool> include_pad = true;
  // Pooling takes one stride and one padding for both axes (unlike conv2d): the message says so.
  const std::string stride_what = fmt::format("{}'s stride (one integer for both axes)", name);
  const std::string padding_what = fmt::format("{}'s padding (one integer for both axes)", name);
  if (const ast::Expr* a = keyword(e, "stride")) {
    stride = int_argument(*a, stride_what.c_str());
    if (stride && *stride < 1) {
      error(a->loc, fmt::format("{}'s stride must be at least 1, found {}", name, *stride));
      return Value::error();
    }
    if (!stride) return Value::error();
  }
  if (const ast::Expr* a = keyword(e, "padding")) {
    padding = int_argument(*a, padding_what.c_str());
    if (padding && *padding < 0) {
      error(a->loc, fmt::format("{}'s padding must not be negative, found {}", name, *padding));
      return Value::error();
    }
  }
  if (const ast::Expr* a = keyword(e, "count_include_pad")) include_pad = bool_argument(*a, "count_include_pad");
  if (!kernel || !padding || !include_pad || x.failed()) return Value::error();
  if (!stride) {
    if ((*kernel)[0] != (*kernel)[1]) {
      error(e.args[1]->loc, fmt::format("{} with a non-square kernel needs an explicit stride= (one stride for both "
                                        "axes)", name));
      return Value::error();
    }
    stride = (*kernel)[0];   // PyTorch's default: the kernel size
  }
  if (!check_nchw(x, *e.args[0], name, "input")) return Value::error();
  ir::Attrs attrs;
  ir::Window2d& win = attrs.window;
  win.kh = (*kernel)[0], win.kw = (*kernel)[1];
  win.stride_h = win.stride_w = *stride;
  win.pad_top = win.pad_bottom = win.pad_left = win.pad_right = *padding;
  win.in_h = x.type.shape[2].size, win.in_w = x.type.shape[3].size;
  win.count_include_pad = op == Op::AvgPool2d ? *include_pad : true;
  return apply(op, {x}, attrs, e.loc);
}

Value FunctionAnalyzer::call_global_avg_pool(const ast::Expr& e) {
  if (!check_arguments(e, 1, 1, {"keepdims"})) return Value::error();
  Value x = operand(*e.args[0]);
  std::optional<bool> keep = false;
  if (const ast::Expr* k = keyword(e, "keepdims")) keep = bool_argument(*k, "keepdims");
  if (!keep || x.failed()) return Value::error();
  if (!check_nchw(x, *e.args[0], "global_avg_pool", "input")) return Value::error();
  ir::Attrs attrs;
  attrs.axes = {2, 3};
  attrs.keepdims = *keep;
  return apply(Op::ReduceMean, {x}, attrs, e.loc);
}

// flatten(x): every axis into one; flatten(x, axis=k): axes before k kept, the rest into one
// (axis=1 gives [N, C*H*W], what a classifier head after convolutions needs).
Value FunctionAnalyzer::call_flatten(const ast::Expr& e) {
  if (!check_arguments(e, 1, 1, {"axis"})) return Value::error();
  Value x = operand(*e.args[0]);
  std::optional<int64_t> axis = 0;
  const ast::Expr* axis_arg = keyword(e, "axis");
  if (axis_arg) axis = int_argument(*axis_arg, "flatten's axis");
  if (!axis || x.failed()) return Value::error();
  ir::Shape shape;
  if (*axis != 0) {
    std::string why;
    auto a = normalize_axis(*axis, x.type.rank(), &why);
    if (!a) {
      error(axis_arg->loc, fmt::format("{} in flatten: '{}' has type {}", why, expr_text(*e.args[0]),
                                       ir::type_str(x.type)));
      return Value::error();
    }
    shape.assign(x.type.shape.begin(), x.type.shape.begin() + *a);
  }
  shape.push_back(ir::Dim::fixed(-1));
  ir::TensorType requested{x.type.dtype, shape};
  return apply(Op::Reshape, {x}, ir::Attrs{}, e.loc, &requested);
}

}  // namespace synk::dsl::sema
