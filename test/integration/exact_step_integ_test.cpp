// Training steps are exact for any split of their rows (SEMANTICS, "Training steps"): a rank's
// gradient counts by its rows, and a rank without rows contributes nothing (before, it kept the
// previous step's averaged gradient and the plain all_reduce(avg) mixed that in). Logistic
// regression with adam, 20 steps of 1 to 7 rows, through scattered inputs with `batch` (with and
// without num_slices) and through sliceable shared variables with a skewed per-rank `batch_s`
// (whole ranks left empty): 1 to 5 ranks train to the same parameters as one rank, up to f32
// rounding. The one-rank run itself is checked against a float64 reference of the same steps.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "synk/jit.h"
#include "synk/train_step.h"

using namespace synk;

namespace {

constexpr int64_t kRows = 64, kFeatures = 4, kSteps = 20;
constexpr double kLr = 0.05, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-6;

constexpr const char* kProgram = R"(
shared w: f32[4] = zeros;
shared b: f32 = zeros;
shared xs: f32[m, 4] sliceable;
shared ys: f32[m] sliceable;
optimizer opt = adam(lr=0.05, beta1=0.9, beta2=0.999, epsilon=0.000001);

def losses_of(x: f32[r, 4], y: f32[r]) {
  return log(1 + exp(-(x @ w + b) * y));
}

fn train(scatter x: f32[n, 4], scatter y: f32[n]) {
  let losses = losses_of(x, y);
  out loss: avg = mean(losses);
  minimize mean(losses) over w, b using opt;
}

fn train_device() {
  minimize mean(losses_of(xs, ys)) over w, b using opt;
}
)";

struct DataSet {
  std::vector<float> x, y;
};

DataSet make_data() {
  DataSet d;
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kFeatures; ++j) d.x.push_back(std::sin(float(i * kFeatures + j) * 0.7f) * 2.0f);
    d.y.push_back((i * 7) % 3 == 0 ? 1.0f : -1.0f);
  }
  return d;
}

// Step k's rows: 1 to 7 of them, spread over the data set.
std::vector<int64_t> step_rows(int64_t k) {
  std::vector<int64_t> rows;
  const int64_t count = 1 + (k * 5) % 7;
  for (int64_t j = 0; j < count; ++j) rows.push_back((k * 13 + j * 7) % kRows);
  return rows;
}

// A skewed split of one step's rows over `ranks`: most rows go to the low ranks, so several ranks
// are often empty (and which ones changes from step to step).
std::vector<Rows> skewed_split(const std::vector<int64_t>& rows, int ranks, int64_t k) {
  std::vector<std::vector<int64_t>> per;
  per.resize(static_cast<size_t>(ranks));
  for (size_t j = 0; j < rows.size(); ++j) per[(j * j + size_t(k)) % per.size()].push_back(rows[j]);
  std::vector<Rows> out;
  for (std::vector<int64_t>& p : per) out.emplace_back(std::move(p));
  return out;
}

enum class Feed { Batch, BatchSlices, BatchS };

struct Params {
  std::vector<float> w;
  float b = 0;
};

Params train(Feed feed, int ranks, const DataSet& d) {
  jit::Module m = jit::compile_string(kProgram);
  m.shared("xs").set_value<float>(d.x, {kRows, kFeatures});
  m.shared("ys").set_value<float>(d.y, {kRows});
  TrainStep step = m.train_step(feed == Feed::BatchS ? "train_device" : "train");
  EXPECT_EQ(ranks, synk::fork(ranks));
  Data x = data<float>(d.x, {kRows, kFeatures}), y = data<float>(d.y, {kRows});
  for (int64_t k = 0; k < kSteps; ++k) {
    const std::vector<int64_t> rows = step_rows(k);
    switch (feed) {
      case Feed::Batch: step({x, y}, {.batch = rows}); break;
      case Feed::BatchSlices: step({x, y}, {.batch = rows, .num_slices = 3}); break;
      case Feed::BatchS: step({}, {.batch_s = BatchS::per_rank(skewed_split(rows, ranks, k))}); break;
    }
  }
  Params p{m.shared("w").values<float>(), m.shared("b").values<float>()[0]};
  for (int r = 1; r < ranks; ++r)
    EXPECT_EQ(m.shared("w").values<float>(r), p.w) << "rank " << r << " holds the master's parameters";
  synk::close();
  return p;
}

// The same 20 adam steps in float64 on one device, with the gradient of the mean loss written out.
Params reference(const DataSet& d) {
  std::vector<double> w(kFeatures, 0.0), m(kFeatures + 1, 0.0), v(kFeatures + 1, 0.0);
  double b = 0;
  for (int64_t k = 0; k < kSteps; ++k) {
    const std::vector<int64_t> rows = step_rows(k);
    std::vector<double> g(kFeatures + 1, 0.0);
    for (int64_t i : rows) {
      double z = b;
      for (int64_t j = 0; j < kFeatures; ++j) z += double(d.x[size_t(i * kFeatures + j)]) * w[size_t(j)];
      const double yi = d.y[size_t(i)];
      const double dz = -yi / (1 + std::exp(z * yi)) / double(rows.size());   // d/dz of log(1 + exp(-z y))
      for (int64_t j = 0; j < kFeatures; ++j) g[size_t(j)] += dz * double(d.x[size_t(i * kFeatures + j)]);
      g[kFeatures] += dz;
    }
    const double t = double(k + 1);
    const double lr_t = kLr * std::sqrt(1 - std::pow(kBeta2, t)) / (1 - std::pow(kBeta1, t));
    for (size_t j = 0; j <= size_t(kFeatures); ++j) {
      m[j] = kBeta1 * m[j] + (1 - kBeta1) * g[j];
      v[j] = kBeta2 * v[j] + (1 - kBeta2) * g[j] * g[j];
      const double delta = lr_t * m[j] / (std::sqrt(v[j]) + kEps);
      if (j < size_t(kFeatures)) w[j] -= delta;
      else b -= delta;
    }
  }
  return Params{{w.begin(), w.end()}, float(b)};
}

void expect_close(const Params& got, const Params& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.w.size(), want.w.size()) << what;
  for (size_t j = 0; j < got.w.size(); ++j)
    EXPECT_NEAR(got.w[j], want.w[j], tolerance * (1 + std::abs(want.w[j]))) << what << ": w[" << j << "]";
  EXPECT_NEAR(got.b, want.b, tolerance * (1 + std::abs(want.b))) << what << ": b";
}

TEST(ExactTrainingStep, OneRankMatchesTheFloat64Reference) {
  const DataSet d = make_data();
  expect_close(train(Feed::Batch, 1, d), reference(d), 1e-4, "one rank against float64");
}

TEST(ExactTrainingStep, OneToFiveRanksTrainTheSameParametersWithBatchSlicesAndBatchS) {
  const DataSet d = make_data();
  const Params one = train(Feed::Batch, 1, d);
  for (Feed feed : {Feed::Batch, Feed::BatchSlices, Feed::BatchS})
    for (int ranks = 1; ranks <= 5; ++ranks) {
      const char* name = feed == Feed::Batch ? "batch" : feed == Feed::BatchSlices ? "batch, 3 slices" : "batch_s";
      expect_close(train(feed, ranks, d), one, 2e-5, fmt::format("{}, {} ranks", name, ranks));
    }
}

// Outputs::rank_weights is what the step weights by; a step whose call selects no rows changes
// nothing on any rank.
TEST(ExactTrainingStep, RankWeightsAndAStepOverNoRows) {
  const DataSet d = make_data();
  jit::Module m = jit::compile_string(kProgram);
  Function f = m.function("train");
  TrainStep step = m.train_step("train");
  ASSERT_EQ(3, synk::fork(3));
  Data x = data<float>(d.x, {kRows, kFeatures}), y = data<float>(d.y, {kRows});
  EXPECT_EQ(f({x, y}, {.batch = std::vector<int64_t>{5, 9}}).rank_weights(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(f({x, y}, {.batch = Range{0, 7}, .num_slices = 2}).rank_weights(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(f({x, y}, {.batch = std::vector<int64_t>{}}).rank_weights(), (std::vector<int64_t>{0, 0, 0}));
  step({x, y}, {.batch = std::vector<int64_t>{1, 2, 3}});
  const std::vector<float> w = m.shared("w").values<float>();
  step({x, y}, {.batch = std::vector<int64_t>{}});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(m.shared("w").values<float>(r), w) << "rank " << r;
  synk::close();
}

TEST(ExactTrainingStep, WeightedAllReduceChecksItsWeights) {
  jit::Module m = jit::compile_string(kProgram);
  ASSERT_EQ(2, synk::fork(2));
  Var w = m.shared("w").var();
  m.shared("w").set_value(0, std::vector<float>{1, 2, 3, 4}, {4});
  m.shared("w").set_value(1, std::vector<float>{NAN, 0, 0, 0}, {4});
  all_reduce_weighted(w, {3.0, 0.0});
  EXPECT_EQ(m.shared("w").values<float>(1), (std::vector<float>{1, 2, 3, 4})) << "a weight-0 rank's NaN counts for nothing";
  m.shared("w").set_value(1, std::vector<float>{5, 6, 7, 8}, {4});
  all_reduce_weighted(w, {1.0, 3.0});
  EXPECT_EQ(m.shared("w").values<float>(0), (std::vector<float>{4, 5, 6, 7}));
  for (const std::vector<double>& bad : {std::vector<double>{1.0}, {0.0, 0.0}, {1.0, -1.0}, {1.0, NAN}})
    EXPECT_THROW(all_reduce_weighted(w, bad), UsageError);
  synk::close();
}

}  // namespace
