// Run-time hyper-parameters end to end (docs/training.md, "Hyper-parameters at run time"): a step's
// set_lr / set_hyper between calls, on 1 and 3 ranks, trains exactly (bit for bit) like a module
// compiled with the new value from the start, because both read the value from the same kind of
// f64 scalar variable; the optimizer's state (m, v, t) survives the change; the value reaches every
// rank; a schedule sets lr from the step count exactly as set_lr before each call would; the
// variables give the bits the folded constants gave (docs/training.md's hand-written momentum
// update against the generated one, through the CPU JIT); and bad keywords and values are
// reported naming them.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/testing.h"
#include "compiler/grad/linear_model_test_util.h"
#include "compiler/grad/update_rules.h"
#include "dsl/frontend.h"
#include "synk/jit.h"

using namespace synk;

namespace {

using synk::testing::error_of;

using synk::testing::linear_model;
using synk::testing::random_batch;
using Batch = synk::testing::LinearBatch;

// The variables of the adam model that a step changes.
const std::vector<std::string> kAdamState = {"w", "b", "w_m", "w_v", "b_m", "b_v", "opt_update_t"};

bool same_bits(const Array& a, const Array& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.bytes == b.bytes;
}

void expect_same_state(jit::Module& a, jit::Module& b, int ranks, const std::string& when) {
  for (int r = 0; r < ranks; ++r)
    for (const std::string& name : kAdamState)
      EXPECT_TRUE(same_bits(a.shared(name).get_value(r), b.shared(name).get_value(r)))
          << name << " on rank " << r << ", " << when;
}

class HyperAtRunTime : public ::testing::TestWithParam<int> {};

// Module `switched` trains 3 steps at lr 0.01, then set_lr(0.003) and 3 more. Module `fresh` is
// compiled with lr 0.003, gets `switched`'s state after the first 3 steps and trains the same 3
// more: every variable agrees bit for bit. Module `set_first` (compiled with 0.01, set_lr(0.003)
// before any step) equals module `compiled` (0.003 from the start) for all 6 steps.
TEST_P(HyperAtRunTime, SetLrBetweenStepsEqualsCompilingWithIt) {
  const int ranks = GetParam();
  jit::Module switched = jit::compile_string(linear_model("adam(lr=0.01)"));
  jit::Module fresh = jit::compile_string(linear_model("adam(lr=0.003)"));
  jit::Module set_first = jit::compile_string(linear_model("adam(lr=0.01)"));
  jit::Module compiled = jit::compile_string(linear_model("adam(lr=0.003)"));
  TrainStep set_first_step = set_first.train_step("train");
  set_first_step.set_lr(0.003);   // before the fork: the master's value, inherited by the workers
  ASSERT_EQ(ranks, synk::fork(ranks));
  TrainStep switched_step = switched.train_step("train"), fresh_step = fresh.train_step("train");
  TrainStep compiled_step = compiled.train_step("train");
  EXPECT_EQ(switched_step.lr(), 0.01);
  EXPECT_EQ(set_first_step.lr(), 0.003);

  std::mt19937_64 rng(77);
  std::vector<Batch> batches;
  for (int s = 0; s < 6; ++s) batches.push_back(random_batch(6 + 2 * s, rng));
  for (int s = 0; s < 3; ++s) switched_step({batches[s].x, batches[s].y});

  // The switch changes lr on every rank and nothing else.
  std::vector<Array> before;
  for (const std::string& name : kAdamState) before.push_back(switched.shared(name).get_value(ranks - 1));
  switched_step.set_lr(0.003);
  EXPECT_EQ(switched_step.lr(), 0.003);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(switched.shared("opt_lr").values<double>(r), std::vector<double>{0.003});
  for (size_t k = 0; k < kAdamState.size(); ++k)
    EXPECT_TRUE(same_bits(before[k], switched.shared(kAdamState[k]).get_value(ranks - 1)))
        << kAdamState[k] << " changed by set_lr";
  EXPECT_EQ(switched.shared("opt_update_t").values<float>(), std::vector<float>{3}) << "no reset of the state";

  // `fresh` continues from `switched`'s state with its compiled lr.
  for (int r = 0; r < ranks; ++r)
    for (const std::string& name : kAdamState) {
      const Array value = switched.shared(name).get_value(r);
      fresh.shared(name).set_value(r, value.ref());
    }
  for (int s = 3; s < 6; ++s) {
    const Batch& b = batches[s];
    const Outputs a = switched_step({b.x, b.y});
    const Outputs c = fresh_step({b.x, b.y});
    EXPECT_TRUE(same_bits(a[0], c[0])) << "loss_sum, step " << s;
    expect_same_state(switched, fresh, ranks, fmt::format("after step {}", s));
  }
  EXPECT_EQ(switched.shared("opt_update_t").values<float>(), std::vector<float>{6});
  EXPECT_EQ(switched_step.step_index(), 6);

  for (int s = 0; s < 6; ++s) {
    const Batch& b = batches[s];
    set_first_step({b.x, b.y});
    compiled_step({b.x, b.y});
    expect_same_state(set_first, compiled, ranks, fmt::format("set before step 0, after step {}", s));
  }
  // And lr mattered: the module trained at 0.01 throughout ended elsewhere.
  EXPECT_FALSE(same_bits(switched.shared("w").get_value(), set_first.shared("w").get_value()));
  synk::close();
}

// A schedule sets lr = schedule(step_index) before each call: the same bits as set_lr by hand.
TEST_P(HyperAtRunTime, ScheduleEqualsSetLrBeforeEachCall) {
  const int ranks = GetParam();
  jit::Module scheduled = jit::compile_string(linear_model("adam(lr=0.01)"));
  jit::Module by_hand = jit::compile_string(linear_model("adam(lr=0.01)"));
  ASSERT_EQ(ranks, synk::fork(ranks));
  TrainStep a = scheduled.train_step("train"), b = by_hand.train_step("train");
  const Schedule schedule = Schedule::cosine(0.02, 4, 0.001).with_warmup(2);
  a.set_schedule(schedule);
  std::mt19937_64 rng(3);
  for (int s = 0; s < 7; ++s) {
    const Batch batch = random_batch(8, rng);
    EXPECT_EQ(a.step_index(), s);
    b.set_lr(schedule(s));
    a({batch.x, batch.y});
    b({batch.x, batch.y});
    EXPECT_EQ(a.lr(), schedule(s)) << "step " << s;
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(scheduled.shared("opt_lr").values<double>(r), std::vector<double>{schedule(s)}) << "rank " << r;
    expect_same_state(scheduled, by_hand, ranks, fmt::format("after step {}", s));
  }
  // Resuming: the step index is settable; clearing the schedule keeps the last lr.
  a.set_step_index(1);
  const Batch batch = random_batch(8, rng);
  a({batch.x, batch.y});
  EXPECT_EQ(a.lr(), schedule(1));
  a.clear_schedule();
  a({batch.x, batch.y});
  EXPECT_EQ(a.lr(), schedule(1));
  EXPECT_EQ(a.step_index(), 3);
  synk::close();
}

INSTANTIATE_TEST_SUITE_P(Ranks, HyperAtRunTime, ::testing::Values(1, 3),
                         [](const auto& info) { return fmt::format("ranks{}", info.param); });

// Every hyper-parameter of an adamw step with clipping is settable; clip_norm takes effect.
TEST(HyperAtRunTime, EveryKeywordOfAnAdamwStepWithClipping) {
  jit::Module mod = jit::compile_string(linear_model("adamw(lr=0.01, clip_norm=0)"));
  TrainStep step = mod.train_step("train");
  std::vector<std::string> keywords;
  for (const HyperParameter& h : step.hyper_parameters()) keywords.push_back(h.keyword);
  EXPECT_EQ(keywords, (std::vector<std::string>{"lr", "beta1", "beta2", "epsilon", "weight_decay", "clip_norm"}));
  EXPECT_EQ(step.hyper("weight_decay"), 0.01);
  EXPECT_EQ(step.hyper("clip_norm"), 0);
  ASSERT_EQ(2, synk::fork(2));
  step.set_hyper("beta1", 0.5);
  step.set_hyper("weight_decay", 0.1);
  step.set_hyper("epsilon", 1e-6);
  EXPECT_EQ(mod.shared("opt_beta1").values<double>(1), std::vector<double>{0.5});
  EXPECT_EQ(mod.shared("opt_weight_decay").values<double>(1), std::vector<double>{0.1});
  // The flat gradient is what gets clipped: after the first step the first moment is
  // m = (1 - beta1) * the clipped gradient, of norm (1 - beta1) * clip_norm.
  step.set_hyper("clip_norm", 1e-3);
  std::mt19937_64 rng(9);
  const Batch b = random_batch(8, rng);
  step({b.x, b.y});
  std::vector<float> grads = mod.shared("opt_grads").values<float>();
  std::vector<float> m = mod.shared("w_m").values<float>(), mb = mod.shared("b_m").values<float>();
  m.insert(m.end(), mb.begin(), mb.end());
  double norm_g = 0, norm_m = 0;
  for (float g : grads) norm_g += double(g) * g;
  for (float x : m) norm_m += double(x) * x;
  ASSERT_GT(std::sqrt(norm_g), 1e-2) << "the gradient must be larger than the threshold";
  EXPECT_NEAR(std::sqrt(norm_m), 0.5 * 1e-3, 1e-8) << "m = (1 - beta1) * g clipped to norm 1e-3";
  synk::close();
}

TEST(HyperAtRunTime, BadKeywordsAndValuesAreUsageErrorsNamingThem) {
  jit::Module mod = jit::compile_string(linear_model("momentum(lr=0.1)"));
  TrainStep step = mod.train_step("train");
  std::string e = error_of<UsageError>([&] { step.set_hyper("beta1", 0.5); });
  EXPECT_HAS(e, "training step 'train': no hyper-parameter 'beta1'");
  EXPECT_HAS(e, "its update function has: lr, momentum");
  e = error_of<UsageError>([&] { step.hyper("clip_norm"); });
  EXPECT_HAS(e, "declare clip_norm=0");
  EXPECT_HAS(error_of<UsageError>([&] { step.set_lr(-1); }), "hyper-parameter 'lr' must be a finite number >= 0, got -1");
  EXPECT_HAS(error_of<UsageError>([&] { step.set_hyper("momentum", 1); }), "'momentum' must be in [0, 1), got 1");
  EXPECT_HAS(error_of<UsageError>([&] { step.set_lr(NAN); }), "'lr' must be a finite number >= 0");
  EXPECT_HAS(error_of<UsageError>([&] { step.set_hyper("momentum", INFINITY); }), "'momentum' must be in [0, 1)");
  EXPECT_HAS(error_of<UsageError>([&] { step.set_step_index(-2); }), "step index must be >= 0, got -2");
  EXPECT_EQ(step.lr(), 0.1) << "a rejected value changes nothing";
  step.set_lr(0);   // unlike a declaration: where a schedule such as cosine(lr, T) ends
  EXPECT_EQ(step.lr(), 0);
  step.set_schedule(Schedule::cosine(0.1, 2));
  EXPECT_EQ(step.schedule()->describe(), "cosine(lr=0.1, steps=2, min_lr=0)");
  EXPECT_HAS(error_of<UsageError>([] { TrainStep().set_lr(0.1); }), "empty synk::TrainStep");
  // A hyper-parameter's variable name that is taken: the module is rejected naming it.
  EXPECT_HAS(error_of<UserError>([] { jit::compile_string("shared opt_lr: f64[1];\n" + linear_model("sgd(lr=0.1)")); }),
             "adds 'opt_lr'");
}

// The ```synk block under "## Example" in docs/training.md: a momentum update written by hand
// with the constants 0.05 and 0.9, as add_update_function generated it before hyper-parameters
// became variables.
std::string docs_example() {
  std::ifstream file(std::string(SYNK_SOURCE_DIR) + "/docs/training.md");
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  const size_t begin = doc.find("```synk\n", doc.find("## Example"));
  const size_t end = doc.find("```", begin + 8);
  if (begin == std::string::npos || end == std::string::npos) return {};
  return doc.substr(begin + 8, end - begin - 8);
}

TEST(HyperAtRunTime, VariablesGiveTheBitsOfFoldedConstants) {
  const std::string source = docs_example();
  ASSERT_FALSE(source.empty()) << "no ```synk block under '## Example' in docs/training.md";
  jit::Module folded = jit::compile_string(source);
  ir::Module ir = dsl::compile_source("training.md.synk", source);
  ir.shareds.resize(4);   // w1, b1, w2, b2: the generated update adds the velocities
  ir.functions = {*ir.find_function("gradient")};
  compiler::add_update_function(ir, "train_step", std::vector<std::string>{"w1", "b1", "w2", "b2"},
                                compiler::UpdateRule::with_momentum(0.05));
  jit::Module generated = jit::compile(ir);
  ASSERT_EQ(generated.shared("train_step_momentum").values<double>(), std::vector<double>{0.9});
  ASSERT_EQ(1, synk::fork(1));
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> pixel(0, 1);
  const std::vector<std::string> names = {"w1", "b1", "w2", "b2", "w1_velocity", "b1_velocity", "w2_velocity",
                                          "b2_velocity"};
  for (int s = 0; s < 3; ++s) {
    std::vector<float> xs(6 * 784);
    std::vector<int64_t> ys(6);
    for (float& v : xs) v = pixel(rng);
    for (int64_t& v : ys) v = int64_t(rng() % 10);
    const Data x = data<float>(xs, {6, 784}), y = data<int64_t>(ys, {6});
    for (jit::Module* m : {&folded, &generated}) {
      const Outputs out = m->function("gradient")({x, y});
      const Data grad = data<float>(to_vector<float>(out[1]), out[1].shape);
      m->function("train_step")({grad});
    }
    for (const std::string& name : names)
      EXPECT_TRUE(same_bits(folded.shared(name).get_value(), generated.shared(name).get_value()))
          << name << " after step " << s;
  }
  EXPECT_NE(folded.shared("w2_velocity").values<float>(), std::vector<float>(2560, 0.0f)) << "the steps ran";
  synk::close();
}

}  // namespace
