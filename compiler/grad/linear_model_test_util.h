// The linear model the training-step tests share (compiler/grad/train_test.cpp,
// test/integration/hyper_integ_test.cpp): y = x @ w + b with w: f32[4, 3], b: f32[3], trained by
// the optimizer rule given as .synk text on the mean squared error over the step's rows, and
// random batches for it (test use only).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "synk/core.h"

namespace synk::testing {

// `rule` is the optimizer's right-hand side, e.g. "adam(lr=0.01)".
inline std::string linear_model(const std::string& rule) {
  return fmt::format(R"(
shared w: f32[4, 3] = normal(seed=7, std=0.5);
shared b: f32[3] = uniform(seed=8, low=-0.5, high=0.5);
optimizer opt = {};
fn train(scatter x: f32[n, 4], scatter y: f32[n, 3]) {{
  let e = x @ w + b - y;
  let losses = sum(e * e, axis=1);
  out loss_sum: sum = sum(losses);
  minimize mean(losses) over w, b using opt;
}}
fn evaluate(scatter x: f32[n, 4]) {{
  out y: gather = x @ w + b;
}}
)",
                     rule);
}

struct LinearBatch {
  Data x, y;
  std::vector<float> xs, ys;
  int64_t rows = 0;
};

// `rows` rows of N(0, 1) inputs and targets.
inline LinearBatch random_batch(int64_t rows, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  LinearBatch b;
  b.rows = rows;
  for (int64_t i = 0; i < rows * 4; ++i) b.xs.push_back(normal(rng));
  for (int64_t i = 0; i < rows * 3; ++i) b.ys.push_back(normal(rng));
  b.x = data<float>(b.xs, {rows, 4});
  b.y = data<float>(b.ys, {rows, 3});
  return b;
}

}  // namespace synk::testing
