// The CUDA kernels of the dnn steps (KernelKind::Dnn: conv2d, its two backward passes, max and
// average pooling and their backward passes), generated for NVRTC as direct loops with one thread
// per output element: the backward passes are gathers (each input or weight cell sums the taps
// that reach it in a fixed order), never scatters with atomics, so every result is deterministic
// and bit-identical from run to run. They follow ir/dnn_reference.h exactly (the max-pool rule:
// padding never wins, ties go to the first maximal cell in row-major window order, a NaN wins),
// and the emulator runs them in the tests against the float64 reference. Every size is a
// constant of the kernel except the batch, which may be a symbol. This is the portable fallback;
// cuDNN is not used yet.
#include <fmt/format.h>

#include "base/errors.h"
#include "compiler/codegen/emitter.h"
#include "compiler/cuda/codegen_cuda.h"
#include "ir/window.h"

namespace synk::compiler::cuda_detail {

namespace {

using emitter::Writer;

// The operands' and the output's buffers, the element type, and the batch as a C expression.
struct DnnStep {
  const ir::Node* node = nullptr;
  std::vector<std::string> in;   // b<k> of each operand
  std::string out, T, batch;
};

DnnStep dnn_step(const KernelPlan& plan, const Kernel& k) {
  DnnStep s;
  s.node = &emitter::node_of(plan, k.roots.at(0));
  for (ir::NodeId o : s.node->operands) s.in.push_back(buf(emitter::buffer_of(plan, o)));
  s.out = buf(emitter::buffer_of(plan, k.roots.at(0)));
  s.T = emitter::c_type(s.node->type.dtype);
  s.batch = Poly::dim(emitter::node_of(plan, s.node->operands.at(0)).type.shape.at(0)).c_expr();
  return s;
}

int64_t static_dim(const KernelPlan& plan, ir::NodeId id, size_t d) {
  const ir::Dim& dim = emitter::node_of(plan, id).type.shape.at(d);
  if (dim.is_symbolic()) synk::internal_error("a dnn step with a symbolic channel or spatial size");
  return dim.size;
}

// The constants of a convolution: input [N, C, H, W], weights [O, C/G, KH, KW], output [N, O, OH, OW].
void emit_conv_constants(Writer& w, const DnnStep& s, const dnn::Conv2dParams& p) {
  const dnn::Size2d o = dnn::conv2d_output_size(p);
  w.line(fmt::format("const int64_t N = {};", s.batch));
  w.line(fmt::format("const int64_t C = {}, H = {}, W = {}, O = {}, KH = {}, KW = {}, OH = {}, OW = {};", p.c, p.h,
                     p.w, p.out_channels, p.kh, p.kw, o.h, o.w));
  w.line(fmt::format("const int64_t SH = {}, SW = {}, PT = {}, PL = {}, DH = {}, DW = {}, CG = {}, OG = {};",
                     p.stride_h, p.stride_w, p.pad_top, p.pad_left, p.dilation_h, p.dilation_w, p.c / p.groups,
                     p.out_channels / p.groups));
  w.line("(void)N; (void)C; (void)H; (void)W; (void)O; (void)KH; (void)KW; (void)OH; (void)OW;");
  w.line("(void)SH; (void)SW; (void)PT; (void)PL; (void)DH; (void)DW; (void)CG; (void)OG;");
}

// y[n, oc, oh, ow] = sum over the group's channels and the window of x * w.
void emit_conv_forward(Writer& w, const DnnStep& s) {
  const std::string &x = s.in.at(0), &wt = s.in.at(1);
  w.open("for (int64_t e = synk_thread(); e < N * O * OH * OW; e += synk_threads())");
  w.line("const int64_t ow = e % OW, oh = e / OW % OH, oc = e / (OW * OH) % O, n = e / (OW * OH * O);");
  w.line("const int64_t g = oc / OG;");
  w.line(fmt::format("{} acc = 0;", s.T));
  w.open("for (int64_t ic = 0; ic < CG; ++ic)");
  w.open("for (int64_t i = 0; i < KH; ++i)");
  w.line("const int64_t ih = oh * SH - PT + i * DH;");
  w.line("if (ih < 0 || ih >= H) continue;");
  w.open("for (int64_t j = 0; j < KW; ++j)");
  w.line("const int64_t iw = ow * SW - PL + j * DW;");
  w.line("if (iw < 0 || iw >= W) continue;");
  w.line(fmt::format("acc += {}[((n * C + g * CG + ic) * H + ih) * W + iw] * {}[((oc * CG + ic) * KH + i) * KW + j];", x, wt));
  w.close();
  w.close();
  w.close();
  w.line(fmt::format("{}[e] = acc;", s.out));
  w.close();
}

// dx[n, c, ih, iw] = sum over the group's filters and the taps (oh, ow) that read (ih, iw).
void emit_conv_backward_data(Writer& w, const DnnStep& s) {
  const std::string &dy = s.in.at(0), &wt = s.in.at(1);
  w.open("for (int64_t e = synk_thread(); e < N * C * H * W; e += synk_threads())");
  w.line("const int64_t iw = e % W, ih = e / W % H, c = e / (W * H) % C, n = e / (W * H * C);");
  w.line("const int64_t g = c / CG, ic = c % CG;");
  w.line(fmt::format("{} acc = 0;", s.T));
  w.open("for (int64_t oc = g * OG; oc < (g + 1) * OG; ++oc)");
  w.open("for (int64_t i = 0; i < KH; ++i)");
  w.line("const int64_t th = ih + PT - i * DH;");
  w.line("if (th < 0 || th % SH != 0 || th / SH >= OH) continue;");
  w.open("for (int64_t j = 0; j < KW; ++j)");
  w.line("const int64_t tw = iw + PL - j * DW;");
  w.line("if (tw < 0 || tw % SW != 0 || tw / SW >= OW) continue;");
  w.line(fmt::format("acc += {}[((n * O + oc) * OH + th / SH) * OW + tw / SW] * {}[((oc * CG + ic) * KH + i) * KW + j];",
                     dy, wt));
  w.close();
  w.close();
  w.close();
  w.line(fmt::format("{}[e] = acc;", s.out));
  w.close();
}

// dw[oc, ic, i, j] = sum over the batch and the output positions of dy * the x the tap read.
void emit_conv_backward_weights(Writer& w, const DnnStep& s) {
  const std::string &x = s.in.at(0), &dy = s.in.at(1);
  w.open("for (int64_t e = synk_thread(); e < O * CG * KH * KW; e += synk_threads())");
  w.line("const int64_t j = e % KW, i = e / KW % KH, ic = e / (KW * KH) % CG, oc = e / (KW * KH * CG);");
  w.line("const int64_t c = oc / OG * CG + ic;");
  w.line(fmt::format("{} acc = 0;", s.T));
  w.open("for (int64_t n = 0; n < N; ++n)");
  w.open("for (int64_t oh = 0; oh < OH; ++oh)");
  w.line("const int64_t ih = oh * SH - PT + i * DH;");
  w.line("if (ih < 0 || ih >= H) continue;");
  w.open("for (int64_t ow = 0; ow < OW; ++ow)");
  w.line("const int64_t iw = ow * SW - PL + j * DW;");
  w.line("if (iw < 0 || iw >= W) continue;");
  w.line(fmt::format("acc += {}[((n * O + oc) * OH + oh) * OW + ow] * {}[((n * C + c) * H + ih) * W + iw];", dy, x));
  w.close();
  w.close();
  w.close();
  w.line(fmt::format("{}[e] = acc;", s.out));
  w.close();
}

// The constants of a pool over planes of [H, W] (N * C planes) giving [OH, OW].
void emit_pool_constants(Writer& w, const DnnStep& s, const dnn::Pool2dParams& p) {
  const dnn::Size2d o = dnn::pool2d_output_size(p);
  w.line(fmt::format("const int64_t N = {};", s.batch));
  w.line(fmt::format("const int64_t C = {}, H = {}, W = {}, KH = {}, KW = {}, OH = {}, OW = {}, S = {}, P = {};", p.c,
                     p.h, p.w, p.kh, p.kw, o.h, o.w, p.stride, p.padding));
  w.line("(void)N; (void)C; (void)H; (void)W; (void)KH; (void)KW; (void)OH; (void)OW; (void)S; (void)P;");
}

// Defines h0, h1, w0, w1: the real rows and columns [h0, h1) x [w0, w1) of window (oh, ow).
void emit_window(Writer& w) {
  w.line("const int64_t h0 = oh * S - P > 0 ? oh * S - P : 0, h1 = oh * S - P + KH < H ? oh * S - P + KH : H;");
  w.line("const int64_t w0 = ow * S - P > 0 ? ow * S - P : 0, w1 = ow * S - P + KW < W ? ow * S - P + KW : W;");
}

// Defines `at`, the index within plane `xp` of window (oh, ow)'s maximum (ir/dnn_reference.h's rule).
void emit_argmax(Writer& w, const DnnStep& s) {
  emit_window(w);
  w.line(fmt::format("{} best = -{};", s.T, s.node->type.dtype == ir::DType::F32 ? "__builtin_inff()" : "__builtin_inf()"));
  w.line("int64_t at = h0 * W + w0;");
  w.open("for (int64_t ih = h0; ih < h1; ++ih)");
  w.open("for (int64_t iw = w0; iw < w1; ++iw)");
  w.line(fmt::format("const {} v = xp[ih * W + iw];", s.T));
  w.line("if (v > best || v != v) { best = v; at = ih * W + iw; }");
  w.close();
  w.close();
}

// The divisor of window (oh, ow), as avg_pool2d_divisor.
std::string avg_divisor(const dnn::Pool2dParams& p) {
  return p.count_include_pad ? "(KH * KW)" : "((h1 - h0) * (w1 - w0))";
}

void emit_pool_forward(Writer& w, const DnnStep& s, const dnn::Pool2dParams& p) {
  const std::string& x = s.in.at(0);
  w.open("for (int64_t e = synk_thread(); e < N * C * OH * OW; e += synk_threads())");
  w.line("const int64_t ow = e % OW, oh = e / OW % OH, plane = e / (OW * OH);");
  w.line(fmt::format("const {}* xp = {} + plane * H * W;", s.T, x));
  if (p.kind == dnn::PoolKind::max) {
    emit_argmax(w, s);
    w.line(fmt::format("{}[e] = xp[at];", s.out));
  } else {
    emit_window(w);
    w.line(fmt::format("{} acc = 0;", s.T));
    w.line("for (int64_t ih = h0; ih < h1; ++ih) for (int64_t iw = w0; iw < w1; ++iw) acc += xp[ih * W + iw];");
    w.line(fmt::format("{}[e] = acc / ({}){};", s.out, s.T, avg_divisor(p)));
  }
  w.close();
}

// dx[plane, ih, iw] = the sum, over the windows that contain (ih, iw) in (oh, ow) order, of dy
// (max: where the window chose this cell; average: divided by the window's divisor).
void emit_pool_backward(Writer& w, const DnnStep& s, const dnn::Pool2dParams& p) {
  const bool max = p.kind == dnn::PoolKind::max;
  const std::string& dy = s.in.at(max ? 1 : 0);
  w.open("for (int64_t e = synk_thread(); e < N * C * H * W; e += synk_threads())");
  w.line("const int64_t iw = e % W, ih0 = e / W % H, plane = e / (W * H);");
  if (max) w.line(fmt::format("const {}* xp = {} + plane * H * W;", s.T, s.in.at(0)));
  w.line(fmt::format("const {}* dyp = {} + plane * OH * OW;", s.T, dy));
  w.line(fmt::format("{} acc = 0;", s.T));
  // Windows whose rows [oh * S - P, oh * S - P + KH) contain ih0 (likewise for columns).
  w.line("const int64_t oh_lo = ih0 + P - KH + 1 <= 0 ? 0 : (ih0 + P - KH + 1 + S - 1) / S;");
  w.line("const int64_t oh_hi = (ih0 + P) / S < OH - 1 ? (ih0 + P) / S : OH - 1;");
  w.line("const int64_t ow_lo = iw + P - KW + 1 <= 0 ? 0 : (iw + P - KW + 1 + S - 1) / S;");
  w.line("const int64_t ow_hi = (iw + P) / S < OW - 1 ? (iw + P) / S : OW - 1;");
  w.open("for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)");
  w.open("for (int64_t ow = ow_lo; ow <= ow_hi; ++ow)");
  if (max) {
    w.open("");
    emit_argmax(w, s);
    w.line("if (at == ih0 * W + iw) acc += dyp[oh * OW + ow];");
    w.close();
  } else {
    emit_window(w);
    w.line(fmt::format("acc += dyp[oh * OW + ow] / ({}){};", s.T, avg_divisor(p)));
  }
  w.close();
  w.close();
  w.line(fmt::format("{}[e] = acc;", s.out));
  w.close();
}

}  // namespace

void emit_cuda_dnn(Writer& w, const KernelPlan& plan, const Kernel& k, CudaKernelLaunch& launch) {
  const DnnStep s = dnn_step(plan, k);
  const ir::Node& node = *s.node;
  const ir::Window2d& win = node.attrs.window;
  const ir::NodeId a = node.operands.at(0), b = node.operands.back();
  auto d = [&](ir::NodeId id, size_t i) { return static_dim(plan, id, i); };
  // The batch does not change the descriptor's checks or sizes; 1 stands for it here.
  w.open("");
  switch (node.op) {
    case ir::Op::Conv2d:
      emit_conv_constants(w, s, ir::conv2d_params(win, 1, d(a, 1), d(a, 2), d(a, 3), d(b, 0)));
      emit_conv_forward(w, s);
      break;
    case ir::Op::Conv2dBackwardData:
      emit_conv_constants(w, s, ir::conv2d_params(win, 1, d(b, 1) * win.groups, win.in_h, win.in_w, d(b, 0)));
      emit_conv_backward_data(w, s);
      break;
    case ir::Op::Conv2dBackwardWeights:
      emit_conv_constants(w, s, ir::conv2d_params(win, 1, d(a, 1), d(a, 2), d(a, 3), d(b, 1)));
      emit_conv_backward_weights(w, s);
      break;
    case ir::Op::MaxPool2d:
    case ir::Op::AvgPool2d: {
      const dnn::Pool2dParams p = ir::pool2d_params(node.op, win, 1, d(a, 1), d(a, 2), d(a, 3));
      emit_pool_constants(w, s, p);
      emit_pool_forward(w, s, p);
      break;
    }
    case ir::Op::MaxPool2dBackward: {
      const dnn::Pool2dParams p = ir::pool2d_params(node.op, win, 1, d(a, 1), d(a, 2), d(a, 3));
      emit_pool_constants(w, s, p);
      emit_pool_backward(w, s, p);
      break;
    }
    case ir::Op::AvgPool2dBackward: {
      const dnn::Pool2dParams p = ir::pool2d_params(node.op, win, 1, d(a, 1), win.in_h, win.in_w);
      emit_pool_constants(w, s, p);
      emit_pool_backward(w, s, p);
      break;
    }
    default: synk::internal_error(fmt::format("{} is not a dnn step", ir::op_name(node.op)));
  }
  w.close();
  launch.kind = CudaLaunchKind::Flat;
  launch.work = node.type.shape;
}

}  // namespace synk::compiler::cuda_detail
