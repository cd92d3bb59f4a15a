// Semantic analysis of training steps (docs/training.md, "Training steps in .synk"):
// `optimizer NAME = RULE(keyword=number, ...);` declarations, checked with the same rules as
// make_update_rule (sema_optimizer.h) but reported at the offending keyword; `minimize LOSS over
// p1, ..., pk using NAME;`, which becomes `update NAME_grads = grad(LOSS, p1, ..., pk)` (flattened
// for one variable) into the optimizer's flat-gradient shared variable, created here; and
// `update NAME_grads = grad(...) using NAME;`, the same step written out (what --emit=ir prints).
// The update function and the optimizer's state are added later, by
// compiler::expand_training_steps; check_training_names makes sure their names are free.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "dsl/sema.h"
#include "ir/type_infer.h"

namespace synk::dsl::sema {

using ir::Op;

namespace {

std::string loc_text(SourceLoc loc) { return fmt::format("{}:{}", loc.line, loc.col); }

std::optional<double> number_literal(const ast::Expr& e) {
  if (e.kind == ast::ExprKind::IntLiteral) return double(e.int_value);
  if (e.kind == ast::ExprKind::FloatLiteral) return e.float_value;
  return std::nullopt;
}

// "a function declared at 3:1"
std::string declared_text(const Global& g) {
  return fmt::format("{} declared at {}", global_kind_text(g.kind), loc_text(g.loc));
}

}  // namespace

void analyze_optimizer(ModuleContext& ctx, const ast::OptimizerDecl& d) {
  const int64_t index = int64_t(ctx.module.optimizers.size());
  bool ok = declare_global(ctx, d.name, d.name_loc, Global{Global::Kind::Optimizer, index, d.name_loc});
  ir::Optimizer opt;
  opt.name = d.name;
  opt.rule = d.rule;
  opt.loc = d.name_loc;
  if (d.rule.empty()) {
    ok = false;   // a syntax error, already reported
  } else if (std::optional<std::string> why = checks::unknown_rule_error(d.name, d.rule)) {
    ctx.diags.error(d.rule_loc, std::move(*why));
    ok = false;
  } else {
    for (const ast::ExprPtr& arg : d.positional) {
      ctx.diags.error(arg->loc, fmt::format("optimizer '{}': hyper-parameters are keyword arguments, as in "
                                            "{}(lr=0.01)", d.name, d.rule));
      ok = false;
    }
    for (const ast::KwArg& kw : d.hyper_parameters) {
      if (kw.name == "num_packs") {   // the step's all-reduce, not the rule's
        std::optional<int64_t> packs;
        if (kw.value && kw.value->kind == ast::ExprKind::IntLiteral) packs = kw.value->int_value;
        if (std::optional<std::string> why = checks::num_packs_error(d.name, packs)) {
          ctx.diags.error(kw.loc, std::move(*why));
          ok = false;
        } else {
          opt.num_packs = *packs;
        }
        continue;
      }
      std::optional<double> value = kw.value ? number_literal(*kw.value) : std::nullopt;
      if (!value) {
        if (kw.value && kw.value->kind != ast::ExprKind::Error)
          ctx.diags.error(kw.value->loc, fmt::format("optimizer '{}': hyper-parameter '{}' must be a number",
                                                     d.name, kw.name));
        ok = false;
        continue;
      }
      // One keyword at a time, so that the message points at the keyword that is wrong.
      if (std::optional<std::string> why = checks::hyper_parameter_error(d.name, d.rule, kw.name, *value)) {
        ctx.diags.error(kw.loc, std::move(*why));
        ok = false;
      } else {
        opt.hyper_parameters.emplace_back(kw.name, *value);
      }
    }
    if (ok)
      if (std::optional<std::string> why = checks::update_rule_error(d.name, d.rule, opt.hyper_parameters)) {
        ctx.diags.error(d.rule_loc, std::move(*why));
        ok = false;
      }
  }
  ctx.module.optimizers.push_back(std::move(opt));
  ctx.optimizer_ok.push_back(ok);
  ctx.optimizer_bound_at.push_back(SourceLoc{});
}

void check_training_names(ModuleContext& ctx) {
  std::map<std::string, std::string> declared;
  for (const auto& [name, g] : ctx.globals) declared.emplace(name, declared_text(g));
  for (const auto& [i, why] : checks::training_name_errors(ctx.module.optimizers, ctx.module.shareds, declared,
                                                           ctx.optimizer_ok))
    ctx.diags.error(ctx.optimizer_bound_at[i], why);
}

std::optional<int64_t> FunctionAnalyzer::resolve_optimizer(const ast::Stmt& s) {
  auto it = ctx_.globals.find(s.optimizer);
  if (it == ctx_.globals.end()) {
    error(s.optimizer_loc, fmt::format("unknown optimizer '{}' (declare one at the top level, e.g. "
                                       "optimizer {} = momentum(lr=0.05);)", s.optimizer, s.optimizer));
    return std::nullopt;
  }
  if (it->second.kind != Global::Kind::Optimizer) {
    error(s.optimizer_loc, checks::not_an_optimizer_message(s.optimizer, global_kind_text(it->second.kind)));
    return std::nullopt;
  }
  if (!ctx_.optimizer_ok[size_t(it->second.index)]) {
    had_error_ = true;
    return std::nullopt;
  }
  return it->second.index;
}

bool FunctionAnalyzer::bind_optimizer(const ast::Stmt& s, int64_t optimizer, const checks::FlatGradient& gradient) {
  ir::Optimizer& o = ctx_.module.optimizers[size_t(optimizer)];
  const std::string bound_at = fmt::format(" (at {})", loc_text(ctx_.optimizer_bound_at[size_t(optimizer)]));
  if (auto why = checks::already_trains_error(o, gradient.parameters, ctx_.module.shareds, bound_at)) {
    error(s.loc, std::move(*why));
    return false;
  }
  if (o.gradient >= 0) return true;
  const std::string name = o.gradient_variable();
  const ir::TensorType type = gradient.type();
  int64_t index = -1;
  if (auto g = ctx_.globals.find(name); g != ctx_.globals.end()) {
    const ir::SharedVar* existing =
        g->second.kind == Global::Kind::Shared ? &ctx_.module.shareds[size_t(g->second.index)] : nullptr;
    if (auto why = checks::gradient_variable_error(o, type, existing, declared_text(g->second))) {
      error(s.loc, std::move(*why));
      return false;
    }
    index = g->second.index;
  } else {
    index = int64_t(ctx_.module.shareds.size());
    ctx_.module.shareds.push_back(ir::SharedVar{name, type, ir::InitZeros{}, false, s.loc});
    ctx_.shared_ok.push_back(true);
    ctx_.shared_locs.push_back(s.loc);
    ctx_.globals.emplace(name, Global{Global::Kind::Shared, index, s.loc});
  }
  o.parameters = gradient.parameters;
  o.gradient = index;
  ctx_.optimizer_bound_at[size_t(optimizer)] = s.loc;
  return true;
}

// The loss-form warning at the part it blames; when that part is elsewhere (in a helper the loss
// calls, or an earlier let), a note at the loss says which function's loss it is.
void FunctionAnalyzer::warn_of_loss(const checks::LossWarning& w, const ast::Expr& loss) {
  const bool elsewhere = w.loc.valid() && w.loc.line != loss.loc.line;
  ctx_.diags.warning(w.loc.valid() ? w.loc : loss.loc, w.text);
  if (elsewhere) ctx_.diags.note(loss.loc, fmt::format("in the loss of function '{}'", fn_.name));
}

void FunctionAnalyzer::minimize_statement(const ast::Stmt& s) {
  if (step_at_) return error(s.loc, checks::second_training_step_message(decl_.name, " at " + loc_text(*step_at_)));
  step_at_ = s.loc;
  std::optional<int64_t> optimizer = resolve_optimizer(s);
  if (!s.value) return;
  Value loss = expr(*s.value);
  Value g = gradient_of("minimize", loss, *s.value, s.over, s.loc, /*inputs_allowed=*/false);
  if (g.failed() || !optimizer) return;

  const ir::Node grad = fn_.nodes[size_t(g.node)];
  checks::FlatGradient t;
  bool ok = true;
  for (size_t i = 1; i < grad.operands.size(); ++i) {
    const int64_t index = fn_.nodes[size_t(grad.operands[i])].attrs.index;
    const ir::SharedVar& var = ctx_.module.shareds[size_t(index)];
    if (std::optional<std::string> why = checks::static_shape_error(var.name, var.type)) {
      error(s.over[i - 1].loc, std::move(*why));
      ok = false;
    }
    t.add(index, var.type);
  }
  if (!ok) return;
  if (auto why = checks::loss_dtype_error(loss.type.dtype, t.dtype, expr_text(*s.value)))
    return error(s.value->loc, std::move(*why));
  if (loss.kind == Value::Kind::Node)
    if (auto w = checks::loss_not_a_row_mean_warning(fn_, loss.node, scattered_)) warn_of_loss(*w, *s.value);
  if (!bind_optimizer(s, *optimizer, t)) return;
  const int64_t gradient = ctx_.module.optimizers[size_t(*optimizer)].gradient;
  if (auto seen = updates_seen_.find(gradient); seen != updates_seen_.end())
    return error(s.loc, checks::gradient_updated_message(ctx_.module.shareds[size_t(gradient)].name,
                                                         "at " + loc_text(seen->second)));
  updates_seen_.emplace(gradient, s.loc);
  ir::NodeId value = g.node;
  const ir::TensorType flat = t.type();
  if (!(g.type == flat)) {   // one variable: grad has its shape
    Value reshaped = apply(Op::Reshape, {g}, ir::Attrs{}, s.loc, &flat);
    if (reshaped.failed()) return;
    value = reshaped.node;
  }
  fn_.updates.push_back(ir::Update{gradient, value, ir::ReduceMode::Avg, s.loc});
  train_step_ = ir::TrainStep{decl_.name, *optimizer, s.loc};
  trained_ = t.parameters;
}

void FunctionAnalyzer::training_update(const ast::Stmt& s, int64_t gradient_var, const Value& value) {
  if (step_at_) return error(s.loc, checks::second_training_step_message(decl_.name, " at " + loc_text(*step_at_)));
  step_at_ = s.loc;
  std::optional<int64_t> optimizer = resolve_optimizer(s);
  if (!optimizer || value.failed() || value.kind != Value::Kind::Node) return;
  const ir::Optimizer& o = ctx_.module.optimizers[size_t(*optimizer)];
  ir::NodeId node = value.node;
  if (fn_.nodes[size_t(node)].op == Op::Reshape) node = fn_.nodes[size_t(node)].operands[0];
  const ir::Node grad = fn_.nodes[size_t(node)];
  if (grad.op != Op::Grad)
    return error(s.value->loc, fmt::format("'update ... using {}' needs the gradient grad(loss, variables...) as its "
                                           "value (or write: minimize loss over variables using {};)",
                                           o.name, o.name));
  if (ctx_.module.shareds[size_t(gradient_var)].name != o.gradient_variable())
    return error(s.name_loc, fmt::format("optimizer '{}' keeps its flat gradient in '{}_grads', not in '{}'", o.name,
                                         o.name, s.name));
  checks::FlatGradient t;
  for (size_t i = 1; i < grad.operands.size(); ++i) {
    const ir::Node& v = fn_.nodes[size_t(grad.operands[i])];
    if (v.op != Op::SharedRead)
      return error(s.value->loc, fmt::format("optimizer '{}' trains shared variables, but its gradient is also taken "
                                             "with respect to the input '{}'", o.name,
                                             fn_.params[size_t(v.attrs.index)].name));
    const int64_t index = v.attrs.index;
    t.add(index, ctx_.module.shareds[size_t(index)].type);
  }
  const ir::TensorType flat = t.type();
  if (!(value.type == flat))
    return error(s.value->loc, fmt::format("the flat gradient of optimizer '{}' must be {}, but this one is {}", o.name,
                                           ir::type_str(flat), ir::type_str(value.type)));
  if (!bind_optimizer(s, *optimizer, t)) return;
  if (auto w = checks::loss_not_a_row_mean_warning(fn_, grad.operands[0], scattered_)) warn_of_loss(*w, *s.value);
  train_step_ = ir::TrainStep{decl_.name, *optimizer, s.loc};
  trained_ = t.parameters;
}

void FunctionAnalyzer::check_training_conflicts() {
  if (!train_step_) return;
  for (int64_t p : trained_) {
    auto seen = updates_seen_.find(p);
    if (seen == updates_seen_.end()) continue;
    error(seen->second, checks::trained_update_message(ctx_.module.shareds[size_t(p)].name,
                                                       "at " + loc_text(train_step_->loc), decl_.name));
  }
}

}  // namespace synk::dsl::sema
