// The optimizer rules' table, constructors and checks (sema_optimizer.h).
#include "dsl/sema_optimizer.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/diagnostics.h"

namespace synk::dsl {

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
      {UpdateRuleKind::AdamW, "adamw", {"m", "v"}, true, {"lr", "beta1", "beta2", "epsilon", "weight_decay"}, false},
  };
  return table;
}

const RuleInfo& info(UpdateRuleKind kind) {
  for (const RuleInfo& r : rules())
    if (r.kind == kind) return r;
  internal_error("unknown update rule kind");
}

bool uses(const RuleInfo& r, std::string_view keyword) {
  if (keyword == "clip_norm") return true;   // every rule
  for (const char* k : r.keywords)
    if (keyword == k) return true;
  return false;
}

}  // namespace

const char* update_rule_name(UpdateRuleKind kind) { return info(kind).name; }

std::optional<UpdateRuleKind> update_rule_from_name(std::string_view name) {
  for (const RuleInfo& r : rules())
    if (name == r.name) return r.kind;
  return std::nullopt;
}

UpdateRule UpdateRule::sgd(double learning_rate) {
  return {.kind = UpdateRuleKind::Sgd, .learning_rate = learning_rate, .clip_norm = std::nullopt};
}

UpdateRule UpdateRule::with_momentum(double learning_rate, double momentum) {
  return {.kind = UpdateRuleKind::Momentum, .learning_rate = learning_rate, .momentum = momentum,
          .clip_norm = std::nullopt};
}

UpdateRule UpdateRule::nesterov(double learning_rate, double momentum) {
  UpdateRule r = with_momentum(learning_rate, momentum);
  r.kind = UpdateRuleKind::Nesterov;
  return r;
}

UpdateRule UpdateRule::adagrad(double learning_rate, double epsilon) {
  return {.kind = UpdateRuleKind::Adagrad, .learning_rate = learning_rate, .epsilon = epsilon,
          .clip_norm = std::nullopt};
}

UpdateRule UpdateRule::rmsprop(double learning_rate, double rho, double epsilon) {
  return {.kind = UpdateRuleKind::RMSProp, .learning_rate = learning_rate, .rho = rho, .epsilon = epsilon,
          .clip_norm = std::nullopt};
}

UpdateRule UpdateRule::adadelta(double learning_rate, double rho, double epsilon) {
  UpdateRule r = rmsprop(learning_rate, rho, epsilon);
  r.kind = UpdateRuleKind::Adadelta;
  return r;
}

UpdateRule UpdateRule::adam(double learning_rate, double beta1, double beta2, double epsilon) {
  return {.kind = UpdateRuleKind::Adam, .learning_rate = learning_rate, .epsilon = epsilon, .beta1 = beta1,
          .beta2 = beta2, .clip_norm = std::nullopt};
}

UpdateRule UpdateRule::adamax(double learning_rate, double beta1, double beta2, double epsilon) {
  UpdateRule r = adam(learning_rate, beta1, beta2, epsilon);
  r.kind = UpdateRuleKind::Adamax;
  return r;
}

UpdateRule UpdateRule::adamw(double learning_rate, double beta1, double beta2, double epsilon, double weight_decay) {
  UpdateRule r = adam(learning_rate, beta1, beta2, epsilon);
  r.kind = UpdateRuleKind::AdamW;
  r.weight_decay = weight_decay;
  return r;
}

UpdateRule make_update_rule(std::string_view name,
                            std::span<const std::pair<std::string, double>> hyper_parameters) {
  auto kind = update_rule_from_name(name);
  if (!kind) {
    std::vector<std::string> names;
    for (const RuleInfo& r : rules()) names.push_back(r.name);
    throw UserError(fmt::format("unknown update rule '{}'{} (known rules: {})", name, did_you_mean(name, names),
                                fmt::join(names, ", ")));
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
    case UpdateRuleKind::AdamW: rule = UpdateRule::adamw(); break;
  }
  bool have_lr = false;
  std::set<std::string> seen;
  for (const auto& [key, value] : hyper_parameters) {
    if (!seen.insert(key).second)
      throw UserError(fmt::format("update rule '{}': hyper-parameter '{}' is given twice", name, key));
    if (!uses(ri, key))
      throw UserError(fmt::format("update rule '{}' has no hyper-parameter '{}'{} (it takes: {})", name, key,
                                  did_you_mean(key, update_rule_keywords(*kind)),
                                  fmt::join(update_rule_keywords(*kind), ", ")));
    if (key == "lr") rule.learning_rate = value, have_lr = true;
    else if (key == "momentum") rule.momentum = value;
    else if (key == "rho") rule.rho = value;
    else if (key == "epsilon") rule.epsilon = value;
    else if (key == "beta1") rule.beta1 = value;
    else if (key == "beta2") rule.beta2 = value;
    else if (key == "weight_decay") rule.weight_decay = value;
    else if (key == "clip_norm") rule.clip_norm = value;
  }
  if (ri.needs_learning_rate && !have_lr)
    throw UserError(fmt::format("update rule '{}' needs a learning rate (lr=...)", name));
  check_update_rule(rule);
  return rule;
}

HyperRange hyper_parameter_range(std::string_view keyword) {
  if (keyword == "lr") return HyperRange::Positive;
  if (keyword == "momentum" || keyword == "rho" || keyword == "beta1" || keyword == "beta2") return HyperRange::Unit;
  if (keyword == "epsilon" || keyword == "weight_decay" || keyword == "clip_norm") return HyperRange::NonNegative;
  internal_error(fmt::format("hyper_parameter_range: unknown hyper-parameter '{}'", keyword));
}

void check_update_rule(const UpdateRule& rule) {
  const RuleInfo& ri = info(rule.kind);
  for (const auto& [keyword, value] : hyper_parameter_values(rule)) {
    const char* range = nullptr;
    switch (hyper_parameter_range(keyword)) {
      case HyperRange::Positive: if (!(value > 0)) range = "a finite number > 0"; break;
      case HyperRange::Unit: if (!(value >= 0 && value < 1)) range = "in [0, 1)"; break;
      case HyperRange::NonNegative: if (!(value >= 0)) range = "a finite number >= 0"; break;
    }
    if (!range && !std::isfinite(value)) range = hyper_parameter_range(keyword) == HyperRange::Positive
                                                     ? "a finite number > 0" : "a finite number >= 0";
    if (range)
      throw UserError(fmt::format("update rule '{}': {} is {}, but it must be {}", ri.name,
                                  keyword == "lr" ? std::string("the learning rate") : keyword, value, range));
  }
}

std::optional<std::string> hyper_parameter_error(std::string_view rule, const std::string& keyword, double value) {
  std::vector<std::pair<std::string, double>> one = {{keyword, value}};
  if (auto kind = update_rule_from_name(rule); kind && info(*kind).needs_learning_rate && keyword != "lr")
    one.emplace_back("lr", 1.0);
  try {
    make_update_rule(rule, one);
    return std::nullopt;
  } catch (const UserError& e) {
    return std::string(e.what());
  }
}

std::vector<std::string> names_added_by(const ir::Optimizer& optimizer, const std::vector<ir::SharedVar>& shareds) {
  const RuleInfo& ri = info(*update_rule_from_name(optimizer.rule));
  std::vector<std::string> names = {optimizer.update_function()};
  if (ri.step_counter) names.push_back(optimizer.update_function() + "_t");
  for (int64_t p : optimizer.parameters)
    for (const char* slot : ri.slots) names.push_back(fmt::format("{}_{}", shareds.at(size_t(p)).name, slot));
  for (const auto& [keyword, variable] : hyper_parameter_variables(optimizer)) names.push_back(variable);
  return names;
}

std::vector<std::pair<std::string, std::string>> hyper_parameter_variables(const ir::Optimizer& optimizer) {
  const RuleInfo& ri = info(*update_rule_from_name(optimizer.rule));
  std::vector<std::pair<std::string, std::string>> result;
  for (const char* keyword : ri.keywords) result.emplace_back(keyword, fmt::format("{}_{}", optimizer.name, keyword));
  for (const auto& [keyword, value] : optimizer.hyper_parameters)
    if (keyword == "clip_norm") result.emplace_back(keyword, optimizer.name + "_clip_norm");
  return result;
}

std::vector<std::pair<std::string, double>> hyper_parameter_values(const UpdateRule& rule) {
  std::vector<std::pair<std::string, double>> result;
  for (const char* keyword : info(rule.kind).keywords) {
    const std::string_view k = keyword;
    const double value = k == "lr" ? rule.learning_rate : k == "momentum" ? rule.momentum : k == "rho" ? rule.rho
                       : k == "epsilon" ? rule.epsilon : k == "beta1" ? rule.beta1 : k == "beta2" ? rule.beta2
                       : rule.weight_decay;
    result.emplace_back(keyword, value);
  }
  if (rule.clip_norm) result.emplace_back("clip_norm", *rule.clip_norm);
  return result;
}

std::vector<std::string> update_rule_slots(UpdateRuleKind kind) {
  const RuleInfo& ri = info(kind);
  return {ri.slots.begin(), ri.slots.end()};
}

bool update_rule_has_step_counter(UpdateRuleKind kind) { return info(kind).step_counter; }

std::vector<std::string> update_rule_keywords(UpdateRuleKind kind) {
  const RuleInfo& ri = info(kind);
  std::vector<std::string> keywords(ri.keywords.begin(), ri.keywords.end());
  keywords.push_back("clip_norm");
  return keywords;
}

std::vector<std::string> update_rule_names() {
  std::vector<std::string> names;
  for (const RuleInfo& r : rules()) names.push_back(r.name);
  return names;
}

}  // namespace synk::dsl
