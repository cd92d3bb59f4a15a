// Learning-rate schedules for synk::TrainStep::set_schedule (docs/training.md, "Hyper-parameters at
// run time"): a Schedule maps a step index (0 for a step's first call) to a learning rate, and a
// step with a schedule sets its optimizer's `lr` to schedule(step_index) on every rank before each
// update. Small values, copied freely; every constructor checks its arguments (UsageError naming
// the one that is wrong).
//
//   step.set_schedule(synk::Schedule::cosine(0.1, 1000, 0.001).with_warmup(100));
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace synk {

class Schedule {
 public:
  // lr on every step.
  static Schedule constant(double lr);
  // lr * gamma^floor(step / every): multiplied by gamma every `every` steps (PyTorch's StepLR).
  static Schedule step_decay(double lr, int64_t every, double gamma);
  // min_lr + (lr - min_lr) * (1 + cos(pi * min(step, steps) / steps)) / 2: from lr down to min_lr
  // over `steps` steps, then min_lr (PyTorch's CosineAnnealingLR without restarts).
  static Schedule cosine(double lr, int64_t steps, double min_lr = 0);

  // This schedule after a linear warm-up of `steps` steps: step i < steps gets
  // (*this)(0) * (i + 1) / steps, step i >= steps gets (*this)(i - steps).
  Schedule with_warmup(int64_t steps) const;

  // The learning rate of step `step` (>= 0, else UsageError).
  double operator()(int64_t step) const;
  // "cosine(lr=0.1, steps=1000, min_lr=0.001) after warmup(100)", for messages and repr.
  std::string describe() const;

 private:
  enum class Kind : uint8_t { Constant, StepDecay, Cosine, Warmup };
  Schedule() = default;
  Schedule(Kind kind, double lr, int64_t steps, double gamma, double min_lr)
      : kind_(kind), lr_(lr), gamma_(gamma), min_lr_(min_lr), steps_(steps) {}
  Kind kind_ = Kind::Constant;
  double lr_ = 0, gamma_ = 1, min_lr_ = 0;
  int64_t steps_ = 1;
  std::shared_ptr<const Schedule> inner_;   // Warmup: the schedule after the warm-up
};

}  // namespace synk
