// Tests of synk::Schedule (schedule.h): every schedule's values against its closed form, warm-up
// composed with each, and every bad argument reported naming it.
#include "synk/schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include <gtest/gtest.h>

#include "base/errors.h"

namespace synk {
namespace {

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Schedule, ConstantIsConstant) {
  const Schedule s = Schedule::constant(0.125);
  for (int64_t step : {0, 1, 7, 1000000}) EXPECT_EQ(s(step), 0.125);
  EXPECT_EQ(s.describe(), "constant(lr=0.125)");
}

TEST(Schedule, StepDecayMultipliesByGammaEveryKSteps) {
  const Schedule s = Schedule::step_decay(0.1, 3, 0.5);
  const double want[] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125};
  for (int64_t step = 0; step < 10; ++step) EXPECT_EQ(s(step), want[step]) << step;
  EXPECT_EQ(s(3 * 20), 0.1 * std::pow(0.5, 20));
  EXPECT_EQ(Schedule::step_decay(0.2, 1, 0.9)(4), 0.2 * std::pow(0.9, 4));
}

TEST(Schedule, CosineFallsToTheMinimumOverTSteps) {
  const double lr = 0.1, min_lr = 0.001;
  const int64_t steps = 8;
  const Schedule s = Schedule::cosine(lr, steps, min_lr);
  for (int64_t step = 0; step <= steps; ++step) {
    const double want = min_lr + (lr - min_lr) * (1 + std::cos(std::numbers::pi * double(step) / double(steps))) / 2;
    EXPECT_DOUBLE_EQ(s(step), want) << step;
  }
  EXPECT_EQ(s(0), lr);
  EXPECT_DOUBLE_EQ(s(steps / 2), (lr + min_lr) / 2);
  EXPECT_DOUBLE_EQ(s(steps), min_lr);
  EXPECT_DOUBLE_EQ(s(steps + 5), min_lr) << "after T steps it stays at the minimum";
  EXPECT_DOUBLE_EQ(Schedule::cosine(1, 4)(4), 0) << "the minimum defaults to 0";
  for (int64_t step = 1; step <= steps; ++step) EXPECT_LT(s(step), s(step - 1)) << step;
}

TEST(Schedule, WarmupRisesLinearlyThenRunsTheScheduleFromItsStart) {
  const Schedule cosine = Schedule::cosine(0.1, 10, 0.0);
  const Schedule s = cosine.with_warmup(4);
  for (int64_t step = 0; step < 4; ++step) EXPECT_DOUBLE_EQ(s(step), 0.1 * double(step + 1) / 4) << step;
  for (int64_t step = 4; step < 20; ++step) EXPECT_EQ(s(step), cosine(step - 4)) << step;
  const Schedule decay = Schedule::step_decay(0.2, 2, 0.1).with_warmup(2);
  EXPECT_DOUBLE_EQ(decay(0), 0.1);
  EXPECT_DOUBLE_EQ(decay(1), 0.2);
  EXPECT_DOUBLE_EQ(decay(2), 0.2);
  EXPECT_DOUBLE_EQ(decay(4), 0.2 * 0.1);
  const Schedule constant = Schedule::constant(0.3).with_warmup(3);
  EXPECT_DOUBLE_EQ(constant(0), 0.1);
  EXPECT_DOUBLE_EQ(constant(2), 0.3);
  EXPECT_EQ(constant(100), 0.3);
  // Warm-ups compose: the inner one starts after the outer one.
  const Schedule twice = constant.with_warmup(2);
  EXPECT_DOUBLE_EQ(twice(1), constant(0));
  EXPECT_DOUBLE_EQ(twice(2), constant(0));
  EXPECT_EQ(s.describe(), "cosine(lr=0.1, steps=10, min_lr=0) after warmup(4)");
}

TEST(Schedule, BadArgumentsAreUsageErrorsNamingThem) {
  EXPECT_NE(error_of([] { Schedule::constant(0); }).find("constant: lr must be a finite number > 0, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { Schedule::constant(NAN); }).find("lr must be"), std::string::npos);
  EXPECT_NE(error_of([] { Schedule::step_decay(0.1, 0, 0.5); }).find("every must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(error_of([] { Schedule::step_decay(0.1, 2, -1); }).find("gamma must be"), std::string::npos);
  EXPECT_NE(error_of([] { Schedule::cosine(0.1, 0); }).find("steps must be >= 1"), std::string::npos);
  EXPECT_NE(error_of([] { Schedule::cosine(0.1, 5, -1); }).find("min_lr must be a finite number >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { Schedule::cosine(0.1, 5, 0.2); }).find("min_lr (0.2) must not exceed lr (0.1)"),
            std::string::npos);
  EXPECT_NE(error_of([] { Schedule::constant(1).with_warmup(0); }).find("with_warmup: steps must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { Schedule::constant(1)(-1); }).find("step index must be >= 0, got -1"), std::string::npos);
}

}  // namespace
}  // namespace synk
