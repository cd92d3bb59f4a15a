// Printing kernel plans (`synkc --emit=ir-fused`) and single nodes.
#include "compiler/passes/kernel_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace synk::compiler {

const char* buffer_kind_name(Buffer::Kind k) {
  switch (k) {
    case Buffer::Kind::Input: return "input";
    case Buffer::Kind::Shared: return "shared";
    case Buffer::Kind::Output: return "output";
    case Buffer::Kind::Update: return "update";
    case Buffer::Kind::Temp: return "temp";
    case Buffer::Kind::Alias: return "alias";
  }
  return "?";
}

const char* kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::Pointwise: return "pointwise";
    case KernelKind::Reduce: return "reduce";
    case KernelKind::ArgMax: return "argmax";
    case KernelKind::MatMul: return "matmul";
    case KernelKind::Softmax: return "softmax";
    case KernelKind::LogSoftmax: return "log_softmax";
    case KernelKind::Cumsum: return "cumsum";
    case KernelKind::CrossEntropy: return "cross_entropy";
    case KernelKind::Concat: return "concat";
    case KernelKind::Take: return "take";
    case KernelKind::OneHot: return "one_hot";
    case KernelKind::Random: return "random";
    case KernelKind::Dnn: return "dnn";
  }
  return "?";
}

int KernelPlan::symbol_index(const std::string& name) const {
  for (size_t i = 0; i < symbols.size(); ++i) if (symbols[i] == name) return int(i);
  return -1;
}

std::string node_str(const ir::Module* module, const ir::Function& fn, ir::NodeId id) {
  const ir::Node& n = fn.node(id);
  std::string s = fmt::format("%{}: {} = {}", id, ir::type_str(n.type), ir::op_name(n.op));
  std::vector<std::string> operands;
  for (ir::NodeId o : n.operands) operands.push_back(fmt::format("%{}", o));
  const ir::Attrs& a = n.attrs;
  switch (n.op) {
    case ir::Op::Input:
      s += fmt::format(" {}", a.index >= 0 && size_t(a.index) < fn.params.size() ? fn.params[size_t(a.index)].name : "?");
      break;
    case ir::Op::SharedRead:
      if (module && a.index >= 0 && size_t(a.index) < module->shareds.size())
        s += " " + module->shareds[size_t(a.index)].name;
      else
        s += fmt::format(" #{}", a.index);
      break;
    case ir::Op::Constant:
      s += ir::is_float(n.type.dtype) ? fmt::format(" {}", a.value) : fmt::format(" {}", a.ivalue);
      break;
    default:
      s += fmt::format("({})", fmt::join(operands, ", "));
      break;
  }
  if (ir::is_reduction(n.op)) s += fmt::format(" axes=[{}]{}", fmt::join(a.axes, ", "), a.keepdims ? " keepdims" : "");
  if (n.op == ir::Op::Transpose) s += fmt::format(" perm=[{}]", fmt::join(a.perm, ", "));
  if (n.op == ir::Op::Slice) s += fmt::format(" axis={} start={} stop={}", a.axis, a.start, a.stop);
  if (n.op == ir::Op::Concat || n.op == ir::Op::Softmax || n.op == ir::Op::LogSoftmax || n.op == ir::Op::Cumsum)
    s += fmt::format(" axis={}", a.axis);
  if (n.op == ir::Op::Cumsum && a.reverse) s += " reverse";
  if (n.op == ir::Op::OneHot) s += fmt::format(" num_classes={}", a.num_classes);
  if (n.op == ir::Op::Random)
    s += fmt::format(" {} salt={}{}", a.index == 1 ? "normal" : "uniform", a.salt, a.global_rows ? " global_rows" : "");
  if (ir::is_window_op(n.op)) {
    const ir::Window2d& w = a.window;
    s += fmt::format(" window={}x{} stride={},{} pad={},{},{},{} dilation={},{} groups={} input={}x{}{}", w.kh, w.kw,
                     w.stride_h, w.stride_w, w.pad_top, w.pad_bottom, w.pad_left, w.pad_right, w.dilation_h,
                     w.dilation_w, w.groups, w.in_h, w.in_w, w.count_include_pad ? "" : " exclude_pad");
    if (w.channels_last) s += " nhwc";
  }
  return s;
}

namespace {

std::string buffer_list(const std::vector<int>& ids) {
  std::vector<std::string> names;
  for (int b : ids) names.push_back(fmt::format("b{}", b));
  return fmt::format("({})", fmt::join(names, ", "));
}

}  // namespace

void print_plan(const ir::Module& module, const KernelPlan& plan, std::ostream& out) {
  const ir::Function& fn = plan.function;
  out << fmt::format("fn {}: {} kernel{}\n", fn.name, plan.kernels.size(), plan.kernels.size() == 1 ? "" : "s");
  if (!plan.symbols.empty()) out << fmt::format("  symbols: {}\n", fmt::join(plan.symbols, ", "));
  out << "  buffers:\n";
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const Buffer& b = plan.buffers[i];
    std::string what = buffer_kind_name(b.kind);
    switch (b.kind) {
      case Buffer::Kind::Input: what += " " + fn.params.at(size_t(b.index)).name; break;
      case Buffer::Kind::Shared:
        what += " " + module.shareds.at(size_t(plan.shareds_read.at(size_t(b.index)))).name;
        break;
      case Buffer::Kind::Output: what += " " + fn.outputs.at(size_t(b.index)).name; break;
      case Buffer::Kind::Update:
        what += " " + module.shareds.at(size_t(fn.updates.at(size_t(b.index)).shared)).name;
        break;
      case Buffer::Kind::Alias: what += fmt::format(" of b{}", b.index); break;
      case Buffer::Kind::Temp: break;
    }
    out << fmt::format("    b{} {}: {} (%{})\n", i, what, ir::type_str(b.type), b.node);
  }
  for (const Kernel& k : plan.kernels) {
    out << fmt::format("  kernel {} {}", k.name, kernel_kind_name(k.kind));
    if (k.kind == KernelKind::MatMul)
      out << fmt::format(" a=b{}{} b=b{}{}", k.matmul_a, k.trans_a ? "^T" : "", k.matmul_b, k.trans_b ? "^T" : "");
    out << fmt::format(" {} -> {}\n", buffer_list(k.inputs), buffer_list(k.outputs));
    for (ir::NodeId id : k.nodes) out << "    " << node_str(&module, fn, id) << "\n";
  }
  for (const ir::Output& o : fn.outputs)
    out << fmt::format("  out {}: {} = b{}\n", o.name, ir::mode_name(o.mode), plan.node_buffer.at(size_t(o.node)));
  for (const ir::Update& u : fn.updates)
    out << fmt::format("  update {}: {} = b{}\n", module.shareds.at(size_t(u.shared)).name, ir::mode_name(u.mode),
                       plan.node_buffer.at(size_t(u.node)));
}

}  // namespace synk::compiler
