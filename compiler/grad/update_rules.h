// Optimizer update rules as IR functions: the third step of the data-parallel training pattern
// (gradient function -> one all_reduce(avg) of one flat gradient vector -> update function).
// add_update_function() adds to a module the optimizer's state (zero-initialized shared
// variables) and a function taking the flat gradient as ONE broadcast input; the function
// slices and reshapes it per parameter and updates every parameter and state variable, so every
// rank applies the same update to the same averaged gradient. Formulas and defaults follow
// Lasagne's `lasagne.updates` (the library the seeds' Synkhronos extension adapts); they are
// written out in docs/training.md (adamw: PyTorch's AdamW). Hyper-parameters are f64 scalar
// shared variables the update function reads, so a runtime can change them between steps.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "dsl/sema_optimizer.h"

namespace synk::compiler {

// The rules themselves (names, hyper-parameters, checks) live with the front end, which checks
// `optimizer` declarations with them (dsl/sema_optimizer.h).
using dsl::UpdateRule;
using dsl::UpdateRuleKind;
using dsl::check_update_rule;
using dsl::make_update_rule;
using dsl::update_rule_from_name;
using dsl::update_rule_name;

// What add_update_function() added.
struct UpdateFunctionInfo {
  std::string function;                 // the update function's name
  int64_t gradient_size = 0;            // P, the length of its `grad` input
  std::vector<int64_t> parameters;      // shared-variable indices, in gradient order
  std::vector<int64_t> state;           // the optimizer-state shared variables it added
  int64_t step_counter = -1;            // adam, adamax, adamw: the shared step count t (else -1)
  // The hyper-parameter variables it added, (keyword, shared index), in dsl::hyper_parameter_values
  // order: f64 scalars initialised to the rule's values, read (never written) by the function.
  std::vector<std::pair<std::string, int64_t>> hyper;
};

// Adds `fn <function_name>(bcast grad: D[P])` to `module`, where P is the total size of the
// parameters (shared variables named in `parameters`, in the order of the flat gradient that
// `grad(loss, p1, ..., pk)` produces) and D the promoted dtype of the parameters. It reads each
// parameter's slice of `grad`, reshapes it to the parameter's shape and updates the parameter and
// its state. State variables are named `<param>_<slot>` (slots: velocity; accu; accu and
// delta_accu; m and v; m and u) and the step counter `<function_name>_t`, all zeros-initialized
// with the parameter's type (the counter: a D scalar). Each hyper-parameter is an f64 scalar
// variable `<hyper_prefix>_<keyword>` (hyper_prefix empty: the function's name) initialised to
// the rule's value, so that it can change between calls without recompiling; with `clip_norm`
// the flat gradient is first scaled to that global norm when larger.
// UserError for an unknown, repeated, non-float or symbolically shaped parameter, an existing
// function of that name, a state name that is already taken, or a bad hyper-parameter.
UpdateFunctionInfo add_update_function(ir::Module& module, const std::string& function_name,
                                       std::span<const std::string> parameters,
                                       const UpdateRule& rule, SourceLoc loc = {},
                                       const std::string& hyper_prefix = {});

}  // namespace synk::compiler
