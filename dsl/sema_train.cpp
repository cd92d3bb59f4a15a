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
#include <fmt/ranges.h>

#include "dsl/sema.h"
#include "dsl/sema_optimizer.h"
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

const char* global_kind_text(Global::Kind kind) {
  switch (kind) {
    case Global::Kind::Shared: return "a shared variable";
    case Global::Kind::Function: return "a function";
    case Global::Kind::Optimizer: return "an optimizer";
  }
  return "a name";
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
  } else if (!update_rule_from_name(d.rule)) {
    ctx.diags.error(d.rule_loc, fmt::format("optimizer '{}': unknown update rule '{}' (known rules: {})", d.name,
                                            d.rule, fmt::join(update_rule_names(), ", ")));
    ok = false;
  } else {
    for (const ast::ExprPtr& arg : d.positional) {
      ctx.diags.error(arg->loc, fmt::format("optimizer '{}': hyper-parameters are keyword arguments, as in "
                                            "{}(lr=0.01)", d.name, d.rule));
      ok = false;
    }
    for (const ast::KwArg& kw : d.hyper_parameters) {
      if (kw.name == "num_packs") {   // the step's all-reduce, not the rule's
        if (!kw.value || kw.value->kind != ast::ExprKind::IntLiteral || kw.value->int_value < 1) {
          ctx.diags.error(kw.loc, fmt::format("optimizer '{}': num_packs must be an integer >= 1 (the number of "
                                              "buffers the gradient's all-reduce uses)", d.name));
          ok = false;
        } else {
          opt.num_packs = kw.value->int_value;
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
      if (std::optional<std::string> why = hyper_parameter_error(d.rule, kw.name, *value)) {
        ctx.diags.error(kw.loc, fmt::format("optimizer '{}': {}", d.name, *why));
        ok = false;
      } else {
        opt.hyper_parameters.emplace_back(kw.name, *value);
      }
    }
    if (ok) {
      try {
        make_update_rule(d.rule, opt.hyper_parameters);
      } catch (const UserError& e) {
        ctx.diags.error(d.rule_loc, fmt::format("optimizer '{}': {}", d.name, e.what()));
        ok = false;
      }
    }
  }
  ctx.module.optimizers.push_back(std::move(opt));
  ctx.optimizer_ok.push_back(ok);
  ctx.optimizer_bound_at.push_back(SourceLoc{});
}

void check_training_names(ModuleContext& ctx) {
  // Every name the expansion will add, with the optimizer that adds it.
  std::map<std::string, size_t> added;
  for (size_t i = 0; i < ctx.module.optimizers.size(); ++i) {
    const ir::Optimizer& o = ctx.module.optimizers[i];
    if (o.gradient < 0 || !ctx.optimizer_ok[i]) continue;
    for (const std::string& name : names_added_by(o, ctx.module.shareds)) {
      std::string clash;
      if (auto g = ctx.globals.find(name); g != ctx.globals.end())
        clash = fmt::format("{} declared at {}", global_kind_text(g->second.kind), loc_text(g->second.loc));
      else if (auto a = added.find(name); a != added.end())
        clash = fmt::format("what optimizer '{}' adds too", ctx.module.optimizers[a->second].name);
      if (!clash.empty()) {
        ctx.diags.error(ctx.optimizer_bound_at[i],
                        fmt::format("optimizer '{}' ({}) adds '{}' for its update function and state, but '{}' "
                                    "is {}; rename one of them",
                                    o.name, o.rule, name, name, clash));
        break;
      }
      added.emplace(name, i);
    }
  }
}

std::optional<int64_t> FunctionAnalyzer::resolve_optimizer(const ast::Stmt& s) {
  auto it = ctx_.globals.find(s.optimizer);
  if (it == ctx_.globals.end()) {
    error(s.optimizer_loc, fmt::format("unknown optimizer '{}' (declare one at the top level, e.g. "
                                       "optimizer {} = momentum(lr=0.05);)", s.optimizer, s.optimizer));
    return std::nullopt;
  }
  if (it->second.kind != Global::Kind::Optimizer) {
    error(s.optimizer_loc, fmt::format("'{}' is {}, not an optimizer", s.optimizer, global_kind_text(it->second.kind)));
    return std::nullopt;
  }
  if (!ctx_.optimizer_ok[size_t(it->second.index)]) {
    had_error_ = true;
    return std::nullopt;
  }
  return it->second.index;
}

bool FunctionAnalyzer::bind_optimizer(const ast::Stmt& s, int64_t optimizer, const std::vector<int64_t>& parameters,
                                      ir::DType dtype, int64_t size) {
  ir::Optimizer& o = ctx_.module.optimizers[size_t(optimizer)];
  auto names = [&](const std::vector<int64_t>& indices) {
    std::vector<std::string> out;
    for (int64_t i : indices) out.push_back(ctx_.module.shareds[size_t(i)].name);
    return fmt::format("{}", fmt::join(out, ", "));
  };
  if (o.gradient >= 0) {
    if (o.parameters == parameters) return true;
    error(s.loc, fmt::format("optimizer '{}' already trains {} (at {}); every step that uses it must train the same "
                             "variables in the same order, not {}",
                             o.name, names(o.parameters), loc_text(ctx_.optimizer_bound_at[size_t(optimizer)]),
                             names(parameters)));
    return false;
  }
  const std::string name = o.gradient_variable();
  const ir::TensorType type{dtype, {ir::Dim::fixed(size)}};
  int64_t index = -1;
  if (auto g = ctx_.globals.find(name); g != ctx_.globals.end()) {
    const bool fits = g->second.kind == Global::Kind::Shared &&
                      ctx_.module.shareds[size_t(g->second.index)].type == type &&
                      !ctx_.module.shareds[size_t(g->second.index)].sliceable;
    if (!fits) {
      error(s.loc, fmt::format("optimizer '{}' keeps the flat gradient in the shared variable '{}: {}', but '{}' is "
                               "already {} declared at {}; rename it",
                               o.name, name, ir::type_str(type), name, global_kind_text(g->second.kind),
                               loc_text(g->second.loc)));
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
  o.parameters = parameters;
  o.gradient = index;
  ctx_.optimizer_bound_at[size_t(optimizer)] = s.loc;
  return true;
}

namespace {

// The variables of a Grad node, their promoted dtype and total size; nullopt (after reporting)
// when one has a symbolic shape.
struct Trained {
  std::vector<int64_t> parameters;
  ir::DType dtype = ir::DType::F32;
  int64_t size = 0;
};

}  // namespace

void FunctionAnalyzer::minimize_statement(const ast::Stmt& s) {
  if (step_at_) {
    error(s.loc, fmt::format("function '{}' already has a training step at {}; a function minimizes one loss",
                             decl_.name, loc_text(*step_at_)));
    return;
  }
  step_at_ = s.loc;
  std::optional<int64_t> optimizer = resolve_optimizer(s);
  if (!s.value) return;
  Value loss = expr(*s.value);
  Value g = gradient_of("minimize", loss, *s.value, s.over, s.loc);
  if (g.failed() || !optimizer) return;

  const ir::Node grad = fn_.nodes[size_t(g.node)];
  Trained t;
  bool ok = true;
  for (size_t i = 1; i < grad.operands.size(); ++i) {
    const int64_t index = fn_.nodes[size_t(grad.operands[i])].attrs.index;
    const ir::SharedVar& var = ctx_.module.shareds[size_t(index)];
    const ElementCount count = element_count(var.type.shape);
    if (!count.symbols.empty()) {
      error(s.over[i - 1].loc, fmt::format("minimize trains variables of static shape, but '{}' is {}", var.name,
                                           ir::type_str(var.type)));
      ok = false;
    }
    t.parameters.push_back(index);
    t.size += count.fixed;
    t.dtype = i == 1 ? var.type.dtype : promote(t.dtype, var.type.dtype);
  }
  if (!ok) return;
  if (loss.type.dtype != t.dtype) {
    return error(s.value->loc, fmt::format("the loss of minimize is {} but the variables' dtype is {}: the flat "
                                           "gradient must have the variables' dtype; use cast({}, {})",
                                           ir::dtype_name(loss.type.dtype), ir::dtype_name(t.dtype),
                                           expr_text(*s.value), ir::dtype_name(t.dtype)));
  }
  if (!bind_optimizer(s, *optimizer, t.parameters, t.dtype, t.size)) return;
  const int64_t gradient = ctx_.module.optimizers[size_t(*optimizer)].gradient;
  if (auto seen = updates_seen_.find(gradient); seen != updates_seen_.end()) {
    return error(s.loc, fmt::format("'{}' is already updated at {}; minimize writes the gradient there",
                                    ctx_.module.shareds[size_t(gradient)].name, loc_text(seen->second)));
  }
  updates_seen_.emplace(gradient, s.loc);
  ir::NodeId value = g.node;
  const ir::TensorType flat{t.dtype, {ir::Dim::fixed(t.size)}};
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
  if (step_at_) {
    error(s.loc, fmt::format("function '{}' already has a training step at {}; a function minimizes one loss",
                             decl_.name, loc_text(*step_at_)));
    return;
  }
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
  Trained t;
  for (size_t i = 1; i < grad.operands.size(); ++i) {
    const ir::SharedVar& var = ctx_.module.shareds[size_t(fn_.nodes[size_t(grad.operands[i])].attrs.index)];
    t.parameters.push_back(fn_.nodes[size_t(grad.operands[i])].attrs.index);
    t.size += element_count(var.type.shape).fixed;
    t.dtype = i == 1 ? var.type.dtype : promote(t.dtype, var.type.dtype);
  }
  const ir::TensorType flat{t.dtype, {ir::Dim::fixed(t.size)}};
  if (!(value.type == flat))
    return error(s.value->loc, fmt::format("the flat gradient of optimizer '{}' must be {}, but this one is {}", o.name,
                                           ir::type_str(flat), ir::type_str(value.type)));
  if (!bind_optimizer(s, *optimizer, t.parameters, t.dtype, t.size)) return;
  train_step_ = ir::TrainStep{decl_.name, *optimizer, s.loc};
  trained_ = t.parameters;
}

void FunctionAnalyzer::check_training_conflicts() {
  if (!train_step_) return;
  for (int64_t p : trained_) {
    auto seen = updates_seen_.find(p);
    if (seen == updates_seen_.end()) continue;
    error(seen->second, fmt::format("'{}' is trained by the step at {} (its optimizer updates it after the "
                                    "gradient is averaged), so '{}' cannot also update it",
                                    ctx_.module.shareds[size_t(p)].name, loc_text(train_step_->loc), decl_.name));
  }
}

}  // namespace synk::dsl::sema
