// Optimizer update rules as the front end knows them: the rules by name, their hyper-parameters,
// defaults and valid ranges, the state each keeps, and the run-time hyper-parameter variables
// (`<optimizer>_<keyword>`, f64 scalars the update function reads instead of constants). Sema checks an `optimizer` declaration with
// these (so a bad one is reported at its line and column); compiler/grad/update_rules.h re-exports
// them and generates the update functions (formulas in docs/training.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/ir.h"

namespace synk::dsl {

enum class UpdateRuleKind : uint8_t { Sgd, Momentum, Nesterov, Adagrad, RMSProp, Adadelta, Adam, Adamax, AdamW };

const char* update_rule_name(UpdateRuleKind kind);   // "sgd", "momentum", "nesterov", ...
std::optional<UpdateRuleKind> update_rule_from_name(std::string_view name);

// A rule and its hyper-parameters; fields a rule does not use are ignored.
struct UpdateRule {
  UpdateRuleKind kind = UpdateRuleKind::Sgd;
  double learning_rate = 0.01;
  double momentum = 0.9;     // momentum, nesterov
  double rho = 0.9;          // rmsprop, adadelta
  double epsilon = 1e-6;     // adagrad, rmsprop, adadelta, adam, adamax, adamw
  double beta1 = 0.9;        // adam, adamax, adamw
  double beta2 = 0.999;      // adam, adamax, adamw
  double weight_decay = 0.01;   // adamw (decoupled, PyTorch's AdamW)
  // Every rule: global-norm gradient clipping (PyTorch's clip_grad_norm_); nullopt: not declared,
  // so no `clip_norm` variable and no norm computed; 0: off until set at run time.
  std::optional<double> clip_norm;

  static UpdateRule sgd(double learning_rate);
  static UpdateRule with_momentum(double learning_rate, double momentum = 0.9);
  static UpdateRule nesterov(double learning_rate, double momentum = 0.9);
  static UpdateRule adagrad(double learning_rate = 0.01, double epsilon = 1e-6);
  static UpdateRule rmsprop(double learning_rate = 0.001, double rho = 0.9, double epsilon = 1e-6);
  static UpdateRule adadelta(double learning_rate = 1.0, double rho = 0.95, double epsilon = 1e-6);
  static UpdateRule adam(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                         double epsilon = 1e-8);
  static UpdateRule adamax(double learning_rate = 0.002, double beta1 = 0.9, double beta2 = 0.999,
                           double epsilon = 1e-8);
  static UpdateRule adamw(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                          double epsilon = 1e-8, double weight_decay = 0.01);
};

// A rule by name with keyword hyper-parameters (`lr`, `momentum`, `rho`, `epsilon`, `beta1`,
// `beta2`, `weight_decay`, and `clip_norm` for every rule), the others taking their defaults;
// for front ends (a `.synk` declaration, a command line). UserError for an unknown rule or keyword, a keyword the rule does not use, or a
// missing `lr` where the rule has no default (sgd, momentum, nesterov).
UpdateRule make_update_rule(std::string_view name,
                            std::span<const std::pair<std::string, double>> hyper_parameters);

// The error of one hyper-parameter `keyword = value` of rule `rule`, checked on its own (with a
// valid learning rate where the rule needs one) so that the message is about that keyword;
// nullopt when it is fine. For front ends that report each keyword (sema, the C++ builder).
std::optional<std::string> hyper_parameter_error(std::string_view rule, const std::string& keyword, double value);

// The names the expansion of an optimizer bound to its parameters adds (compiler::
// expand_training_steps): its update function, the step counter `<update function>_t` where
// the rule keeps one, then `<parameter>_<slot>` per parameter and state slot, then the
// hyper-parameter variables (hyper_parameter_variables). Front ends check that they are free.
std::vector<std::string> names_added_by(const ir::Optimizer& optimizer, const std::vector<ir::SharedVar>& shareds);

// Each hyper-parameter the update function reads at run time, as (keyword, shared-variable name
// `<optimizer>_<keyword>`): the rule's keywords (update_rule_keywords, less clip_norm), then
// `clip_norm` when the optimizer declares it. For the expansion and for the runtime's
// synk::TrainStep::set_hyper (via jit::Module::train_step and synkc's generated code).
std::vector<std::pair<std::string, std::string>> hyper_parameter_variables(const ir::Optimizer& optimizer);

// The rule's hyper-parameters that become variables, as (keyword, value), in the order above.
std::vector<std::pair<std::string, double>> hyper_parameter_values(const UpdateRule& rule);

// The valid range of a hyper-parameter (all finite): Positive (> 0: lr), Unit ([0, 1): momentum,
// rho, beta1, beta2) or NonNegative (>= 0: epsilon, weight_decay, clip_norm).
enum class HyperRange : uint8_t { Positive, Unit, NonNegative };
HyperRange hyper_parameter_range(std::string_view keyword);   // InternalError for an unknown one

// Throws UserError naming the first hyper-parameter out of range (learning rate > 0; momentum,
// rho, beta1, beta2 in [0, 1); epsilon, weight_decay, clip_norm >= 0; all finite).
void check_update_rule(const UpdateRule& rule);

// The per-parameter state slots of a rule, in order (`velocity`; `accu`; `accu`, `delta_accu`;
// `m`, `v`; `m`, `u`; adamw: `m`, `v`): add_update_function names them `<param>_<slot>`.
std::vector<std::string> update_rule_slots(UpdateRuleKind kind);
// adam, adamax and adamw keep a step counter (`<update function>_t`).
bool update_rule_has_step_counter(UpdateRuleKind kind);
// The hyper-parameter keywords a rule takes, in the order of the documentation (`clip_norm`, which
// every rule takes, last).
std::vector<std::string> update_rule_keywords(UpdateRuleKind kind);
// Every rule's name, in the order of the documentation.
std::vector<std::string> update_rule_names();

}  // namespace synk::dsl
