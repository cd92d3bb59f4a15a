// The Fashion-MNIST model as the training loop sees it: mlp.synk compiled with the JIT, plus an
// update function generated for the chosen optimizer (compiler/update_rules.h) and rewired to
// read the all-reduced gradient from the shared variable `grads` instead of an input, so a step
// is one gradient call, one all_reduce(avg) of `grads`, and one update call with no inputs.
#pragma once

#include <string>
#include <vector>

#include "compiler/synk_jit.h"
#include "compiler/update_rules.h"

namespace fashion_mnist {

struct Model {
  synk::jit::Module module;
  synk::Function gradient;   // (images u8[n, 784], labels i64[n], scale f32) -> loss_sum; updates grads
  synk::Function gradient_device;   // (scale f32) -> the same on the rows batch_s picks from train_images/labels
  synk::Function update;     // () -> updates every parameter and the optimizer's state from grads
  synk::Function evaluate;   // (images, labels) -> loss, accuracy
  synk::Var grads;           // the flat gradient, all-reduced between gradient and update
  synk::Var train_images, train_labels;   // sliceable: each rank's share of the training set
  std::vector<std::string> parameters;   // in the order of the flat gradient
};

// Compiles `synk_path` (mlp.synk) with `rule` as the optimizer. Call before synk::fork() so that
// workers inherit the compiled functions (after it works too, they are then rebuilt in workers).
Model build_model(const std::string& synk_path, const synk::compiler::UpdateRule& rule);

// Makes `param` of function `function` read shared variable `shared` (same type) instead: the
// update rule's `grad` input becomes the all-reduced `grads`. dsl::UserError on a mismatch.
void read_input_from_shared(synk::ir::Module& module, const std::string& function, const std::string& param,
                            const std::string& shared);

}  // namespace fashion_mnist
