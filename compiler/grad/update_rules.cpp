// Optimizer update rules as IR (update_rules.h). Each rule is written once, as ordinary IR ops
// over one parameter, its gradient slice and its state, so the compiled update fuses into a few
// pointwise kernels like any other code.
#include "compiler/grad/update_rules.h"

#include <cmath>
#include <map>
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

// The hyper-parameters as the update function reads them: f64 scalars (shared reads of the
// `<prefix>_<keyword>` variables), by keyword.
using Hyper = std::map<std::string, NodeId>;

// The new value of one parameter and of its state slots (in dsl::update_rule_slots order).
struct Step {
  NodeId param;
  std::vector<NodeId> slots;
};

// Per-step scalars shared by every parameter: adam's a_t or adamax's lr / (1 - beta1^t) in the
// gradient's dtype; adamw's lr / (1 - beta1^t) and sqrt(1 - beta2^t) in f64.
struct StepScalars {
  std::optional<NodeId> step_size;
  std::optional<NodeId> bias2_sqrt;
};

// Every formula computes each scalar factor exactly as the constant it replaces was computed
// (in f64, e.g. `1 - rho`, then rounded once to the parameter's dtype), so an update reads the
// same bits from variables as it used to fold from constants.
Step apply_rule(NodeWriter& w, const UpdateRule& r, const Hyper& h, NodeId p, NodeId g, const std::vector<NodeId>& s,
                const StepScalars& scalars) {
  const ir::DType dtype = w.type(p).dtype;
  auto in = [&](NodeId f64) { return w.cast(f64, dtype); };
  auto one_minus = [&](const char* keyword) { return w.scalar_binary(Op::Sub, 1, h.at(keyword)); };
  auto scale = [&](NodeId c, NodeId x) { return w.mul(in(c), x); };
  auto plus = [&](NodeId x, NodeId c) { return w.add(x, in(c)); };
  auto sqrt = [&](NodeId x) { return w.unary(Op::Sqrt, x); };
  auto square = [&](NodeId x) { return w.mul(x, x); };
  // rho * a + (1 - rho) * g^2, Lasagne's running average of squares.
  auto running_mean = [&](const char* rho, NodeId a, NodeId x) {
    return w.add(scale(h.at(rho), a), scale(one_minus(rho), square(x)));
  };
  auto first_moment = [&] { return w.add(scale(h.at("beta1"), s[0]), scale(one_minus("beta1"), g)); };
  const NodeId lr_g = scale(h.at("lr"), g);

  switch (r.kind) {
    case UpdateRuleKind::Sgd:
      return {w.sub(p, lr_g), {}};
    case UpdateRuleKind::Momentum: {
      const NodeId v = w.sub(scale(h.at("momentum"), s[0]), lr_g);
      return {w.add(p, v), {v}};
    }
    case UpdateRuleKind::Nesterov: {
      const NodeId v = w.sub(scale(h.at("momentum"), s[0]), lr_g);
      return {w.sub(w.add(p, scale(h.at("momentum"), v)), lr_g), {v}};
    }
    case UpdateRuleKind::Adagrad: {
      const NodeId accu = w.add(s[0], square(g));
      return {w.sub(p, w.div(lr_g, sqrt(plus(accu, h.at("epsilon"))))), {accu}};
    }
    case UpdateRuleKind::RMSProp: {
      const NodeId accu = running_mean("rho", s[0], g);
      return {w.sub(p, w.div(lr_g, sqrt(plus(accu, h.at("epsilon"))))), {accu}};
    }
    case UpdateRuleKind::Adadelta: {
      const NodeId eps = h.at("epsilon");
      const NodeId accu = running_mean("rho", s[0], g);
      const NodeId update = w.div(w.mul(g, sqrt(plus(s[1], eps))), sqrt(plus(accu, eps)));
      const NodeId delta_accu = running_mean("rho", s[1], update);
      return {w.sub(p, scale(h.at("lr"), update)), {accu, delta_accu}};
    }
    case UpdateRuleKind::Adam: {
      const NodeId m = first_moment();
      const NodeId v = running_mean("beta2", s[1], g);
      const NodeId step = w.div(w.mul(w.cast(*scalars.step_size, dtype), m), plus(sqrt(v), h.at("epsilon")));
      return {w.sub(p, step), {m, v}};
    }
    case UpdateRuleKind::Adamax: {
      const NodeId m = first_moment();
      const NodeId u = w.binary(Op::Maximum, scale(h.at("beta2"), s[1]), w.unary(Op::Abs, g));
      const NodeId step = w.div(w.mul(w.cast(*scalars.step_size, dtype), m), plus(u, h.at("epsilon")));
      return {w.sub(p, step), {m, u}};
    }
    case UpdateRuleKind::AdamW: {
      // PyTorch's AdamW: p *= 1 - lr * weight_decay, then the bias-corrected Adam step with
      // epsilon added to sqrt(v) / sqrt(1 - beta2^t).
      const NodeId decay = w.scalar_binary(Op::Sub, 1, w.mul(h.at("lr"), h.at("weight_decay")));
      const NodeId decayed = scale(decay, p);
      const NodeId m = first_moment();
      const NodeId v = running_mean("beta2", s[1], g);
      const NodeId denom = plus(w.div(sqrt(v), in(*scalars.bias2_sqrt)), h.at("epsilon"));
      return {w.sub(decayed, w.mul(in(*scalars.step_size), w.div(m, denom))), {m, v}};
    }
  }
  synk::internal_error("unknown update rule kind");
}

// The per-step scalars of the rules with a step counter `t` (a scalar of the gradient's dtype).
StepScalars step_scalars(NodeWriter& w, const UpdateRule& r, const Hyper& h, NodeId t) {
  StepScalars result;
  const ir::DType dtype = w.type(t).dtype;
  if (r.kind == UpdateRuleKind::AdamW) {
    const NodeId t64 = w.cast(t, ir::DType::F64);
    auto one_minus_power = [&](const char* beta) {
      return w.scalar_binary(Op::Sub, 1, w.binary(Op::Pow, h.at(beta), t64));
    };
    result.step_size = w.div(h.at("lr"), one_minus_power("beta1"));
    result.bias2_sqrt = w.unary(Op::Sqrt, one_minus_power("beta2"));
    return result;
  }
  // Adam's a_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); adamax's a_t = lr / (1 - beta1^t), in
  // the counter's dtype.
  auto one_minus_power = [&](const char* beta) {
    return w.scalar_binary(Op::Sub, 1, w.binary(Op::Pow, w.cast(h.at(beta), dtype), t));
  };
  NodeId numerator = w.cast(h.at("lr"), dtype);
  if (r.kind == UpdateRuleKind::Adam) numerator = w.mul(numerator, w.unary(Op::Sqrt, one_minus_power("beta2")));
  result.step_size = w.div(numerator, one_minus_power("beta1"));
  return result;
}

// The flat gradient scaled by min(1, clip_norm / (||g||_2 + 1e-6)) when clip_norm > 0 (PyTorch's
// clip_grad_norm_), the norm and the factor computed in f64; a factor of 1 leaves g's bits.
NodeId clip_gradient(NodeWriter& w, NodeId g, NodeId clip_norm) {
  const NodeId g64 = w.cast(g, ir::DType::F64);
  const NodeId norm = w.unary(Op::Sqrt, w.reduce(Op::ReduceSum, w.mul(g64, g64), {0}, false));
  const NodeId factor = w.binary(Op::Minimum, w.constant(1, ir::DType::F64),
                                 w.div(clip_norm, w.binary_scalar(Op::Add, norm, 1e-6)));
  const NodeId on = w.binary(Op::Gt, clip_norm, w.constant(0, ir::DType::F64));
  const NodeId scale = w.where(on, factor, w.constant(1, ir::DType::F64));
  return w.mul(g, w.cast(scale, w.type(g).dtype));
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
                                       const UpdateRule& rule, SourceLoc loc, const std::string& hyper_prefix) {
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
      throw synk::UserError(fmt::format("{}: its state or hyper-parameter variable '{}' would clash with an existing name",
                                       what, name));
  };
  for (const std::string& name : parameters)
    for (const std::string& slot : slots) reserve(fmt::format("{}_{}", name, slot));
  if (step_counter) reserve(function_name + "_t");
  const std::string prefix = hyper_prefix.empty() ? function_name : hyper_prefix;
  const std::vector<std::pair<std::string, double>> hyper_values = dsl::hyper_parameter_values(rule);
  for (const auto& [keyword, value] : hyper_values) {
    const std::string name = fmt::format("{}_{}", prefix, keyword);
    if (!is_identifier(name))
      throw synk::UserError(fmt::format("{}: '{}' cannot name its hyper-parameter variable (prefix '{}'): use a "
                                       "prefix that makes an identifier", what, name, prefix));
    reserve(name);
  }

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

  Hyper hyper;
  const ir::TensorType scalar64{ir::DType::F64, {}};
  for (const auto& [keyword, value] : hyper_values) {
    const int64_t index = int64_t(module.shareds.size());
    module.shareds.push_back(ir::SharedVar{fmt::format("{}_{}", prefix, keyword), scalar64, ir::InitConstant{value},
                                           false, loc});
    result.hyper.emplace_back(keyword, index);
    hyper[keyword] = w.shared_read(index, scalar64);
  }
  NodeId flat_grad = w.input(0);
  if (rule.clip_norm) flat_grad = clip_gradient(w, flat_grad, hyper.at("clip_norm"));
  StepScalars scalars;
  if (step_counter) {
    const ir::TensorType counter_type{*grad_dtype, {}};
    result.step_counter = add_shared(function_name + "_t", counter_type);
    const NodeId t = w.binary_scalar(Op::Add, w.shared_read(result.step_counter, counter_type), 1);
    update(result.step_counter, t);
    scalars = step_scalars(w, rule, hyper, t);
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
    const Step next = apply_rule(w, rule, hyper, w.shared_read(index, type), g, slot_values, scalars);
    update(index, next.param);
    for (size_t k = 0; k < slot_vars.size(); ++k) update(slot_vars[k], next.slots[k]);
    result.state.insert(result.state.end(), slot_vars.begin(), slot_vars.end());
  }
  module.functions.push_back(std::move(fn));
  return result;
}

}  // namespace synk::compiler
