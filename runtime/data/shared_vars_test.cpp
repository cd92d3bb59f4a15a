// Tests of shared-variable initialisation (the reproducible RNG of docs/language.md, checked
// against values from an independent Python implementation), load() with symbol binding,
// value checks, and the ModuleSpec encoding; plus the reducers of reduce.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "runtime/data/data.h"
#include "base/errors.h"
#include "runtime/data/npy.h"
#include "runtime/call/reduce.h"
#include "runtime/data/shared_vars.h"
#include "runtime/testing.h"

using namespace synk;
using namespace synk::rt;
using namespace synk::testing;   // the runtime test helpers (runtime/testing.h)


TEST(SplitMix64, MatchesTheReferenceStream) {
  SplitMix64 g(0);
  EXPECT_EQ(g.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(g.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(g.next(), 0x06c45d188009454full);
}

TEST(Init, UniformAndNormalAreReproducible) {
  ModuleSpec spec;
  spec.shareds = {shared("u", DType::F64, {fixed(3)}, InitSpec{InitSpec::Kind::Uniform, -1, 2, 42}),
                  shared("n", DType::F64, {fixed(3)}, InitSpec{InitSpec::Kind::Normal, 0.5, 2, 42}),
                  shared("c", DType::I32, {fixed(2), fixed(2)}, InitSpec{InitSpec::Kind::Constant, 7}),
                  shared("o", DType::F32, {}, InitSpec{InitSpec::Kind::Ones}),
                  shared("z", DType::U8, {fixed(4)})};
  std::vector<Array> v = initial_values(spec);
  const double u[3] = {1.22469463631547, -0.5202688213692397, -0.164196609234584};
  const double n[3] = {2.264497812444538, -0.4016997514377202, 0.876705268231863};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(v[0].data<double>()[i], u[i], 1e-15);
    EXPECT_NEAR(v[1].data<double>()[i], n[i], 1e-14);
  }
  EXPECT_EQ(v[2].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(v[2].data<int32_t>()[3], 7);
  EXPECT_EQ(v[3].data<float>()[0], 1.0f);
  EXPECT_EQ(v[4].data<uint8_t>()[3], 0);
  // Same spec, same values, every time (every rank initialises its own copy).
  std::vector<Array> again = initial_values(spec);
  EXPECT_EQ(again[1].bytes, v[1].bytes);
}

TEST(Init, LoadBindsSymbolsAndChecksTheFile) {
  std::string path = ::testing::TempDir() + "synk_sv_" + std::to_string(getpid()) + ".npy";
  Array file = make_array<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  npy::write(path, file.ref());
  ModuleSpec spec;
  spec.symbols = {"k", "m"};
  spec.shareds = {shared("b", DType::F32, {sym(0)}),   // sized by the load below
                  shared("w", DType::F64, {fixed(2), sym(0)}, InitSpec{InitSpec::Kind::Load, 0, 1, 0, path}),
                  shared("free", DType::F32, {sym(1), fixed(2)})};
  std::vector<Array> v = initial_values(spec);
  EXPECT_EQ(v[1].dtype, DType::F64);
  EXPECT_EQ(v[1].data<double>()[5], 6.0);
  EXPECT_EQ(v[0].shape, std::vector<int64_t>{3});
  EXPECT_EQ(v[2].shape, (std::vector<int64_t>{0, 2})) << "an unbound symbol starts at 0";
  spec.shareds[1].dims = {fixed(3), sym(0)};
  EXPECT_HAS(usage_error_of([&] { initial_values(spec); }), "declared f64[3, k], the file holds shape [2, 3]");
  spec.shareds[1].dims = {fixed(2), sym(0)};
  spec.shareds[1].dtype = DType::F32;
  EXPECT_HAS(usage_error_of([&] { initial_values(spec); }), "expected dtype f32 (or one that converts safely to it), received i32");
  spec.shareds[1].init.path = path + ".missing";
  EXPECT_HAS(usage_error_of([&] { initial_values(spec); }), "cannot open");
  std::remove(path.c_str());
}

TEST(Init, ValidateAndConform) {
  ModuleSpec spec;
  spec.shareds = {shared("a", DType::F32, {fixed(2)}), shared("a", DType::F32, {fixed(2)})};
  EXPECT_HAS(usage_error_of([&] { validate_module(spec); }), "shared variable 'a' is declared twice");
  spec.shareds = {shared("s", DType::F32, {}, {}, true)};
  EXPECT_HAS(usage_error_of([&] { validate_module(spec); }), "sliceable shared variable 's' needs at least one dimension");
  SharedSpec s = shared("w", DType::F32, {fixed(2), sym(0)});
  Array bad = make_array<float>({3, 1}, {1, 2, 3});
  EXPECT_HAS(usage_error_of([&] { conform_shared_value(s, {"n"}, bad.ref(), false, "set_value('w')"); }),
             "set_value('w'): expected shape f32[2, n], received [3, 1] (axis 0 must be 2)");
  Array ints = make_array<uint8_t>({2, 1}, {1, 2});
  Array ok = conform_shared_value(s, {"n"}, ints.ref(), false, "w");
  EXPECT_EQ(ok.dtype, DType::F32);
  EXPECT_EQ(ok.data<float>()[1], 2.0f);
}

TEST(Init, ModuleEncodingRoundTrips) {
  ModuleSpec spec;
  spec.symbols = {"n"};
  spec.shareds = {shared("x", DType::I64, {sym(0), fixed(4)}, InitSpec{InitSpec::Kind::Normal, 1.5, 0.25, 99}, true),
                  shared("y", DType::U8, {}, InitSpec{InitSpec::Kind::Load, 0, 1, 0, "/tmp/f.npy"})};
  ModuleSpec back = decode_module(encode_module(spec));
  EXPECT_EQ(back.symbols, spec.symbols);
  ASSERT_EQ(back.shareds.size(), 2u);
  EXPECT_EQ(back.shareds[0].name, "x");
  EXPECT_EQ(back.shareds[0].dims[0].symbol, 0);
  EXPECT_EQ(back.shareds[0].dims[1].size, 4);
  EXPECT_EQ(back.shareds[0].init.seed, 99u);
  EXPECT_EQ(back.shareds[0].init.b, 0.25);
  EXPECT_TRUE(back.shareds[0].sliceable);
  EXPECT_EQ(back.shareds[1].init.path, "/tmp/f.npy");
  EXPECT_THROW(decode_module(encode_module(spec).substr(0, 10)), InternalError);
}

TEST(Accumulator, WeightedAverageIsExact) {
  // Rows 1..5 split unevenly as (1), (2, 3), (), (4, 5): the weighted mean of part means is the
  // mean of all rows; the empty part is simply never added.
  Accumulator rank0(ReduceMode::Avg, DType::F32, "z"), rank1(ReduceMode::Avg, DType::F32, "z");
  rank0.add(make_array<float>({}, {1.0f}).ref(), 1);
  rank0.add(make_array<float>({}, {2.5f}).ref(), 2);
  rank1.add(make_array<float>({}, {4.5f}).ref(), 2);
  Accumulator master(ReduceMode::Avg, DType::F32, "z");
  master.add(rank0.partial().ref(), rank0.weight());
  master.add(rank1.partial().ref(), rank1.weight());
  Array out = master.finish();
  EXPECT_EQ(out.dtype, DType::F32);
  EXPECT_FLOAT_EQ(out.data<float>()[0], 3.0f);
  EXPECT_EQ(rank0.partial().dtype, DType::F64) << "partials travel in float64";
}

TEST(Accumulator, ElementwiseModesAndGather) {
  Array a = make_array<int32_t>({3}, {1, 5, -2}), b = make_array<int32_t>({3}, {4, 2, -7});
  auto run = [&](ReduceMode m) {
    Accumulator acc(m, DType::I32, "o");
    acc.add(a.ref(), 1);
    acc.add(b.ref(), 3);
    return acc.finish();
  };
  Array sum = run(ReduceMode::Sum);
  EXPECT_EQ(std::vector<int32_t>(sum.data<int32_t>(), sum.data<int32_t>() + 3), (std::vector<int32_t>{5, 7, -9}));
  Array prod = run(ReduceMode::Prod), mx = run(ReduceMode::Max), mn = run(ReduceMode::Min), none = run(ReduceMode::None);
  EXPECT_EQ(prod.data<int32_t>()[2], 14);
  EXPECT_EQ(mx.data<int32_t>()[0], 4);
  EXPECT_EQ(mn.data<int32_t>()[1], 2);
  EXPECT_EQ(none.data<int32_t>()[0], 4) << "none keeps the last part";
  Accumulator g(ReduceMode::Gather, DType::I32, "g");
  g.add(make_array<int32_t>({2, 2}, {1, 2, 3, 4}).ref(), 2);
  g.add(make_array<int32_t>({0, 2}, {}).ref(), 0);
  g.add(make_array<int32_t>({1, 2}, {5, 6}).ref(), 1);
  Array gathered = g.finish();
  EXPECT_EQ(gathered.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(gathered.data<int32_t>()[5], 6);
  EXPECT_THROW(g.add(make_array<int32_t>({1, 3}, {1, 2, 3}).ref(), 1), Error);
  Accumulator s(ReduceMode::Sum, DType::F32, "s");
  s.add(make_array<float>({2}, {1, 2}).ref(), 1);
  EXPECT_THROW(s.add(make_array<float>({3}, {1, 2, 3}).ref(), 1), Error);
  Accumulator nan(ReduceMode::Max, DType::F64, "m");
  nan.add(make_array<double>({1}, {NAN}).ref(), 1);
  nan.add(make_array<double>({1}, {3}).ref(), 1);
  EXPECT_TRUE(std::isnan(nan.finish().data<double>()[0])) << "NaN propagates through max";
  Accumulator bools(ReduceMode::Sum, DType::Bool, "b");
  bools.add(make_array<bool>({2}, {false, false}).ref(), 1);
  bools.add(make_array<bool>({2}, {true, false}).ref(), 1);
  EXPECT_EQ(bools.finish().data<bool>()[0], true);
}
