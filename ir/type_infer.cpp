// Type and shape inference for single Graph IR operations (see type_infer.h). Each op family
// has one small function; messages are complete sentences for users, without locations.
#include "ir/type_infer.h"

#include "ir/window.h"

#include <algorithm>
#include <fmt/format.h>

#include "base/checked_math.h"

namespace synk::dsl {

using ir::DType;
using ir::Dim;
using ir::Op;
using ir::Shape;
using ir::TensorType;

namespace {

int dtype_rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::U8: return 1;
    case DType::I32: return 2;
    case DType::I64: return 3;
    case DType::F16: return 4;
    case DType::BF16: return 5;
    case DType::F32: return 6;
    case DType::F64: return 7;
  }
  return 0;
}

std::string dim_str(const Dim& d) { return d.is_symbolic() ? d.symbol : std::to_string(d.size); }

InferResult fail(std::string message) { return InferResult{std::nullopt, std::move(message)}; }
InferResult ok(TensorType t) { return InferResult{std::move(t), {}}; }

InferResult need_operands(Op op, std::span<const TensorType> operands, size_t count) {
  if (operands.size() != count)
    return fail(fmt::format("{} takes {} operand{} but {} {} given", ir::op_name(op), count,
                            count == 1 ? "" : "s", operands.size(),
                            operands.size() == 1 ? "was" : "were"));
  return ok({});
}

InferResult infer_unary(Op op, const TensorType& x) {
  const char* name = ir::op_name(op);
  switch (op) {
    case Op::Not:
      if (x.dtype != DType::Bool)
        return fail(fmt::format("'!' needs a bool operand, found {}", ir::dtype_name(x.dtype)));
      return ok(x);
    case Op::Neg: case Op::Abs: case Op::Relu: case Op::Floor: case Op::Ceil: case Op::Round: case Op::Sign:
      if (!is_numeric(x.dtype))
        return fail(fmt::format("{} needs a numeric operand, found {}", name, ir::dtype_name(x.dtype)));
      return ok(x);
    default:  // Exp Log Sqrt Tanh Sigmoid Log1p Expm1 Softplus Sin Cos
      if (!ir::is_float(x.dtype))
        return fail(fmt::format("{} needs a floating operand, found {}; use cast(x, f32)", name,
                                ir::dtype_name(x.dtype)));
      return ok(x);
  }
}

// Matrix products are typed apart (infer_matmul), so a message here never says '@'.
const char* binary_spelling(Op op) {
  const char* infix = op == Op::MatMul ? nullptr : ir::infix_spelling(op);
  return infix ? infix : ir::op_name(op);
}

InferResult infer_binary(Op op, const TensorType& a, const TensorType& b) {
  const char* spelling = binary_spelling(op);
  if (a.dtype != b.dtype)
    return fail(fmt::format("operands of '{}' have different dtypes {} and {}", spelling,
                            ir::dtype_name(a.dtype), ir::dtype_name(b.dtype)));
  std::string error;
  auto shape = broadcast_shapes(a.shape, b.shape, &error);
  if (!shape) return fail(fmt::format("{} in '{}'", error, spelling));
  DType result = a.dtype;
  switch (op) {
    case Op::Div:
      if (!ir::is_float(a.dtype))
        return fail(fmt::format("'/' needs floating operands, found {}; use cast(x, f32)",
                                ir::dtype_name(a.dtype)));
      break;
    case Op::BceWithLogits:
      if (!ir::is_float(a.dtype))
        return fail(fmt::format("{} needs floating operands, found {}; use cast(x, f32)", spelling,
                                ir::dtype_name(a.dtype)));
      break;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Pow: case Op::Maximum: case Op::Minimum:
    case Op::Mod: case Op::FloorDiv:
      if (!is_numeric(a.dtype))
        return fail(fmt::format("'{}' needs numeric operands, found {}", spelling,
                                ir::dtype_name(a.dtype)));
      break;
    case Op::And: case Op::Or:
      if (a.dtype != DType::Bool)
        return fail(fmt::format("'{}' needs bool operands, found {}", spelling,
                                ir::dtype_name(a.dtype)));
      break;
    default:  // comparisons
      result = DType::Bool;
      break;
  }
  return ok(TensorType{result, *shape});
}

InferResult infer_where(const TensorType& c, const TensorType& a, const TensorType& b) {
  if (c.dtype != DType::Bool)
    return fail(fmt::format("where needs a bool condition, found {}", ir::dtype_name(c.dtype)));
  if (a.dtype != b.dtype)
    return fail(fmt::format("where's branches have different dtypes {} and {}",
                            ir::dtype_name(a.dtype), ir::dtype_name(b.dtype)));
  std::string error;
  auto ab = broadcast_shapes(a.shape, b.shape, &error);
  if (!ab) return fail(error + " in 'where'");
  auto all = broadcast_shapes(c.shape, *ab, &error);
  if (!all) return fail(error + " in 'where'");
  return ok(TensorType{a.dtype, *all});
}

std::string check_axes(std::span<const int64_t> axes, size_t rank) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || size_t(axes[i]) >= rank)
      return fmt::format("axis {} is out of range for rank {}", axes[i], rank);
    if (i > 0 && axes[i] <= axes[i - 1]) return "axes must be sorted and unique";
  }
  return {};
}

InferResult infer_reduction(Op op, const TensorType& x, const ir::Attrs& attrs) {
  const char* name = ir::op_name(op);
  if (auto e = check_axes(attrs.axes, x.rank()); !e.empty()) return fail(fmt::format("{} in {}", e, name));
  switch (op) {
    case Op::ReduceSum: case Op::ReduceProd:
      if (!is_numeric(x.dtype))
        return fail(fmt::format("{} needs a numeric operand, found {}; use cast(x, i64)", name,
                                ir::dtype_name(x.dtype)));
      break;
    case Op::ReduceMean:
      if (!ir::is_float(x.dtype))
        return fail(fmt::format("mean needs a floating operand, found {}; use cast(x, f32)",
                                ir::dtype_name(x.dtype)));
      break;
    case Op::ArgMax:
      if (attrs.axes.size() != 1) return fail("argmax reduces exactly one axis");
      break;
    default:
      break;
  }
  if (op == Op::ReduceMax || op == Op::ReduceMin || op == Op::ArgMax)
    for (int64_t a : attrs.axes)
      if (!x.shape[size_t(a)].is_symbolic() && x.shape[size_t(a)].size == 0)
        return fail(fmt::format("{} over an empty axis: axis {} of {} has size 0, and {} has no identity", name, a,
                                ir::type_str(x), name));
  Shape shape;
  for (size_t i = 0; i < x.rank(); ++i) {
    bool reduced = std::find(attrs.axes.begin(), attrs.axes.end(), int64_t(i)) != attrs.axes.end();
    if (!reduced) shape.push_back(x.shape[i]);
    else if (attrs.keepdims) shape.push_back(Dim::fixed(1));
  }
  return ok(TensorType{op == Op::ArgMax ? DType::I64 : x.dtype, shape});
}

InferResult infer_matmul(const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype)
    return fail(fmt::format("operands of '@' have different dtypes {} and {}", ir::dtype_name(a.dtype),
                            ir::dtype_name(b.dtype)));
  if (!is_numeric(a.dtype)) return fail("'@' needs numeric operands, found bool");
  if (a.rank() < 1 || a.rank() > 2 || b.rank() < 1 || b.rank() > 2)
    return fail(fmt::format("'@' needs operands of rank 1 or 2, found {} and {}",
                            ir::shape_str(a.shape), ir::shape_str(b.shape)));
  const Dim& inner_a = a.shape.back();
  const Dim& inner_b = b.shape[0];  // [k] or [k, m]
  if (!(inner_a == inner_b))
    return fail(fmt::format("inner dimensions of '@' do not match: {} and {} ({} vs {})",
                            ir::shape_str(a.shape), ir::shape_str(b.shape), dim_str(inner_a),
                            dim_str(inner_b)));
  Shape shape;
  if (a.rank() == 2) shape.push_back(a.shape[0]);
  if (b.rank() == 2) shape.push_back(b.shape[1]);
  return ok(TensorType{a.dtype, shape});
}

InferResult infer_transpose(const TensorType& x, const ir::Attrs& attrs) {
  if (attrs.perm.size() != x.rank())
    return fail(fmt::format("transpose needs a permutation of {} axes, found {}", x.rank(),
                            attrs.perm.size()));
  std::vector<bool> seen(x.rank(), false);
  Shape shape;
  for (int64_t p : attrs.perm) {
    if (p < 0 || size_t(p) >= x.rank() || seen[size_t(p)])
      return fail(fmt::format("transpose's axes must be a permutation of 0..{}", x.rank() - 1));
    seen[size_t(p)] = true;
    shape.push_back(x.shape[size_t(p)]);
  }
  return ok(TensorType{x.dtype, shape});
}

InferResult infer_broadcast_to(const TensorType& x, const Shape& target) {
  if (x.rank() > target.size())
    return fail(fmt::format("cannot broadcast {} to {}", ir::shape_str(x.shape), ir::shape_str(target)));
  size_t offset = target.size() - x.rank();
  for (size_t i = 0; i < x.rank(); ++i) {
    const Dim& d = x.shape[i];
    if (!(d == target[offset + i]) && !(!d.is_symbolic() && d.size == 1))
      return fail(fmt::format("cannot broadcast {} to {}", ir::shape_str(x.shape), ir::shape_str(target)));
  }
  return ok(TensorType{x.dtype, target});
}

InferResult infer_concat(std::span<const TensorType> xs, const ir::Attrs& attrs) {
  if (xs.size() < 2) return fail("concat needs at least two operands");
  const TensorType& first = xs[0];
  if (first.rank() == 0) return fail("concat needs operands of rank 1 or more, found a scalar");
  if (attrs.axis < 0 || size_t(attrs.axis) >= first.rank())
    return fail(fmt::format("axis {} is out of range for rank {} in concat", attrs.axis, first.rank()));
  size_t axis = size_t(attrs.axis);
  int64_t total = 0;
  for (const TensorType& x : xs) {
    if (x.dtype != first.dtype)
      return fail(fmt::format("concat's operands have different dtypes {} and {}",
                              ir::dtype_name(first.dtype), ir::dtype_name(x.dtype)));
    if (x.rank() != first.rank())
      return fail(fmt::format("concat's operands have different ranks: {} and {}",
                              ir::shape_str(first.shape), ir::shape_str(x.shape)));
    for (size_t i = 0; i < x.rank(); ++i)
      if (i != axis && !(x.shape[i] == first.shape[i]))
        return fail(fmt::format("concat's operands differ outside axis {}: {} and {}", axis,
                                ir::shape_str(first.shape), ir::shape_str(x.shape)));
  }
  for (const TensorType& x : xs) {
    if (x.shape[axis].is_symbolic())
      return fail(fmt::format("concat along axis {} needs static sizes, found {}", axis,
                              ir::shape_str(x.shape)));
    std::optional<int64_t> sum = checked_add(total, x.shape[axis].size);
    if (!sum) return fail("concat's result has too many elements");
    total = *sum;
  }
  Shape shape = first.shape;
  shape[axis] = Dim::fixed(total);
  return ok(TensorType{first.dtype, shape});
}

InferResult infer_slice(const TensorType& x, const ir::Attrs& attrs) {
  if (x.rank() == 0) return fail("slice needs an operand of rank 1 or more, found a scalar");
  if (attrs.axis < 0 || size_t(attrs.axis) >= x.rank())
    return fail(fmt::format("axis {} is out of range for rank {} in slice", attrs.axis, x.rank()));
  const Dim& d = x.shape[size_t(attrs.axis)];
  if (d.is_symbolic())
    return fail(fmt::format("slice needs a static size along axis {}, found {}", attrs.axis,
                            ir::shape_str(x.shape)));
  if (attrs.start < 0 || attrs.start > attrs.stop || attrs.stop > d.size)
    return fail(fmt::format("slice [{}, {}) is out of range for size {}", attrs.start, attrs.stop, d.size));
  Shape shape = x.shape;
  shape[size_t(attrs.axis)] = Dim::fixed(attrs.stop - attrs.start);
  return ok(TensorType{x.dtype, shape});
}

InferResult infer_take(const TensorType& x, const TensorType& idx) {
  if (x.rank() == 0) return fail("take needs an operand of rank 1 or more, found a scalar");
  if (!ir::is_integer(idx.dtype) || idx.rank() != 1)
    return fail(fmt::format("take needs an integer vector of indices, found {}", ir::type_str(idx)));
  Shape shape = x.shape;
  shape[0] = idx.shape[0];
  return ok(TensorType{x.dtype, shape});
}

InferResult infer_one_hot(const TensorType& labels, const ir::Attrs& attrs, const TensorType* requested) {
  if (!ir::is_integer(labels.dtype) || labels.rank() != 1)
    return fail(fmt::format("one_hot needs integer labels of rank 1, found {}", ir::type_str(labels)));
  if (attrs.num_classes <= 0)
    return fail(fmt::format("one_hot needs a positive number of classes, found {}", attrs.num_classes));
  DType dtype = requested ? requested->dtype : DType::F32;
  return ok(TensorType{dtype, {labels.shape[0], Dim::fixed(attrs.num_classes)}});
}

InferResult infer_softmax(Op op, const TensorType& x, const ir::Attrs& attrs) {
  if (!ir::is_float(x.dtype))
    return fail(fmt::format("{} needs a floating operand, found {}; use cast(x, f32)", ir::op_name(op),
                            ir::dtype_name(x.dtype)));
  if (x.rank() == 0) return fail(fmt::format("{} needs an operand of rank 1 or more, found a scalar", ir::op_name(op)));
  if (attrs.axis < 0 || size_t(attrs.axis) >= x.rank())
    return fail(fmt::format("axis {} is out of range for rank {} in {}", attrs.axis, x.rank(), ir::op_name(op)));
  return ok(x);
}

// Like sum, cumsum needs numeric operands and keeps their dtype (an i32 cumsum is i32).
InferResult infer_cumsum(const TensorType& x, const ir::Attrs& attrs) {
  if (!is_numeric(x.dtype))
    return fail(fmt::format("cumsum needs a numeric operand, found {}; use cast(x, i32)", ir::dtype_name(x.dtype)));
  if (x.rank() == 0) return fail("cumsum needs an operand of rank 1 or more, found a scalar");
  if (attrs.axis < 0 || size_t(attrs.axis) >= x.rank())
    return fail(fmt::format("axis {} is out of range for rank {} in cumsum", attrs.axis, x.rank()));
  return ok(x);
}

InferResult infer_cross_entropy(const TensorType& logits, const TensorType& labels) {
  if (!ir::is_float(logits.dtype) || logits.rank() != 2)
    return fail(fmt::format("cross_entropy needs floating logits of rank 2 [n, k], found {}",
                            ir::type_str(logits)));
  if (!logits.shape[1].is_symbolic() && logits.shape[1].size == 0)
    return fail(fmt::format("cross_entropy needs at least one class, found logits {}", ir::type_str(logits)));
  if (ir::is_integer(labels.dtype)) {
    if (labels.rank() != 1 || !(labels.shape[0] == logits.shape[0]))
      return fail(fmt::format("cross_entropy's class-index labels must have shape [{}], found {}",
                              dim_str(logits.shape[0]), ir::shape_str(labels.shape)));
  } else if (labels.dtype == logits.dtype) {
    if (!(labels.shape == logits.shape))
      return fail(fmt::format("cross_entropy's probability labels must have the logits' shape {}, found {}",
                              ir::shape_str(logits.shape), ir::shape_str(labels.shape)));
  } else {
    return fail(fmt::format("cross_entropy needs integer class indices or {} probabilities as labels, found {}",
                            ir::dtype_name(logits.dtype), ir::type_str(labels)));
  }
  return ok(TensorType{logits.dtype, {logits.shape[0]}});
}

InferResult infer_grad(std::span<const TensorType> operands) {
  if (operands.size() < 2) return fail("grad needs a loss and at least one variable");
  const TensorType& loss = operands[0];
  if (!ir::is_float(loss.dtype))
    return fail(fmt::format("grad needs a floating loss, found {}", ir::type_str(loss)));
  if (loss.rank() != 0)
    return fail(fmt::format("grad needs a scalar loss, found shape {}", ir::shape_str(loss.shape)));
  for (const TensorType& v : operands.subspan(1))
    if (!ir::is_float(v.dtype))
      return fail(fmt::format("grad needs floating variables, found {}", ir::type_str(v)));
  if (operands.size() == 2) return ok(operands[1]);
  int64_t total = 0;
  for (const TensorType& v : operands.subspan(1)) {
    ElementCount c = element_count(v.shape);
    if (!c.symbols.empty())
      return fail(fmt::format("grad with several variables returns one flat vector and needs static "
                              "shapes, found {}", ir::shape_str(v.shape)));
    std::optional<int64_t> sum = c.overflow ? std::nullopt : checked_add(total, c.fixed);
    if (!sum) return fail("grad's flat result has too many elements");
    total = *sum;
  }
  return ok(TensorType{loss.dtype, {Dim::fixed(total)}});
}

}  // namespace

bool is_numeric(DType t) { return t != DType::Bool; }

DType promote(DType a, DType b) { return dtype_rank(a) >= dtype_rank(b) ? a : b; }

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* error) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim* da = i < a.size() ? &a[a.size() - 1 - i] : nullptr;
    const Dim* db = i < b.size() ? &b[b.size() - 1 - i] : nullptr;
    auto is_one = [](const Dim* d) { return !d || (!d->is_symbolic() && d->size == 1); };
    Dim& o = out[rank - 1 - i];
    if (da && db && *da == *db) o = *da;
    else if (is_one(da)) o = db ? *db : Dim::fixed(1);
    else if (is_one(db)) o = *da;
    else {
      if (error) *error = fmt::format("cannot broadcast shapes {} and {}", ir::shape_str(a), ir::shape_str(b));
      return std::nullopt;
    }
  }
  return out;
}

std::optional<int64_t> normalize_axis(int64_t axis, size_t rank, std::string* error) {
  int64_t r = int64_t(rank);
  if (axis < -r || axis >= r) {
    if (error) *error = fmt::format("axis {} is out of range for rank {}", axis, rank);
    return std::nullopt;
  }
  return axis < 0 ? axis + r : axis;
}

std::optional<std::vector<int64_t>> normalize_axes(std::span<const int64_t> axes, size_t rank,
                                                   std::string* error) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normalize_axis(a, rank, error);
    if (!n) return std::nullopt;
    if (std::find(out.begin(), out.end(), *n) != out.end()) {
      if (error) *error = fmt::format("axis {} appears twice", *n);
      return std::nullopt;
    }
    out.push_back(*n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> all_axes(size_t rank) {
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) out[i] = int64_t(i);
  return out;
}

ElementCount element_count(const Shape& shape) {
  ElementCount c;
  std::vector<int64_t> fixed;
  for (const Dim& d : shape) {
    if (d.is_symbolic()) c.symbols.push_back(d.symbol);
    else fixed.push_back(d.size);
  }
  // A zero dimension makes the count 0 whatever the others are (checked_elements).
  if (std::optional<int64_t> n = checked_elements(fixed)) c.fixed = *n;
  else c.overflow = true;
  std::sort(c.symbols.begin(), c.symbols.end());
  return c;
}

std::string element_count_str(const ElementCount& c) {
  std::string out;
  if (c.fixed != 1 || c.symbols.empty()) out = std::to_string(c.fixed);
  for (const std::string& s : c.symbols) out += (out.empty() ? "" : "*") + s;
  return out;
}

namespace {
std::string count_phrase(const ElementCount& c) {
  bool one = c.fixed == 1 && c.symbols.empty();
  return element_count_str(c) + (one ? " element" : " elements");
}
}  // namespace

std::optional<Shape> resolve_reshape(const Shape& from, const Shape& to, std::string* error) {
  auto set_error = [&](std::string m) { if (error) *error = std::move(m); };
  ElementCount have = element_count(from);
  if (have.overflow) {
    set_error(fmt::format("cannot reshape {}: it has too many elements", ir::shape_str(from)));
    return std::nullopt;
  }
  Shape known;
  int infer_at = -1;
  for (size_t i = 0; i < to.size(); ++i) {
    if (!to[i].is_symbolic() && to[i].size == -1) {
      if (infer_at >= 0) { set_error("reshape allows only one -1 size"); return std::nullopt; }
      infer_at = int(i);
    } else if (!to[i].is_symbolic() && to[i].size < 0) {
      set_error(fmt::format("reshape size {} is negative", to[i].size));
      return std::nullopt;
    } else {
      known.push_back(to[i]);
    }
  }
  ElementCount want = element_count(known);
  if (want.overflow) {
    set_error(fmt::format("cannot reshape to {}: it has too many elements", ir::shape_str(to)));
    return std::nullopt;
  }
  if (infer_at < 0) {
    if (have == want || (have.fixed == 0 && want.fixed == 0)) return to;
    set_error(fmt::format("cannot reshape {} ({}) to {} ({})", ir::shape_str(from), count_phrase(have),
                          ir::shape_str(to), count_phrase(want)));
    return std::nullopt;
  }
  // Divide `have` by `want`: the quotient must be one static size or exactly one symbol.
  std::vector<std::string> rest = have.symbols;
  for (const std::string& s : want.symbols) {
    auto it = std::find(rest.begin(), rest.end(), s);
    if (it == rest.end()) {
      set_error(fmt::format("cannot reshape {} to {}: dimension {} does not divide {} elements",
                            ir::shape_str(from), ir::shape_str(to), s, element_count_str(have)));
      return std::nullopt;
    }
    rest.erase(it);
  }
  if (want.fixed == 0) {
    set_error(fmt::format("cannot infer -1 in reshape to {}: the other sizes hold no elements",
                          ir::shape_str(to)));
    return std::nullopt;
  }
  if (have.fixed % want.fixed != 0) {
    set_error(fmt::format("cannot reshape {} ({}) to {}: {} does not divide the element count",
                          ir::shape_str(from), count_phrase(have), ir::shape_str(to), want.fixed));
    return std::nullopt;
  }
  int64_t quotient = have.fixed / want.fixed;
  Dim inferred;
  if (rest.empty()) inferred = Dim::fixed(quotient);
  else if (rest.size() == 1 && quotient == 1) inferred = Dim::sym(rest[0]);
  else {
    set_error(fmt::format("cannot infer -1 in reshape of {} to {}: the size would be {}, which is "
                          "not a single dimension", ir::shape_str(from), ir::shape_str(to),
                          element_count_str(ElementCount{quotient, rest})));
    return std::nullopt;
  }
  Shape out = to;
  out[size_t(infer_at)] = inferred;
  return out;
}

std::optional<std::string> size_error(const TensorType& t) {
  std::vector<int64_t> fixed;
  bool symbolic = false;
  for (const Dim& d : t.shape) {
    if (d.is_symbolic()) symbolic = true;
    else fixed.push_back(d.size);
  }
  if (checked_shape_bytes(fixed, ir::dtype_size(t.dtype))) return std::nullopt;
  return fmt::format("{} is too large: {}{} would take {}", ir::type_str(t), symbolic ? "its static dimensions" : "it",
                     symbolic ? " alone" : "", describe_oversize(fixed, ir::dtype_size(t.dtype)));
}

namespace {
InferResult infer_any(Op op, std::span<const TensorType> operands, const ir::Attrs& attrs,
                      const TensorType* requested) {
  auto count = [&](size_t n) { return need_operands(op, operands, n); };
  switch (op) {
    case Op::Input: case Op::SharedRead: case Op::Constant: {
      if (auto r = count(0); !r.ok()) return r;
      if (!requested) return fail(fmt::format("{} needs a requested type", ir::op_name(op)));
      if (op == Op::Constant && requested->rank() != 0)
        return fail(fmt::format("a constant is a scalar, found {}", ir::type_str(*requested)));
      return ok(*requested);
    }
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Tanh:
    case Op::Sigmoid: case Op::Relu: case Op::Not: case Op::Log1p: case Op::Expm1: case Op::Softplus:
    case Op::Sin: case Op::Cos: case Op::Floor: case Op::Ceil: case Op::Round: case Op::Sign:
      if (auto r = count(1); !r.ok()) return r;
      return infer_unary(op, operands[0]);
    case Op::Cast:
      if (auto r = count(1); !r.ok()) return r;
      if (!requested) return fail("cast needs a target dtype");
      return ok(TensorType{requested->dtype, operands[0].shape});
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Maximum:
    case Op::Minimum: case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt:
    case Op::Ge: case Op::And: case Op::Or: case Op::Mod: case Op::FloorDiv: case Op::BceWithLogits:
      if (auto r = count(2); !r.ok()) return r;
      return infer_binary(op, operands[0], operands[1]);
    case Op::Where:
      if (auto r = count(3); !r.ok()) return r;
      return infer_where(operands[0], operands[1], operands[2]);
    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin:
    case Op::ReduceProd: case Op::ArgMax:
      if (auto r = count(1); !r.ok()) return r;
      return infer_reduction(op, operands[0], attrs);
    case Op::MatMul:
      if (auto r = count(2); !r.ok()) return r;
      return infer_matmul(operands[0], operands[1]);
    case Op::Transpose:
      if (auto r = count(1); !r.ok()) return r;
      return infer_transpose(operands[0], attrs);
    case Op::Reshape: {
      if (auto r = count(1); !r.ok()) return r;
      if (!requested) return fail("reshape needs a target shape");
      std::string error;
      auto shape = resolve_reshape(operands[0].shape, requested->shape, &error);
      if (!shape) return fail(error);
      return ok(TensorType{operands[0].dtype, *shape});
    }
    case Op::BroadcastTo:
      if (auto r = count(1); !r.ok()) return r;
      if (!requested) return fail("broadcast_to needs a target shape");
      return infer_broadcast_to(operands[0], requested->shape);
    case Op::Concat:
      return infer_concat(operands, attrs);
    case Op::Slice:
      if (auto r = count(1); !r.ok()) return r;
      return infer_slice(operands[0], attrs);
    case Op::Take:
      if (auto r = count(2); !r.ok()) return r;
      return infer_take(operands[0], operands[1]);
    case Op::OneHot:
      if (auto r = count(1); !r.ok()) return r;
      return infer_one_hot(operands[0], attrs, requested);
    case Op::Softmax: case Op::LogSoftmax:
      if (auto r = count(1); !r.ok()) return r;
      return infer_softmax(op, operands[0], attrs);
    case Op::Cumsum:
      if (auto r = count(1); !r.ok()) return r;
      return infer_cumsum(operands[0], attrs);
    case Op::CrossEntropy:
      if (auto r = count(2); !r.ok()) return r;
      return infer_cross_entropy(operands[0], operands[1]);
    case Op::Grad:
      return infer_grad(operands);
    case Op::Random:
      if (auto r = count(0); !r.ok()) return r;
      if (!requested || !ir::is_float(requested->dtype)) return fail("a random op needs a floating type");
      if (attrs.index != 0 && attrs.index != 1) return fail(fmt::format("unknown distribution {}", attrs.index));
      if (attrs.global_rows && (requested->rank() == 0 || !requested->shape[0].is_symbolic()))
        return fail("a random op with global rows needs a symbolic axis 0");
      return ok(*requested);
    case Op::Conv2d: case Op::Conv2dBackwardData: case Op::Conv2dBackwardWeights: case Op::MaxPool2d:
    case Op::MaxPool2dBackward: case Op::AvgPool2d: case Op::AvgPool2dBackward:
      return ir::infer_window_type(op, operands, attrs);
  }
  return fail("unknown op");
}
}  // namespace

InferResult infer_type(Op op, std::span<const TensorType> operands, const ir::Attrs& attrs,
                       const TensorType* requested) {
  InferResult r = infer_any(op, operands, attrs, requested);
  // Every value an op produces has a size that can be allocated and indexed: a broadcast, a
  // matmul or a one_hot of large but valid operands may not.
  if (r.ok())
    if (std::optional<std::string> e = size_error(*r.type)) return fail(*e);
  return r;
}

}  // namespace synk::dsl
