// The Graph IR's small helpers (names, predicates, lookups), structural equality, and the
// verifier that checks every invariant stated in ir.h. The verifier re-derives each node's type
// with infer_type, so the IR can never drift from what sema and the builder produce.
#include "ir/ir.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "base/enum_names.h"
#include "ir/type_infer.h"

namespace synk::ir {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].is_symbolic() ? s[i].symbol : std::to_string(s[i].size);
  }
  return out + "]";
}

std::string type_str(const TensorType& t) { return dtype_name(t.dtype) + shape_str(t.shape); }

const char* op_name(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::SharedRead: return "shared_read";
    case Op::Constant: return "constant";
    case Op::Neg: return "neg";
    case Op::Abs: return "abs";
    case Op::Exp: return "exp";
    case Op::Log: return "log";
    case Op::Sqrt: return "sqrt";
    case Op::Tanh: return "tanh";
    case Op::Sigmoid: return "sigmoid";
    case Op::Relu: return "relu";
    case Op::Log1p: return "log1p";
    case Op::Expm1: return "expm1";
    case Op::Softplus: return "softplus";
    case Op::Sin: return "sin";
    case Op::Cos: return "cos";
    case Op::Floor: return "floor";
    case Op::Ceil: return "ceil";
    case Op::Round: return "round";
    case Op::Sign: return "sign";
    case Op::Not: return "not";
    case Op::Cast: return "cast";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Pow: return "pow";
    case Op::Maximum: return "maximum";
    case Op::Minimum: return "minimum";
    case Op::Mod: return "mod";
    case Op::FloorDiv: return "floor_divide";
    case Op::BceWithLogits: return "binary_cross_entropy_with_logits";
    case Op::Eq: return "eq";
    case Op::Ne: return "ne";
    case Op::Lt: return "lt";
    case Op::Le: return "le";
    case Op::Gt: return "gt";
    case Op::Ge: return "ge";
    case Op::And: return "and";
    case Op::Or: return "or";
    case Op::Where: return "where";
    case Op::ReduceSum: return "sum";
    case Op::ReduceMean: return "mean";
    case Op::ReduceMax: return "max";
    case Op::ReduceMin: return "min";
    case Op::ReduceProd: return "prod";
    case Op::ArgMax: return "argmax";
    case Op::MatMul: return "matmul";
    case Op::Transpose: return "transpose";
    case Op::Reshape: return "reshape";
    case Op::BroadcastTo: return "broadcast_to";
    case Op::Concat: return "concat";
    case Op::Slice: return "slice";
    case Op::Take: return "take";
    case Op::OneHot: return "one_hot";
    case Op::Softmax: return "softmax";
    case Op::LogSoftmax: return "log_softmax";
    case Op::Cumsum: return "cumsum";
    case Op::CrossEntropy: return "cross_entropy";
    case Op::Conv2d: return "conv2d";
    case Op::Conv2dBackwardData: return "conv2d_backward_data";
    case Op::Conv2dBackwardWeights: return "conv2d_backward_weights";
    case Op::MaxPool2d: return "max_pool2d";
    case Op::MaxPool2dBackward: return "max_pool2d_backward";
    case Op::AvgPool2d: return "avg_pool2d";
    case Op::AvgPool2dBackward: return "avg_pool2d_backward";
    case Op::Random: return "random";
    case Op::Grad: return "grad";
  }
  return "?";
}

const char* infix_spelling(Op op) {
  static constexpr EnumName<Op> kInfix[] = {
      {Op::Add, "+"},   {Op::Sub, "-"},   {Op::Mul, "*"}, {Op::Div, "/"},    {Op::Mod, "%"},
      {Op::Pow, "**"},  {Op::MatMul, "@"}, {Op::Eq, "=="}, {Op::Ne, "!="},   {Op::Lt, "<"},
      {Op::Le, "<="},   {Op::Gt, ">"},    {Op::Ge, ">="}, {Op::And, "&&"},   {Op::Or, "||"},
  };
  return enum_name(kInfix, op, nullptr);
}

bool is_pointwise(Op op) { return op >= Op::Neg && op <= Op::Where; }
bool is_reduction(Op op) { return op >= Op::ReduceSum && op <= Op::ArgMax; }
bool is_window_op(Op op) { return op >= Op::Conv2d && op <= Op::AvgPool2dBackward; }

const Function* Module::find_function(std::string_view name) const {
  for (const Function& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

const TrainStep* Module::find_train_step(std::string_view function) const {
  for (const TrainStep& step : train_steps)
    if (step.function == function) return &step;
  return nullptr;
}

int64_t Module::find_shared(std::string_view name) const {
  for (size_t i = 0; i < shareds.size(); ++i)
    if (shareds[i].name == name) return int64_t(i);
  return -1;
}

// ---- Structural equality ---------------------------------------------------------------

namespace {

std::string init_str(const Initializer& init) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, InitZeros>) return "zeros";
        else if constexpr (std::is_same_v<T, InitOnes>) return "ones";
        else if constexpr (std::is_same_v<T, InitConstant>) return fmt::format("const({})", v.value);
        else if constexpr (std::is_same_v<T, InitNormal>)
          return fmt::format("normal(seed={}, mean={}, std={})", v.seed, v.mean, v.stddev);
        else if constexpr (std::is_same_v<T, InitUniform>)
          return fmt::format("uniform(seed={}, low={}, high={})", v.seed, v.low, v.high);
        else return fmt::format("load(\"{}\")", v.path);
      },
      init);
}

// Bitwise equality for doubles, so that NaN constants compare equal to themselves.
bool same_double(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || a == b;
}

bool same_attrs(const Attrs& a, const Attrs& b) {
  return a.index == b.index && same_double(a.value, b.value) && a.ivalue == b.ivalue &&
         a.axes == b.axes && a.keepdims == b.keepdims && a.perm == b.perm && a.axis == b.axis &&
         a.start == b.start && a.stop == b.stop && a.num_classes == b.num_classes && a.window == b.window &&
         a.reverse == b.reverse;
}

bool same_init(const Initializer& a, const Initializer& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<InitConstant>(&a)) return same_double(x->value, std::get<InitConstant>(b).value);
  if (auto* x = std::get_if<InitNormal>(&a)) {
    auto& y = std::get<InitNormal>(b);
    return x->seed == y.seed && same_double(x->mean, y.mean) && same_double(x->stddev, y.stddev);
  }
  if (auto* x = std::get_if<InitUniform>(&a)) {
    auto& y = std::get<InitUniform>(b);
    return x->seed == y.seed && same_double(x->low, y.low) && same_double(x->high, y.high);
  }
  if (auto* x = std::get_if<InitLoad>(&a)) return x->path == std::get<InitLoad>(b).path;
  return true;
}

std::string node_str(const Node& n) {
  std::string ops;
  for (NodeId o : n.operands) ops += (ops.empty() ? "" : ", ") + std::to_string(o);
  return fmt::format("{}({}) : {}", op_name(n.op), ops, type_str(n.type));
}

bool function_equal(const Function& a, const Function& b, std::string* diff) {
  auto differ = [&](std::string what) {
    if (diff) *diff = fmt::format("function '{}': {}", a.name, what);
    return false;
  };
  if (a.name != b.name) return differ(fmt::format("named '{}' vs '{}'", a.name, b.name));
  // Equal lists of `what`: one length, and `same` for every pair; otherwise the first difference.
  auto lists_equal = [&](const auto& xs, const auto& ys, const char* what, auto same, auto describe) {
    if (xs.size() != ys.size()) return differ(fmt::format("{} vs {} {}", xs.size(), ys.size(), what));
    for (size_t i = 0; i < xs.size(); ++i)
      if (!same(xs[i], ys[i])) return differ(describe(i, xs[i], ys[i]));
    return true;
  };
  return lists_equal(
             a.params, b.params, "parameters",
             [](const Param& p, const Param& q) { return p.name == q.name && p.role == q.role && p.type == q.type; },
             [](size_t i, const Param& p, const Param& q) {
               return fmt::format("parameter {}: {} {}: {} vs {} {}: {}", i, role_name(p.role), p.name,
                                  type_str(p.type), role_name(q.role), q.name, type_str(q.type));
             }) &&
         lists_equal(
             a.nodes, b.nodes, "nodes",
             [](const Node& x, const Node& y) {
               return x.op == y.op && x.type == y.type && x.operands == y.operands && same_attrs(x.attrs, y.attrs);
             },
             [](size_t i, const Node& x, const Node& y) {
               return fmt::format("node {}: {} vs {}", i, node_str(x), node_str(y));
             }) &&
         lists_equal(
             a.outputs, b.outputs, "outputs",
             [](const Output& x, const Output& y) { return x.name == y.name && x.node == y.node && x.mode == y.mode; },
             [](size_t i, const Output& x, const Output& y) {
               return fmt::format("output {}: {} = node {} ({}) vs {} = node {} ({})", i, x.name, x.node,
                                  mode_name(x.mode), y.name, y.node, mode_name(y.mode));
             }) &&
         lists_equal(
             a.updates, b.updates, "updates",
             [](const Update& x, const Update& y) {
               return x.shared == y.shared && x.node == y.node && x.mode == y.mode;
             },
             [](size_t i, const Update& x, const Update& y) {
               return fmt::format("update {}: shared {} = node {} ({}) vs shared {} = node {} ({})", i, x.shared,
                                  x.node, mode_name(x.mode), y.shared, y.node, mode_name(y.mode));
             });
}

}  // namespace

bool structurally_equal(const Module& a, const Module& b, std::string* first_difference) {
  auto differ = [&](std::string what) {
    if (first_difference) *first_difference = std::move(what);
    return false;
  };
  if (a.shareds.size() != b.shareds.size())
    return differ(fmt::format("{} vs {} shared variables", a.shareds.size(), b.shareds.size()));
  for (size_t i = 0; i < a.shareds.size(); ++i) {
    const SharedVar& x = a.shareds[i];
    const SharedVar& y = b.shareds[i];
    if (x.name != y.name || !(x.type == y.type) || !same_init(x.init, y.init) || x.sliceable != y.sliceable)
      return differ(fmt::format("shared {}: {}: {} = {}{} vs {}: {} = {}{}", i, x.name, type_str(x.type),
                                init_str(x.init), x.sliceable ? " sliceable" : "", y.name,
                                type_str(y.type), init_str(y.init), y.sliceable ? " sliceable" : ""));
  }
  if (a.functions.size() != b.functions.size())
    return differ(fmt::format("{} vs {} functions", a.functions.size(), b.functions.size()));
  for (size_t i = 0; i < a.functions.size(); ++i)
    if (!function_equal(a.functions[i], b.functions[i], first_difference)) return false;
  if (a.optimizers != b.optimizers) return differ("the optimizers differ");
  if (a.train_steps != b.train_steps) return differ("the training steps differ");
  return true;
}

// ---- Verifier --------------------------------------------------------------------------

namespace {

void verify_node(const Module& m, const Function& f, NodeId id, std::vector<std::string>& out) {
  const Node& n = f.nodes[size_t(id)];
  auto bad = [&](std::string what) {
    out.push_back(fmt::format("function '{}' node {} ({}): {}", f.name, id, op_name(n.op), what));
  };
  std::vector<TensorType> operand_types;
  for (NodeId o : n.operands) {
    if (o < 0 || o >= id) {
      bad(fmt::format("operand {} is not an earlier node", o));
      return;
    }
    operand_types.push_back(f.nodes[size_t(o)].type);
  }
  if (is_reserved(n.type.dtype)) bad(fmt::format("reserved dtype {}", dtype_name(n.type.dtype)));
  for (const Dim& d : n.type.shape)
    if (!d.is_symbolic() && d.size < 0) bad(fmt::format("negative size in {}", type_str(n.type)));

  // An Input or a SharedRead refers to its declaration (`what`) by index and has its type.
  auto check_declared = [&](const auto& declarations, const char* what) {
    if (n.attrs.index < 0 || size_t(n.attrs.index) >= declarations.size())
      return bad(fmt::format("{} index {} out of range", what, n.attrs.index));
    const auto& declared = declarations[size_t(n.attrs.index)];
    if (!(declared.type == n.type))
      bad(fmt::format("type {} differs from {} '{}' of type {}", type_str(n.type), what, declared.name,
                      type_str(declared.type)));
  };
  switch (n.op) {
    case Op::Input: check_declared(f.params, "parameter"); break;
    case Op::SharedRead: check_declared(m.shareds, "shared variable"); break;
    case Op::Grad:
      for (size_t i = 1; i < n.operands.size(); ++i) {
        const Node& v = f.nodes[size_t(n.operands[i])];
        if (v.op != Op::SharedRead && v.op != Op::Input)
          return bad(fmt::format("operand {} is neither a shared variable read nor an input", i));
        for (size_t j = 1; j < i; ++j) {
          const Node& u = f.nodes[size_t(n.operands[j])];
          if (u.op == v.op && u.attrs.index == v.attrs.index) return bad("a variable appears twice");
        }
      }
      break;
    default:
      break;
  }
  // Reshape: the stored shape is the request; it must not contain -1 (checked above).
  const TensorType* requested = nullptr;
  switch (n.op) {
    case Op::Input: case Op::SharedRead: case Op::Constant: case Op::Cast: case Op::Reshape:
    case Op::OneHot: case Op::BroadcastTo: case Op::Random:
      requested = &n.type;
      break;
    default:
      break;
  }
  dsl::InferResult r = dsl::infer_type(n.op, operand_types, n.attrs, requested);
  if (!r.ok()) return bad(r.error);
  if (!(*r.type == n.type))
    bad(fmt::format("type {} but its operands give {}", type_str(n.type), type_str(*r.type)));
}

void verify_function(const Module& m, const Function& f, std::vector<std::string>& out) {
  for (size_t i = 0; i < f.nodes.size(); ++i) verify_node(m, f, NodeId(i), out);
  auto valid_node = [&](NodeId id) { return id >= 0 && size_t(id) < f.nodes.size(); };
  std::vector<std::string> out_names;
  for (const Output& o : f.outputs) {
    if (!valid_node(o.node)) {
      out.push_back(fmt::format("function '{}' output '{}': node {} does not exist", f.name, o.name, o.node));
      continue;
    }
    if (std::find(out_names.begin(), out_names.end(), o.name) != out_names.end())
      out.push_back(fmt::format("function '{}': output '{}' appears twice", f.name, o.name));
    out_names.push_back(o.name);
    DType t = f.nodes[size_t(o.node)].type.dtype;
    if (o.mode == ReduceMode::Avg && !is_float(t))
      out.push_back(fmt::format("function '{}' output '{}': mode avg on {}", f.name, o.name, dtype_name(t)));
  }
  std::vector<int64_t> updated;
  for (const Update& u : f.updates) {
    if (u.shared < 0 || size_t(u.shared) >= m.shareds.size()) {
      out.push_back(fmt::format("function '{}': update of shared variable {} out of range", f.name, u.shared));
      continue;
    }
    const SharedVar& s = m.shareds[size_t(u.shared)];
    if (std::find(updated.begin(), updated.end(), u.shared) != updated.end())
      out.push_back(fmt::format("function '{}': '{}' is updated twice", f.name, s.name));
    updated.push_back(u.shared);
    if (!valid_node(u.node)) {
      out.push_back(fmt::format("function '{}' update of '{}': node {} does not exist", f.name, s.name, u.node));
      continue;
    }
    if (!(f.nodes[size_t(u.node)].type == s.type))
      out.push_back(fmt::format("function '{}' update of '{}': type {} differs from {}", f.name, s.name,
                                type_str(f.nodes[size_t(u.node)].type), type_str(s.type)));
    if (u.mode == ReduceMode::Gather || u.mode == ReduceMode::None)
      out.push_back(fmt::format("function '{}' update of '{}': mode {} is not an accumulation", f.name,
                                s.name, mode_name(u.mode)));
  }
}

}  // namespace

namespace {

void verify_training(const Module& m, std::vector<std::string>& out) {
  auto valid_shared = [&](int64_t index) { return index >= 0 && index < int64_t(m.shareds.size()); };
  for (const Optimizer& o : m.optimizers) {
    if (o.gradient == -1 && o.parameters.empty()) continue;
    if (!valid_shared(o.gradient) || m.shareds[size_t(o.gradient)].type.rank() != 1) {
      out.push_back(fmt::format("optimizer '{}': bad gradient variable {}", o.name, o.gradient));
      continue;
    }
    for (int64_t p : o.parameters)
      if (!valid_shared(p) || !is_float(m.shareds[size_t(p)].type.dtype))
        out.push_back(fmt::format("optimizer '{}': bad parameter {}", o.name, p));
  }
  for (const TrainStep& step : m.train_steps) {
    if (step.optimizer < 0 || step.optimizer >= int64_t(m.optimizers.size())) {
      out.push_back(fmt::format("training step '{}': bad optimizer {}", step.function, step.optimizer));
      continue;
    }
    const Optimizer& o = m.optimizers[size_t(step.optimizer)];
    const Function* f = m.find_function(step.function);
    if (!f) {
      out.push_back(fmt::format("training step '{}': no such function", step.function));
      continue;
    }
    int writes = 0;
    for (const Update& u : f->updates) writes += u.shared == o.gradient;
    if (writes != 1)
      out.push_back(fmt::format("training step '{}': {} updates of the gradient of optimizer '{}'", step.function,
                                writes, o.name));
    if (m.find_train_step(step.function) != &step)
      out.push_back(fmt::format("training step '{}' is declared twice", step.function));
  }
}

}  // namespace

std::vector<std::string> verify_function(const Module& m, const Function& f) {
  std::vector<std::string> out;
  verify_function(m, f, out);
  return out;
}

std::vector<std::string> verify(const Module& m) {
  std::vector<std::string> out;
  for (size_t i = 0; i < m.shareds.size(); ++i) {
    const SharedVar& s = m.shareds[i];
    if (m.find_shared(s.name) != int64_t(i))
      out.push_back(fmt::format("shared variable '{}' is declared twice", s.name));
    if (is_reserved(s.type.dtype))
      out.push_back(fmt::format("shared variable '{}': reserved dtype {}", s.name, dtype_name(s.type.dtype)));
    if (s.sliceable && s.type.rank() == 0)
      out.push_back(fmt::format("shared variable '{}': sliceable but a scalar", s.name));
  }
  for (size_t i = 0; i < m.functions.size(); ++i) {
    const Function& f = m.functions[i];
    if (m.find_function(f.name) != &f) out.push_back(fmt::format("function '{}' is declared twice", f.name));
    verify_function(m, f, out);
  }
  verify_training(m, out);
  return out;
}

}  // namespace synk::ir
