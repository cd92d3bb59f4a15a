// Optimizer update rules as IR functions: the third step of the data-parallel training pattern
// (gradient function -> one all_reduce(avg) of one flat gradient vector -> update function).
// add_update_function() adds to a module the optimizer's state (zero-initialized shared
// variables) and a function taking the flat gradient as ONE broadcast input; the function
// slices and reshapes it per parameter and updates every parameter and state variable, so every
// rank applies the same update to the same averaged gradient. Formulas and defaults follow
// Lasagne's `lasagne.updates` (the library the seeds' Synkhronos extension adapts); they are
// written out in docs/training.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dsl/ir.h"

namespace synk::compiler {

enum class UpdateRuleKind : uint8_t { Sgd, Momentum, Nesterov, Adagrad, RMSProp, Adadelta, Adam, Adamax };

const char* update_rule_name(UpdateRuleKind kind);   // "sgd", "momentum", "nesterov", ...
std::optional<UpdateRuleKind> update_rule_from_name(std::string_view name);

// A rule and its hyper-parameters; fields a rule does not use are ignored.
struct UpdateRule {
  UpdateRuleKind kind = UpdateRuleKind::Sgd;
  double learning_rate = 0.01;
  double momentum = 0.9;     // momentum, nesterov
  double rho = 0.9;          // rmsprop, adadelta
  double epsilon = 1e-6;     // adagrad, rmsprop, adadelta, adam, adamax
  double beta1 = 0.9;        // adam, adamax
  double beta2 = 0.999;      // adam, adamax

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
};

// A rule by name with keyword hyper-parameters (`lr`, `momentum`, `rho`, `epsilon`, `beta1`,
// `beta2`), the others taking their defaults; for front ends (a `.synk` declaration, a command
// line). UserError for an unknown rule or keyword, a keyword the rule does not use, or a
// missing `lr` where the rule has no default (sgd, momentum, nesterov).
UpdateRule make_update_rule(std::string_view name,
                            std::span<const std::pair<std::string, double>> hyper_parameters);

// Throws UserError naming the first hyper-parameter out of range (learning rate > 0; momentum,
// rho, beta1, beta2 in [0, 1); epsilon >= 0; all finite).
void check_update_rule(const UpdateRule& rule);

// What add_update_function() added.
struct UpdateFunctionInfo {
  std::string function;                 // the update function's name
  int64_t gradient_size = 0;            // P, the length of its `grad` input
  std::vector<int64_t> parameters;      // shared-variable indices, in gradient order
  std::vector<int64_t> state;           // the optimizer-state shared variables it added
  int64_t step_counter = -1;            // adam, adamax: the shared step count t (else -1)
};

// Adds `fn <function_name>(bcast grad: D[P])` to `module`, where P is the total size of the
// parameters (shared variables named in `parameters`, in the order of the flat gradient that
// `grad(loss, p1, ..., pk)` produces) and D the promoted dtype of the parameters. It reads each
// parameter's slice of `grad`, reshapes it to the parameter's shape and updates the parameter and
// its state. State variables are named `<param>_<slot>` (slots: velocity; accu; accu and
// delta_accu; m and v; m and u) and the step counter `<function_name>_t`, all zeros-initialized
// with the parameter's type (the counter: a D scalar).
// UserError for an unknown, repeated, non-float or symbolically shaped parameter, an existing
// function of that name, a state name that is already taken, or a bad hyper-parameter.
UpdateFunctionInfo add_update_function(ir::Module& module, const std::string& function_name,
                                       std::span<const std::string> parameters,
                                       const UpdateRule& rule, ir::SourceLoc loc = {});

}  // namespace synk::compiler
