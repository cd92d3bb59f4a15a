// Learning-rate schedules (schedule.h): the closed forms and their argument checks.
#include "synk/schedule.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "base/errors.h"

namespace synk {

namespace {

void check_lr(const char* schedule, const char* what, double value, bool zero_ok) {
  if (!std::isfinite(value) || value < 0 || (!zero_ok && value == 0))
    throw UsageError(fmt::format("synk::Schedule::{}: {} must be a finite number {}, got {}", schedule, what,
                                 zero_ok ? ">= 0" : "> 0", value));
}

void check_steps(const char* schedule, const char* what, int64_t value) {
  if (value < 1) throw UsageError(fmt::format("synk::Schedule::{}: {} must be >= 1, got {}", schedule, what, value));
}

}  // namespace

Schedule Schedule::constant(double lr) {
  check_lr("constant", "lr", lr, false);
  return Schedule(Kind::Constant, lr, 1, 1, 0);
}

Schedule Schedule::step_decay(double lr, int64_t every, double gamma) {
  check_lr("step_decay", "lr", lr, false);
  check_steps("step_decay", "every", every);
  check_lr("step_decay", "gamma", gamma, false);
  return Schedule(Kind::StepDecay, lr, every, gamma, 0);
}

Schedule Schedule::cosine(double lr, int64_t steps, double min_lr) {
  check_lr("cosine", "lr", lr, false);
  check_steps("cosine", "steps", steps);
  check_lr("cosine", "min_lr", min_lr, true);
  if (min_lr > lr)
    throw UsageError(fmt::format("synk::Schedule::cosine: min_lr ({}) must not exceed lr ({})", min_lr, lr));
  return Schedule(Kind::Cosine, lr, steps, 1, min_lr);
}

Schedule Schedule::with_warmup(int64_t steps) const {
  check_steps("with_warmup", "steps", steps);
  Schedule s(Kind::Warmup, 0, steps, 1, 0);
  s.inner_ = std::make_shared<const Schedule>(*this);
  return s;
}

double Schedule::operator()(int64_t step) const {
  if (step < 0) throw UsageError(fmt::format("synk::Schedule: the step index must be >= 0, got {}", step));
  switch (kind_) {
    case Kind::Constant:
      return lr_;
    case Kind::StepDecay:
      return lr_ * std::pow(gamma_, double(step / steps_));
    case Kind::Cosine: {
      const double progress = double(std::min(step, steps_)) / double(steps_);
      return min_lr_ + (lr_ - min_lr_) * (1 + std::cos(std::numbers::pi * progress)) / 2;
    }
    case Kind::Warmup:
      if (step < steps_) return (*inner_)(0) * double(step + 1) / double(steps_);
      return (*inner_)(step - steps_);
  }
  internal_error("unknown schedule kind");
}

std::string Schedule::describe() const {
  switch (kind_) {
    case Kind::Constant: return fmt::format("constant(lr={})", lr_);
    case Kind::StepDecay: return fmt::format("step_decay(lr={}, every={}, gamma={})", lr_, steps_, gamma_);
    case Kind::Cosine: return fmt::format("cosine(lr={}, steps={}, min_lr={})", lr_, steps_, min_lr_);
    case Kind::Warmup: return fmt::format("{} after warmup({})", inner_->describe(), steps_);
  }
  internal_error("unknown schedule kind");
}

}  // namespace synk
