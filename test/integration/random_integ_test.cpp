// Random ops through the runtime: the same program with the same seed draws the same dropout
// masks and random values, bit for bit, on 1, 2, 3 and 4 ranks, with and without num_slices and
// with a batch of selected rows (the runtime hands every part its first row of the call); the
// training step's all-reduced gradient, which the mask gates, is the same up to the rounding of
// the reductions (every rank holds as many rows, so the mean of the ranks' means is the mean);
// the step counter of a training function advances by itself on every call, and
// set_seed/set_step choose the draws.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "synk/jit.h"
#include "synk/train_step.h"

using namespace synk;

namespace {

constexpr const char* kProgram = R"(
shared w: f32[8] = uniform(seed=3, low=0.5, high=1.5);
optimizer opt = sgd(lr=0.01);
fn train(scatter x: f32[n, 8]) {
  let h = dropout(x * w, 0.4);
  out y: gather = h;
  out u: gather = uniform_like(x, low=-1, high=1) + normal_like(x);
  minimize mean(sum(h * h, axis=1), axis=0) over w using opt;
}
)";

struct Result {
  Array y, u, grads;
};

std::vector<float> inputs(int64_t rows) {
  std::vector<float> x;
  for (int64_t i = 0; i < rows * 8; ++i) x.push_back(float(i % 11) * 0.25f - 1.0f);
  return x;
}

Result run(jit::Module& m, int ranks, int64_t slices, const std::vector<int64_t>& batch) {
  synk::TrainStep step = m.train_step("train");
  synk::Function f = m.function("train");
  EXPECT_EQ(ranks, synk::fork(ranks));
  f.set_seed(1234);
  f.set_step(7);
  Data x = data<float>(inputs(36), {36, 8});
  CallOptions options;
  options.num_slices = slices;
  if (!batch.empty()) options.batch = batch;
  Outputs out = step({x}, options);
  Result r{out.get("y"), out.get("u"), m.shared("opt_grads").get_value(0)};
  EXPECT_EQ(f.step(), 8u) << "a training function's call advances its step";
  synk::close();
  return r;
}

void expect_same_bits(const Array& a, const Array& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  EXPECT_EQ(0, std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size())) << what;
}

TEST(RandomOps, DropoutDrawsTheSameOnOneToFourRanksWithAndWithoutSlices) {
  jit::Module m = jit::compile_string(kProgram);
  const Array w0 = m.shared("w").get_value(0);
  std::vector<int64_t> batch;
  for (int64_t i = 35; i >= 0; i -= 3) batch.push_back(i), batch.push_back(i - 1);   // 24 rows
  for (const std::vector<int64_t>& rows : {std::vector<int64_t>{}, batch}) {
    m.shared("w").set_value(w0.ref());
    const Result one = run(m, 1, 1, rows);
    size_t dropped = 0;
    const float* y = one.y.data<float>();
    for (int64_t i = 0; i < one.y.size(); ++i) dropped += y[i] == 0.0f;
    EXPECT_GT(dropped, size_t(one.y.size()) / 5) << "dropout dropped elements";
    for (int ranks = 1; ranks <= 4; ++ranks)
      for (int64_t slices : {1, 3}) {
        const std::string what = fmt::format("{} ranks, {} slices, batch of {}", ranks, slices, rows.size());
        m.shared("w").set_value(w0.ref());
        const Result r = run(m, ranks, slices, rows);
        expect_same_bits(r.y, one.y, what + ": dropout");
        expect_same_bits(r.u, one.u, what + ": uniform + normal");
        ASSERT_EQ(r.grads.size(), one.grads.size());
        for (int64_t i = 0; i < r.grads.size(); ++i)
          EXPECT_NEAR(r.grads.data<float>()[i], one.grads.data<float>()[i], 1e-5 * (1 + std::abs(one.grads.data<float>()[i])))
              << what << ": gradient " << i;
      }
  }
}

TEST(RandomOps, TheStepAdvancesAndTheSeedChoosesTheDraws) {
  jit::Module m = jit::compile_string(kProgram);
  synk::Function f = m.function("train");
  Data x = data<float>(inputs(5), {5, 8});
  f.set_seed(1);
  f.set_step(0);
  const Array first = f.run_local({x}).get("u");
  EXPECT_EQ(f.step(), 1u);
  const Array second = f.run_local({x}).get("u");
  EXPECT_NE(0, std::memcmp(first.bytes.data(), second.bytes.data(), first.bytes.size())) << "a new step draws anew";
  f.set_step(0);
  expect_same_bits(f.run_local({x}).get("u"), first, "the same seed and step");
  f.set_seed(2);
  f.set_step(0);
  const Array other = f.run_local({x}).get("u");
  EXPECT_NE(0, std::memcmp(first.bytes.data(), other.bytes.data(), first.bytes.size())) << "another seed";
}

}  // namespace
