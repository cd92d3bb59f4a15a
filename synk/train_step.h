// synk::TrainStep: one data-parallel training step as one call (docs/training.md). It holds three
// runtime handles: the gradient function (which writes this rank's flat gradient into a shared
// variable), that variable, and the update function (no inputs; reads the averaged gradient from
// the variable and updates the parameters). A call runs the gradient function on every rank,
// one reduction of the gradient variable weighted by each rank's rows (in num_packs flat buffers
// when asked), and the update function, and returns the gradient function's outputs. When every
// rank held as many rows this is exactly what the three separate calls (gradient,
// all_reduce(avg), update) do, bit for bit. The runtime knows nothing of .synk: jit::Module::train_step("train")
// finds the three handles of a step declared with `minimize` (synk/jit.h).
//
//   synk::TrainStep step = mod.train_step("train");       // before or after synk::fork()
//   synk::Outputs out = step({images, labels, scale}, {.batch = idx});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "synk/core.h"

namespace synk {

class TrainStep {
 public:
  TrainStep() = default;
  // UsageError when a handle is empty, `update` takes inputs, or `gradient` does not update
  // `gradient_var`. `name` names the step in every message.
  // num_packs > 0: the gradient travels in that many flat buffers (CollectiveOptions::num_packs);
  // 0: the collectives' default.
  TrainStep(std::string name, Function gradient, Var gradient_var, Function update, int64_t num_packs = 0);

  // Gradient call (with `options`), reduction of the gradient variable, update call. The
  // reduction weights each rank by its rows (Outputs::rank_weights): all_reduce(avg) when every
  // rank held as many rows, all_reduce_weighted otherwise, so a rank without rows contributes
  // nothing and `minimize mean(...)` is the gradient of the mean over all the step's rows. A step
  // that selected no rows at all changes nothing (no reduction, no update).
  // Errors are those of the three calls, with the step and the part that failed named first.
  Outputs operator()(const std::vector<Data>& inputs, const CallOptions& options = {}) const;

  // The middle part alone, for callers that time or interleave the three parts: reduces the
  // gradient variable as operator() does, weighted by `gradient_outputs.rank_weights()` (the
  // outputs of the gradient call just made). False when that call selected no rows: then nothing
  // was reduced and the update must be skipped.
  bool reduce_gradient(const Outputs& gradient_outputs) const;

  const std::string& name() const { return name_; }
  const Function& gradient() const { return gradient_; }
  const Var& gradient_var() const { return gradient_var_; }
  const Function& update() const { return update_; }
  int64_t num_packs() const { return num_packs_; }
  void set_num_packs(int64_t num_packs);   // UsageError when negative
  bool valid() const { return gradient_var_.valid(); }

 private:
  std::string name_;
  Function gradient_;
  Var gradient_var_;
  Function update_;
  int64_t num_packs_ = 0;
};

}  // namespace synk
