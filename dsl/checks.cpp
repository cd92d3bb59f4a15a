// The rules both front ends check (checks.h), with their messages: one wording for sema and the
// C++ builder, parameterized only where their users write things differently.
#include "dsl/checks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/diagnostics.h"
#include "base/errors.h"
#include "dsl/sema_optimizer.h"
#include "ir/type_infer.h"

namespace synk::dsl::checks {

namespace {

// Keywords a builder name may not be, so that a built module prints as .synk (print_module). The
// newer keywords `optimizer` and `minimize` are missing: the builder still accepts them as names.
constexpr const char* kKeywords[] = {"fn",    "shared",    "let",       "out",  "update", "scatter", "bcast",
                                     "minibatch", "sliceable", "true", "false", "def",    "return"};

constexpr const char* kBuiltinOps[] = {
    "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "neg", "pow", "maximum", "minimum",
    "where", "sum", "mean", "max", "min", "prod", "argmax", "matmul", "transpose", "reshape",
    "flatten", "broadcast_to", "cast", "softmax", "log_softmax", "cross_entropy", "one_hot", "take",
    "concat", "slice", "grad", "conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool", "batch_norm",
    "uniform", "normal", "bernoulli", "uniform_like", "normal_like", "bernoulli_like", "dropout",
    "log1p", "expm1", "softplus", "sin", "cos", "floor", "ceil", "round", "sign", "clip", "mod",
    "floor_divide", "binary_cross_entropy_with_logits", "logsumexp", "argmin", "var", "std", "norm",
    "stack", "expand_dims", "squeeze", "cumsum"};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  for (const char* k : kKeywords)
    if (s == k) return false;
  return true;
}

bool reduced_over_ranks(ir::ReduceMode mode) {
  return mode != ir::ReduceMode::Gather && mode != ir::ReduceMode::None;
}

}  // namespace

// ---- Names ---------------------------------------------------------------------------------

bool is_builtin_constant(std::string_view name) { return name == "inf" || name == "nan"; }

bool is_builtin_operation(std::string_view name) {
  for (const char* op : kBuiltinOps)
    if (name == op) return true;
  return false;
}

std::span<const char* const> builtin_operations() { return kBuiltinOps; }

std::optional<std::string> operation_alias_hint(std::string_view name) {
  // Another name for a built-in: "did you mean".
  static const std::map<std::string_view, std::string_view> same = {
      {"average", "mean"}, {"amax", "max"}, {"amin", "min"}, {"reduce_sum", "sum"}, {"reduce_mean", "mean"},
      {"reduce_max", "max"}, {"reduce_min", "min"}, {"reduce_prod", "prod"}, {"reduce_logsumexp", "logsumexp"},
      {"nanargmin", "argmin"}, {"nanargmax", "argmax"}, {"power", "pow"}, {"absolute", "abs"},
      {"clamp", "clip"}, {"clip_by_value", "clip"}, {"logistic", "sigmoid"}, {"expit", "sigmoid"},
      {"logsoftmax", "log_softmax"}, {"rint", "round"}, {"around", "round"}, {"remainder", "mod"},
      {"floordiv", "floor_divide"}, {"floor_div", "floor_divide"}, {"variance", "var"},
      {"cumulative_sum", "cumsum"}, {"stddev", "std"},
      {"std_dev", "std"}, {"l2_norm", "norm"}, {"linalg_norm", "norm"}, {"frobenius_norm", "norm"},
      {"concatenate", "concat"}, {"cat", "concat"}, {"unsqueeze", "expand_dims"}, {"view", "reshape"},
      {"permute", "transpose"}, {"mm", "matmul"}, {"dot", "matmul"}, {"index_select", "take"},
      {"gather", "take"}, {"bce", "binary_cross_entropy_with_logits"},
      {"bce_with_logits", "binary_cross_entropy_with_logits"},
      {"binary_cross_entropy", "binary_cross_entropy_with_logits"},
      {"sigmoid_cross_entropy_with_logits", "binary_cross_entropy_with_logits"},
      {"softmax_cross_entropy", "cross_entropy"}, {"categorical_crossentropy", "cross_entropy"},
      {"sparse_softmax_cross_entropy_with_logits", "cross_entropy"}, {"softmax_cross_entropy_with_logits", "cross_entropy"}};
  // No built-in of its own: how to write it.
  static const std::map<std::string_view, std::string_view> written = {
      {"square", "x * x"}, {"rsqrt", "1.0 / sqrt(x)"}, {"reciprocal", "1.0 / x"}, {"exp2", "2.0 ** x"},
      {"log2", "log(x) / log(2.0)"}, {"log10", "log(x) / log(10.0)"}, {"tan", "sin(x) / cos(x)"},
      {"sinh", "(exp(x) - exp(-x)) / 2.0"}, {"cosh", "(exp(x) + exp(-x)) / 2.0"},
      {"trunc", "where(x < 0.0, ceil(x), floor(x))"}, {"fix", "where(x < 0.0, ceil(x), floor(x))"},
      {"silu", "x * sigmoid(x)"}, {"swish", "x * sigmoid(x)"}, {"leaky_relu", "where(x > 0.0, x, 0.01 * x)"},
      {"elu", "where(x > 0.0, x, expm1(x))"}, {"log_sigmoid", "-softplus(-x)"}, {"logsigmoid", "-softplus(-x)"},
      {"gelu", "0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))"},
      {"softsign", "x / (1.0 + abs(x))"}, {"mse_loss", "mean((a - b) ** 2)"}, {"l1_loss", "mean(abs(a - b))"},
      {"nll_loss", "cross_entropy(logits, labels), which takes logits and applies log_softmax itself"},
      {"isnan", "x != x"}, {"isinf", "abs(x) == inf"}, {"isfinite", "abs(x) < inf"},
      {"hstack", "concat(a, b, axis=1), or stack([a, b], axis=1) for new axes"},
      {"vstack", "concat(a, b, axis=0), or stack([a, b]) for new axes"},
      {"fmod", "x - y * where(x / y < 0.0, ceil(x / y), floor(x / y)) ('%' is numpy's mod: the divisor's sign)"},
      {"asin", "nothing yet: there are no inverse trigonometric ops"},
      {"acos", "nothing yet: there are no inverse trigonometric ops"},
      {"atan", "nothing yet: there are no inverse trigonometric ops"},
      {"arcsin", "nothing yet: there are no inverse trigonometric ops"},
      {"arccos", "nothing yet: there are no inverse trigonometric ops"},
      {"arctan", "nothing yet: there are no inverse trigonometric ops"}};
  if (auto it = same.find(name); it != same.end()) return fmt::format("; did you mean '{}'?", it->second);
  if (auto it = written.find(name); it != written.end()) {
    constexpr std::string_view kNone = "nothing yet: ";
    if (it->second.substr(0, kNone.size()) == kNone)
      return fmt::format("; synk has no '{}' yet ({})", name, it->second.substr(kNone.size()));
    return fmt::format("; '{}' is written {} here", name, it->second);
  }
  // PyTorch's in-place spelling (sum_, clamp_): the op without the underscore.
  if (name.size() > 1 && name.back() == '_') {
    const std::string_view plain = name.substr(0, name.size() - 1);
    if (is_builtin_operation(plain))
      return fmt::format("; did you mean '{}'? (values are immutable: there are no in-place ops)", plain);
    if (auto it = same.find(plain); it != same.end())
      return fmt::format("; did you mean '{}'? (values are immutable: there are no in-place ops)", it->second);
  }
  return std::nullopt;
}

std::optional<std::string> helper_name_error(const std::string& name) {
  if (!is_builtin_operation(name)) return std::nullopt;
  return fmt::format("helper '{}' has the name of a built-in operation, which a call '{}(...)' always means; "
                     "choose another name", name, name);
}

std::optional<std::string> name_error(const std::string& name, const char* what) {
  if (!is_identifier(name))
    return fmt::format("'{}' is not a valid {} name: use letters, digits and '_', not starting with a digit, "
                       "and not a keyword", name, what);
  return builtin_constant_error(name, what);
}

std::optional<std::string> builtin_constant_error(const std::string& name, const char* what) {
  if (!is_builtin_constant(name)) return std::nullopt;
  return fmt::format("'{}' is a built-in constant and cannot name a {}", name, what);
}

std::optional<std::string> dimension_name_error(const std::string& symbol) {
  if (is_builtin_constant(symbol))   // in an expression the name would mean the constant's value
    return fmt::format("'{}' is a built-in constant and cannot name a dimension", symbol);
  if (is_identifier(symbol)) return std::nullopt;
  return fmt::format("'{}' is not a valid dimension name", symbol);
}

std::string already_declared_message(std::string_view kind, const std::string& name, const std::string& previous) {
  if (kind.empty()) return fmt::format("'{}' is already declared {}", name, previous);
  return fmt::format("{} '{}' is already declared {}", kind, name, previous);
}

std::string shadow_message(const char* what, const std::string& name, std::string_view function,
                           const std::string& shared) {
  return fmt::format("{} '{}'{} would shadow the shared variable {}; choose another name", what, name, function,
                     shared);
}

// ---- Types and shapes ----------------------------------------------------------------------

std::optional<std::string> reserved_dtype_error(ir::DType dtype) {
  if (!ir::is_reserved(dtype)) return std::nullopt;
  return fmt::format("dtype '{}' is reserved and not supported yet; use f32 or f64", ir::dtype_name(dtype));
}

std::optional<std::string> dimension_size_error(int64_t size) {
  if (size >= 0) return std::nullopt;
  return fmt::format("a dimension size must be 0 or more, found {}", size);
}

std::optional<std::string> shape_size_error(const char* op, int64_t size, bool allow_infer) {
  if (size >= 0 || (allow_infer && size == -1)) return std::nullopt;
  return fmt::format("{}'s sizes must be 0 or more{}, found {}", op, allow_infer ? " (or -1 to infer one)" : "",
                     size);
}

std::optional<std::string> row_dimension_error(ir::Role role, const std::string& name, const ir::TensorType& type) {
  if (role == ir::Role::Broadcast || (type.rank() > 0 && type.shape[0].is_symbolic())) return std::nullopt;
  return fmt::format("{} parameter '{}' is split by rows and needs a symbolic row dimension (axis 0), like "
                     "f32[n, 10]; found {}", ir::role_name(role), name, ir::type_str(type));
}

std::optional<std::string> sliceable_error(const std::string& name, const ir::TensorType& type, bool sliceable) {
  if (!sliceable || (type.rank() > 0 && type.shape[0].is_symbolic())) return std::nullopt;
  return fmt::format("sliceable shared variable '{}' holds rows and needs a symbolic row dimension (axis 0), "
                     "like f32[rows, 10]; found {}", name, ir::type_str(type));
}

std::optional<std::string> unknown_dimension_error(const std::string& symbol, const std::string& where,
                                                   const std::set<std::string>& symbols) {
  if (symbols.count(symbol)) return std::nullopt;
  return fmt::format("unknown dimension '{}' in {}; {}", symbol, where,
                     symbols.empty() ? "this function has no symbolic dimensions"
                                     : fmt::format("the dimensions of this function are {}", fmt::join(symbols, ", ")));
}

// ---- Literals ------------------------------------------------------------------------------

std::string literal_text(LiteralKind kind, int64_t ivalue, double fvalue) {
  switch (kind) {
    case LiteralKind::Int: return std::to_string(ivalue);
    case LiteralKind::Bool: return ivalue ? "true" : "false";
    case LiteralKind::Float: return fmt::format("{}", fvalue);
  }
  return "?";
}

std::optional<std::string> literal_error(LiteralKind kind, int64_t ivalue, double fvalue, ir::DType dtype) {
  switch (kind) {
    case LiteralKind::Int: {
      if (dtype == ir::DType::Bool)
        return fmt::format("integer {} cannot be used as a bool; use true or false", ivalue);
      if (ir::is_float(dtype)) return std::nullopt;
      const bool fits = dtype == ir::DType::I64 ||
                        (dtype == ir::DType::I32 && ivalue >= INT32_MIN && ivalue <= INT32_MAX) ||
                        (dtype == ir::DType::U8 && ivalue >= 0 && ivalue <= 255);
      if (fits) return std::nullopt;
      return fmt::format("integer {} does not fit in {}", ivalue, ir::dtype_name(dtype));
    }
    case LiteralKind::Float: {
      if (dtype == ir::DType::F32 && std::isfinite(fvalue) && std::isinf(float(fvalue)))
        return fmt::format("{} does not fit in f32 (at most 3.4028235e38 in magnitude); write inf, or make the other "
                           "operand f64", literal_text(kind, ivalue, fvalue));
      if (ir::is_float(dtype)) return std::nullopt;
      const std::string text = literal_text(kind, ivalue, fvalue);
      return fmt::format("{} is not an integer but {} is needed here; use cast({}, {})", text, ir::dtype_name(dtype),
                         text, ir::dtype_name(dtype));
    }
    case LiteralKind::Bool: return std::nullopt;
  }
  return std::nullopt;
}

ir::Attrs constant_attrs(LiteralKind kind, int64_t ivalue, double fvalue, ir::DType dtype) {
  ir::Attrs attrs;
  if (kind == LiteralKind::Float) attrs.value = fvalue;
  else if (ir::is_float(dtype)) attrs.value = double(ivalue);
  else attrs.ivalue = ivalue;
  return attrs;
}

// ---- Shared variables' initializers ---------------------------------------------------------

bool value_fits(double v, ir::DType t) {
  if (t == ir::DType::F32) return !std::isfinite(v) || !std::isinf(float(v));
  if (ir::is_float(t)) return true;
  if (v != std::floor(v)) return false;
  switch (t) {
    case ir::DType::Bool: return v == 0 || v == 1;
    case ir::DType::U8: return v >= 0 && v <= 255;
    case ir::DType::I32: return v >= -2147483648.0 && v <= 2147483647.0;
    // An initial value travels as a double (InitSpec): beyond 2^53 an i64 would silently change.
    default: return v >= -9007199254740992.0 && v <= 9007199254740992.0;
  }
}

std::optional<std::string> initial_value_error(const std::string& name, const ir::TensorType& type, double value,
                                               bool inexact_integer) {
  const bool beyond_double = inexact_integer && !ir::is_float(type.dtype);
  if (!beyond_double && value_fits(value, type.dtype)) return std::nullopt;
  if (beyond_double || (type.dtype == ir::DType::I64 && value == std::floor(value)))
    return fmt::format("initial value of shared variable '{}' is beyond 2^53 in magnitude, which an integer initial "
                       "value cannot be exactly; set it with set_value after compiling", name);
  return fmt::format("initial value {} does not fit shared variable '{}' of dtype {}", value, name,
                     ir::dtype_name(type.dtype));
}

std::optional<std::string> random_dtype_error(const char* kind, const std::string& name, const ir::TensorType& type) {
  if (ir::is_float(type.dtype)) return std::nullopt;
  return fmt::format("{} initializes floating variables, but '{}' is {}", kind, name, ir::dtype_name(type.dtype));
}

std::optional<std::string> std_error(double stddev) {
  if (!(stddev < 0)) return std::nullopt;
  return fmt::format("std must be 0 or more, found {}", stddev);
}

std::optional<std::string> uniform_bounds_error(double low, double high) {
  if (!(low < high)) return fmt::format("uniform needs low < high, found low={} and high={}", low, high);
  return uniform_width_error(low, high, ir::DType::F64);
}

std::optional<std::string> random_parameters_fit_error(bool normal, double a, double b, ir::DType dtype) {
  if (dtype != ir::DType::F32) return std::nullopt;
  const double largest = double(std::numeric_limits<float>::max());
  for (auto [value, what] : {std::pair{a, normal ? "mean" : "low"}, std::pair{b, normal ? "std" : "high"}})
    if (std::isfinite(value) && std::abs(value) > largest)   // non-finite: the finiteness checks say so
      return fmt::format("{}'s {}={} does not fit in f32 (at most 3.4028235e38 in magnitude): the draws would be "
                         "inf; use f64", normal ? "normal" : "uniform", what, value);
  return std::nullopt;
}

std::optional<std::string> uniform_width_error(double low, double high, ir::DType dtype) {
  const double largest = dtype == ir::DType::F32 ? double(std::numeric_limits<float>::max())
                                                 : std::numeric_limits<double>::max();
  const double width = high - low;
  if (std::isfinite(width) && width <= largest) return std::nullopt;
  return fmt::format("uniform's range is too wide for {}: high - low ({} - ({})) is more than the largest {} ({}); "
                     "draw from a narrower range{}", ir::dtype_name(dtype), high, low, ir::dtype_name(dtype), largest,
                     dtype == ir::DType::F32 ? " or in f64" : "");
}

std::optional<std::string> initializer_error(const std::string& name, const ir::TensorType& type,
                                             const ir::Initializer& init) {
  auto finite = [](double v, const char* what) -> std::optional<std::string> {
    if (std::isfinite(v)) return std::nullopt;
    return fmt::format("{} must be a finite number, found {}", what, v);
  };
  if (auto* c = std::get_if<ir::InitConstant>(&init)) return initial_value_error(name, type, c->value);
  if (auto* l = std::get_if<ir::InitLoad>(&init); l && l->path.empty())
    return fmt::format("load needs a file name for shared variable '{}'", name);
  const auto* n = std::get_if<ir::InitNormal>(&init);
  const auto* u = std::get_if<ir::InitUniform>(&init);
  if (!n && !u) return std::nullopt;
  const char* kind = n ? "normal" : "uniform";
  const uint64_t seed = n ? n->seed : u->seed;
  if (seed > uint64_t(INT64_MAX)) return fmt::format("{}'s seed must be at most 2^63-1, found {}", kind, seed);
  if (auto e = random_dtype_error(kind, name, type)) return e;
  if (auto e = random_parameters_fit_error(n != nullptr, n ? n->mean : u->low, n ? n->stddev : u->high, type.dtype))
    return e;
  if (n) {
    if (auto e = finite(n->mean, "mean")) return e;
    if (auto e = finite(n->stddev, "std")) return e;
    return std_error(n->stddev);
  }
  if (auto e = finite(u->low, "low")) return e;
  if (auto e = finite(u->high, "high")) return e;
  return uniform_bounds_error(u->low, u->high);
}

// ---- Outputs and updates -------------------------------------------------------------------

std::optional<std::string> output_avg_error(const std::string& name, ir::DType dtype, ir::ReduceMode mode,
                                            Spelling spelling, bool mode_written) {
  if (mode != ir::ReduceMode::Avg || ir::is_float(dtype)) return std::nullopt;
  const std::string other = spelling == Spelling::Synk
                                ? fmt::format("'out {}: sum = ...' or 'out {}: gather = ...'", name, name)
                                : std::string("ReduceMode::Sum or ReduceMode::Gather");
  return fmt::format("output '{}' has dtype {}, which cannot be averaged{}; give it another mode, e.g. {}", name,
                     ir::dtype_name(dtype), mode_written ? "" : " (avg is the default mode)", other);
}

std::optional<std::string> output_gather_error(const std::string& name, const ir::TensorType& type,
                                               ir::ReduceMode mode, Spelling spelling) {
  if (mode != ir::ReduceMode::Gather || type.rank() != 0) return std::nullopt;
  return fmt::format("output '{}' is a scalar, but mode gather concatenates along axis 0; use another mode or "
                     "reshape(x, {})", name, spelling == Spelling::Synk ? "[1]" : "{1}");
}

ScatteredRows scattered_rows(const std::vector<ir::Param>& params, const std::vector<const ir::SharedVar*>& used) {
  ScatteredRows scattered;
  for (const ir::Param& p : params)
    if (p.role != ir::Role::Broadcast && !p.type.shape.empty() && p.type.shape[0].is_symbolic())
      scattered.emplace(p.type.shape[0].symbol,
                        fmt::format("axis 0 of {} parameter '{}'", ir::role_name(p.role), p.name));
  for (const ir::SharedVar* s : used)
    if (s->sliceable && !s->type.shape.empty() && s->type.shape[0].is_symbolic())
      scattered.emplace(s->type.shape[0].symbol, fmt::format("axis 0 of sliceable shared variable '{}'", s->name));
  return scattered;
}

std::optional<std::string> param_axis_error(const ir::Param& p, size_t axis, const ScatteredRows& scattered) {
  const ir::Dim& d = p.type.shape.at(axis);
  if (!d.is_symbolic() || (axis == 0 && p.role != ir::Role::Broadcast)) return std::nullopt;
  auto it = scattered.find(d.symbol);
  if (it == scattered.end()) return std::nullopt;
  return fmt::format("'{}' is a scattered row dimension ({}), so it cannot also size axis {} of {} parameter '{}'; "
                     "use another symbol", d.symbol, it->second, axis, ir::role_name(p.role), p.name);
}

std::optional<std::string> shared_axis_error(const ir::SharedVar& s, size_t axis, const ScatteredRows& scattered) {
  const ir::Dim& d = s.type.shape.at(axis);
  if (!d.is_symbolic() || (axis == 0 && s.sliceable)) return std::nullopt;
  auto it = scattered.find(d.symbol);
  if (it == scattered.end()) return std::nullopt;
  return fmt::format("'{}' is a scattered row dimension ({}), but shared variable '{}' of type {} uses it for a "
                     "dimension every rank holds whole", d.symbol, it->second, s.name, ir::type_str(s.type));
}

std::optional<std::string> scattered_output_error(const std::string& name, std::string_view function,
                                                  const ir::TensorType& type, ir::ReduceMode mode,
                                                  const ScatteredRows& scattered) {
  if (mode == ir::ReduceMode::Gather) {
    // The parts are concatenated along axis 0, so every other axis must be the same on every rank.
    for (size_t axis = 1; axis < type.shape.size(); ++axis) {
      const ir::Dim& d = type.shape[axis];
      if (auto it = d.is_symbolic() ? scattered.find(d.symbol) : scattered.end(); it != scattered.end())
        return fmt::format("output '{}'{} has shape {}: gather concatenates the ranks' parts along axis 0, but "
                           "axis {} depends on the scattered row dimension '{}' ({}), so the parts differ with "
                           "the split; put the rows on axis 0 (e.g. transpose the result), or use mode none",
                           name, function, ir::shape_str(type.shape), axis, d.symbol, it->second);
    }
    return std::nullopt;
  }
  if (!reduced_over_ranks(mode)) return std::nullopt;
  for (const ir::Dim& d : type.shape) {
    if (!d.is_symbolic()) continue;
    if (auto it = scattered.find(d.symbol); it != scattered.end())
      return fmt::format("output '{}'{} has shape {}, which depends on the scattered row dimension '{}' ({}); use "
                         "mode gather or none", name, function, ir::shape_str(type.shape), d.symbol, it->second);
  }
  return std::nullopt;
}

std::optional<std::string> rows_reduced_by_avg_warning(const std::string& name, const ir::Function& fn,
                                                       ir::NodeId node, const ScatteredRows& scattered) {
  const ir::Node& n = fn.nodes.at(size_t(node));
  const char* op = n.op == ir::Op::ReduceSum    ? "sum"
                   : n.op == ir::Op::ReduceMax  ? "max"
                   : n.op == ir::Op::ReduceMin  ? "min"
                   : n.op == ir::Op::ReduceProd ? "prod"
                                                : nullptr;
  if (!op || n.operands.empty()) return std::nullopt;
  const ir::TensorType& in = fn.nodes.at(size_t(n.operands[0])).type;
  if (in.shape.empty() || !in.shape[0].is_symbolic()) return std::nullopt;
  auto rows = scattered.find(in.shape[0].symbol);
  if (rows == scattered.end() || std::find(n.attrs.axes.begin(), n.attrs.axes.end(), 0) == n.attrs.axes.end())
    return std::nullopt;
  return fmt::format("output '{}' is a {} over each rank's rows ('{}', {}), and the default mode avg averages the "
                     "ranks' results, which is not the {} over all rows; write 'out {}: {} = ...' for that (or "
                     "'out {}: avg = ...' to keep the average)",
                     name, op, in.shape[0].symbol, rows->second, op, name, op, name);
}

std::optional<std::string> update_mode_error(ir::ReduceMode mode) {
  if (reduced_over_ranks(mode)) return std::nullopt;
  return fmt::format("an update accumulates over slices with avg, sum, prod, max or min; mode '{}' is for "
                     "outputs only", ir::mode_name(mode));
}

std::optional<std::string> update_type_error(const std::string& name, const ir::TensorType& variable,
                                             const ir::TensorType& value) {
  if (value == variable) return std::nullopt;
  return fmt::format("update of '{}' needs a value of type {} but this one has type {}", name,
                     ir::type_str(variable), ir::type_str(value));
}

std::optional<std::string> update_avg_error(const std::string& name, ir::DType dtype, ir::ReduceMode mode,
                                            Spelling spelling, bool mode_written) {
  if (mode != ir::ReduceMode::Avg || ir::is_float(dtype)) return std::nullopt;
  const std::string other =
      spelling == Spelling::Synk ? fmt::format("'update {}: sum = ...'", name) : std::string("ReduceMode::Sum");
  return fmt::format("update of '{}' has dtype {}, which cannot be averaged over slices{}; give it another mode, "
                     "e.g. {}", name, ir::dtype_name(dtype), mode_written ? "" : " (avg is the default mode)", other);
}

std::string updated_twice_message(const std::string& name, const std::string& previous) {
  return fmt::format("'{}' is already updated {}; a shared variable is updated at most once per function", name,
                     previous);
}

// ---- Functions -----------------------------------------------------------------------------

std::string no_results_message(const std::string& function) {
  return fmt::format("function '{}' has no 'out' or 'update' statement, so it computes nothing", function);
}

// ---- Optimizers and training steps ---------------------------------------------------------

std::optional<std::string> unknown_rule_error(const std::string& optimizer, const std::string& rule) {
  if (update_rule_from_name(rule)) return std::nullopt;
  return fmt::format("optimizer '{}': unknown update rule '{}'{} (known rules: {})", optimizer, rule,
                     did_you_mean(rule, update_rule_names()), fmt::join(update_rule_names(), ", "));
}

std::optional<std::string> num_packs_error(const std::string& optimizer, std::optional<int64_t> value) {
  if (value && *value >= 1) return std::nullopt;
  return fmt::format("optimizer '{}': num_packs must be an integer >= 1 (the number of buffers the gradient's "
                     "all-reduce uses)", optimizer);
}

std::optional<std::string> hyper_parameter_error(const std::string& optimizer, const std::string& rule,
                                                 const std::string& keyword, double value) {
  std::optional<std::string> why = dsl::hyper_parameter_error(rule, keyword, value);
  if (!why) return std::nullopt;
  return fmt::format("optimizer '{}': {}", optimizer, *why);
}

std::optional<std::string> update_rule_error(const std::string& optimizer, const std::string& rule,
                                             std::span<const std::pair<std::string, double>> hyper_parameters) {
  try {
    make_update_rule(rule, hyper_parameters);
    return std::nullopt;
  } catch (const UserError& e) {
    return fmt::format("optimizer '{}': {}", optimizer, e.what());
  }
}

std::string not_an_optimizer_message(const std::string& name, const std::string& is) {
  return fmt::format("'{}' is {}, not an optimizer", name, is);
}

std::string second_training_step_message(const std::string& function, const std::string& previous) {
  return fmt::format("function '{}' already has a training step{}; a function minimizes one loss", function, previous);
}

void FlatGradient::add(int64_t index, const ir::TensorType& type) {
  parameters.push_back(index);
  size += element_count(type.shape).fixed;
  dtype = parameters.size() == 1 ? type.dtype : promote(dtype, type.dtype);
}

std::string variable_names(const std::vector<ir::SharedVar>& shareds, const std::vector<int64_t>& indices) {
  std::vector<std::string> names;
  for (int64_t i : indices) names.push_back(shareds[size_t(i)].name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::optional<std::string> static_shape_error(const std::string& variable, const ir::TensorType& type) {
  if (element_count(type.shape).symbols.empty()) return std::nullopt;
  return fmt::format("minimize trains variables of static shape, but '{}' is {}", variable, ir::type_str(type));
}

std::optional<std::string> loss_dtype_error(ir::DType loss_dtype, ir::DType variables, const std::string& loss) {
  if (loss_dtype == variables) return std::nullopt;
  return fmt::format("the loss of minimize is {} but the variables' dtype is {}: the flat gradient must have the "
                     "variables' dtype; use cast({}, {})", ir::dtype_name(loss_dtype), ir::dtype_name(variables),
                     loss, ir::dtype_name(variables));
}

std::optional<std::string> already_trains_error(const ir::Optimizer& o, const std::vector<int64_t>& parameters,
                                                const std::vector<ir::SharedVar>& shareds,
                                                const std::string& bound_at) {
  if (o.gradient < 0 || o.parameters == parameters) return std::nullopt;
  return fmt::format("optimizer '{}' already trains {}{}; every step that uses it must train the same variables in "
                     "the same order, not {}", o.name, variable_names(shareds, o.parameters), bound_at,
                     variable_names(shareds, parameters));
}

std::optional<std::string> gradient_variable_error(const ir::Optimizer& o, const ir::TensorType& flat,
                                                   const ir::SharedVar* existing, const std::string& is) {
  if (existing && existing->type == flat && !existing->sliceable) return std::nullopt;
  const std::string name = o.gradient_variable();
  return fmt::format("optimizer '{}' keeps the flat gradient in the shared variable '{}: {}', but '{}' is already "
                     "{}; rename it", o.name, name, ir::type_str(flat), name, is);
}

std::string gradient_updated_message(const std::string& gradient, const std::string& previous) {
  return fmt::format("'{}' is already updated {}; minimize writes the gradient there", gradient, previous);
}

std::string trained_update_message(const std::string& variable, const std::string& step, const std::string& function) {
  return fmt::format("'{}' is trained by the step {} (its optimizer updates it after the gradient is averaged), so "
                     "'{}' cannot also update it", variable, step, function);
}

std::vector<std::pair<size_t, std::string>> training_name_errors(const std::vector<ir::Optimizer>& optimizers,
                                                                 const std::vector<ir::SharedVar>& shareds,
                                                                 const std::map<std::string, std::string>& declared,
                                                                 const std::vector<bool>& usable) {
  std::vector<std::pair<size_t, std::string>> errors;
  std::map<std::string, size_t> added;   // every name the expansion adds -> the optimizer that adds it
  for (size_t i = 0; i < optimizers.size(); ++i) {
    const ir::Optimizer& o = optimizers[i];
    if (o.gradient < 0 || (!usable.empty() && !usable[i])) continue;
    for (const std::string& name : names_added_by(o, shareds)) {
      std::string clash;
      if (auto d = declared.find(name); d != declared.end()) clash = d->second;
      else if (auto a = added.find(name); a != added.end())
        clash = fmt::format("what optimizer '{}' adds too", optimizers[a->second].name);
      if (!clash.empty()) {
        errors.emplace_back(i, fmt::format("optimizer '{}' ({}) adds '{}' for its update function, state and "
                                           "hyper-parameters, but '{}' is {}; rename one of them",
                                           o.name, o.rule, name, name, clash));
        break;
      }
      added.emplace(name, i);
    }
  }
  return errors;
}

}  // namespace synk::dsl::checks
