// Training steps declared in .synk (docs/training.md, "Training steps in .synk"): the stage that
// turns each used `optimizer` into its update function. Sema has already made every training
// function write its flat gradient into the optimizer's shared variable `<opt>_grads` and
// recorded the step (ir::Module::optimizers, train_steps); expand_training_steps adds, per
// optimizer, `fn <opt>_update()` (add_update_function with the optimizer's rule, its gradient
// read from `<opt>_grads` instead of an input) and the optimizer's state variables. The JIT API
// and `synkc --emit=ir-grad` and later stages run it right after the front end.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "compiler/grad/update_rules.h"
#include "ir/ir.h"

namespace synk::compiler {

// Adds every used optimizer's update function and state (idempotent: an optimizer whose update
// function exists already is left as it is). synk::UserError when a generated name is taken.
void expand_training_steps(ir::Module& module);

// True when the module has an optimizer whose update function has been added.
bool training_steps_expanded(const ir::Module& module);

// Replaces the rule and hyper-parameters of optimizer `name` (before expansion, e.g. from a
// command line), checked like a declaration. synk::UserError for an unknown optimizer, rule,
// keyword or a bad value.
void set_optimizer(ir::Module& module, const std::string& name, const std::string& rule,
                   const std::vector<std::pair<std::string, double>>& hyper_parameters);

// Makes input `param` of `function` read shared variable `shared` (same type) instead, so
// that an update function reads the all-reduced gradient from the variable. synk::UserError on a
// mismatch or an unknown name.
void read_input_from_shared(ir::Module& module, const std::string& function, const std::string& param,
                            const std::string& shared);

}  // namespace synk::compiler
