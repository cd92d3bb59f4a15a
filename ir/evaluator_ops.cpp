// The reference evaluator's op implementations, one small function per op (or per op family),
// and the table that maps each ir::Op to its function. Every function computes in double (or in
// wrapping 64-bit integers for integer results), walks arrays in row-major order, and reports
// data-dependent failures as UserErrors naming the op. Semantics: docs/language.md, plus the
// numeric conventions listed in evaluator.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "base/numpy_math.h"
#include "ir/evaluator_internal.h"

namespace synk::dsl::eval_detail {
namespace {

using ir::DType;
using ir::Op;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

HostTensor make_result(const OpContext& ctx, Sizes shape) {
  return HostTensor::filled(ctx.node.type.dtype, std::move(shape), 0.0);
}

const HostTensor& arg(const OpContext& ctx, size_t i) {
  SYNK_CHECK(i < ctx.args.size(), fmt::format("node %{} ({}) needs operand {}", ctx.id,
                                                  ir::op_name(ctx.node.op), i));
  return *ctx.args[i];
}

bool is_integral_dtype(DType t) { return ir::is_integer(t) || t == DType::Bool; }

int64_t as_int(double v) { return int64_t(v); }   // callers pass exact integers (|v| <= 2^63)

int64_t normalize_axis(const OpContext& ctx, int64_t axis, size_t rank) {
  const int64_t r = int64_t(rank);
  if (axis < 0) axis += r;
  SYNK_CHECK(axis >= 0 && axis < r, fmt::format("node %{} ({}): axis {} out of range for rank {}",
                                                    ctx.id, ir::op_name(ctx.node.op), axis, rank));
  return axis;
}

// numpy broadcasting of actual shapes; the IR was checked, so a mismatch is our bug.
Sizes broadcast_all(const OpContext& ctx) {
  Sizes out;
  for (const HostTensor* t : ctx.args) {
    const Sizes& s = t->shape;
    if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), 1);
    const size_t lead = out.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& o = out[lead + d];
      if (o == s[d] || s[d] == 1) continue;
      SYNK_CHECK(o == 1, fmt::format("node %{} ({}): shapes do not broadcast", ctx.id,
                                         ir::op_name(ctx.node.op)));
      o = s[d];
    }
  }
  return out;
}

// ---- leaves --------------------------------------------------------------------------------

HostTensor constant(OpContext& ctx) {
  const DType t = ctx.node.type.dtype;
  const double v = ir::is_float(t) ? convert_value(ctx.node.attrs.value, t, "constant")
                                   : wrap_integer(ctx.node.attrs.ivalue, t);
  return HostTensor::filled(t, {}, v);
}

// ---- pointwise, one operand ----------------------------------------------------------------

template <class F>
HostTensor map_unary(OpContext& ctx, F&& f) {
  const HostTensor& x = arg(ctx, 0);
  HostTensor out = make_result(ctx, x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) out.data[i] = f(x.data[i]);
  return out;
}

HostTensor unary_op(OpContext& ctx) {
  const DType t = ctx.node.type.dtype;
  const bool integral = is_integral_dtype(t);
  switch (ctx.node.op) {
    case Op::Neg:
      if (integral) return map_unary(ctx, [t](double v) { return wrap_integer(int64_t(0 - uint64_t(as_int(v))), t); });
      return map_unary(ctx, [](double v) { return -v; });
    case Op::Abs:
      if (integral)
        return map_unary(ctx, [t](double v) {
          const int64_t i = as_int(v);
          return wrap_integer(i < 0 ? int64_t(0 - uint64_t(i)) : i, t);
        });
      return map_unary(ctx, [](double v) { return std::fabs(v); });
    case Op::Relu:
      return map_unary(ctx, [](double v) { return std::isnan(v) ? v : (v > 0 ? v : 0.0); });
    case Op::Not:
      return map_unary(ctx, [](double v) { return v != 0 ? 0.0 : 1.0; });
    case Op::Floor: return map_unary(ctx, [](double v) { return std::floor(v); });   // ints: identity
    case Op::Ceil: return map_unary(ctx, [](double v) { return std::ceil(v); });
    case Op::Round: return map_unary(ctx, numpy_math::round_half_even);
    case Op::Sign: return map_unary(ctx, numpy_math::sign);
    default: break;
  }
  SYNK_CHECK(ir::is_float(t), fmt::format("node %{} ({}) needs a float type", ctx.id, ir::op_name(ctx.node.op)));
  switch (ctx.node.op) {
    case Op::Exp: return map_unary(ctx, [](double v) { return std::exp(v); });
    case Op::Log: return map_unary(ctx, [](double v) { return std::log(v); });
    case Op::Sqrt: return map_unary(ctx, [](double v) { return std::sqrt(v); });
    case Op::Tanh: return map_unary(ctx, [](double v) { return std::tanh(v); });
    case Op::Log1p: return map_unary(ctx, [](double v) { return std::log1p(v); });
    case Op::Expm1: return map_unary(ctx, [](double v) { return std::expm1(v); });
    case Op::Sin: return map_unary(ctx, [](double v) { return std::sin(v); });
    case Op::Cos: return map_unary(ctx, [](double v) { return std::cos(v); });
    case Op::Softplus: return map_unary(ctx, numpy_math::softplus);
    case Op::Sigmoid:
      // Written so that exp never overflows: both branches take exp of a non-positive number.
      return map_unary(ctx, [](double v) {
        if (std::isnan(v)) return v;
        if (v >= 0) return 1.0 / (1.0 + std::exp(-v));
        const double e = std::exp(v);
        return e / (1.0 + e);
      });
    default: break;
  }
  internal_error(fmt::format("evaluator: {} is not a unary op", ir::op_name(ctx.node.op)));
}

HostTensor cast(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const DType to = ctx.node.type.dtype;
  const bool integral_source = is_integral_dtype(x.dtype);
  return map_unary(ctx, [&](double v) {
    if (integral_source && is_integral_dtype(to)) return wrap_integer(as_int(v), to);
    return convert_value(v, to, "cast");
  });
}

// ---- pointwise, two or three operands --------------------------------------------------------

template <class F>
HostTensor map_broadcast(OpContext& ctx, F&& f) {
  const Sizes out_shape = broadcast_all(ctx);
  HostTensor out = make_result(ctx, out_shape);
  const HostTensor& a = arg(ctx, 0);
  const HostTensor& b = arg(ctx, 1);
  std::array<Sizes, 2> strides{broadcast_strides(a.shape, out_shape), broadcast_strides(b.shape, out_shape)};
  for_each_element(out_shape, strides, [&](int64_t flat, const std::array<int64_t, 2>& off, const Sizes&) {
    out.data[size_t(flat)] = f(a.data[size_t(off[0])], b.data[size_t(off[1])]);
  });
  return out;
}

// a ** b for integers, wrapping; a negative exponent gives trunc(1 / a^|b|).
uint64_t integer_power(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent % 2 == 0) ? 1 : uint64_t(-1);
    return 0;
  }
  uint64_t result = 1, b = uint64_t(base);
  for (uint64_t e = uint64_t(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return result;
}

double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }

HostTensor binary_op(OpContext& ctx) {
  const DType t = ctx.node.type.dtype;
  const Op op = ctx.node.op;
  if (is_integral_dtype(t) && (op == Op::Add || op == Op::Sub || op == Op::Mul || op == Op::Pow)) {
    return map_broadcast(ctx, [op, t](double a, double b) {
      const uint64_t x = uint64_t(as_int(a)), y = uint64_t(as_int(b));
      uint64_t r = 0;
      switch (op) {
        case Op::Add: r = x + y; break;
        case Op::Sub: r = x - y; break;
        case Op::Mul: r = x * y; break;
        default: r = integer_power(as_int(a), as_int(b)); break;
      }
      return wrap_integer(int64_t(r), t);
    });
  }
  if (is_integral_dtype(t) && (op == Op::Mod || op == Op::FloorDiv)) {
    return map_broadcast(ctx, [&ctx, op, t](double a, double b) {
      // Integer division by zero has no value (numpy gives 0 and a warning): a user error.
      if (as_int(b) == 0)
        throw UserError(fmt::format("{}{}: integer division by zero", op == Op::Mod ? "'%'" : "floor_divide",
                                    ctx.node.loc.valid() ? fmt::format(" (line {}, column {})", ctx.node.loc.line,
                                                                       ctx.node.loc.col) : std::string()));
      const int64_t r = op == Op::Mod ? numpy_math::int_floor_mod(as_int(a), as_int(b))
                                      : numpy_math::int_floor_divide(as_int(a), as_int(b));
      return wrap_integer(r, t);
    });
  }
  switch (op) {
    case Op::Add: return map_broadcast(ctx, [](double a, double b) { return a + b; });
    case Op::Mod: return map_broadcast(ctx, numpy_math::floor_mod);
    case Op::FloorDiv: return map_broadcast(ctx, numpy_math::floor_divide);
    case Op::BceWithLogits: return map_broadcast(ctx, numpy_math::bce_with_logits);
    case Op::Sub: return map_broadcast(ctx, [](double a, double b) { return a - b; });
    case Op::Mul: return map_broadcast(ctx, [](double a, double b) { return a * b; });
    case Op::Div:
      SYNK_CHECK(ir::is_float(t), fmt::format("node %{} (div) needs a float type", ctx.id));
      return map_broadcast(ctx, [](double a, double b) { return a / b; });
    case Op::Pow: return map_broadcast(ctx, [](double a, double b) { return std::pow(a, b); });
    case Op::Maximum: return map_broadcast(ctx, nan_max);
    case Op::Minimum: return map_broadcast(ctx, nan_min);
    case Op::Eq: return map_broadcast(ctx, [](double a, double b) { return double(a == b); });
    case Op::Ne: return map_broadcast(ctx, [](double a, double b) { return double(a != b); });
    case Op::Lt: return map_broadcast(ctx, [](double a, double b) { return double(a < b); });
    case Op::Le: return map_broadcast(ctx, [](double a, double b) { return double(a <= b); });
    case Op::Gt: return map_broadcast(ctx, [](double a, double b) { return double(a > b); });
    case Op::Ge: return map_broadcast(ctx, [](double a, double b) { return double(a >= b); });
    case Op::And: return map_broadcast(ctx, [](double a, double b) { return double(a != 0 && b != 0); });
    case Op::Or: return map_broadcast(ctx, [](double a, double b) { return double(a != 0 || b != 0); });
    default: break;
  }
  internal_error(fmt::format("evaluator: {} is not a binary op", ir::op_name(op)));
}

HostTensor where(OpContext& ctx) {
  const Sizes out_shape = broadcast_all(ctx);
  HostTensor out = make_result(ctx, out_shape);
  const HostTensor& c = arg(ctx, 0);
  const HostTensor& a = arg(ctx, 1);
  const HostTensor& b = arg(ctx, 2);
  std::array<Sizes, 3> strides{broadcast_strides(c.shape, out_shape), broadcast_strides(a.shape, out_shape),
                               broadcast_strides(b.shape, out_shape)};
  for_each_element(out_shape, strides, [&](int64_t flat, const std::array<int64_t, 3>& off, const Sizes&) {
    out.data[size_t(flat)] = c.data[size_t(off[0])] != 0 ? a.data[size_t(off[1])] : b.data[size_t(off[2])];
  });
  return out;
}

// ---- reductions ----------------------------------------------------------------------------

struct ReduceLayout {
  Sizes out_shape;
  Sizes in_to_out_strides;   // over the input's axes: the output stride, 0 on reduced axes
  int64_t reduced_count = 1; // elements folded into each output element
  std::vector<bool> reduced;
};

ReduceLayout reduce_layout(OpContext& ctx, const Sizes& in) {
  ReduceLayout l;
  l.reduced.assign(in.size(), false);
  for (int64_t a : ctx.node.attrs.axes) {
    SYNK_CHECK(a >= 0 && size_t(a) < in.size(),
                   fmt::format("node %{} ({}): axis {} out of range", ctx.id, ir::op_name(ctx.node.op), a));
    l.reduced[size_t(a)] = true;
  }
  Sizes kept_shape;   // the output shape with keepdims, whose strides map input to output
  for (size_t d = 0; d < in.size(); ++d) {
    kept_shape.push_back(l.reduced[d] ? 1 : in[d]);
    if (l.reduced[d]) l.reduced_count *= in[d];
    if (!l.reduced[d] || ctx.node.attrs.keepdims) l.out_shape.push_back(kept_shape.back());
  }
  l.in_to_out_strides = row_major_strides(kept_shape);
  for (size_t d = 0; d < in.size(); ++d)
    if (l.reduced[d]) l.in_to_out_strides[d] = 0;
  return l;
}

// Visits every input element with the flat offset of the output element it folds into.
template <class F>
void for_each_reduced(const HostTensor& x, const ReduceLayout& l, F&& f) {
  std::array<Sizes, 1> strides{l.in_to_out_strides};
  for_each_element(x.shape, strides, [&](int64_t flat, const std::array<int64_t, 1>& off, const Sizes& index) {
    f(x.data[size_t(flat)], size_t(off[0]), index);
  });
}

void require_nonempty_axis(const OpContext& ctx, const HostTensor& x, const ReduceLayout& l) {
  if (l.reduced_count != 0) return;
  std::vector<int64_t> empty_axes;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (l.reduced[d] && x.shape[d] == 0) empty_axes.push_back(int64_t(d));
  throw UserError(fmt::format("{}: cannot reduce over an empty axis (axis {} of {} has size 0); {} has no identity",
                              ir::op_name(ctx.node.op), fmt::join(empty_axes, ", "), host_type_str(x),
                              ir::op_name(ctx.node.op)));
}

HostTensor reduce_op(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const ReduceLayout l = reduce_layout(ctx, x.shape);
  HostTensor out = make_result(ctx, l.out_shape);
  const DType t = out.dtype;
  const Op op = ctx.node.op;
  if (op == Op::ReduceMax || op == Op::ReduceMin) {
    require_nonempty_axis(ctx, x, l);
    std::vector<bool> seen(out.data.size(), false);
    for_each_reduced(x, l, [&](double v, size_t o, const Sizes&) {
      if (!seen[o]) out.data[o] = v, seen[o] = true;
      else out.data[o] = op == Op::ReduceMax ? nan_max(out.data[o], v) : nan_min(out.data[o], v);
    });
    return out;
  }
  const bool product = op == Op::ReduceProd;
  if (is_integral_dtype(t)) {
    std::vector<uint64_t> acc(out.data.size(), product ? 1 : 0);
    for_each_reduced(x, l, [&](double v, size_t o, const Sizes&) {
      acc[o] = product ? acc[o] * uint64_t(as_int(v)) : acc[o] + uint64_t(as_int(v));
    });
    for (size_t o = 0; o < acc.size(); ++o) {
      out.data[o] = wrap_integer(int64_t(acc[o]), t);
      if (op == Op::ReduceMean) out.data[o] = convert_value(double(int64_t(acc[o])) / double(l.reduced_count), t, "mean");
    }
    return out;
  }
  std::fill(out.data.begin(), out.data.end(), product ? 1.0 : 0.0);
  for_each_reduced(x, l, [&](double v, size_t o, const Sizes&) {
    out.data[o] = product ? out.data[o] * v : out.data[o] + v;
  });
  if (op == Op::ReduceMean)
    for (double& v : out.data) v /= double(l.reduced_count);   // 0 / 0 = NaN for an empty axis, like numpy
  return out;
}

HostTensor argmax(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  SYNK_CHECK(ctx.node.attrs.axes.size() == 1, fmt::format("node %{} (argmax) needs one axis", ctx.id));
  const size_t axis = size_t(ctx.node.attrs.axes[0]);
  const ReduceLayout l = reduce_layout(ctx, x.shape);
  require_nonempty_axis(ctx, x, l);
  HostTensor out = make_result(ctx, l.out_shape);
  std::vector<double> best(out.data.size(), 0.0);
  std::vector<bool> seen(out.data.size(), false);
  // Row-major order visits each output's candidates in increasing index along the axis, so
  // keeping only strict improvements returns the first maximum; a NaN wins and then stays.
  for_each_reduced(x, l, [&](double v, size_t o, const Sizes& index) {
    const bool better = !seen[o] || (!std::isnan(best[o]) && (std::isnan(v) || v > best[o]));
    if (better) best[o] = v, out.data[o] = double(index[axis]), seen[o] = true;
  });
  return out;
}

// ---- structure -----------------------------------------------------------------------------

HostTensor matmul(OpContext& ctx) {
  const HostTensor& a = arg(ctx, 0);
  const HostTensor& b = arg(ctx, 1);
  SYNK_CHECK(a.shape.size() >= 1 && a.shape.size() <= 2 && b.shape.size() >= 1 && b.shape.size() <= 2,
                 fmt::format("node %{} (matmul) needs rank 1 or 2 operands", ctx.id));
  // numpy: a vector on the left is a row [1, k], on the right a column [k, 1]; those unit axes
  // are dropped from the result.
  const int64_t n = a.shape.size() == 2 ? a.shape[0] : 1;
  const int64_t k = a.shape.back();
  const int64_t kb = b.shape[0];
  const int64_t m = b.shape.size() == 2 ? b.shape[1] : 1;
  SYNK_CHECK(k == kb, fmt::format("node %{} (matmul): inner sizes {} and {} differ", ctx.id, k, kb));
  Sizes out_shape;
  if (a.shape.size() == 2) out_shape.push_back(n);
  if (b.shape.size() == 2) out_shape.push_back(m);
  HostTensor out = make_result(ctx, out_shape);
  const bool integral = is_integral_dtype(out.dtype);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double facc = 0;
      uint64_t iacc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = a.data[size_t(i * k + p)], y = b.data[size_t(p * m + j)];
        if (integral) iacc += uint64_t(as_int(x)) * uint64_t(as_int(y));
        else facc += x * y;
      }
      out.data[size_t(i * m + j)] = integral ? wrap_integer(int64_t(iacc), out.dtype) : facc;
    }
  }
  return out;
}

HostTensor transpose(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const std::vector<int64_t>& perm = ctx.node.attrs.perm;
  SYNK_CHECK(perm.size() == x.shape.size(), fmt::format("node %{} (transpose): perm has the wrong length", ctx.id));
  const Sizes in_strides = row_major_strides(x.shape);
  Sizes out_shape, strides;
  for (int64_t p : perm) {
    SYNK_CHECK(p >= 0 && size_t(p) < x.shape.size(), fmt::format("node %{} (transpose): bad perm", ctx.id));
    out_shape.push_back(x.shape[size_t(p)]);
    strides.push_back(in_strides[size_t(p)]);
  }
  HostTensor out = make_result(ctx, out_shape);
  for_each_element(out_shape, std::array<Sizes, 1>{strides},
                   [&](int64_t flat, const std::array<int64_t, 1>& off, const Sizes&) {
                     out.data[size_t(flat)] = x.data[size_t(off[0])];
                   });
  return out;
}

HostTensor reshape(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const ir::Shape& target = ctx.node.type.shape;
  Sizes out_shape(target.size(), 0);
  int64_t known = 1;
  int unknown_axis = -1;
  for (size_t d = 0; d < target.size(); ++d) {
    const ir::Dim& dim = target[d];
    if (!dim.is_symbolic()) {
      out_shape[d] = dim.size;
    } else if (auto it = ctx.bindings.size.find(dim.symbol); it != ctx.bindings.size.end()) {
      out_shape[d] = it->second;
    } else {
      SYNK_CHECK(unknown_axis < 0, fmt::format("node %{} (reshape): more than one unbound dimension", ctx.id));
      unknown_axis = int(d);
      continue;
    }
    known *= out_shape[d];
  }
  const int64_t count = x.size();
  if (unknown_axis >= 0) {
    // A dimension the front end could not name (from a -1): it takes what the others leave.
    if (known == 0 || count % known != 0)
      throw UserError(fmt::format("reshape: cannot reshape {} into {} ({} elements do not divide into rows of {})",
                                  host_type_str(x), ir::shape_str(target), count, known));
    out_shape[size_t(unknown_axis)] = count / known;
  } else if (known != count) {
    throw UserError(fmt::format("reshape: cannot reshape {} ({} elements) into {} = {} ({} elements)",
                                host_type_str(x), count, ir::shape_str(target), sizes_str(out_shape), known));
  }
  HostTensor out = x;
  out.dtype = ctx.node.type.dtype;
  out.shape = out_shape;
  return out;
}

Sizes resolve_shape(const OpContext& ctx, const ir::Shape& shape) {
  Sizes out;
  for (const ir::Dim& dim : shape) {
    if (!dim.is_symbolic()) { out.push_back(dim.size); continue; }
    auto it = ctx.bindings.size.find(dim.symbol);
    SYNK_CHECK(it != ctx.bindings.size.end(),
                   fmt::format("node %{} ({}): symbol '{}' is unbound", ctx.id, ir::op_name(ctx.node.op), dim.symbol));
    out.push_back(it->second);
  }
  return out;
}

HostTensor broadcast_to(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const Sizes out_shape = resolve_shape(ctx, ctx.node.type.shape);
  SYNK_CHECK(out_shape.size() >= x.shape.size(), fmt::format("node %{} (broadcast_to): rank shrinks", ctx.id));
  for (size_t d = 0; d < x.shape.size(); ++d) {
    const int64_t from = x.shape[d], to = out_shape[out_shape.size() - x.shape.size() + d];
    SYNK_CHECK(from == to || from == 1, fmt::format("node %{} (broadcast_to): {} does not broadcast to {}",
                                                        ctx.id, sizes_str(x.shape), sizes_str(out_shape)));
  }
  HostTensor out = make_result(ctx, out_shape);
  for_each_element(out_shape, std::array<Sizes, 1>{broadcast_strides(x.shape, out_shape)},
                   [&](int64_t flat, const std::array<int64_t, 1>& off, const Sizes&) {
                     out.data[size_t(flat)] = x.data[size_t(off[0])];
                   });
  return out;
}

// Sizes before, along and after `axis`: an array is outer x len x inner in row-major order.
struct AxisSplit { int64_t outer = 1, len = 1, inner = 1; };
AxisSplit split_at(const Sizes& s, size_t axis) {
  AxisSplit r;
  for (size_t d = 0; d < s.size(); ++d) {
    if (d < axis) r.outer *= s[d];
    else if (d == axis) r.len = s[d];
    else r.inner *= s[d];
  }
  return r;
}

HostTensor concat(OpContext& ctx) {
  SYNK_CHECK(ctx.args.size() >= 2, fmt::format("node %{} (concat) needs two operands", ctx.id));
  const HostTensor& first = arg(ctx, 0);
  const size_t axis = size_t(normalize_axis(ctx, ctx.node.attrs.axis, first.shape.size()));
  Sizes out_shape = first.shape;
  out_shape[axis] = 0;
  for (const HostTensor* t : ctx.args) {
    SYNK_CHECK(t->shape.size() == first.shape.size(), fmt::format("node %{} (concat): ranks differ", ctx.id));
    for (size_t d = 0; d < t->shape.size(); ++d)
      SYNK_CHECK(d == axis || t->shape[d] == first.shape[d],
                     fmt::format("node %{} (concat): shapes differ off the axis", ctx.id));
    out_shape[axis] += t->shape[axis];
  }
  HostTensor out = make_result(ctx, out_shape);
  const AxisSplit whole = split_at(out_shape, axis);
  size_t write = 0;
  for (int64_t o = 0; o < whole.outer; ++o) {
    for (const HostTensor* t : ctx.args) {
      const int64_t block = t->shape[axis] * whole.inner;
      std::copy_n(t->data.begin() + o * block, block, out.data.begin() + int64_t(write));
      write += size_t(block);
    }
  }
  return out;
}

HostTensor slice(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const size_t axis = size_t(normalize_axis(ctx, ctx.node.attrs.axis, x.shape.size()));
  const int64_t start = ctx.node.attrs.start, stop = ctx.node.attrs.stop;
  if (!(0 <= start && start <= stop && stop <= x.shape[axis]))
    throw UserError(fmt::format("slice: [{}, {}) is out of range for axis {} of {} (size {})", start, stop,
                                axis, host_type_str(x), x.shape[axis]));
  Sizes out_shape = x.shape;
  out_shape[axis] = stop - start;
  HostTensor out = make_result(ctx, out_shape);
  const AxisSplit s = split_at(x.shape, axis);
  const int64_t block = (stop - start) * s.inner;
  for (int64_t o = 0; o < s.outer; ++o)
    std::copy_n(x.data.begin() + (o * s.len + start) * s.inner, block, out.data.begin() + o * block);
  return out;
}

HostTensor take(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const HostTensor& idx = arg(ctx, 1);
  SYNK_CHECK(x.shape.size() >= 1 && idx.shape.size() == 1, fmt::format("node %{} (take): bad ranks", ctx.id));
  Sizes out_shape = x.shape;
  out_shape[0] = idx.shape[0];
  HostTensor out = make_result(ctx, out_shape);
  const int64_t row = split_at(x.shape, 0).inner;
  for (int64_t i = 0; i < idx.shape[0]; ++i) {
    const double v = idx.data[size_t(i)];
    if (!(v >= 0 && v < double(x.shape[0])))
      throw UserError(fmt::format("take: index {} at position {} is out of range for axis 0 of {} (size {})",
                                  v, i, host_type_str(x), x.shape[0]));
    std::copy_n(x.data.begin() + as_int(v) * row, row, out.data.begin() + i * row);
  }
  return out;
}

HostTensor one_hot(OpContext& ctx) {
  const HostTensor& labels = arg(ctx, 0);
  const int64_t k = ctx.node.attrs.num_classes;
  SYNK_CHECK(labels.shape.size() == 1 && k >= 0, fmt::format("node %{} (one_hot): bad operand", ctx.id));
  HostTensor out = make_result(ctx, {labels.shape[0], k});
  for (int64_t i = 0; i < labels.shape[0]; ++i) {
    const double v = labels.data[size_t(i)];
    if (!(v >= 0 && v < double(k)))
      throw UserError(fmt::format("one_hot: label {} in row {} is out of range for {} classes (valid labels are 0 to {})",
                                  v, i, k, k - 1));
    out.data[size_t(i * k + as_int(v))] = 1.0;
  }
  return out;
}

// Numerically stable softmax / log-softmax along one axis: subtract the maximum first.
HostTensor softmax_family(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const size_t axis = size_t(normalize_axis(ctx, ctx.node.attrs.axis, x.shape.size()));
  const bool log_form = ctx.node.op == Op::LogSoftmax;
  HostTensor out = make_result(ctx, x.shape);
  const AxisSplit s = split_at(x.shape, axis);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t in = 0; in < s.inner; ++in) {
      auto at = [&](int64_t j) { return size_t((o * s.len + j) * s.inner + in); };
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s.len; ++j) max = nan_max(max, x.data[at(j)]);
      double total = 0;
      for (int64_t j = 0; j < s.len; ++j) total += std::exp(x.data[at(j)] - max);
      const double log_total = std::log(total);
      for (int64_t j = 0; j < s.len; ++j)
        out.data[at(j)] = log_form ? x.data[at(j)] - max - log_total : std::exp(x.data[at(j)] - max) / total;
    }
  }
  return out;
}

// Inclusive prefix sum along one axis (from its end with attrs.reverse), numpy's cumsum: the
// first element is copied (so -0.0 stays -0.0), integers add in wrapping 64-bit arithmetic and
// wrap into the dtype, floats add in double.
HostTensor cumsum(OpContext& ctx) {
  const HostTensor& x = arg(ctx, 0);
  const size_t axis = size_t(normalize_axis(ctx, ctx.node.attrs.axis, x.shape.size()));
  const bool reverse = ctx.node.attrs.reverse;
  const DType t = ctx.node.type.dtype;
  HostTensor out = make_result(ctx, x.shape);
  const AxisSplit s = split_at(x.shape, axis);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t in = 0; in < s.inner; ++in) {
      auto at = [&](int64_t step) {
        const int64_t j = reverse ? s.len - 1 - step : step;
        return size_t((o * s.len + j) * s.inner + in);
      };
      uint64_t int_total = 0;
      double total = 0;
      for (int64_t step = 0; step < s.len; ++step) {
        const double v = x.data[at(step)];
        if (is_integral_dtype(t)) {
          int_total += uint64_t(as_int(v));
          out.data[at(step)] = wrap_integer(int64_t(int_total), t);
        } else {
          total = step == 0 ? v : total + v;
          out.data[at(step)] = total;
        }
      }
    }
  }
  return out;
}

HostTensor cross_entropy(OpContext& ctx) {
  const HostTensor& logits = arg(ctx, 0);
  const HostTensor& labels = arg(ctx, 1);
  SYNK_CHECK(logits.shape.size() == 2, fmt::format("node %{} (cross_entropy): logits must be [n, k]", ctx.id));
  const int64_t n = logits.shape[0], k = logits.shape[1];
  const bool class_indices = is_integral_dtype(labels.dtype);
  SYNK_CHECK(class_indices ? labels.shape == Sizes{n} : labels.shape == logits.shape,
                 fmt::format("node %{} (cross_entropy): labels do not fit the logits", ctx.id));
  HostTensor out = make_result(ctx, {n});
  for (int64_t i = 0; i < n; ++i) {
    const double* row = logits.data.data() + i * k;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < k; ++j) max = nan_max(max, row[j]);
    double total = 0;
    for (int64_t j = 0; j < k; ++j) total += std::exp(row[j] - max);
    const double log_total = std::log(total);
    if (class_indices) {
      const double label = labels.data[size_t(i)];
      if (!(label >= 0 && label < double(k)))
        throw UserError(fmt::format("cross_entropy: label {} in row {} is out of range for {} classes "
                                    "(valid labels are 0 to {})", label, i, k, k - 1));
      out.data[size_t(i)] = -(row[as_int(label)] - max - log_total);
    } else {
      double loss = 0;
      for (int64_t j = 0; j < k; ++j) loss -= labels.data[size_t(i * k + j)] * (row[j] - max - log_total);
      out.data[size_t(i)] = loss;
    }
  }
  return out;
}

HostTensor grad_not_expanded(OpContext&) {
  throw UserError("grad(...) must be expanded by the compiler's gradient pass before evaluation");
}

HostTensor leaf_in_table(OpContext& ctx) {
  internal_error(fmt::format("evaluator: {} is handled by the driver", ir::op_name(ctx.node.op)));
}

// The table, indexed by ir::Op. Built by a switch so that the compiler warns when an op is added
// to ir.h without an entry here.
OpImpl lookup(Op op) {
  switch (op) {
    case Op::Input: case Op::SharedRead: case Op::Random: return leaf_in_table;
    case Op::Constant: return constant;
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Tanh:
    case Op::Sigmoid: case Op::Relu: case Op::Not: case Op::Log1p: case Op::Expm1: case Op::Softplus:
    case Op::Sin: case Op::Cos: case Op::Floor: case Op::Ceil: case Op::Round: case Op::Sign: return unary_op;
    case Op::Cast: return cast;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Maximum:
    case Op::Minimum: case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::And: case Op::Or: case Op::Mod: case Op::FloorDiv: case Op::BceWithLogits: return binary_op;
    case Op::Where: return where;
    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin:
    case Op::ReduceProd: return reduce_op;
    case Op::ArgMax: return argmax;
    case Op::MatMul: return matmul;
    case Op::Transpose: return transpose;
    case Op::Reshape: return reshape;
    case Op::BroadcastTo: return broadcast_to;
    case Op::Concat: return concat;
    case Op::Slice: return slice;
    case Op::Take: return take;
    case Op::OneHot: return one_hot;
    case Op::Softmax: case Op::LogSoftmax: return softmax_family;
    case Op::Cumsum: return cumsum;
    case Op::CrossEntropy: return cross_entropy;
    case Op::Conv2d: case Op::Conv2dBackwardData: case Op::Conv2dBackwardWeights: case Op::MaxPool2d:
    case Op::MaxPool2dBackward: case Op::AvgPool2d: case Op::AvgPool2dBackward: return window_op;
    case Op::Grad: return grad_not_expanded;
  }
  return nullptr;
}

}  // namespace

OpImpl op_impl(ir::Op op) {
  static const std::array<OpImpl, size_t(Op::Grad) + 1> table = [] {
    std::array<OpImpl, size_t(Op::Grad) + 1> t{};
    for (size_t i = 0; i < t.size(); ++i) t[i] = lookup(Op(i));
    return t;
  }();
  const size_t i = size_t(op);
  if (i >= table.size() || table[i] == nullptr)
    internal_error(fmt::format("evaluator: no implementation for op #{}", i));
  return table[i];
}

}  // namespace synk::dsl::eval_detail
