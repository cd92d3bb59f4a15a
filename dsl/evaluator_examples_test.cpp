// The reference evaluator on the seed examples (examples/*.synk, compiled by the front end),
// checked against direct computations written here with plain loops on fresh random data (the
// seed is printed on failure), and against the answers the Synkhronos guide prints.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "dsl/frontend.h"
#include "ir/evaluator.h"
#include "ir/evaluator_test_util.h"

namespace synk::dsl {
namespace {

using ir::DType;
using eval_test::Random;

ir::Module compile_example(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(SYNK_SOURCE_DIR) / "examples" / name;
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return compile_source(p.string(), ss.str());
}

TEST(EvaluatorOnExamples, IntroIsTheMeanOfTheMatrixVectorProduct) {
  Random rng;
  TRACE_SEED(rng);
  const ir::Module m = compile_example("intro.synk");
  const int64_t n = 7;
  const HostTensor x = rng.normal(DType::F32, {n, 10});
  const HostTensor y = rng.normal(DType::F32, {10});
  const EvalResult r = evaluate(m, "f", std::vector<HostTensor>{x, y}, {});
  ASSERT_EQ(r.outputs.size(), 1u);
  double want = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < 10; ++j) want += x.data[size_t(i * 10 + j)] * y.data[size_t(j)];
  want /= double(n);
  EXPECT_EQ(r.outputs[0].shape, std::vector<int64_t>{});
  EXPECT_NEAR(r.outputs[0].data[0], want, 1e-12);
}

TEST(EvaluatorOnExamples, SharedVariableBecomesTenTen) {
  const ir::Module m = compile_example("shared_variable.synk");
  const std::vector<HostTensor> inputs{HostTensor::make(DType::F32, {4, 2}, {1, 1, 2, 2, 3, 3, 4, 4})};
  const std::vector<HostTensor> shareds{HostTensor::make(DType::F32, {2}, {1, 1})};
  const EvalResult r = evaluate(m, "f", inputs, shareds);
  ASSERT_EQ(r.updates.size(), 1u);
  EXPECT_EQ(r.updates[0].data, (std::vector<double>{10, 10}));
  // The guide's two-rank local values: rows [0, 2) give [3, 3], rows [2, 4) give [7, 7].
  const EvalResult first = evaluate(m, "f", std::vector<HostTensor>{HostTensor::make(DType::F32, {2, 2}, {1, 1, 2, 2})}, shareds);
  const EvalResult second = evaluate(m, "f", std::vector<HostTensor>{HostTensor::make(DType::F32, {2, 2}, {3, 3, 4, 4})}, shareds);
  EXPECT_EQ(first.updates[0].data, (std::vector<double>{3, 3}));
  EXPECT_EQ(second.updates[0].data, (std::vector<double>{7, 7}));
}

TEST(EvaluatorOnExamples, MultiOutputStatistics) {
  Random rng;
  TRACE_SEED(rng);
  const ir::Module m = compile_example("multi_output.synk");
  const int64_t n = 9;
  const HostTensor x = rng.normal(DType::F32, {n, 3});
  const HostTensor w = rng.normal(DType::F32, {3});
  const EvalResult r = evaluate(m, "stats", std::vector<HostTensor>{x, w}, {});
  ASSERT_EQ(r.outputs.size(), 5u);
  std::vector<double> scores(size_t(n), 0.0), total(3, 0.0);
  double largest = -INFINITY, positive = 0, mean_score = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      const double v = x.data[size_t(i * 3 + j)];
      scores[size_t(i)] += v * w.data[size_t(j)];
      total[size_t(j)] += v;
      largest = std::max(largest, v);
    }
    positive += scores[size_t(i)] > 0;
    mean_score += scores[size_t(i)] / double(n);
  }
  EXPECT_NEAR(r.outputs[0].data[0], mean_score, 1e-12);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(r.outputs[1].data[size_t(j)], total[size_t(j)], 1e-12);
  EXPECT_EQ(r.outputs[2].data[0], largest);
  EXPECT_EQ(r.outputs[3].dtype, DType::I64);
  EXPECT_EQ(r.outputs[3].data[0], positive);
  ASSERT_EQ(r.outputs[4].shape, std::vector<int64_t>{n});
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(r.outputs[4].data[size_t(i)], scores[size_t(i)], 1e-12);
}

TEST(EvaluatorOnExamples, MlpLossAndAccuracyMatchADirectForwardPass) {
  Random rng;
  TRACE_SEED(rng);
  const ir::Module m = compile_example("mlp.synk");
  const int64_t n = 5;
  const std::vector<int64_t> sizes{784, 256, 256, 10};
  std::vector<HostTensor> shareds;   // w1 b1 w2 b2 w3 b3, in declaration order
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    shareds.push_back(rng.normal(DType::F32, {sizes[l], sizes[l + 1]}, 0.05));
    shareds.push_back(rng.normal(DType::F32, {sizes[l + 1]}, 0.1));
  }
  const HostTensor images = rng.normal(DType::F32, {n, 784});
  const HostTensor labels = rng.ints(DType::I64, {n}, 0, 9);
  const EvalResult r = evaluate(m, "loss", std::vector<HostTensor>{images, labels}, shareds);
  ASSERT_EQ(r.outputs.size(), 2u);

  std::vector<double> act = images.data;
  int64_t width = 784;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const HostTensor& w = shareds[2 * l];
    const HostTensor& b = shareds[2 * l + 1];
    const int64_t out = sizes[l + 1];
    std::vector<double> next(size_t(n * out), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j) {
        double s = 0;
        for (int64_t p = 0; p < width; ++p) s += act[size_t(i * width + p)] * w.data[size_t(p * out + j)];
        s += b.data[size_t(j)];
        next[size_t(i * out + j)] = l + 2 < sizes.size() ? std::max(s, 0.0) : s;
      }
    act = std::move(next);
    width = out;
  }
  double loss = 0, correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = act.data() + i * 10;
    int64_t best = 0;
    double total = 0;
    for (int64_t j = 0; j < 10; ++j) {
      total += std::exp(row[j]);
      if (row[j] > row[best]) best = j;
    }
    const int64_t label = int64_t(labels.data[size_t(i)]);
    loss += (std::log(total) - row[label]) / double(n);
    correct += best == label;
  }
  EXPECT_NEAR(r.outputs[0].data[0], loss, 1e-9);
  EXPECT_DOUBLE_EQ(r.outputs[1].data[0], correct / double(n));

  // The gradient function still holds grad(...): the evaluator needs it expanded first.
  try {
    evaluate(m, "gradient", std::vector<HostTensor>{images, labels}, shareds);
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("gradient pass"), std::string::npos) << e.what();
  }
}

TEST(EvaluatorOnExamples, WrongArgumentsNameTheArgument) {
  const ir::Module m = compile_example("intro.synk");
  try {
    evaluate(m, "f", std::vector<HostTensor>{HostTensor::filled(DType::F32, {3, 10}, 0), HostTensor::filled(DType::F32, {9}, 0)}, {});
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'y'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32[10]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(evaluate(m, "nope", std::vector<HostTensor>{}, {}), UserError);
}

}  // namespace
}  // namespace synk::dsl
