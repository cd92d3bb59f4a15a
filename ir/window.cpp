// Type inference of conv2d and pooling (see window.h). Inputs are NCHW with a static C, H and W
// (the batch N may be a symbol), or NHWC for a channels_last convolution; weights are static
// OIHW. Output sizes and parameter checks come from dnn_params.h with N = 1, so a symbolic batch
// is checked once for every binding.
#include "ir/window.h"

#include <fmt/format.h>

#include <vector>

namespace synk::ir {

using dsl::InferResult;

namespace {

InferResult fail(std::string message) { return InferResult{std::nullopt, std::move(message)}; }
InferResult ok(TensorType t) { return InferResult{std::move(t), {}}; }

// The operand must be a float NCHW tensor whose axes from `first_static` on are static.
std::string nchw_error(const char* op, const char* what, const TensorType& t, size_t first_static) {
  if (!is_float(t.dtype))
    return fmt::format("{} needs a floating {} but it is {}", op, what, type_str(t));
  if (t.rank() != 4)
    return fmt::format("{} needs a rank-4 {} ({}) but it is {}", op, what,
                       first_static == 0 ? "[O, C/groups, kh, kw]" : "[N, C, H, W]", type_str(t));
  for (size_t d = first_static; d < 4; ++d)
    if (t.shape[d].is_symbolic())
      return fmt::format("{} needs a static size along axis {} of the {}, but it is {}", op, d, what, type_str(t));
  return "";
}

Shape nchw(const Dim& n, int64_t c, int64_t h, int64_t w) { return {n, Dim::fixed(c), Dim::fixed(h), Dim::fixed(w)}; }

InferResult infer_conv(Op op, std::span<const TensorType> xs, const Window2d& win) {
  const char* name = op_name(op);
  // Conv2d: (x, w); BackwardData: (dy, w); BackwardWeights: (x, dy).
  const TensorType& first = xs[0];
  const TensorType& second = xs[1];
  const bool data = op == Op::Conv2dBackwardData, weights = op == Op::Conv2dBackwardWeights;
  if (std::string e = nchw_error(name, data ? "output gradient" : "input", first, 1); !e.empty()) return fail(e);
  if (std::string e = nchw_error(name, weights ? "output gradient" : "weights", second, weights ? 1 : 0); !e.empty())
    return fail(e);
  if (first.dtype != second.dtype)
    return fail(fmt::format("{} needs operands of one dtype, found {} and {}", name, type_str(first), type_str(second)));
  auto sz = [](const TensorType& t, size_t d) { return t.shape[d].size; };
  const int64_t c = data ? sz(second, 1) * win.groups : sz(first, 1);
  const int64_t h = op == Op::Conv2d || weights ? sz(first, 2) : win.in_h;
  const int64_t w = op == Op::Conv2d || weights ? sz(first, 3) : win.in_w;
  const int64_t out = weights ? sz(second, 1) : sz(second, 0);
  if (op == Op::Conv2d) {
    if (win.kh != sz(second, 2) || win.kw != sz(second, 3))
      return fail(fmt::format("conv2d: the window {}x{} differs from the weights' kernel {}", win.kh, win.kw,
                              type_str(second)));
    if (win.groups >= 1 && c % win.groups == 0 && sz(second, 1) * win.groups != c)
      return fail(fmt::format("conv2d: the input has C = {} channels but the weights {} expect C/groups = {} "
                              "(groups = {}), i.e. {} channels",
                              c, type_str(second), sz(second, 1), win.groups, sz(second, 1) * win.groups));
  }
  if (op == Op::Conv2d && (win.in_h != h || win.in_w != w))
    return fail(fmt::format("conv2d: attribute plane {}x{} differs from the input {}", win.in_h, win.in_w, type_str(first)));
  const dnn::Conv2dParams p = conv2d_params(win, 1, c, h, w, out);
  if (std::string e = dnn::conv2d_error(p); !e.empty()) return fail(fmt::format("conv2d: {}", e));
  if (weights && sz(first, 1) % win.groups != 0) return fail("conv2d_backward_weights: groups do not divide C");
  const dnn::Size2d o = dnn::conv2d_output_size(p);
  if (op == Op::Conv2d) return ok(TensorType{first.dtype, nchw(first.shape[0], out, o.h, o.w)});
  const TensorType& dy = data ? first : second;
  if (sz(dy, 2) != o.h || sz(dy, 3) != o.w || (weights && !(first.shape[0] == second.shape[0])))
    return fail(fmt::format("{}: the output gradient {} does not match the convolution's output [{}, {}, {}, {}]", name,
                            type_str(dy), first.shape[0].is_symbolic() ? first.shape[0].symbol : "N", out, o.h, o.w));
  if (data) return ok(TensorType{first.dtype, nchw(first.shape[0], c, h, w)});
  return ok(TensorType{first.dtype, {Dim::fixed(out), Dim::fixed(c / win.groups), Dim::fixed(win.kh), Dim::fixed(win.kw)}});
}

// A channels_last convolution is the NCHW one on permuted activations: the same checks and sizes.
InferResult infer_conv_channels_last(Op op, std::span<const TensorType> xs, Window2d win) {
  win.channels_last = false;
  // A wrong rank stays as it is, for infer_conv's message.
  auto to_nchw = [](const TensorType& t) { return t.rank() == 4 ? transposed_type(t, kNhwcToNchw) : t; };
  std::vector<TensorType> nchw_operands(xs.begin(), xs.end());
  nchw_operands[0] = to_nchw(xs[0]);
  if (op == Op::Conv2dBackwardWeights) nchw_operands[1] = to_nchw(xs[1]);
  InferResult r = infer_conv(op, nchw_operands, win);
  if (r.type && op != Op::Conv2dBackwardWeights) r.type = transposed_type(*r.type, kNchwToNhwc);
  return r;
}

InferResult infer_pool(Op op, std::span<const TensorType> xs, const Window2d& win) {
  const char* name = op_name(op);
  const bool backward = op == Op::MaxPool2dBackward || op == Op::AvgPool2dBackward;
  const TensorType& first = xs[0];
  if (std::string e = nchw_error(name, op == Op::AvgPool2dBackward ? "output gradient" : "input", first, 1); !e.empty())
    return fail(e);
  const bool from_plane = op == Op::AvgPool2dBackward;
  const int64_t c = first.shape[1].size;
  const int64_t h = from_plane ? win.in_h : first.shape[2].size, w = from_plane ? win.in_w : first.shape[3].size;
  if (!from_plane && (win.in_h != h || win.in_w != w))
    return fail(fmt::format("{}: attribute plane {}x{} differs from the input {}", name, win.in_h, win.in_w, type_str(first)));
  if (win.stride_h != win.stride_w || win.pad_top != win.pad_bottom || win.pad_top != win.pad_left ||
      win.pad_top != win.pad_right || win.dilation_h != 1 || win.dilation_w != 1 || win.groups != 1)
    return fail(fmt::format("{} takes one stride and one padding for both axes", name));
  const dnn::Pool2dParams p = pool2d_params(op, win, 1, c, h, w);
  if (std::string e = dnn::pool2d_error(p); !e.empty())
    return fail(fmt::format("{}: {}", op == Op::MaxPool2d || op == Op::MaxPool2dBackward ? "max_pool2d" : "avg_pool2d", e));
  const dnn::Size2d o = dnn::pool2d_output_size(p);
  const TensorType result{first.dtype, nchw(first.shape[0], c, o.h, o.w)};
  if (!backward) return ok(result);
  const TensorType& dy = op == Op::MaxPool2dBackward ? xs[1] : xs[0];
  if (!(dy.shape == result.shape) || dy.dtype != first.dtype)
    return fail(fmt::format("{}: the output gradient {} does not match the pooling's output {}", name, type_str(dy),
                            type_str(result)));
  if (op == Op::MaxPool2dBackward) return ok(first);
  return ok(TensorType{first.dtype, nchw(first.shape[0], c, h, w)});
}

}  // namespace

TensorType transposed_type(const TensorType& t, const std::vector<int64_t>& perm) {
  TensorType out{t.dtype, {}};
  for (int64_t p : perm) out.shape.push_back(t.shape.at(size_t(p)));
  return out;
}

dnn::Conv2dParams conv2d_params(const Window2d& win, int64_t n, int64_t c, int64_t h, int64_t w, int64_t out_channels) {
  dnn::Conv2dParams p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.out_channels = out_channels, p.kh = win.kh, p.kw = win.kw;
  p.stride_h = win.stride_h, p.stride_w = win.stride_w;
  p.pad_top = win.pad_top, p.pad_bottom = win.pad_bottom, p.pad_left = win.pad_left, p.pad_right = win.pad_right;
  p.dilation_h = win.dilation_h, p.dilation_w = win.dilation_w, p.groups = win.groups;
  p.has_bias = false;
  return p;
}

dnn::Pool2dParams pool2d_params(Op op, const Window2d& win, int64_t n, int64_t c, int64_t h, int64_t w) {
  const bool max = op == Op::MaxPool2d || op == Op::MaxPool2dBackward;
  return dnn::Pool2dParams{n, c, h, w, win.kh, win.kw, win.stride_h, win.pad_top,
                           max ? dnn::PoolKind::max : dnn::PoolKind::avg, win.count_include_pad};
}

InferResult infer_window_type(Op op, std::span<const TensorType> operands, const Attrs& attrs) {
  const size_t want = op == Op::MaxPool2d || op == Op::AvgPool2d || op == Op::AvgPool2dBackward ? 1 : 2;
  if (operands.size() != want)
    return fail(fmt::format("{} takes {} operand{} but {} {} given", op_name(op), want, want == 1 ? "" : "s",
                            operands.size(), operands.size() == 1 ? "was" : "were"));
  switch (op) {
    case Op::Conv2d: case Op::Conv2dBackwardData: case Op::Conv2dBackwardWeights:
      if (attrs.window.channels_last) return infer_conv_channels_last(op, operands, attrs.window);
      return infer_conv(op, operands, attrs.window);
    default:
      if (attrs.window.channels_last) return fail(fmt::format("{} has no channels_last form", op_name(op)));
      return infer_pool(op, operands, attrs.window);
  }
}

}  // namespace synk::ir
