// Semantic analysis of batch_norm (docs/language.md, "Convolutional networks") and of the backward
// window ops that the IR printer writes after the gradient pass. batch_norm becomes ordinary IR:
// per-channel reductions and pointwise ops (which fuse, and which the gradient pass already
// differentiates); in training mode the batch statistics normalise and the running statistics,
// named shared variables, get function updates with PyTorch's momentum rule (the variance
// unbiased), so `update` semantics apply to them: held per rank, averaged over slices.
#include <cmath>
#include <fmt/format.h>

#include "dsl/sema.h"
#include "ir/type_infer.h"

namespace synk::dsl::sema {

using ir::DType;
using ir::Op;

std::optional<double> FunctionAnalyzer::number_argument(const ast::Expr& written, const char* what) {
  const ast::Expr& arg = literal_argument(written);
  if (arg.kind == ast::ExprKind::Error) return std::nullopt;
  if (arg.kind == ast::ExprKind::IntLiteral) return double(arg.int_value);
  if (arg.kind == ast::ExprKind::FloatLiteral) return arg.float_value;
  error(arg.loc, fmt::format("{} must be a number, found '{}'", what, expr_text(arg)));
  return std::nullopt;
}

// The shared variable an argument names directly, or -1 after reporting.
// The argument's value must be a shared variable as read at the start of the call: named directly,
// or through a helper parameter or a let that passes it on unchanged.
int64_t FunctionAnalyzer::named_shared(const ast::Expr& arg, const Value& value, const char* what) {
  const bool read = value.kind == Value::Kind::Node && fn_.nodes[size_t(value.node)].op == Op::SharedRead;
  if (!read) {
    error(arg.loc, fmt::format("batch_norm(training=true) updates its {}, so it must name a shared variable; found "
                               "'{}'", what, expr_text(arg)));
    return -1;
  }
  const int64_t index = fn_.nodes[size_t(value.node)].attrs.index;
  const std::string& name = ctx_.module.shareds[size_t(index)].name;
  if (auto seen = updates_seen_.find(index); seen != updates_seen_.end()) {
    const auto site = update_call_sites_.find(index);
    error(arg.loc, checks::updated_twice_message(name, fmt::format("at {}:{}{}", seen->second.line, seen->second.col,
                                                                   site == update_call_sites_.end() ? "" : site->second)));
    return -1;
  }
  return index;
}

Value FunctionAnalyzer::call_batch_norm(const ast::Expr& e) {
  if (!check_arguments(e, 5, 5, {"momentum", "eps", "training"})) return Value::error();
  std::vector<Value> v;
  bool failed = false;
  for (const auto& a : e.args) {
    v.push_back(operand(*a));
    failed |= v.back().failed();
  }
  std::optional<double> momentum = 0.1, eps = 1e-5;
  std::optional<bool> training = false;
  const ast::Expr* momentum_arg = keyword(e, "momentum");
  const ast::Expr* eps_arg = keyword(e, "eps");
  if (momentum_arg) momentum = number_argument(*momentum_arg, "batch_norm's momentum");
  if (eps_arg) eps = number_argument(*eps_arg, "batch_norm's eps");
  if (const ast::Expr* a = keyword(e, "training")) training = bool_argument(*a, "training");
  if (failed || !momentum || !eps || !training) return Value::error();
  if (!(*momentum >= 0 && *momentum <= 1)) {
    error(momentum_arg->loc, fmt::format("batch_norm's momentum must be in [0, 1], found {}", *momentum));
    return Value::error();
  }
  if (!(*eps >= 0) || !std::isfinite(float(*eps))) {
    error(eps_arg->loc, fmt::format("batch_norm's eps must be a finite number >= 0, found {}", *eps));
    return Value::error();
  }
  const Value& x = v[0];
  const std::string xtext = expr_text(*e.args[0]);
  if (!ir::is_float(x.type.dtype) || (x.type.rank() != 2 && x.type.rank() != 4) || x.type.shape[1].is_symbolic()) {
    error(e.args[0]->loc, fmt::format("batch_norm needs a floating input [N, C, H, W] or [N, C] with a static C, "
                                      "but '{}' is {}", xtext, ir::type_str(x.type)));
    return Value::error();
  }
  const ir::Dim channels = x.type.shape[1];
  const char* roles[] = {"", "gamma", "beta", "running mean", "running variance"};
  for (size_t i = 1; i < 5; ++i)
    if (v[i].type.rank() != 1 || !(v[i].type.shape[0] == channels) || v[i].type.dtype != x.type.dtype) {
      error(e.args[i]->loc, fmt::format("batch_norm's {} must be {}[{}] (one per channel of '{}') but '{}' is {}",
                                        roles[i], ir::dtype_name(x.type.dtype), channels.size, xtext,
                                        expr_text(*e.args[i]), ir::type_str(v[i].type)));
      return Value::error();
    }
  const bool planes = x.type.rank() == 4;
  ir::Attrs stats;
  stats.axes = planes ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0};
  ir::TensorType column{x.type.dtype, {channels, ir::Dim::fixed(1), ir::Dim::fixed(1)}};
  auto col = [&](const Value& c) { return planes ? apply(Op::Reshape, {c}, ir::Attrs{}, e.loc, &column) : c; };
  auto op = [&](Op o, const Value& a, const Value& b) { return pointwise(o, {a, b}, e.loc); };
  auto inverse_std = [&](const Value& var) {
    return op(Op::Div, float_literal(1.0), apply(Op::Sqrt, {op(Op::Add, var, float_literal(*eps))}, {}, e.loc));
  };
  // Every value below is its own statement, so the node order does not depend on the order in
  // which the C++ compiler evaluates a call's arguments (it is the order GCC gave when the
  // builder's batch_norm, dsl/builder_dnn.cpp, was written to match it).
  if (!*training) {   // y = x * (gamma / sqrt(rv + eps)) + (beta - rm * that)
    const Value scale = op(Op::Mul, v[1], inverse_std(v[4]));
    const Value shift = op(Op::Sub, v[2], op(Op::Mul, v[3], scale));
    const Value shift_column = col(shift);
    const Value scaled = op(Op::Mul, x, col(scale));
    return op(Op::Add, scaled, shift_column);
  }
  const int64_t plane = planes ? x.type.shape[2].size * x.type.shape[3].size : 1;
  const bool static_batch = !x.type.shape[0].is_symbolic() && !(planes && x.type.shape[2].is_symbolic()) &&
                            !(planes && x.type.shape[3].is_symbolic());
  if (static_batch && x.type.shape[0].size * plane < 2) {
    error(e.loc, fmt::format("batch_norm(training=true) needs more than one value per channel, but '{}' is {}", xtext,
                             ir::type_str(x.type)));
    return Value::error();
  }
  const int64_t rm = named_shared(*e.args[3], v[3], "running mean");
  const int64_t rv = rm < 0 ? -1 : named_shared(*e.args[4], v[4], "running variance");
  if (rm < 0 || rv < 0) return Value::error();
  if (rm == rv) {   // each gets its own update: one variable would be updated twice
    error(e.args[4]->loc, fmt::format("batch_norm(training=true) updates its running mean and running variance "
                                      "apart, but '{}' is given for both; declare one shared variable for each",
                                      ctx_.module.shareds[size_t(rv)].name));
    return Value::error();
  }
  const Value mean = apply(Op::ReduceMean, {x}, stats, e.loc);
  const Value centered = op(Op::Sub, x, col(mean));
  const Value var = apply(Op::ReduceMean, {op(Op::Mul, centered, centered)}, stats, e.loc);
  const Value beta_column = col(v[2]);
  const Value scale_column = col(op(Op::Mul, v[1], inverse_std(var)));
  const Value y = op(Op::Add, op(Op::Mul, centered, scale_column), beta_column);
  // The values per channel, for the unbiased variance: N * H * W, N counted at run time when symbolic.
  Value count = float_literal(double(x.type.shape[0].size * plane));
  if (x.type.shape[0].is_symbolic() || (planes && (x.type.shape[2].is_symbolic() || x.type.shape[3].is_symbolic()))) {
    ir::TensorType ones{x.type.dtype, planes ? ir::Shape{x.type.shape[0], x.type.shape[2], x.type.shape[3]}
                                             : ir::Shape{x.type.shape[0]}};
    auto one = convert(float_literal(1.0), x.type.dtype, e.loc);
    if (!one) return Value::error();
    ir::Attrs all;
    all.axes = dsl::all_axes(ones.rank());
    count = apply(Op::ReduceSum, {apply(Op::BroadcastTo, {*one}, {}, e.loc, &ones)}, all, e.loc);
  }
  const Value unbiased = op(Op::Mul, var, op(Op::Div, count, op(Op::Sub, count, float_literal(1.0))));
  auto running = [&](int64_t index, const Value& old, const Value& batch, const ast::Expr& arg) {
    const Value fresh = op(Op::Mul, float_literal(*momentum), batch);
    const Value kept = op(Op::Mul, float_literal(1 - *momentum), old);
    const Value next = op(Op::Add, kept, fresh);
    if (next.failed()) return;
    updates_seen_.emplace(index, arg.loc);
    if (!frames_.empty())
      update_call_sites_.emplace(index, fmt::format(" (through the call of helper '{}' at {}:{})",
                                                    frames_.front().decl->name, frames_.front().call_loc.line,
                                                    frames_.front().call_loc.col));
    fn_.updates.push_back(ir::Update{index, next.node, ir::ReduceMode::Avg, arg.loc});
  };
  running(rm, v[3], mean, *e.args[3]);
  running(rv, v[4], unbiased, *e.args[4]);
  return y;
}

// ---- The backward window ops, as the IR printer writes them ---------------------------------

Value FunctionAnalyzer::call_window_backward(const ast::Expr& e, Op op) {
  const size_t operands = op == Op::AvgPool2dBackward ? 1 : 2;
  if (!check_arguments(e, operands, operands,
                       {"input", "kernel", "stride", "padding", "dilation", "groups", "count_include_pad"}))
    return Value::error();
  std::vector<Value> xs;
  for (const auto& a : e.args) xs.push_back(operand(*a));
  ir::Attrs attrs;
  ir::Window2d& win = attrs.window;
  bool same = false, ok = true;
  auto pair = [&](const char* key, int64_t& a, int64_t& b, int64_t at_least) {
    if (const ast::Expr* k = keyword(e, key)) {
      auto p = pair_argument(*k, key, at_least);
      if (p) a = (*p)[0], b = (*p)[1];
      ok &= p.has_value();
    }
  };
  pair("input", win.in_h, win.in_w, 1);
  pair("kernel", win.kh, win.kw, 1);
  pair("stride", win.stride_h, win.stride_w, 1);
  pair("dilation", win.dilation_h, win.dilation_w, 1);
  if (const ast::Expr* k = keyword(e, "padding")) {
    auto p = padding_argument(*k, e.text.c_str(), &same);
    if (p) win.pad_top = (*p)[0], win.pad_bottom = (*p)[1], win.pad_left = (*p)[2], win.pad_right = (*p)[3];
    ok &= p.has_value() && !same;
  }
  if (const ast::Expr* k = keyword(e, "groups")) {
    auto g = int_argument(*k, "groups");
    if (g) win.groups = *g;
    ok &= g.has_value();
  }
  if (const ast::Expr* k = keyword(e, "count_include_pad")) {
    auto b = bool_argument(*k, "count_include_pad");
    if (b) win.count_include_pad = *b;
    ok &= b.has_value();
  }
  for (const Value& x : xs) ok &= !x.failed();
  if (!ok) return Value::error();
  const ir::TensorType& first = xs[0].type;
  if (op == Op::Conv2dBackwardData && xs[1].type.rank() == 4)
    win.kh = xs[1].type.shape[2].size, win.kw = xs[1].type.shape[3].size;
  if ((op == Op::Conv2dBackwardWeights || op == Op::MaxPool2dBackward) && first.rank() == 4)
    win.in_h = first.shape[2].size, win.in_w = first.shape[3].size;
  return apply(op, std::move(xs), attrs, e.loc);
}

}  // namespace synk::dsl::sema
