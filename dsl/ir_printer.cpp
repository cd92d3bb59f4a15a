// print_module: the Graph IR as valid `.synk` text (`synkc FILE --emit=ir`). Every node is one
// typed `let` in node order, so that parsing and analyzing the text again rebuilds the same
// nodes in the same order (the round-trip that test/ir checks); leaves read their parameter or
// shared variable, constants are literals, and operators use their .synk spelling. Optimizers
// print first; a training step prints as the update it became, `update opt_grads = t9 using opt;`.
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>

#include "dsl/frontend.h"
#include "dsl/lexer.h"
#include "dsl/sema.h"

namespace synk::dsl {

using ir::Op;

std::string float_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

namespace {

// A constant of an integer or bool variable is written as the integer it is (`const(-7)`).
std::string init_text(const ir::Initializer& init, ir::DType dtype) {
  return std::visit(
      [dtype](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ir::InitZeros>) return "zeros";
        else if constexpr (std::is_same_v<T, ir::InitOnes>) return "ones";
        else if constexpr (std::is_same_v<T, ir::InitConstant>)
          return !ir::is_float(dtype) && std::nearbyint(v.value) == v.value && std::fabs(v.value) < 9.2e18
                     ? fmt::format("const({})", int64_t(v.value))
                     : fmt::format("const({})", float_text(v.value));
        else if constexpr (std::is_same_v<T, ir::InitNormal>)
          return fmt::format("normal(seed={}, mean={}, std={})", v.seed, float_text(v.mean), float_text(v.stddev));
        else if constexpr (std::is_same_v<T, ir::InitUniform>)
          return fmt::format("uniform(seed={}, low={}, high={})", v.seed, float_text(v.low), float_text(v.high));
        else return fmt::format("load({})", quote_string(v.path));
      },
      init);
}

std::string int_list(const std::vector<int64_t>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + std::to_string(xs[i]);
  return out + "]";
}

bool is_generated_name(const std::string& name) {
  if (name.size() < 2 || name[0] != 't') return false;
  return name.find_first_not_of("0123456789", 1) == std::string::npos;
}

class FunctionPrinter {
 public:
  FunctionPrinter(const ir::Module& m, const ir::Function& f) : m_(m), f_(f) { choose_names(); }

  std::string print() {
    std::string out = fmt::format("fn {}(", f_.name);
    for (size_t i = 0; i < f_.params.size(); ++i) {
      const ir::Param& p = f_.params[i];
      out += fmt::format("{}{} {}: {}", i ? ", " : "", ir::role_name(p.role), p.name, ir::type_str(p.type));
    }
    out += ") {\n";
    for (size_t i = 0; i < f_.nodes.size(); ++i)
      out += fmt::format("  let {}: {} = {};\n", names_[i], ir::type_str(f_.nodes[i].type), node_text(f_.nodes[i]));
    for (const ir::Output& o : f_.outputs)
      out += fmt::format("  out {}: {} = {};\n", o.name, ir::mode_name(o.mode), ref(o.node));
    // A training function's gradient update names its optimizer (what `minimize` became).
    const ir::TrainStep* step = m_.find_train_step(f_.name);
    const ir::Optimizer* optimizer =
        step && step->optimizer >= 0 && size_t(step->optimizer) < m_.optimizers.size() ? &m_.optimizers[size_t(step->optimizer)]
                                                                                      : nullptr;
    for (const ir::Update& u : f_.updates) {
      std::string using_text = optimizer && u.shared == optimizer->gradient ? " using " + optimizer->name : "";
      out += fmt::format("  update {}: {} = {}{};\n", shared_name(u.shared), ir::mode_name(u.mode), ref(u.node),
                         using_text);
    }
    return out + "}\n";
  }

 private:
  // A node prints under its let name when that name is unique and cannot be confused with a
  // parameter, a shared variable, a built-in constant or a generated `t<id>`; else as t<id>.
  void choose_names() {
    std::set<std::string> taken = {"inf", "nan"};
    for (const ir::Param& p : f_.params) taken.insert(p.name);
    for (const ir::SharedVar& s : m_.shareds) taken.insert(s.name);
    std::map<std::string, int> uses;
    for (const ir::Node& n : f_.nodes) ++uses[n.name];
    names_.resize(f_.nodes.size());
    for (size_t i = 0; i < f_.nodes.size(); ++i) {
      const std::string& n = f_.nodes[i].name;
      if (!n.empty() && uses[n] == 1 && !taken.count(n) && !is_generated_name(n)) {
        names_[i] = n;
        taken.insert(n);
      }
    }
    for (size_t i = 0; i < f_.nodes.size(); ++i) {
      if (!names_[i].empty()) continue;
      std::string name = fmt::format("t{}", i);
      while (taken.count(name)) name += "_";
      names_[i] = name;
      taken.insert(name);
    }
  }

  std::string ref(ir::NodeId id) const {
    if (id < 0 || size_t(id) >= names_.size()) return fmt::format("<bad node {}>", id);
    return names_[size_t(id)];
  }

  std::string shared_name(int64_t index) const {
    if (index < 0 || size_t(index) >= m_.shareds.size()) return fmt::format("<bad shared {}>", index);
    return m_.shareds[size_t(index)].name;
  }

  std::string operands_text(const ir::Node& n) const {
    std::string out;
    for (size_t i = 0; i < n.operands.size(); ++i) out += (i ? ", " : "") + ref(n.operands[i]);
    return out;
  }

  std::string node_text(const ir::Node& n) const {
    const ir::Attrs& a = n.attrs;
    std::string ops = operands_text(n);
    if (const char* spelling = ir::infix_spelling(n.op); spelling && n.operands.size() == 2)
      return fmt::format("{} {} {}", ref(n.operands[0]), spelling, ref(n.operands[1]));
    switch (n.op) {
      case Op::Input:
        if (a.index < 0 || size_t(a.index) >= f_.params.size()) return fmt::format("<bad input {}>", a.index);
        return f_.params[size_t(a.index)].name;
      case Op::SharedRead: return shared_name(a.index);
      case Op::Constant:
        if (ir::is_float(n.type.dtype)) return float_text(a.value);
        if (n.type.dtype == ir::DType::Bool) return a.ivalue ? "true" : "false";
        return std::to_string(a.ivalue);
      case Op::Neg: return "-" + ops;
      case Op::Not: return "!" + ops;
      case Op::Cast: return fmt::format("cast({}, {})", ops, ir::dtype_name(n.type.dtype));
      case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin:
      case Op::ReduceProd:
        return fmt::format("{}({}, axis={}, keepdims={})", ir::op_name(n.op), ops, int_list(a.axes),
                           a.keepdims ? "true" : "false");
      case Op::ArgMax:
        return fmt::format("argmax({}, axis={}, keepdims={})", ops, a.axes.empty() ? -1 : a.axes[0],
                           a.keepdims ? "true" : "false");
      case Op::Transpose: return fmt::format("transpose({}, {})", ops, int_list(a.perm));
      case Op::Reshape: case Op::BroadcastTo:
        return fmt::format("{}({}, {})", ir::op_name(n.op), ops, ir::shape_str(n.type.shape));
      case Op::Concat: return fmt::format("concat({}, axis={})", ops, a.axis);
      case Op::Slice: return fmt::format("slice({}, {}, {}, axis={})", ops, a.start, a.stop, a.axis);
      case Op::OneHot:
        return fmt::format("one_hot({}, {}, dtype={})", ops, a.num_classes, ir::dtype_name(n.type.dtype));
      case Op::Softmax: case Op::LogSoftmax:
        return fmt::format("{}({}, axis={})", ir::op_name(n.op), ops, a.axis);
      case Op::Cumsum:
        return fmt::format("cumsum({}, axis={}{})", ops, a.axis, a.reverse ? ", reverse=true" : "");
      case Op::Random:   // the salt reads back (sema_random.cpp); global rows follow from the shape
        return fmt::format("{}({}, dtype={}, salt={})", a.index == 1 ? "normal" : "uniform",
                           ir::shape_str(n.type.shape), ir::dtype_name(n.type.dtype), a.salt);
      case Op::Grad: {
        // Variables print as the shared variables' and inputs' names: grad takes names, not values.
        std::string out = "grad(" + (n.operands.empty() ? std::string() : ref(n.operands[0]));
        for (size_t i = 1; i < n.operands.size(); ++i) {
          ir::NodeId v = n.operands[i];
          const bool leaf = v >= 0 && size_t(v) < f_.nodes.size() &&
                            (f_.nodes[size_t(v)].op == Op::SharedRead || f_.nodes[size_t(v)].op == Op::Input);
          out += ", " + (leaf ? node_text(f_.nodes[size_t(v)]) : ref(v));
        }
        return out + ")";
      }
      case Op::Conv2d: case Op::Conv2dBackwardData: case Op::Conv2dBackwardWeights: case Op::MaxPool2d:
      case Op::MaxPool2dBackward: case Op::AvgPool2d: case Op::AvgPool2dBackward:
        return window_text(n, ops);
      default:  // Abs Exp ... Where, MatMul of other arity, Take, CrossEntropy: name(operands)
        return fmt::format("{}({})", ir::op_name(n.op), ops);
    }
  }

  // Every attribute the op's call reads back (sema_dnn.cpp, sema_batch_norm.cpp).
  static std::string window_text(const ir::Node& n, const std::string& ops) {
    const ir::Window2d& w = n.attrs.window;
    const std::string pad = fmt::format("padding=[{}, {}, {}, {}]", w.pad_top, w.pad_bottom, w.pad_left, w.pad_right);
    // channels_last (NHWC activations) exists only after the CPU backend's layout pass
    // (--print-after-all); the front end does not read it back.
    const std::string conv = fmt::format("stride=[{}, {}], {}, dilation=[{}, {}], groups={}{}", w.stride_h, w.stride_w,
                                         pad, w.dilation_h, w.dilation_w, w.groups,
                                         w.channels_last ? ", channels_last=true" : "");
    const std::string kernel = fmt::format("[{}, {}]", w.kh, w.kw);
    const std::string input = fmt::format("input=[{}, {}]", w.in_h, w.in_w);
    const char* include = w.count_include_pad ? "true" : "false";
    switch (n.op) {
      case Op::Conv2d: return fmt::format("conv2d({}, {})", ops, conv);
      case Op::Conv2dBackwardData: return fmt::format("conv2d_backward_data({}, {}, {})", ops, input, conv);
      case Op::Conv2dBackwardWeights: return fmt::format("conv2d_backward_weights({}, kernel={}, {})", ops, kernel, conv);
      case Op::MaxPool2d: return fmt::format("max_pool2d({}, {}, stride={}, padding={})", ops, kernel, w.stride_h, w.pad_top);
      case Op::MaxPool2dBackward:
        return fmt::format("max_pool2d_backward({}, kernel={}, stride={}, padding={})", ops, kernel, w.stride_h, w.pad_top);
      case Op::AvgPool2d:
        return fmt::format("avg_pool2d({}, {}, stride={}, padding={}, count_include_pad={})", ops, kernel, w.stride_h,
                           w.pad_top, include);
      default:
        return fmt::format("avg_pool2d_backward({}, {}, kernel={}, stride={}, padding={}, count_include_pad={})", ops,
                           input, kernel, w.stride_h, w.pad_top, include);
    }
  }

  const ir::Module& m_;
  const ir::Function& f_;
  std::vector<std::string> names_;
};

}  // namespace

std::string print_module(const ir::Module& module) {
  std::string out;
  for (const ir::Optimizer& o : module.optimizers) {
    std::vector<std::string> hyper;
    for (const auto& [key, value] : o.hyper_parameters) hyper.push_back(key + "=" + float_text(value));
    if (o.num_packs > 0) hyper.push_back(fmt::format("num_packs={}", o.num_packs));
    out += fmt::format("optimizer {} = {}({});\n", o.name, o.rule, fmt::join(hyper, ", "));
  }
  for (const ir::SharedVar& s : module.shareds)
    out += fmt::format("shared {}: {} = {}{};\n", s.name, ir::type_str(s.type), init_text(s.init, s.type.dtype),
                       s.sliceable ? " sliceable" : "");
  for (const ir::Function& f : module.functions) {
    if (!out.empty()) out += "\n";
    out += FunctionPrinter(module, f).print();
  }
  return out;
}

}  // namespace synk::dsl
