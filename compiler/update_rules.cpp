// Optimizer update rules as IR (update_rules.h). Each rule is written once, as ordinary IR ops
// over one parameter, its gradient slice and its state, so the compiled update fuses into a few
// pointwise kernels like any other code.
#include "compiler/update_rules.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "compiler/grad_node_writer.h"
#include "dsl/lexer.h"
#include "dsl/type_infer.h"

namespace synk::compiler {

using grad_detail::NodeWriter;
using ir::NodeId;
using ir::Op;

namespace {

struct RuleInfo {
  UpdateRuleKind kind;
  const char* name;
  std::vector<const char*> slots;      // per-parameter state, in order
  bool step_counter;
  std::vector<const char*> keywords;   // hyper-parameters it uses
  bool needs_learning_rate;            // no default learning rate
};

const std::vector<RuleInfo>& rules() {
  static const std::vector<RuleInfo> table = {
      {UpdateRuleKind::Sgd, "sgd", {}, false, {"lr"}, true},
      {UpdateRuleKind::Momentum, "momentum", {"velocity"}, false, {"lr", "momentum"}, true},
      {UpdateRuleKind::Nesterov, "nesterov", {"velocity"}, false, {"lr", "momentum"}, true},
      {UpdateRuleKind::Adagrad, "adagrad", {"accu"}, false, {"lr", "epsilon"}, false},
      {UpdateRuleKind::RMSProp, "rmsprop", {"accu"}, false, {"lr", "rho", "epsilon"}, false},
      {UpdateRuleKind::Adadelta, "adadelta", {"accu", "delta_accu"}, false, {"lr", "rho", "epsilon"}, false},
      {UpdateRuleKind::Adam, "adam", {"m", "v"}, true, {"lr", "beta1", "beta2", "epsilon"}, false},
      {UpdateRuleKind::Adamax, "adamax", {"m", "u"}, true, {"lr", "beta1", "beta2", "epsilon"}, false},
  };
  return table;
}

const RuleInfo& info(UpdateRuleKind kind) {
  for (const RuleInfo& r : rules())
    if (r.kind == kind) return r;
  dsl::internal_error("unknown update rule kind");
}

bool uses(const RuleInfo& r, std::string_view keyword) {
  for (const char* k : r.keywords)
    if (keyword == k) return true;
  return false;
}

// The new value of one parameter and of its state slots (in RuleInfo::slots order).
struct Step {
  NodeId param;
  std::vector<NodeId> slots;
};

// `step_size` is adam's a_t or adamax's lr / (1 - beta1^t), already in the parameter's dtype.
Step apply_rule(NodeWriter& w, const UpdateRule& r, NodeId p, NodeId g, const std::vector<NodeId>& s,
                std::optional<NodeId> step_size) {
  auto scale = [&](double c, NodeId x) { return w.scalar_binary(Op::Mul, c, x); };
  auto plus = [&](NodeId x, double c) { return w.binary_scalar(Op::Add, x, c); };
  auto sqrt = [&](NodeId x) { return w.unary(Op::Sqrt, x); };
  auto square = [&](NodeId x) { return w.mul(x, x); };
  // rho * a + (1 - rho) * g^2, Lasagne's running average of squares.
  auto running_mean = [&](double rho, NodeId a, NodeId x) {
    return w.add(scale(rho, a), scale(1 - rho, square(x)));
  };
  const NodeId lr_g = scale(r.learning_rate, g);

  switch (r.kind) {
    case UpdateRuleKind::Sgd:
      return {w.sub(p, lr_g), {}};
    case UpdateRuleKind::Momentum: {
      const NodeId v = w.sub(scale(r.momentum, s[0]), lr_g);
      return {w.add(p, v), {v}};
    }
    case UpdateRuleKind::Nesterov: {
      const NodeId v = w.sub(scale(r.momentum, s[0]), lr_g);
      return {w.sub(w.add(p, scale(r.momentum, v)), lr_g), {v}};
    }
    case UpdateRuleKind::Adagrad: {
      const NodeId accu = w.add(s[0], square(g));
      return {w.sub(p, w.div(lr_g, sqrt(plus(accu, r.epsilon)))), {accu}};
    }
    case UpdateRuleKind::RMSProp: {
      const NodeId accu = running_mean(r.rho, s[0], g);
      return {w.sub(p, w.div(lr_g, sqrt(plus(accu, r.epsilon)))), {accu}};
    }
    case UpdateRuleKind::Adadelta: {
      const NodeId accu = running_mean(r.rho, s[0], g);
      const NodeId update = w.div(w.mul(g, sqrt(plus(s[1], r.epsilon))), sqrt(plus(accu, r.epsilon)));
      const NodeId delta_accu = running_mean(r.rho, s[1], update);
      return {w.sub(p, scale(r.learning_rate, update)), {accu, delta_accu}};
    }
    case UpdateRuleKind::Adam: {
      const NodeId m = w.add(scale(r.beta1, s[0]), scale(1 - r.beta1, g));
      const NodeId v = running_mean(r.beta2, s[1], g);
      const NodeId step = w.div(w.mul(*step_size, m), plus(sqrt(v), r.epsilon));
      return {w.sub(p, step), {m, v}};
    }
    case UpdateRuleKind::Adamax: {
      const NodeId m = w.add(scale(r.beta1, s[0]), scale(1 - r.beta1, g));
      const NodeId u = w.binary(Op::Maximum, scale(r.beta2, s[1]), w.unary(Op::Abs, g));
      const NodeId step = w.div(w.mul(*step_size, m), plus(u, r.epsilon));
      return {w.sub(p, step), {m, u}};
    }
  }
  dsl::internal_error("unknown update rule kind");
}

// Adam's a_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); adamax's a_t = lr / (1 - beta1^t).
NodeId step_size(NodeWriter& w, const UpdateRule& r, NodeId t) {
  auto one_minus_power = [&](double beta) {
    return w.scalar_binary(Op::Sub, 1, w.binary(Op::Pow, w.constant(beta, w.type(t).dtype), t));
  };
  NodeId numerator = w.constant(r.learning_rate, w.type(t).dtype);
  if (r.kind == UpdateRuleKind::Adam) numerator = w.mul(numerator, w.unary(Op::Sqrt, one_minus_power(r.beta2)));
  return w.div(numerator, one_minus_power(r.beta1));
}

// True when `name` lexes as one .synk identifier (so not a keyword such as `update`): the
// module must still print as .synk that reads back.
bool is_identifier(const std::string& name) {
  dsl::SourceFile file("<name>", name);
  dsl::DiagnosticEngine diags(file);
  const std::vector<dsl::Token> tokens = dsl::lex_all(file, diags);
  return !diags.has_errors() && tokens.size() == 2 && tokens[0].kind == dsl::TokenKind::Identifier &&
         tokens[1].kind == dsl::TokenKind::EndOfFile;
}

}  // namespace

const char* update_rule_name(UpdateRuleKind kind) { return info(kind).name; }

std::optional<UpdateRuleKind> update_rule_from_name(std::string_view name) {
  for (const RuleInfo& r : rules())
    if (name == r.name) return r.kind;
  return std::nullopt;
}

UpdateRule UpdateRule::sgd(double learning_rate) {
  UpdateRule r;
  r.kind = UpdateRuleKind::Sgd;
  r.learning_rate = learning_rate;
  return r;
}

UpdateRule UpdateRule::with_momentum(double learning_rate, double momentum) {
  UpdateRule r;
  r.kind = UpdateRuleKind::Momentum;
  r.learning_rate = learning_rate;
  r.momentum = momentum;
  return r;
}

UpdateRule UpdateRule::nesterov(double learning_rate, double momentum) {
  UpdateRule r = with_momentum(learning_rate, momentum);
  r.kind = UpdateRuleKind::Nesterov;
  return r;
}

UpdateRule UpdateRule::adagrad(double learning_rate, double epsilon) {
  UpdateRule r;
  r.kind = UpdateRuleKind::Adagrad;
  r.learning_rate = learning_rate;
  r.epsilon = epsilon;
  return r;
}

UpdateRule UpdateRule::rmsprop(double learning_rate, double rho, double epsilon) {
  UpdateRule r;
  r.kind = UpdateRuleKind::RMSProp;
  r.learning_rate = learning_rate;
  r.rho = rho;
  r.epsilon = epsilon;
  return r;
}

UpdateRule UpdateRule::adadelta(double learning_rate, double rho, double epsilon) {
  UpdateRule r = rmsprop(learning_rate, rho, epsilon);
  r.kind = UpdateRuleKind::Adadelta;
  return r;
}

UpdateRule UpdateRule::adam(double learning_rate, double beta1, double beta2, double epsilon) {
  UpdateRule r;
  r.kind = UpdateRuleKind::Adam;
  r.learning_rate = learning_rate;
  r.beta1 = beta1;
  r.beta2 = beta2;
  r.epsilon = epsilon;
  return r;
}

UpdateRule UpdateRule::adamax(double learning_rate, double beta1, double beta2, double epsilon) {
  UpdateRule r = adam(learning_rate, beta1, beta2, epsilon);
  r.kind = UpdateRuleKind::Adamax;
  return r;
}

UpdateRule make_update_rule(std::string_view name,
                            std::span<const std::pair<std::string, double>> hyper_parameters) {
  auto kind = update_rule_from_name(name);
  if (!kind) {
    std::vector<std::string> names;
    for (const RuleInfo& r : rules()) names.push_back(r.name);
    throw dsl::UserError(fmt::format("unknown update rule '{}' (known rules: {})", name, fmt::join(names, ", ")));
  }
  const RuleInfo& ri = info(*kind);
  UpdateRule rule;
  switch (*kind) {
    case UpdateRuleKind::Sgd: rule = UpdateRule::sgd(0); break;
    case UpdateRuleKind::Momentum: rule = UpdateRule::with_momentum(0); break;
    case UpdateRuleKind::Nesterov: rule = UpdateRule::nesterov(0); break;
    case UpdateRuleKind::Adagrad: rule = UpdateRule::adagrad(); break;
    case UpdateRuleKind::RMSProp: rule = UpdateRule::rmsprop(); break;
    case UpdateRuleKind::Adadelta: rule = UpdateRule::adadelta(); break;
    case UpdateRuleKind::Adam: rule = UpdateRule::adam(); break;
    case UpdateRuleKind::Adamax: rule = UpdateRule::adamax(); break;
  }
  bool have_lr = false;
  std::set<std::string> seen;
  for (const auto& [key, value] : hyper_parameters) {
    if (!seen.insert(key).second)
      throw dsl::UserError(fmt::format("update rule '{}': hyper-parameter '{}' is given twice", name, key));
    if (!uses(ri, key))
      throw dsl::UserError(fmt::format("update rule '{}' has no hyper-parameter '{}' (it takes: {})", name,
                                       key, fmt::join(ri.keywords, ", ")));
    if (key == "lr") rule.learning_rate = value, have_lr = true;
    else if (key == "momentum") rule.momentum = value;
    else if (key == "rho") rule.rho = value;
    else if (key == "epsilon") rule.epsilon = value;
    else if (key == "beta1") rule.beta1 = value;
    else if (key == "beta2") rule.beta2 = value;
  }
  if (ri.needs_learning_rate && !have_lr)
    throw dsl::UserError(fmt::format("update rule '{}' needs a learning rate (lr=...)", name));
  check_update_rule(rule);
  return rule;
}

void check_update_rule(const UpdateRule& rule) {
  const RuleInfo& ri = info(rule.kind);
  auto bad = [&](const char* what, double value, const char* range) {
    throw dsl::UserError(fmt::format("update rule '{}': {} is {}, but it must be {}", ri.name, what,
                                     value, range));
  };
  auto unit = [&](const char* keyword, const char* what, double value) {
    if (uses(ri, keyword) && !(value >= 0 && value < 1)) bad(what, value, "in [0, 1)");
  };
  if (!(rule.learning_rate > 0) || !std::isfinite(rule.learning_rate))
    bad("the learning rate", rule.learning_rate, "a finite number > 0");
  unit("momentum", "momentum", rule.momentum);
  unit("rho", "rho", rule.rho);
  unit("beta1", "beta1", rule.beta1);
  unit("beta2", "beta2", rule.beta2);
  if (uses(ri, "epsilon") && (!(rule.epsilon >= 0) || !std::isfinite(rule.epsilon)))
    bad("epsilon", rule.epsilon, "a finite number >= 0");
}

UpdateFunctionInfo add_update_function(ir::Module& module, const std::string& function_name,
                                       std::span<const std::string> parameters,
                                       const UpdateRule& rule, ir::SourceLoc loc) {
  check_update_rule(rule);
  const RuleInfo& ri = info(rule.kind);
  const std::string what = fmt::format("update function '{}' ({})", function_name, ri.name);
  if (!is_identifier(function_name))
    throw dsl::UserError(fmt::format("'{}' cannot name an update function: use an identifier that is not "
                                     "a .synk keyword (such as 'train_step')", function_name));
  if (module.find_function(function_name) != nullptr)
    throw dsl::UserError(fmt::format("{}: the module already has a function '{}'", what, function_name));
  if (parameters.empty()) throw dsl::UserError(fmt::format("{}: no parameters to update", what));

  UpdateFunctionInfo result;
  result.function = function_name;
  std::optional<ir::DType> grad_dtype;
  for (const std::string& name : parameters) {
    const int64_t index = module.find_shared(name);
    if (index < 0)
      throw dsl::UserError(fmt::format("{}: '{}' is not a shared variable of the module", what, name));
    for (int64_t seen : result.parameters)
      if (seen == index) throw dsl::UserError(fmt::format("{}: parameter '{}' is listed twice", what, name));
    const ir::TensorType& t = module.shareds[size_t(index)].type;
    if (!ir::is_float(t.dtype) || ir::is_reserved(t.dtype))
      throw dsl::UserError(fmt::format("{}: parameter '{}' has type {}; parameters must be f32 or f64",
                                       what, name, ir::type_str(t)));
    const dsl::ElementCount count = dsl::element_count(t.shape);
    if (!count.symbols.empty())
      throw dsl::UserError(fmt::format("{}: parameter '{}' has the symbolic shape {}; parameters need static shapes",
                                       what, name, ir::shape_str(t.shape)));
    result.parameters.push_back(index);
    result.gradient_size += count.fixed;
    grad_dtype = grad_dtype ? dsl::promote(*grad_dtype, t.dtype) : t.dtype;
  }

  // Reserve every new shared-variable name before adding any, so a clash changes nothing.
  std::set<std::string> new_names;
  auto reserve = [&](const std::string& name) {
    if (module.find_shared(name) >= 0 || module.find_function(name) != nullptr || !new_names.insert(name).second)
      throw dsl::UserError(fmt::format("{}: its state variable '{}' would clash with an existing name",
                                       what, name));
  };
  for (const std::string& name : parameters)
    for (const char* slot : ri.slots) reserve(fmt::format("{}_{}", name, slot));
  if (ri.step_counter) reserve(function_name + "_t");

  ir::Function fn;
  fn.name = function_name;
  fn.loc = loc;
  fn.params.push_back(ir::Param{"grad", ir::Role::Broadcast,
                                ir::TensorType{*grad_dtype, {ir::Dim::fixed(result.gradient_size)}}, loc});
  NodeWriter w(fn, loc);
  auto add_shared = [&](const std::string& name, const ir::TensorType& type) {
    module.shareds.push_back(ir::SharedVar{name, type, ir::InitZeros{}, false, loc});
    return int64_t(module.shareds.size() - 1);
  };
  auto update = [&](int64_t shared, NodeId value) {
    fn.updates.push_back(ir::Update{shared, value, ir::ReduceMode::Avg, loc});
  };

  const NodeId flat_grad = w.input(0);
  std::optional<NodeId> step_size_in_grad_dtype;
  if (ri.step_counter) {
    const ir::TensorType counter_type{*grad_dtype, {}};
    result.step_counter = add_shared(function_name + "_t", counter_type);
    const NodeId t = w.binary_scalar(Op::Add, w.shared_read(result.step_counter, counter_type), 1);
    update(result.step_counter, t);
    step_size_in_grad_dtype = step_size(w, rule, t);
  }

  int64_t offset = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int64_t index = result.parameters[i];
    const ir::TensorType type = module.shareds[size_t(index)].type;
    const int64_t size = dsl::element_count(type.shape).fixed;
    const NodeId g = w.reshape(w.cast(w.slice(flat_grad, 0, offset, offset + size), type.dtype), type.shape);
    offset += size;
    std::vector<int64_t> slot_vars;
    std::vector<NodeId> slot_values;
    for (const char* slot : ri.slots) {
      slot_vars.push_back(add_shared(fmt::format("{}_{}", parameters[i], slot), type));
      slot_values.push_back(w.shared_read(slot_vars.back(), type));
    }
    std::optional<NodeId> step;
    if (step_size_in_grad_dtype) step = w.cast(*step_size_in_grad_dtype, type.dtype);
    const Step next = apply_rule(w, rule, w.shared_read(index, type), g, slot_values, step);
    update(index, next.param);
    for (size_t k = 0; k < slot_vars.size(); ++k) update(slot_vars[k], next.slots[k]);
    result.state.insert(result.state.end(), slot_vars.begin(), slot_vars.end());
  }
  module.functions.push_back(std::move(fn));
  return result;
}

}  // namespace synk::compiler
