// The conv2d and pooling steps of a CPU-compiled function (KernelKind::Dnn): the host calls the
// library in compiler/dnn for f32 (oneDNN convolutions and average pools on one thread, in the
// format dnn::onednn::suggested_format picks; synk's own max pool, whose backward finds each
// window's choice again from x) and the reference loops of ir/dnn_reference.h for f64. Shapes come
// from the call's bound symbols, so the descriptors are valid by construction (type inference
// checked them with a batch of 1); an empty batch writes nothing. A channels_last convolution
// (compiler/passes/channels_last.cpp, f32 only) runs oneDNN on its NHWC operands as they are.
// Errors: a descriptor the library still rejects (a batch so large a tensor passes 2^31
// elements) is a UserError naming the op and its source line; anything else is internal.
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "compiler/cpu/cpu_function.h"
#include "compiler/dnn/dnn.h"
#include "ir/dnn_reference.h"
#include "ir/window.h"

namespace synk::compiler {

namespace {

template <class T>
void run_reference(const ir::Node& node, const dnn::Conv2dParams* conv, const dnn::Pool2dParams* pool,
                   const std::vector<const void*>& in, void* out) {
  auto a = [&](size_t i) { return static_cast<const T*>(in.at(i)); };
  T* y = static_cast<T*>(out);
  switch (node.op) {
    case ir::Op::Conv2d: return dnn::reference::conv2d_forward<T>(*conv, a(0), a(1), nullptr, y);
    case ir::Op::Conv2dBackwardData: return dnn::reference::conv2d_backward_data<T>(*conv, a(0), a(1), y);
    case ir::Op::Conv2dBackwardWeights:
      return dnn::reference::conv2d_backward_weights<T>(*conv, a(0), a(1), y, nullptr);
    case ir::Op::MaxPool2d: return dnn::reference::max_pool2d_forward<T>(*pool, a(0), y);
    case ir::Op::MaxPool2dBackward: return dnn::reference::max_pool2d_backward<T>(*pool, a(0), a(1), y);
    case ir::Op::AvgPool2d: return dnn::reference::avg_pool2d_forward<T>(*pool, a(0), y);
    default: return dnn::reference::avg_pool2d_backward<T>(*pool, a(0), y);
  }
}

void run_f32(const ir::Node& node, const dnn::Conv2dParams* conv, const dnn::Pool2dParams* pool,
             const std::vector<const void*>& in, void* out) {
  auto a = [&](size_t i) { return static_cast<const float*>(in.at(i)); };
  float* y = static_cast<float*>(out);
  namespace onednn = dnn::onednn;
  auto format = [&] {
    return node.attrs.window.channels_last ? onednn::ConvFormat::channels_last : onednn::suggested_format(*conv);
  };
  switch (node.op) {
    case ir::Op::Conv2d: return onednn::conv2d_forward(*conv, a(0), a(1), nullptr, y, format());
    case ir::Op::Conv2dBackwardData: return onednn::conv2d_backward_data(*conv, a(0), a(1), y, format());
    case ir::Op::Conv2dBackwardWeights:
      return onednn::conv2d_backward_weights(*conv, a(0), a(1), y, nullptr, format());
    case ir::Op::MaxPool2d: return dnn::native::max_pool2d_forward(*pool, a(0), y, nullptr);
    case ir::Op::MaxPool2dBackward: return dnn::native::max_pool2d_backward(*pool, a(1), nullptr, a(0), y);
    case ir::Op::AvgPool2d: return onednn::avg_pool2d_forward(*pool, a(0), y);
    default: return onednn::avg_pool2d_backward(*pool, a(0), y);
  }
}

}  // namespace

void run_dnn_step(const KernelPlan& plan, const Kernel& k, const std::vector<std::vector<int64_t>>& shapes,
                  const std::vector<void*>& pointers) {
  const ir::Node& node = plan.function.node(k.roots.at(0));
  const ir::Window2d& win = node.attrs.window;
  std::vector<const void*> in;
  std::vector<const std::vector<int64_t>*> in_shapes;
  for (ir::NodeId o : node.operands) {
    const int b = plan.node_buffer.at(size_t(o));
    in.push_back(pointers.at(size_t(b)));
    in_shapes.push_back(&shapes.at(size_t(b)));
  }
  const std::vector<int64_t>& s0 = *in_shapes.at(0);
  const std::vector<int64_t>& s1 = *in_shapes.at(in_shapes.size() - 1);
  void* out = pointers.at(size_t(k.outputs.at(0)));
  if (s0.at(0) == 0) {   // an empty batch: empty results, except a weight gradient (zeros)
    int64_t elems = 1;
    for (int64_t d : shapes.at(size_t(k.outputs.at(0)))) elems *= d;
    if (elems > 0) std::memset(out, 0, size_t(elems) * (node.type.dtype == ir::DType::F32 ? 4 : 8));
    return;
  }
  dnn::Conv2dParams conv;
  dnn::Pool2dParams pool;
  // Axes of C, H and W in an activation: NCHW, or NHWC for a channels_last convolution.
  const bool nhwc = win.channels_last;
  const size_t ca = nhwc ? 3 : 1, ha = nhwc ? 1 : 2, wa = nhwc ? 2 : 3;
  if (nhwc && node.type.dtype != ir::DType::F32)
    synk::internal_error(fmt::format("function '{}': a channels_last {} on {}", plan.function.name,
                                     ir::op_name(node.op), ir::dtype_name(node.type.dtype)));
  switch (node.op) {
    case ir::Op::Conv2d: conv = ir::conv2d_params(win, s0[0], s0[ca], s0[ha], s0[wa], s1[0]); break;
    case ir::Op::Conv2dBackwardData: conv = ir::conv2d_params(win, s0[0], s1[1] * win.groups, win.in_h, win.in_w, s1[0]); break;
    case ir::Op::Conv2dBackwardWeights: conv = ir::conv2d_params(win, s0[0], s0[ca], s0[ha], s0[wa], s1[ca]); break;
    case ir::Op::AvgPool2dBackward: pool = ir::pool2d_params(node.op, win, s0[0], s0[1], win.in_h, win.in_w); break;
    default: pool = ir::pool2d_params(node.op, win, s0[0], s0[1], s0[2], s0[3]); break;
  }
  try {
    if (node.type.dtype == ir::DType::F32) run_f32(node, &conv, &pool, in, out);
    else run_reference<double>(node, &conv, &pool, in, out);
  } catch (const std::invalid_argument& e) {
    throw synk::UserError(fmt::format("function '{}': {} (line {}, column {}): {}", plan.function.name,
                                      ir::op_name(node.op), node.loc.line, node.loc.col, e.what()));
  } catch (const std::runtime_error& e) {
    synk::internal_error(fmt::format("function '{}': {}: {}", plan.function.name, ir::op_name(node.op), e.what()));
  }
}

}  // namespace synk::compiler
