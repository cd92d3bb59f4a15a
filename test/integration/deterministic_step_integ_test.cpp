// Deterministic training steps (TrainStep::set_deterministic, docs/training.md "The same bits on
// any number of ranks"): a small MLP with batch norm trained with adam for 12 steps of 29 to 61
// rows gives bit-identical parameters, optimizer state and batch-norm running statistics on 1, 2,
// 3 and 4 ranks, with or without num_slices, including steps with fewer shards than ranks; it
// stays within float32 rounding of the plain step; bad settings are UsageErrors.
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

constexpr int64_t kRows = 200, kFeatures = 6, kSteps = 12;

// With batch_norm (`%s` below) or without it.
constexpr const char* kProgram = R"(
shared w1: f32[6, 16] = uniform(seed=3, low=-0.5, high=0.5);
shared b1: f32[16];
shared g1: f32[16] = ones;
shared s1: f32[16];
shared mean1: f32[16];
shared var1: f32[16] = ones;
shared w2: f32[16] = uniform(seed=4, low=-0.5, high=0.5);
shared b2: f32;
optimizer opt = adam(lr=0.01);

def logits(x) {
  let h = %s;
  return relu(h) @ w2 + b2;
}

fn train(scatter x: f32[n, 6], scatter y: f32[n]) {
  let losses = binary_cross_entropy_with_logits(logits(x), y);
  out loss: avg = mean(losses);
  minimize mean(losses) over w1, b1, g1, s1, w2, b2 using opt;
}
)";

struct DataSet {
  std::vector<float> x, y;
};

DataSet make_data() {
  DataSet d;
  for (int64_t i = 0; i < kRows; ++i) {
    float s = 0;
    for (int64_t j = 0; j < kFeatures; ++j) {
      d.x.push_back(std::sin(float(i * kFeatures + j) * 1.3f) * 3.0f + float(j) * 0.1f);
      s += d.x.back() * float(j % 3 - 1);
    }
    d.y.push_back(s > 0 ? 1.0f : 0.0f);
  }
  return d;
}

// Step k's rows: 29 to 61 of them (5 for the steps with fewer shards than ranks), spread out.
std::vector<int64_t> step_rows(int64_t k) {
  const int64_t count = k % 5 == 4 ? 5 : 29 + (k * 11) % 33;
  std::vector<int64_t> rows;
  for (int64_t j = 0; j < count; ++j) rows.push_back((k * 17 + j * 3) % kRows);
  return rows;
}

// Every shared variable's bytes after training, and the loss outputs.
struct Result {
  std::vector<std::vector<std::byte>> vars;
  std::vector<float> losses;
};

std::string program(bool batch_norm) {
  const std::string hidden = batch_norm ? "batch_norm(tanh(x @ w1 + b1), g1, s1, mean1, var1, training=true)"
                                        : "tanh(x @ w1 + b1) * g1 + s1";
  std::string text = kProgram;
  return text.replace(text.find("%s"), 2, hidden);
}

Result train(int ranks, int64_t micro_shard_rows, int64_t num_slices, const DataSet& d, bool batch_norm = true) {
  jit::Module m = jit::compile_string(program(batch_norm));
  TrainStep step = m.train_step("train");
  step.set_deterministic(micro_shard_rows);
  EXPECT_EQ(ranks, synk::fork(ranks));
  Data x = data<float>(d.x, {kRows, kFeatures}), y = data<float>(d.y, {kRows});
  Result r;
  for (int64_t k = 0; k < kSteps; ++k)
    r.losses.push_back(step({x, y}, {.batch = step_rows(k), .num_slices = num_slices})[0].data<float>()[0]);
  for (const std::string& name : m.shared_names()) {
    const Array a = m.shared(name).get_value();
    r.vars.emplace_back(a.bytes.begin(), a.bytes.end());
    for (int rank = 1; rank < ranks; ++rank)
      EXPECT_EQ(m.shared(name).get_value(rank).bytes, a.bytes) << name << " on rank " << rank;
  }
  synk::close();
  return r;
}

TEST(DeterministicStep, SameBitsOnOneToFourRanksWithAndWithoutSlices) {
  const DataSet d = make_data();
  const Result one = train(1, 8, 1, d);
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (int64_t slices : {int64_t(1), int64_t(3)}) {
      if (ranks == 1 && slices == 1) continue;
      const Result other = train(ranks, 8, slices, d);
      EXPECT_EQ(other.vars, one.vars) << ranks << " ranks, num_slices " << slices;
    }
}

// Without batch norm (which normalises each shard with its own statistics, like num_slices) the
// shards change only the order of the arithmetic.
TEST(DeterministicStep, StaysWithinFloat32RoundingOfThePlainStep) {
  const DataSet d = make_data();
  const Result exact = train(2, 8, 1, d, false), plain = train(2, 0, 1, d, false);
  ASSERT_EQ(exact.vars.size(), plain.vars.size());
  for (size_t v = 0; v < exact.vars.size(); ++v) {
    const size_t n = exact.vars[v].size() / sizeof(float);
    const float* a = reinterpret_cast<const float*>(exact.vars[v].data());
    const float* b = reinterpret_cast<const float*>(plain.vars[v].data());
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::abs(b[i]))) << "variable " << v << "[" << i << "]";
  }
  for (size_t k = 0; k < exact.losses.size(); ++k) EXPECT_NEAR(exact.losses[k], plain.losses[k], 1e-5) << "step " << k;
}

TEST(DeterministicStep, ShardSizeMattersAndNegativeIsAUsageError) {
  const DataSet d = make_data();
  EXPECT_NE(train(1, 8, 1, d).vars, train(1, 16, 1, d).vars) << "the shards define the arithmetic";
  jit::Module m = jit::compile_string(program(true));
  TrainStep step = m.train_step("train");
  EXPECT_THROW(step.set_deterministic(-1), UsageError);
  step.set_deterministic(0);
  EXPECT_EQ(step.deterministic(), 0);
}

}  // namespace
