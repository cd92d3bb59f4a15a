// The Fashion-MNIST model as the training loop sees it: mlp.synk compiled with the JIT. The model
// declares its training steps (`minimize ... using opt`), so the compiler adds the optimizer's
// update function and state, and a step is one call of a synk::TrainStep: the gradient call, one
// all_reduce of the flat gradient `opt_grads` weighted by each rank's rows, the update call.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "synk/jit.h"

namespace fashion_mnist {

// An update rule by name with keyword hyper-parameters (compiler::make_update_rule's terms). An
// empty rule keeps the one the model declares, with its hyper-parameters, and changes only these.
struct OptimizerChoice {
  std::string rule;
  std::vector<std::pair<std::string, double>> hyper_parameters;
};

struct Model {
  synk::jit::Module module;
  synk::TrainStep train;          // (images u8[n, 784], labels i64[n]) -> loss_sum
  synk::TrainStep train_device;   // () -> the same on the rows batch_s picks from train_images/labels
  synk::Function evaluate;        // (images, labels) -> loss, accuracy
  synk::Var train_images, train_labels;   // sliceable: each rank's share of the training set
  std::vector<std::string> parameters;    // in the order of the flat gradient
  std::vector<std::string> statistics;    // other shared variables `train` updates (batch norm's running statistics)
  std::string optimizer;          // the rule in use, as "momentum(lr=0.05, momentum=0.9)"
};

// Compiles `synk_path` (mlp.synk); `optimizer`, when given, replaces the rule declared there.
// Call before synk::fork() so that workers inherit the compiled functions (after it works too,
// they are then rebuilt in workers). synk::UserError for a bad model or optimizer.
Model build_model(const std::string& synk_path, const std::optional<OptimizerChoice>& optimizer = std::nullopt);

}  // namespace fashion_mnist
