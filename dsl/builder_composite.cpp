// The C++ builder's operations that sema lowers to compositions of existing ops
// (dsl/sema_composite.cpp explains each choice: stability, and the gradient the composition
// gives): clip, logsumexp, argmin, var, std, norm, stack, expand_dims, squeeze. Each is written
// with the builder's own operations, so the checks and messages are theirs; the few checks of
// their own (ddof, squeeze's axis, stack's shapes) match sema's wording.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "dsl/builder.h"
#include "dsl/builder_internal.h"
#include "ir/type_infer.h"

namespace synk::dsl {

using builder_detail::shape_arg;
using ir::DType;

namespace {

std::vector<int64_t> axes_of(const Expr& x, const Axes& axes, const char* op) {
  const std::vector<int64_t> wanted = axes.get() ? *axes.get() : all_axes(x.rank());
  std::string why;
  auto normalized = normalize_axes(wanted, x.rank(), &why);
  if (!normalized) throw UserError(fmt::format("{} in {}: the operand has type {}", why, op, x.str()));
  return *normalized;
}

int64_t axis_of(const Expr& x, int64_t axis, size_t rank, const char* op) {
  std::string why;
  auto normalized = normalize_axis(axis, rank, &why);
  if (!normalized) throw UserError(fmt::format("{} in {}: the operand has type {}", why, op, x.str()));
  return *normalized;
}

void require_float(const Expr& x, const char* op) {
  if (!ir::is_float(x.dtype()))
    throw UserError(fmt::format("{} needs a floating operand but the operand is {}; use {}(cast(x, f32))", op,
                                x.str(), op));
}

// A value reduced with keepdims=true, reshaped to drop the reduced axes unless keepdims.
Expr drop_kept(const Expr& kept, const Expr& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (keepdims) return kept;
  ir::Shape out;
  for (size_t d = 0; d < x.rank(); ++d)
    if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end()) out.push_back(x.shape()[d]);
  return reshape(kept, shape_arg(out));
}

Expr insert_axis(const Expr& x, int64_t axis) {
  ir::Shape s = x.shape();
  s.insert(s.begin() + axis, ir::Dim::fixed(1));
  return reshape(x, shape_arg(s));
}

}  // namespace

Expr clip(const Expr& x, const Expr& lo, const Expr& hi) {
  if (x.dtype() == DType::Bool && lo.dtype() == DType::Bool && hi.dtype() == DType::Bool)
    throw UserError("clip needs numeric operands but all three are bool");
  const Expr t = where(less(x, lo), lo, x);
  return where(greater(t, hi), hi, t);
}

Expr logsumexp(const Expr& x, Axes axes_arg, bool keepdims) {
  require_float(x, "logsumexp");
  const std::vector<int64_t> axes = axes_of(x, axes_arg, "logsumexp");
  const Expr m = max(x, Axes::list(axes), true);
  const Expr safe = where(equal(abs(m), std::numeric_limits<double>::infinity()), 0.0, m);
  const Expr kept = log(sum(exp(x - safe), Axes::list(axes), true)) + safe;
  return drop_kept(kept, x, axes, keepdims);
}

Expr argmin(const Expr& x, int64_t axis, bool keepdims) {
  Expr flipped = ir::is_float(x.dtype()) ? neg(x)
                 : x.dtype() == DType::Bool ? logical_not(x)
                 : x.dtype() == DType::U8 ? sub(255, x)
                 : sub(-1, x);
  return argmax(flipped, axis, keepdims);
}

static Expr variance(const Expr& x, Axes axes_arg, bool keepdims, int64_t ddof, const char* op) {
  require_float(x, op);
  if (ddof < 0) throw UserError(fmt::format("ddof must be 0 or more, found {}", ddof));
  const std::vector<int64_t> axes = axes_of(x, axes_arg, op);
  const Expr d = x - mean(x, Axes::list(axes), true);
  Expr v = mean(d * d, Axes::list(axes), keepdims);
  if (ddof != 0) {
    const Expr n = sum(where(equal(x, x), 1.0, 1.0), Axes::list(axes), keepdims);
    v = v * (n / (n - ddof));
  }
  return v;
}

Expr var(const Expr& x, Axes axes, bool keepdims, int64_t ddof) { return variance(x, std::move(axes), keepdims, ddof, "var"); }
Expr stddev(const Expr& x, Axes axes, bool keepdims, int64_t ddof) {
  return sqrt(variance(x, std::move(axes), keepdims, ddof, "std"));
}

Expr norm(const Expr& x, Axes axes_arg, bool keepdims) {
  require_float(x, "norm");
  const std::vector<int64_t> axes = axes_of(x, axes_arg, "norm");
  const Expr ss = sum(x * x, Axes::list(axes), keepdims);
  const Expr nonzero = not_equal(ss, 0.0);
  return where(nonzero, sqrt(where(nonzero, ss, 1.0)), 0.0);
}

Expr expand_dims(const Expr& x, int64_t axis) {
  return insert_axis(x, axis_of(x, axis, x.rank() + 1, "expand_dims"));
}

Expr squeeze(const Expr& x, std::optional<int64_t> axis) {
  ir::Shape out;
  if (axis) {
    const int64_t a = axis_of(x, *axis, x.rank(), "squeeze");
    const ir::Dim& d = x.shape()[size_t(a)];
    if (d.is_symbolic() || d.size != 1)
      throw UserError(fmt::format("squeeze: axis {} of the operand has size {}, not 1 (the operand is {})", *axis,
                                  d.is_symbolic() ? d.symbol : std::to_string(d.size), x.str()));
    out = x.shape();
    out.erase(out.begin() + a);
  } else {
    for (const ir::Dim& d : x.shape())
      if (d.is_symbolic() || d.size != 1) out.push_back(d);
  }
  return reshape(x, shape_arg(out));
}

Expr stack(std::vector<Expr> parts, int64_t axis) {
  if (parts.empty()) throw UserError("stack takes a list of tensors such as {a, b}, found an empty list");
  for (const Expr& p : parts)
    if (!(p.shape() == parts[0].shape()))
      throw UserError(fmt::format("stack needs operands of one shape but they are {} and {}", parts[0].str(), p.str()));
  const int64_t a = axis_of(parts[0], axis, parts[0].rank() + 1, "stack");
  for (Expr& p : parts) p = insert_axis(p, a);
  if (parts.size() == 1) return parts[0];
  return concat(std::move(parts), a);
}

}  // namespace synk::dsl
