// The examples end to end through the JIT API on 1, 2, 3 and 4 ranks (real forks), each checked
// against the reference evaluator (ir/evaluator.h, float64) on fresh random inputs and against
// the single-rank result: the seeds' introductory and shared-variable examples, a multi-output
// function with num_slices, batch and minibatch selection, batch_s over sliceable shared
// variables, validation of a whole data set with num_slices, and the MLP's loss and flat
// gradient. Even rank counts compile before synk::fork() (workers inherit the functions), odd
// ones after it (workers rebuild them through the "jit" loader). SYNK_TEST_SEED replays a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "compiler/backend/host_arrays.h"
#include "compiler/backend/signature.h"
#include "compiler/grad/grad.h"
#include "synk/jit.h"

using namespace synk;
using dsl::HostTensor;

namespace {

const std::string kExamples = SYNK_SOURCE_DIR "/examples";

uint64_t test_seed() {
  if (const char* s = std::getenv("SYNK_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return uint64_t(std::random_device{}()) << 32 | std::random_device{}();
}

// Rows [floor(r*L/N), floor((r+1)*L/N)): SEMANTICS section 2.
std::pair<int64_t, int64_t> share(int64_t rows, int64_t parts, int64_t part) {
  return {part * rows / parts, (part + 1) * rows / parts};
}

HostTensor random_tensor(ir::DType dtype, std::vector<int64_t> shape, std::mt19937_64& rng, double scale = 1.0) {
  int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
  std::vector<double> values(static_cast<size_t>(n));
  std::normal_distribution<double> normal(0.0, scale);
  for (double& v : values) v = dtype == ir::DType::F32 ? double(float(normal(rng))) : normal(rng);
  return HostTensor::make(dtype, std::move(shape), std::move(values));
}

HostTensor random_labels(int64_t rows, int64_t classes, std::mt19937_64& rng) {
  std::vector<double> values(static_cast<size_t>(rows));
  for (double& v : values) v = double(std::uniform_int_distribution<int64_t>(0, classes - 1)(rng));
  return HostTensor::make(ir::DType::I64, {rows}, std::move(values));
}

// The rows `rows` of t (axis 0), in that order.
HostTensor take_rows(const HostTensor& t, const std::vector<int64_t>& rows) {
  int64_t width = t.shape.empty() || t.shape[0] == 0 ? 0 : t.size() / t.shape[0];
  std::vector<int64_t> shape = t.shape;
  shape[0] = int64_t(rows.size());
  std::vector<double> values;
  for (int64_t r : rows)
    values.insert(values.end(), t.data.begin() + r * width, t.data.begin() + (r + 1) * width);
  return HostTensor::make(t.dtype, shape, std::move(values));
}

std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v(size_t(std::max<int64_t>(end - begin, 0)));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

Data to_data(const HostTensor& t, const std::string& name) {
  rt::Array a = compiler::to_array(t);
  return synk::data(a.ref(), {.name = name});
}

// The reference: `fn` of `mod` run by the evaluator (gradients expanded first).
dsl::EvalResult reference(const jit::Module& mod, const std::string& fn, const std::vector<HostTensor>& inputs,
                          const std::vector<HostTensor>& shareds) {
  ir::Module m = compiler::has_gradients(mod.ir()) ? compiler::expand_gradients(mod.ir()) : mod.ir();
  return dsl::evaluate(m, fn, inputs, shareds);
}

// Every shared variable's master value, for the reference.
std::vector<HostTensor> shared_values(const jit::Module& mod, int rank = 0) {
  std::vector<HostTensor> values;
  for (const std::string& name : mod.shared_names()) values.push_back(compiler::to_host_tensor(mod.shared(name).get_value(rank)));
  return values;
}

struct Tolerance {
  double rel = 1e-4, abs = 1e-5;   // f32 defaults; f64 and integers are set per check
};

// Equal within tolerance (exactly for integers and bool; NaN equals NaN).
::testing::AssertionResult close(const HostTensor& want, const HostTensor& got, Tolerance tol = {}) {
  if (want.dtype != got.dtype)
    return ::testing::AssertionFailure() << "dtype " << ir::dtype_name(got.dtype) << " vs " << ir::dtype_name(want.dtype);
  if (want.shape != got.shape)
    return ::testing::AssertionFailure() << "shape " << dsl::host_type_str(got) << " vs " << dsl::host_type_str(want);
  double scale = 0;
  for (double v : want.data) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.data.size(); ++i) {
    double w = want.data[i], g = got.data[i];
    bool ok = ir::is_float(want.dtype) ? (std::isnan(w) ? std::isnan(g) : std::fabs(w - g) <= tol.abs + tol.rel * std::max(std::fabs(w), 1e-3 * scale))
                                       : w == g;
    if (!ok) return ::testing::AssertionFailure() << "element " << i << " is " << g << ", expected " << w;
  }
  return ::testing::AssertionSuccess();
}
::testing::AssertionResult close(const HostTensor& want, const Array& got, Tolerance tol = {}) {
  return close(want, compiler::to_host_tensor(got), tol);
}

// Forks `ranks` ranks and loads `file`: even rank counts compile `functions` before the fork,
// odd ones after it (so the workers rebuild them through the loader).
jit::Module fork_and_load(const std::string& file, int ranks, const std::vector<std::string>& functions) {
  jit::Module mod;
  if (ranks % 2 == 0) {
    mod = jit::load_file(kExamples + "/" + file);
    for (const std::string& f : functions) mod.function(f);
    synk::fork(ranks);
  } else {
    synk::fork(ranks);
    mod = jit::load_file(kExamples + "/" + file);
    for (const std::string& f : functions) mod.function(f);
  }
  return mod;
}

class Examples : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test_seed();
    rng_.seed(seed_);
  }
  void TearDown() override { synk::close(); }
  std::string trace() const { return fmt::format("seed {} (SYNK_TEST_SEED replays it)", seed_); }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// --- intro: z = mean(x @ y, axis=0) -------------------------------------------------------------

TEST_F(Examples, IntroOnOneToFourRanks) {
  SCOPED_TRACE(trace());
  HostTensor x = random_tensor(ir::DType::F32, {101, 10}, rng_);
  HostTensor y = random_tensor(ir::DType::F32, {10}, rng_);
  std::map<int, std::vector<Array>> results;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("intro.synk", ranks, {"f"});
    Function f = mod.function("f");
    Data xd = to_data(x, "x"), yd = to_data(y, "y");
    dsl::EvalResult want = reference(mod, "f", {x, y}, {});
    Outputs all = f({xd, yd});
    EXPECT_TRUE(close(want.outputs[0], all.get("z")));
    Outputs part = f({xd, yd}, {.batch = Range{7, 60}, .num_slices = 2});
    dsl::EvalResult want_part = reference(mod, "f", {take_rows(x, iota(7, 60)), y}, {});
    EXPECT_TRUE(close(want_part.outputs[0], part.get("z")));
    results[ranks] = {all.get("z"), part.get("z")};
    synk::close();
  }
  for (int ranks = 2; ranks <= 4; ++ranks)
    for (size_t i = 0; i < 2; ++i)
      EXPECT_TRUE(close(compiler::to_host_tensor(results[1][i]), results[ranks][i], {1e-5, 1e-6})) << ranks << " ranks";
}

// --- shared_variable: update s = sum(x * s, axis=0), rank-local -------------------------------

TEST_F(Examples, SharedVariableAsInTheSeeds) {
  // The seeds' printed values: one device gives [10, 10]; on two ranks the local values are
  // [3, 3] (rows 1, 2) and [7, 7] (rows 3, 4).
  const std::map<int, std::vector<std::vector<float>>> seeds = {
      {1, {{10, 10}}}, {2, {{3, 3}, {7, 7}}}, {3, {{1, 1}, {2, 2}, {7, 7}}}, {4, {{1, 1}, {2, 2}, {3, 3}, {4, 4}}}};
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("shared_variable.synk", ranks, {"f"});
    Data x = data<float>({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}, {.name = "x"});
    jit::Shared s = mod.shared("s");
    EXPECT_EQ(s.values<float>(), (std::vector<float>{1, 1}));
    mod.function("f").run_local({x});   // the seeds' f.as_theano: the master alone, as one device
    EXPECT_EQ(s.values<float>(), (std::vector<float>{10, 10}));
    s.set_value<float>({1, 1}, {2});
    mod.function("f")({x});
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(s.values<float>(r), seeds.at(ranks)[size_t(r)]) << "rank " << r;
    synk::close();
  }
}

TEST_F(Examples, SharedVariableOnRandomRowsMatchesTheReferencePerRank) {
  SCOPED_TRACE(trace());
  HostTensor x = random_tensor(ir::DType::F32, {13, 2}, rng_);
  HostTensor s0 = random_tensor(ir::DType::F32, {2}, rng_);
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("shared_variable.synk", ranks, {"f"});
    for (int r = 0; r < ranks; ++r) mod.shared("s").set_value(r, compiler::to_array(s0).ref());
    mod.function("f")({to_data(x, "x")}, {.num_slices = 2});
    for (int r = 0; r < ranks; ++r) {
      auto [begin, end] = share(13, ranks, r);
      // Two slices per rank: each computed from the starting value, the update averaged by rows.
      std::vector<double> want(2, 0.0);
      for (int slice = 0; slice < 2; ++slice) {
        auto [b, e] = share(end - begin, 2, slice);
        if (e == b) continue;
        dsl::EvalResult part = reference(mod, "f", {take_rows(x, iota(begin + b, begin + e))}, {s0});
        for (int k = 0; k < 2; ++k) want[size_t(k)] += part.updates[0].data[size_t(k)] * double(e - b) / double(end - begin);
      }
      EXPECT_TRUE(close(HostTensor::make(ir::DType::F32, {2}, want), mod.shared("s").get_value(r))) << "rank " << r;
    }
    synk::close();
  }
}

// --- multi_output: one function, an output per mode, with num_slices --------------------------

TEST_F(Examples, MultiOutputWithSlicesOnOneToFourRanks) {
  SCOPED_TRACE(trace());
  HostTensor x = random_tensor(ir::DType::F32, {57, 3}, rng_);
  HostTensor w = random_tensor(ir::DType::F32, {3}, rng_);
  std::map<int, Outputs> single;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("multi_output.synk", ranks, {"stats"});
    Function f = mod.function("stats");
    dsl::EvalResult want = reference(mod, "stats", {x, w}, {});
    for (int slices : {1, 2, 5}) {
      SCOPED_TRACE(fmt::format("num_slices {}", slices));
      Outputs r = f({to_data(x, "x"), to_data(w, "w")}, {.num_slices = slices});
      ASSERT_EQ(r.names(), (std::vector<std::string>{"mean_score", "total", "largest", "positive", "all_scores"}));
      for (size_t o = 0; o < r.size(); ++o) EXPECT_TRUE(close(want.outputs[o], r[o])) << r.names()[o];
      if (ranks == 1 && slices == 1) single[0] = r;
      // `total` sums 57 O(1) floats in an order that depends on the split: two orders differ by
      // ~1.5e-6 (one standard deviation), however small the total, so the absolute part of the
      // tolerance is 1e-5 (an abs 1e-6 failed for seed 13619594540555048539, total 0.0357).
      for (size_t o = 0; o < r.size(); ++o)
        EXPECT_TRUE(close(compiler::to_host_tensor(single[0][o]), r[o], {1e-5, 1e-5})) << r.names()[o] << " vs 1 rank";
    }
    synk::close();
  }
}

// --- batch and minibatch selection --------------------------------------------------------------

TEST_F(Examples, BatchAndMinibatchSelectionOnOneToFourRanks) {
  SCOPED_TRACE(trace());
  const int64_t rows = 40;
  HostTensor x = random_tensor(ir::DType::F64, {rows, 4}, rng_);
  HostTensor v = random_tensor(ir::DType::F64, {4}, rng_);
  std::vector<int64_t> shuffled(30);
  for (int64_t& i : shuffled) i = std::uniform_int_distribution<int64_t>(0, rows - 1)(rng_);   // duplicates allowed
  struct Form {
    std::string name;
    Batch batch;
    std::vector<int64_t> rows;
    HostTensor w;   // the minibatch input: one weight per selected row
  };
  std::vector<Form> forms = {{"count 17", Batch(17), iota(0, 17), {}},
                             {"range [5, 29)", Batch(Range{5, 29}), iota(5, 29), {}},
                             {"index list", Batch(shuffled), shuffled, {}},
                             {"index Data", Batch(data<int64_t>(shuffled, {int64_t(shuffled.size())}, {.name = "idx"})),
                              shuffled, {}}};
  for (Form& form : forms) form.w = random_tensor(ir::DType::F64, {int64_t(form.rows.size())}, rng_);
  std::map<std::string, Outputs> single;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("calls/minibatch.synk", ranks, {"weighted"});
    Function f = mod.function("weighted");
    for (const Form& form : forms) {
      SCOPED_TRACE(form.name);
      dsl::EvalResult want = reference(mod, "weighted", {take_rows(x, form.rows), form.w, v}, {});
      for (int slices : {1, 3}) {
        Outputs r = f({to_data(x, "x"), to_data(form.w, "w"), to_data(v, "v")}, {.batch = form.batch, .num_slices = slices});
        for (size_t o = 0; o < r.size(); ++o) EXPECT_TRUE(close(want.outputs[o], r[o], {1e-12, 1e-12})) << r.names()[o];
        if (ranks == 1 && slices == 1) single[form.name] = r;
        for (size_t o = 0; o < r.size(); ++o)
          EXPECT_TRUE(close(compiler::to_host_tensor(single[form.name][o]), r[o], {1e-13, 1e-13})) << r.names()[o] << " vs 1 rank";
      }
    }
    synk::close();
  }
}

// --- batch_s over sliceable shared variables ----------------------------------------------------

TEST_F(Examples, BatchSOverSliceableSharedVariablesOnOneToFourRanks) {
  SCOPED_TRACE(trace());
  const int64_t rows = 60;
  HostTensor features = random_tensor(ir::DType::F32, {rows, 6}, rng_);
  HostTensor labels = random_labels(rows, 3, rng_);
  HostTensor lr = HostTensor::make(ir::DType::F32, {}, {0.5});
  std::map<int, std::vector<Array>> outputs_by_ranks;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("calls/sliceable.synk", ranks, {"step"});
    Function step = mod.function("step");
    // Scatter the data set: rank r holds its share of the rows.
    std::vector<HostTensor> rank_features, rank_labels;
    for (int r = 0; r < ranks; ++r) {
      auto [b, e] = share(rows, ranks, r);
      rank_features.push_back(take_rows(features, iota(b, e)));
      rank_labels.push_back(take_rows(labels, iota(b, e)));
      mod.shared("features").set_value(r, compiler::to_array(rank_features.back()).ref());
      mod.shared("labels").set_value(r, compiler::to_array(rank_labels.back()).ref());
    }
    HostTensor w0 = compiler::to_host_tensor(mod.shared("w").get_value());
    // Per rank: positions 2, 9, 0, 9, 4 of its own rows (one list for every rank), then one
    // range per rank, in two slices.
    struct Call {
      std::string name;
      BatchS batch_s;
      std::vector<std::vector<int64_t>> rows;   // per rank
      int slices;
    };
    std::vector<std::vector<int64_t>> same(size_t(ranks), std::vector<int64_t>{2, 9, 0, 9, 4});
    std::vector<Rows> per_rank;
    std::vector<std::vector<int64_t>> ranges;
    for (int r = 0; r < ranks; ++r) {
      per_rank.push_back(Rows(Range{r, r + 6}));
      ranges.push_back(iota(r, r + 6));
    }
    std::vector<Call> calls = {{"one index list", BatchS({2, 9, 0, 9, 4}), same, 1},
                               {"a range per rank, 2 slices", BatchS::per_rank(per_rank), ranges, 2}};
    for (const Call& call : calls) {
      SCOPED_TRACE(call.name);
      for (int r = 0; r < ranks; ++r) mod.shared("w").set_value(r, compiler::to_array(w0).ref());
      Outputs out = step({to_data(lr, "lr")}, {.batch_s = call.batch_s, .num_slices = call.slices});
      // Reference: every slice of every rank on its own rows, from w0; loss averaged by rows,
      // correct summed, each rank's w the row-weighted mean of its slices' new values.
      double loss = 0, correct = 0, total_rows = 0;
      for (int r = 0; r < ranks; ++r) {
        const std::vector<int64_t>& sel = call.rows[size_t(r)];
        std::vector<double> w_new(w0.data.size(), 0.0);
        for (int slice = 0; slice < call.slices; ++slice) {
          auto [b, e] = share(int64_t(sel.size()), call.slices, slice);
          if (e == b) continue;
          std::vector<int64_t> part(sel.begin() + b, sel.begin() + e);
          dsl::EvalResult want = reference(mod, "step", {lr},
                                           {take_rows(rank_features[size_t(r)], part), take_rows(rank_labels[size_t(r)], part), w0});
          double n = double(e - b);
          loss += want.outputs[0].data[0] * n;
          correct += want.outputs[1].data[0];
          total_rows += n;
          for (size_t i = 0; i < w_new.size(); ++i) w_new[i] += want.updates[0].data[i] * n / double(sel.size());
        }
        EXPECT_TRUE(close(HostTensor::make(ir::DType::F32, {6, 3}, w_new), mod.shared("w").get_value(r))) << "w on rank " << r;
      }
      EXPECT_TRUE(close(HostTensor::make(ir::DType::F32, {}, {loss / total_rows}), out.get("loss")));
      EXPECT_TRUE(close(HostTensor::make(ir::DType::I64, {}, {correct}), out.get("correct")));
    }
    synk::close();
  }
}

// --- validation of a whole data set with num_slices --------------------------------------------

TEST_F(Examples, ValidationOfAWholeDataSetWithSlicesOnOneToFourRanks) {
  SCOPED_TRACE(trace());
  const int64_t rows = 1003;
  HostTensor x = random_tensor(ir::DType::F32, {rows, 16}, rng_);
  HostTensor y = random_labels(rows, 4, rng_);
  std::vector<Array> single;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("calls/validation.synk", ranks, {"validate"});
    dsl::EvalResult want = reference(mod, "validate", {x, y}, shared_values(mod));
    Outputs r = mod.function("validate")({to_data(x, "x"), to_data(y, "y")}, {.num_slices = 7});
    ASSERT_EQ(r.size(), want.outputs.size());
    for (size_t o = 0; o < r.size(); ++o) {
      // argmax decisions on near-ties may flip between f32 kernels and the f64 reference.
      if (r.names()[o] == "errors" || r.names()[o] == "predictions" || r.names()[o] == "accuracy") continue;
      EXPECT_TRUE(close(want.outputs[o], r[o])) << r.names()[o];
    }
    HostTensor predictions = compiler::to_host_tensor(r.get("predictions"));
    int64_t disagree = 0, errors = 0;
    for (int64_t i = 0; i < rows; ++i) {
      disagree += predictions.data[size_t(i)] != want.outputs[4].data[size_t(i)];
      errors += predictions.data[size_t(i)] != y.data[size_t(i)];
    }
    EXPECT_LE(disagree, 2) << "predictions differing from the reference";
    EXPECT_EQ(to_vector<int64_t>(r.get("errors")).at(0), errors);
    EXPECT_NEAR(to_vector<float>(r.get("accuracy")).at(0), double(rows - errors) / double(rows), 1e-6);
    if (ranks == 1) single = r;
    for (size_t o = 0; o < r.size(); ++o)
      EXPECT_TRUE(close(compiler::to_host_tensor(single[o]), r[o], {1e-5, 1e-6})) << r.names()[o] << " vs 1 rank";
    synk::close();
  }
}

// --- the MLP: loss over a data set in slices, and the flat gradient --------------------------

TEST_F(Examples, MlpLossAndFlatGradientOnOneToFourRanks) {
  SCOPED_TRACE(trace());
  const int64_t rows = 96;
  HostTensor images = random_tensor(ir::DType::F32, {rows, 784}, rng_, 0.5);
  HostTensor labels = random_labels(rows, 10, rng_);
  std::vector<Array> single;
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod = fork_and_load("mlp.synk", ranks, {"loss", "gradient"});
    std::vector<HostTensor> shareds = shared_values(mod);
    dsl::EvalResult want_loss = reference(mod, "loss", {images, labels}, shareds);
    Outputs loss = mod.function("loss")({to_data(images, "images"), to_data(labels, "labels")}, {.num_slices = 3});
    EXPECT_TRUE(close(want_loss.outputs[0], loss.get("loss")));
    std::vector<int64_t> batch = iota(10, 74);
    std::shuffle(batch.begin(), batch.end(), rng_);
    dsl::EvalResult want_grad = reference(mod, "gradient", {take_rows(images, batch), take_rows(labels, batch)}, shareds);
    Outputs grad = mod.function("gradient")({to_data(images, "images"), to_data(labels, "labels")}, {.batch = batch});
    ASSERT_EQ(grad.get("grads").shape, (std::vector<int64_t>{784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10}));
    EXPECT_TRUE(close(want_grad.outputs[0], grad.get("grads"), {1e-3, 1e-6}));
    if (ranks == 1) single = {loss.get("loss"), grad.get("grads")};
    EXPECT_TRUE(close(compiler::to_host_tensor(single[0]), loss.get("loss"), {1e-5, 1e-6}));
    EXPECT_TRUE(close(compiler::to_host_tensor(single[1]), grad.get("grads"), {1e-4, 1e-7}));
    synk::close();
  }
}

}  // namespace

// --- a small CNN (conv2d, batch norm, max pool): gathered outputs and an averaged loss ---------

namespace synk_cnn {
const char* kCnn = R"(
shared w: f32[4, 1, 3, 3] = normal(seed=1, std=0.5);
shared b: f32[4] = normal(seed=2);
shared g: f32[4] = ones;
shared be: f32[4];
shared rm: f32[4];
shared rv: f32[4] = ones;
shared fc: f32[36, 3] = normal(seed=3, std=0.2);
fn eval(scatter x: f32[n, 1, 7, 6]) {
  let h = max_pool2d(relu(batch_norm(conv2d(x, w, b, padding=1), g, be, rm, rv)), 2);
  out logits: gather = flatten(h, axis=1) @ fc;
  out m: avg = mean(avg_pool2d(h, 3, stride=1, padding=1));
}
)";
}  // namespace synk_cnn

TEST_F(Examples, ConvNetOnOneToThreeRanks) {
  SCOPED_TRACE(trace());
  HostTensor x = random_tensor(ir::DType::F32, {23, 1, 7, 6}, rng_);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    jit::Module mod;
    if (ranks % 2 == 0) {
      mod = jit::compile_string(synk_cnn::kCnn);
      mod.function("eval");
      synk::fork(ranks);
    } else {
      synk::fork(ranks);
      mod = jit::compile_string(synk_cnn::kCnn);
    }
    Function f = mod.function("eval");
    dsl::EvalResult want = reference(mod, "eval", {x}, shared_values(mod));
    Outputs all = f({to_data(x, "x")}, {.num_slices = 2});
    EXPECT_TRUE(close(want.outputs[0], all.get("logits"), {1e-4, 1e-4}));
    EXPECT_TRUE(close(want.outputs[1], all.get("m"), {1e-4, 1e-5}));
    synk::close();
  }
}
