// Optimizer update rules as IR (update_rules.h). Each rule is written once, as ordinary IR ops
// over one parameter, its gradient slice and its state, so the compiled update fuses into a few
// pointwise kernels like any other code.
#include "compiler/grad/update_rules.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "compiler/grad/node_writer.h"
#include "dsl/lexer.h"
#include "ir/type_infer.h"

namespace synk::compiler {

using grad_detail::NodeWriter;
using ir::NodeId;
using ir::Op;

namespace {

// The new value of one parameter and of its state slots (in dsl::update_rule_slots order).
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
  synk::internal_error("unknown update rule kind");
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
  synk::SourceFile file("<name>", name);
  synk::DiagnosticEngine diags(file);
  const std::vector<dsl::Token> tokens = dsl::lex_all(file, diags);
  return !diags.has_errors() && tokens.size() == 2 && tokens[0].kind == dsl::TokenKind::Identifier &&
         tokens[1].kind == dsl::TokenKind::EndOfFile;
}

}  // namespace

UpdateFunctionInfo add_update_function(ir::Module& module, const std::string& function_name,
                                       std::span<const std::string> parameters,
                                       const UpdateRule& rule, SourceLoc loc) {
  check_update_rule(rule);
  const std::vector<std::string> slots = dsl::update_rule_slots(rule.kind);
  const bool step_counter = dsl::update_rule_has_step_counter(rule.kind);
  const std::string what = fmt::format("update function '{}' ({})", function_name, update_rule_name(rule.kind));
  if (!is_identifier(function_name))
    throw synk::UserError(fmt::format("'{}' cannot name an update function: use an identifier that is not "
                                     "a .synk keyword (such as 'train_step')", function_name));
  if (module.find_function(function_name) != nullptr)
    throw synk::UserError(fmt::format("{}: the module already has a function '{}'", what, function_name));
  if (parameters.empty()) throw synk::UserError(fmt::format("{}: no parameters to update", what));

  UpdateFunctionInfo result;
  result.function = function_name;
  std::optional<ir::DType> grad_dtype;
  for (const std::string& name : parameters) {
    const int64_t index = module.find_shared(name);
    if (index < 0)
      throw synk::UserError(fmt::format("{}: '{}' is not a shared variable of the module", what, name));
    for (int64_t seen : result.parameters)
      if (seen == index) throw synk::UserError(fmt::format("{}: parameter '{}' is listed twice", what, name));
    const ir::TensorType& t = module.shareds[size_t(index)].type;
    if (!ir::is_float(t.dtype) || ir::is_reserved(t.dtype))
      throw synk::UserError(fmt::format("{}: parameter '{}' has type {}; parameters must be f32 or f64",
                                       what, name, ir::type_str(t)));
    const dsl::ElementCount count = dsl::element_count(t.shape);
    if (!count.symbols.empty())
      throw synk::UserError(fmt::format("{}: parameter '{}' has the symbolic shape {}; parameters need static shapes",
                                       what, name, ir::shape_str(t.shape)));
    result.parameters.push_back(index);
    result.gradient_size += count.fixed;
    grad_dtype = grad_dtype ? dsl::promote(*grad_dtype, t.dtype) : t.dtype;
  }

  // Reserve every new shared-variable name before adding any, so a clash changes nothing.
  std::set<std::string> new_names;
  auto reserve = [&](const std::string& name) {
    if (module.find_shared(name) >= 0 || module.find_function(name) != nullptr || !new_names.insert(name).second)
      throw synk::UserError(fmt::format("{}: its state variable '{}' would clash with an existing name",
                                       what, name));
  };
  for (const std::string& name : parameters)
    for (const std::string& slot : slots) reserve(fmt::format("{}_{}", name, slot));
  if (step_counter) reserve(function_name + "_t");

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
  if (step_counter) {
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
    for (const std::string& slot : slots) {
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
