// Tests of call planning (no processes): the splitting rule, rank parts with slices, and every
// usage error form of SEMANTICS section 9, each checked for the argument, expected and received
// values in its message.
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/call/call_plan.h"
#include "base/errors.h"
#include "runtime/testing.h"

using namespace synk;
using namespace synk::rt;
using namespace synk::testing;   // the runtime test helpers (runtime/testing.h)

namespace {

struct Fixture {
  FunctionSignature sig;
  ModuleSpec module;
  std::vector<std::vector<std::vector<int64_t>>> shapes;   // [rank][var]
  PlanRequest req;

  explicit Fixture(int nranks) {
    sig.name = "f";
    sig.symbols = {"n", "d"};
    sig.inputs = {input("x", Role::Scatter, DType::F32, {sym(0), fixed(3)}),
                  input("y", Role::Broadcast, DType::F32, {sym(1)}),
                  input("m", Role::Minibatch, DType::I64, {sym(0)})};
    sig.outputs = {synk::testing::output("z", ReduceMode::Avg, DType::F32, {}),
                   synk::testing::output("g", ReduceMode::Gather, DType::F32, {sym(0)})};
    module.symbols = {"r"};
    module.shareds = {synk::testing::shared("data", DType::F32, {DimSpec{0, 0}, fixed(2)}, {}, true),
                      synk::testing::shared("w", DType::F32, {fixed(2)})};
    shapes.assign(size_t(nranks), {{5, 2}, {2}});
    req.signature = &sig;
    req.module = &module;
    req.nranks = nranks;
    req.inputs = {InputInfo{DType::F32, {10, 3}, false, "xd"}, InputInfo{DType::F32, {4}, false, "yd"},
                  InputInfo{DType::I64, {10}, false, "md"}};
    req.shared_shape = [this](int r, int v) -> const std::vector<int64_t>& { return shapes[size_t(r)][size_t(v)]; };
  }
};

std::string error_of(const PlanRequest& req) { return usage_error_of([&] { plan_call(req); }); }

}  // namespace

TEST(Split, ExactIntegerRuleCoversEveryRowOnce) {
  for (int64_t L : {0, 1, 2, 7, 10, 99, 100, 1001})
    for (int64_t N = 1; N <= 9; ++N) {
      int64_t expect_lo = 0;
      for (int64_t r = 0; r < N; ++r) {
        auto [lo, hi] = split_range(L, N, r);
        EXPECT_EQ(lo, expect_lo);
        EXPECT_EQ(lo, (r * L) / N);
        EXPECT_LE(hi - lo, L / N + 1);
        EXPECT_GE(hi - lo, L / N);
        expect_lo = hi;
      }
      EXPECT_EQ(expect_lo, L);
    }
  // No overflow for huge lengths.
  auto [lo, hi] = split_range(int64_t(1) << 62, 3, 2);
  EXPECT_EQ(hi, int64_t(1) << 62);
  EXPECT_EQ(lo, int64_t((__int128(2) << 62) / 3));
}

// Far more slices than rows: the parts are those of the slice-by-slice rule (every row in the
// slice split_range gives it), found without visiting the empty slices (10^15 of them here).
TEST(Plan, HugeSliceCountsGiveTheSlicesOfTheRule) {
  Fixture fx(3);
  for (int64_t slices : {int64_t(7), int64_t(21), int64_t(22), int64_t(1000003), int64_t(1) << 50}) {
    fx.req.num_slices = slices;
    CallPlan plan = plan_call(fx.req);
    for (int r = 0; r < 3; ++r) {
      auto [lo, hi] = split_range(plan.positions, 3, r);
      std::vector<std::pair<int64_t, int64_t>> expect;   // each row alone, or with its neighbours
      for (int64_t s = 0; slices < 100 && s < slices; ++s) {
        auto [a, b] = split_range(hi - lo, slices, s);
        if (b > a) expect.emplace_back(lo + a, lo + b);
      }
      if (slices >= 100)
        for (int64_t i = lo; i < hi; ++i) expect.emplace_back(i, i + 1);
      std::vector<std::pair<int64_t, int64_t>> got;
      for (const Part& p : rank_parts(plan, r)) got.emplace_back(p.pos_lo, p.pos_hi);
      EXPECT_EQ(got, expect) << slices << " slices, rank " << r;
    }
  }
}

TEST(Plan, PartsAndWeightsWithSlices) {
  Fixture fx(3);
  fx.req.num_slices = 2;
  CallPlan plan = plan_call(fx.req);
  EXPECT_TRUE(plan.has_scattered);
  EXPECT_EQ(plan.positions, 10);
  EXPECT_EQ(plan.inputs, (std::vector<InputUse>{InputUse::Full, InputUse::Broadcast, InputUse::Positional}));
  // Ranks own [0,3), [3,6), [6,10); slices split each again.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> expect = {
      {{0, 1}, {1, 3}}, {{3, 4}, {4, 6}}, {{6, 8}, {8, 10}}};
  int64_t total = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<Part> parts = rank_parts(plan, r);
    ASSERT_EQ(parts.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      EXPECT_EQ(parts[s].pos_lo, expect[size_t(r)][s].first);
      EXPECT_EQ(parts[s].pos_hi, expect[size_t(r)][s].second);
      EXPECT_EQ(parts[s].weight, parts[s].pos_hi - parts[s].pos_lo);
      total += parts[s].weight;
    }
  }
  EXPECT_EQ(total, 10);
  EXPECT_EQ(rank_weights(plan), (std::vector<int64_t>{3, 3, 4}));
  // More slices than rows: empty slices are left out.
  fx.req.num_slices = 5;
  fx.req.batch = RowSelection{RowSelection::Kind::Count, 0, 4, {}};
  plan = plan_call(fx.req);
  EXPECT_EQ(rank_parts(plan, 0).size(), 1u);   // rank 0 owns 1 position
  EXPECT_EQ(rank_parts(plan, 2).size(), 2u);   // rank 2 owns 2
  // Nothing selected: rank 0 runs once on zero rows, the others not at all.
  fx.req.batch = RowSelection{RowSelection::Kind::Range, 4, 4, {}};
  plan = plan_call(fx.req);
  EXPECT_TRUE(plan.empty_call);
  ASSERT_EQ(rank_parts(plan, 0).size(), 1u);
  EXPECT_EQ(rank_parts(plan, 0)[0].weight, 1);
  EXPECT_TRUE(rank_parts(plan, 1).empty());
}

// Deterministic steps: shards [k*m, (k+1)*m) of the positions, fixed whatever the rank count and
// num_slices, dealt whole to the ranks; a rank may get none.
TEST(Plan, MicroShardsAreFixedByPositionAndDealtWhole) {
  for (int nranks = 1; nranks <= 5; ++nranks)
    for (int64_t slices : {int64_t(1), int64_t(3)}) {
      Fixture fx(nranks);
      fx.req.micro_shard_rows = 3;
      fx.req.num_slices = slices;
      const CallPlan plan = plan_call(fx.req);
      std::vector<std::pair<int64_t, int64_t>> shards;
      std::vector<int64_t> weights;
      for (int r = 0; r < nranks; ++r) {
        int64_t weight = 0;
        for (const Part& p : rank_parts(plan, r)) {
          shards.emplace_back(p.pos_lo, p.pos_hi);
          EXPECT_EQ(p.weight, p.pos_hi - p.pos_lo);
          weight += p.weight;
        }
        weights.push_back(weight);
      }
      EXPECT_EQ(shards, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 9}, {9, 10}}))
          << nranks << " ranks, " << slices << " slices";
      EXPECT_EQ(rank_weights(plan), weights);
      if (nranks == 5) {
        EXPECT_TRUE(rank_parts(plan, 4).empty() || rank_parts(plan, 0).empty()) << "4 shards, 5 ranks";
      }
    }
  Fixture fx(2);
  fx.req.micro_shard_rows = -2;
  EXPECT_EQ(error_of(fx.req), "micro_shard_rows: must be >= 0 (0: off), received -2");
}

TEST(Plan, BatchFormsMapPositionsToRows) {
  Fixture fx(2);
  fx.req.batch = RowSelection{RowSelection::Kind::Range, 2, 9, {}};
  CallPlan plan = plan_call(fx.req);
  EXPECT_EQ(plan.positions, 7);
  EXPECT_EQ(plan.select_start, 2);
  std::vector<int64_t> list = {9, 0, 0, 3};
  fx.req.batch = RowSelection{RowSelection::Kind::List, 0, 0, IndexSource{list.data(), DType::I64, 4}};
  plan = plan_call(fx.req);
  EXPECT_EQ(plan.positions, 4);
  EXPECT_EQ(plan.select, RowSelection::Kind::List);
  EXPECT_EQ(plan.select_list.at(0), 9);
  std::vector<int32_t> list32 = {1, 2};
  fx.req.batch.list = IndexSource{list32.data(), DType::I32, 2};
  EXPECT_EQ(plan_call(fx.req).positions, 2);
}

TEST(PlanErrors, Arguments) {
  Fixture fx(2);
  PlanRequest r = fx.req;
  r.inputs.pop_back();
  EXPECT_HAS(error_of(r), "f: expected 3 inputs (x, y, m), received 2");
  r = fx.req;
  r.inputs[0].dtype = DType::F64;
  EXPECT_HAS(error_of(r), "input 'x' (argument 1 of f): expected dtype f32, received Data 'xd' of dtype f64");
  r = fx.req;
  r.inputs[1].shape = {4, 1};
  EXPECT_HAS(error_of(r), "input 'y' (argument 2 of f): expected 1 dimension (f32[d]), received Data 'yd' of shape [4, 1]");
  r = fx.req;
  r.inputs[0].shape = {10, 4};
  EXPECT_HAS(error_of(r), "expected shape f32[n, 3], received Data 'xd' of shape [10, 4] (axis 1 must be 3)");
  r = fx.req;
  r.inputs[2].missing = true;
  EXPECT_HAS(error_of(r), "input 'm' (argument 3 of f): expected a synk::Data, received an empty handle");
  r = fx.req;
  r.inputs[2].shape = {9};
  EXPECT_HAS(error_of(r), "scattered inputs must have equal lengths when no batch is given: 'x' has 10 rows, 'm' has 9 rows");
}

TEST(PlanErrors, SymbolsMustAgree) {
  Fixture fx(1);
  fx.sig.inputs.push_back(input("v", Role::Broadcast, DType::F32, {sym(1), sym(1)}));
  fx.req.inputs.push_back(InputInfo{DType::F32, {4, 5}, false, "vd"});
  EXPECT_HAS(error_of(fx.req), "symbol 'd' is 5 here (axis 1, shape [4, 5]) but 4 in input 'y'");
}

TEST(PlanErrors, Batch) {
  Fixture fx(2);
  fx.req.batch = RowSelection{RowSelection::Kind::Count, 0, -1, {}};
  EXPECT_HAS(error_of(fx.req), "batch: a count must be >= 0, received -1");
  fx.req.batch = RowSelection{RowSelection::Kind::Count, 0, 11, {}};
  EXPECT_HAS(error_of(fx.req), "batch: count 11 is larger than the 10 rows of input 'x'");
  fx.req.batch = RowSelection{RowSelection::Kind::Range, 5, 11, {}};
  EXPECT_HAS(error_of(fx.req), "batch: range [5, 11) ends past the 10 rows of input 'x'");
  fx.req.batch = RowSelection{RowSelection::Kind::Range, -1, 3, {}};
  EXPECT_HAS(error_of(fx.req), "batch: a range needs 0 <= start <= stop, received [-1, 3)");
  fx.req.batch = RowSelection{RowSelection::Kind::Range, 4, 3, {}};
  EXPECT_HAS(error_of(fx.req), "received [4, 3)");
  std::vector<int64_t> list = {0, 9, 10, 1};
  fx.req.batch = RowSelection{RowSelection::Kind::List, 0, 0, IndexSource{list.data(), DType::I64, 4}};
  EXPECT_HAS(error_of(fx.req), "batch: index 10 at position 2 is out of range for input 'x' with 10 rows (valid indices are 0..9)");
  list = {3, -2};
  fx.req.batch.list.count = 2;
  EXPECT_HAS(error_of(fx.req), "batch: index -2 at position 1 is negative");
  // A minibatch input shorter than the batch.
  fx.req.inputs[2].shape = {3};
  fx.req.inputs[0].shape = {20, 3};
  fx.req.batch = RowSelection{RowSelection::Kind::Range, 10, 15, {}};
  EXPECT_HAS(error_of(fx.req), "minibatch input 'm' has 3 rows but the batch selects 5 positions");
  fx.req.inputs[2].shape = {5};
  EXPECT_NO_THROW(plan_call(fx.req));
  // batch without scattered inputs.
  Fixture bc(1);
  bc.sig.inputs = {input("y", Role::Broadcast, DType::F32, {sym(1)})};
  bc.req.inputs = {InputInfo{DType::F32, {4}, false, ""}};
  bc.req.batch = RowSelection{RowSelection::Kind::Count, 0, 2, {}};
  EXPECT_HAS(error_of(bc.req), "batch: f has no scattered inputs to select rows from");
}

TEST(PlanErrors, BatchSAndSlicesAndSubsets) {
  Fixture fx(3);
  fx.sig.shareds_read = {0, 1};
  fx.req.batch_s = {RowSelection{RowSelection::Kind::Range, 0, 2, {}}, RowSelection{RowSelection::Kind::Range, 0, 2, {}}};
  EXPECT_HAS(error_of(fx.req), "batch_s: expected one selection for every rank or a list of exactly 3 (one per rank), received a list of 2");
  fx.shapes[2][0] = {4, 2};
  std::vector<int64_t> list = {1, 4};
  fx.req.batch_s = {RowSelection{RowSelection::Kind::List, 0, 0, IndexSource{list.data(), DType::I64, 2}}};
  EXPECT_HAS(error_of(fx.req), "batch_s: index 4 at position 1 is out of range for shared variable 'data' on rank 2 with 4 rows");
  fx.req.batch_s = {RowSelection{RowSelection::Kind::Range, 0, 2, {}}, RowSelection{RowSelection::Kind::Range, 0, 2, {}},
                    RowSelection{RowSelection::Kind::Range, 1, 5, {}}};
  EXPECT_HAS(error_of(fx.req), "batch_s[2]: range [1, 5) ends past the 4 rows of shared variable 'data' on rank 2");
  fx.req.batch_s[2].stop = 4;
  CallPlan plan = plan_call(fx.req);
  EXPECT_EQ(plan.shared_rows[2].start, 1);
  EXPECT_EQ(plan.shared_rows[2].count, 3);
  fx.sig.shareds_read = {1};
  EXPECT_HAS(error_of(fx.req), "batch_s: f reads no sliceable shared variable");
  fx.req.batch_s.clear();
  for (int64_t bad : {0, -3}) {
    fx.req.num_slices = bad;
    EXPECT_HAS(error_of(fx.req), "num_slices: must be >= 1, received " + std::to_string(bad));
  }
  fx.req.num_slices = 1;
  fx.req.output_subset = {"g", "q"};
  EXPECT_HAS(error_of(fx.req), "output_subset: f has no output 'q' (its outputs: z, g)");
  fx.req.output_subset = {"g", "g"};
  EXPECT_HAS(error_of(fx.req), "output_subset: output 'g' is listed twice");
  fx.req.output_subset = {"g"};
  EXPECT_EQ(plan_call(fx.req).outputs, std::vector<int32_t>{1});
}

TEST(SignatureErrors, RegistrationChecks) {
  Fixture fx(1);
  auto error = [&](FunctionSignature sig) {
    try {
      validate_signature(sig, fx.module);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("<no UsageError>");
  };
  EXPECT_EQ(error(fx.sig), "<no UsageError>");
  FunctionSignature s = fx.sig;
  s.outputs.push_back(synk::testing::output("count", ReduceMode::Avg, DType::I64, {}));
  EXPECT_HAS(error(s), "output 'count' has dtype i64, which cannot use mode avg");
  s = fx.sig;
  s.inputs[0].dims = {};
  EXPECT_HAS(error(s), "scattered input 'x' is a scalar");
  s = fx.sig;
  s.inputs[1].dims = {sym(0)};
  EXPECT_HAS(error(s), "symbol 'n' is the row axis of a scattered input and also axis 0 of input 'y'");
  s = fx.sig;
  s.updates = {UpdateSpec{1, ReduceMode::Gather}};
  EXPECT_HAS(error(s), "the update of 'w' cannot use mode gather");
  s.updates = {UpdateSpec{1, ReduceMode::Sum}, UpdateSpec{1, ReduceMode::Sum}};
  EXPECT_HAS(error(s), "updates shared variable 'w' twice");
  s.updates = {UpdateSpec{7, ReduceMode::Sum}};
  EXPECT_HAS(error(s), "updates shared variable #7 but the module has 2");
  s = fx.sig;
  s.shareds_read = {0, 0};
  EXPECT_HAS(error(s), "reads shared variable 'data' twice");
}
