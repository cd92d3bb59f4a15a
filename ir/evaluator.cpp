// The reference evaluator's driver: checks and binds the arguments, runs the nodes in order
// through the per-op table (evaluator_ops.cpp), checks every result against its node's type, and
// collects outputs and updates. Shared helpers for shapes and dtype conversion live here too.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ir/evaluator.h"
#include "ir/evaluator_internal.h"

namespace synk::dsl {

using eval_detail::Bindings;
using eval_detail::Sizes;

int64_t HostTensor::size() const { return eval_detail::element_count(shape); }

HostTensor HostTensor::make(ir::DType dtype, std::vector<int64_t> shape, std::vector<double> data) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = std::move(data);
  if (int64_t(t.data.size()) != t.size())
    throw UserError(fmt::format("HostTensor::make: shape {} holds {} elements but {} values were given",
                                eval_detail::sizes_str(t.shape), t.size(), t.data.size()));
  return t;
}

HostTensor HostTensor::scalar(ir::DType dtype, double value) { return make(dtype, {}, {value}); }

HostTensor HostTensor::filled(ir::DType dtype, std::vector<int64_t> shape, double value) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(size_t(t.size()), value);
  return t;
}

std::string host_type_str(const HostTensor& t) {
  return fmt::format("{}{}", ir::dtype_name(t.dtype), eval_detail::sizes_str(t.shape));
}

namespace eval_detail {

int64_t element_count(const Sizes& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Sizes row_major_strides(const Sizes& sizes) {
  Sizes strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return strides;
}

std::string sizes_str(const Sizes& sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

Sizes broadcast_strides(const Sizes& in, const Sizes& out) {
  Sizes own = row_major_strides(in);
  Sizes strides(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    strides[lead + d] = in[d] == 1 && out[lead + d] != 1 ? 0 : own[d];
  return strides;
}

double wrap_integer(int64_t value, ir::DType dtype) {
  switch (dtype) {
    case ir::DType::I32: return double(int32_t(uint32_t(uint64_t(value))));
    case ir::DType::U8: return double(uint8_t(uint64_t(value)));
    case ir::DType::Bool: return value != 0 ? 1.0 : 0.0;
    default: return double(value);
  }
}

double convert_value(double value, ir::DType to, const char* op) {
  switch (to) {
    case ir::DType::F64: return value;
    case ir::DType::F32: return double(float(value));
    case ir::DType::Bool: return value != 0 ? 1.0 : 0.0;   // NaN != 0: true, as in C and numpy
    case ir::DType::I32:
    case ir::DType::I64:
    case ir::DType::U8: {
      const double truncated = std::trunc(value);
      // The representable range of each integer dtype, as exact doubles (2^63 is exact; i64
      // values beyond 2^53 lose precision in a double, which the HostTensor contract accepts).
      double low = 0, high_exclusive = 0;
      if (to == ir::DType::I32) low = -2147483648.0, high_exclusive = 2147483648.0;
      else if (to == ir::DType::U8) low = 0, high_exclusive = 256.0;
      else low = -9223372036854775808.0, high_exclusive = 9223372036854775808.0;
      if (!(truncated >= low && truncated < high_exclusive))
        throw UserError(fmt::format("{}: the value {} cannot be converted to {}", op, value,
                                    ir::dtype_name(to)));
      return truncated == 0 ? 0.0 : truncated;   // no -0 in integer dtypes
    }
    case ir::DType::F16:
    case ir::DType::BF16: break;
  }
  throw UserError(fmt::format("{}: dtype {} is not supported yet", op, ir::dtype_name(to)));
}

}  // namespace eval_detail

namespace {

// Checks one argument against its declared type and binds its symbols. `who` is
// "argument 'x' of function 'f'" or "shared variable 'w'".
void bind_argument(const ir::TensorType& declared, const HostTensor& actual, const std::string& who,
                   const std::string& short_who, Bindings& bindings) {
  if (ir::is_reserved(declared.dtype))
    throw UserError(fmt::format("{}: dtype {} is not supported yet", who, ir::dtype_name(declared.dtype)));
  if (actual.dtype != declared.dtype)
    throw UserError(fmt::format("{}: expected {}, got dtype {} ({})", who, ir::type_str(declared),
                                ir::dtype_name(actual.dtype), host_type_str(actual)));
  if (actual.shape.size() != declared.rank())
    throw UserError(fmt::format("{}: expected {} (rank {}), got shape {} (rank {})", who,
                                ir::type_str(declared), declared.rank(),
                                eval_detail::sizes_str(actual.shape), actual.shape.size()));
  for (size_t d = 0; d < declared.rank(); ++d) {
    const ir::Dim& dim = declared.shape[d];
    const int64_t got = actual.shape[d];
    if (got < 0)
      throw UserError(fmt::format("{}: dimension {} has negative size {}", who, d, got));
    if (!dim.is_symbolic()) {
      if (got != dim.size)
        throw UserError(fmt::format("{}: expected {}, got shape {} (dimension {} must be {}, got {})",
                                    who, ir::type_str(declared), eval_detail::sizes_str(actual.shape),
                                    d, dim.size, got));
      continue;
    }
    auto it = bindings.size.find(dim.symbol);
    if (it == bindings.size.end()) {
      bindings.size[dim.symbol] = got;
      bindings.bound_by[dim.symbol] = short_who;
    } else if (it->second != got) {
      throw UserError(fmt::format(
          "{}: dimension {} is '{}' = {}, but '{}' = {} from {} (shape {}, expected {})", who, d,
          dim.symbol, got, dim.symbol, it->second, bindings.bound_by[dim.symbol],
          eval_detail::sizes_str(actual.shape), ir::type_str(declared)));
    }
  }
  if (int64_t(actual.data.size()) != actual.size())
    throw UserError(fmt::format("{}: shape {} holds {} elements but the data has {} values", who,
                                eval_detail::sizes_str(actual.shape), actual.size(), actual.data.size()));
}

// Copies an argument, rounding f32 values to float and rejecting values outside the dtype.
HostTensor canonical_argument(const HostTensor& actual, const std::string& who) {
  HostTensor t = actual;
  if (actual.dtype == ir::DType::F32) {
    for (double& v : t.data) v = double(float(v));
  } else if (!ir::is_float(actual.dtype)) {
    for (size_t i = 0; i < t.data.size(); ++i) {
      const double v = t.data[i];
      // Range-check before converting: a double outside int64 makes the conversion undefined.
      bool ok = std::trunc(v) == v && v >= -9223372036854775808.0 && v < 9223372036854775808.0;
      if (ok) {
        const double canonical = actual.dtype == ir::DType::I64 ? v : eval_detail::wrap_integer(int64_t(v), actual.dtype);
        ok = canonical == v;
      }
      if (!ok)
        throw UserError(fmt::format("{}: element {} is {}, which is not a valid {} value", who, i, v,
                                    ir::dtype_name(actual.dtype)));
    }
  }
  return t;
}

// The result of every node must match the node's inferred type; a mismatch means the IR and the
// evaluator disagree (an internal error), except that a symbol no argument bound (one the front
// end introduced, e.g. for reshape's -1) is bound here by its first occurrence.
void check_node_result(const ir::Function& fn, ir::NodeId id, const HostTensor& value,
                       Bindings& bindings) {
  const ir::Node& node = fn.node(id);
  bool ok = value.dtype == node.type.dtype && value.shape.size() == node.type.rank() &&
            int64_t(value.data.size()) == value.size();
  for (size_t d = 0; ok && d < node.type.rank(); ++d) {
    const ir::Dim& dim = node.type.shape[d];
    if (!dim.is_symbolic()) {
      ok = dim.size == value.shape[d];
    } else if (auto it = bindings.size.find(dim.symbol); it != bindings.size.end()) {
      ok = it->second == value.shape[d];
    } else {
      bindings.size[dim.symbol] = value.shape[d];
      bindings.bound_by[dim.symbol] = fmt::format("node %{} ({})", id, ir::op_name(node.op));
    }
  }
  if (!ok)
    internal_error(fmt::format("evaluator: node %{} ({}) of function '{}' computed {} but its type is {}",
                               id, ir::op_name(node.op), fn.name, host_type_str(value),
                               ir::type_str(node.type)));
}

}  // namespace

EvalResult evaluate(const ir::Module& module, const ir::Function& fn,
                    std::span<const HostTensor> inputs, std::span<const HostTensor> shared_values,
                    const RngState& rng) {
  if (inputs.size() != fn.params.size()) {
    std::vector<std::string> names;
    for (const ir::Param& p : fn.params) names.push_back(p.name);
    throw UserError(fmt::format("function '{}' takes {} argument{} ({}), got {}", fn.name,
                                fn.params.size(), fn.params.size() == 1 ? "" : "s",
                                fmt::join(names, ", "), inputs.size()));
  }
  if (shared_values.size() > module.shareds.size())
    throw UserError(fmt::format("function '{}': {} shared values given, but the module has {} shared variables",
                                fn.name, shared_values.size(), module.shareds.size()));

  Bindings bindings;
  std::vector<HostTensor> args;
  args.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Param& p = fn.params[i];
    const std::string who = fmt::format("argument '{}' of function '{}'", p.name, fn.name);
    bind_argument(p.type, inputs[i], who, fmt::format("argument '{}'", p.name), bindings);
    args.push_back(canonical_argument(inputs[i], who));
  }

  // Only nodes that reach an output or an update run: compiled code drops the others (dead-code
  // elimination), so a dead node must not raise an error either (e.g. an unused max over an empty
  // axis). Operands precede their users, so one backward pass marks everything live.
  std::vector<bool> live(fn.nodes.size(), false);
  auto mark = [&](ir::NodeId id, const char* what) {
    SYNK_CHECK(id >= 0 && size_t(id) < fn.nodes.size(), fmt::format("{} node out of range", what));
    live[size_t(id)] = true;
  };
  for (const ir::Output& out : fn.outputs) mark(out.node, "output");
  for (const ir::Update& up : fn.updates) mark(up.node, "update");
  for (size_t i = fn.nodes.size(); i-- > 0;)
    if (live[i])
      for (ir::NodeId operand : fn.nodes[i].operands)
        if (operand >= 0 && size_t(operand) < i) live[size_t(operand)] = true;   // else reported below

  // Shared variables the function reads, checked and bound once each, in first-read order.
  std::vector<HostTensor> shareds(module.shareds.size());
  std::vector<bool> shared_checked(module.shareds.size(), false);
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const ir::Node& node = fn.nodes[i];
    if (node.op != ir::Op::SharedRead || !live[i]) continue;
    const int64_t index = node.attrs.index;
    SYNK_CHECK(index >= 0 && size_t(index) < module.shareds.size(), "SharedRead index out of range");
    if (shared_checked[size_t(index)]) continue;
    const ir::SharedVar& var = module.shareds[size_t(index)];
    const std::string who = fmt::format("shared variable '{}'", var.name);
    if (size_t(index) >= shared_values.size() || shared_values[size_t(index)].absent())
      throw UserError(fmt::format("function '{}' reads {}, but no value was given for it", fn.name, who));
    bind_argument(var.type, shared_values[size_t(index)], who, who, bindings);
    shareds[size_t(index)] = canonical_argument(shared_values[size_t(index)], who);
    shared_checked[size_t(index)] = true;
  }

  std::vector<HostTensor> values(fn.nodes.size());
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    if (!live[i]) continue;
    const ir::Node& node = fn.nodes[i];
    const ir::NodeId id = ir::NodeId(i);
    std::vector<const HostTensor*> operands;
    for (ir::NodeId operand : node.operands) {
      SYNK_CHECK(operand >= 0 && operand < id,
                     fmt::format("node %{} uses %{}, which does not precede it", id, operand));
      operands.push_back(&values[size_t(operand)]);
    }
    switch (node.op) {
      case ir::Op::Input:
        SYNK_CHECK(node.attrs.index >= 0 && size_t(node.attrs.index) < args.size(), "Input index out of range");
        values[i] = args[size_t(node.attrs.index)];
        break;
      case ir::Op::SharedRead:
        values[i] = shareds[size_t(node.attrs.index)];
        break;
      case ir::Op::Grad:
        throw UserError("grad(...) must be expanded by the compiler's gradient pass before evaluation");
      case ir::Op::Random: {
        std::vector<int64_t> shape;
        for (const ir::Dim& d : node.type.shape) shape.push_back(d.is_symbolic() ? bindings.size.at(d.symbol) : d.size);
        values[i] = random_values(node, shape, rng);
        break;
      }
      default: {
        eval_detail::OpContext ctx{node, id, operands, bindings};
        values[i] = eval_detail::op_impl(node.op)(ctx);
        break;
      }
    }
    check_node_result(fn, id, values[i], bindings);
  }

  EvalResult result;
  for (const ir::Output& out : fn.outputs) {
    SYNK_CHECK(out.node >= 0 && size_t(out.node) < values.size(), "output node out of range");
    result.outputs.push_back(values[size_t(out.node)]);
  }
  for (const ir::Update& up : fn.updates) {
    SYNK_CHECK(up.node >= 0 && size_t(up.node) < values.size(), "update node out of range");
    SYNK_CHECK(up.shared >= 0 && size_t(up.shared) < module.shareds.size(), "update shared out of range");
    result.updates.push_back(values[size_t(up.node)]);
  }
  return result;
}

EvalResult evaluate(const ir::Module& module, std::string_view function_name,
                    std::span<const HostTensor> inputs, std::span<const HostTensor> shared_values,
                    const RngState& rng) {
  const ir::Function* fn = module.find_function(function_name);
  if (fn == nullptr) throw UserError(fmt::format("the module has no function '{}'", function_name));
  return evaluate(module, *fn, inputs, shared_values, rng);
}

}  // namespace synk::dsl
