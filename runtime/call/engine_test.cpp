// The call engine end to end, on 1, 2, 3 and 4 ranks (real forks), against results computed
// directly on one device: the seeds' introductory and shared-variable examples, a multi-output
// function with updates and slicing under every batch form and minibatch inputs, batch_s over a
// scattered sliceable shared variable, validation of a whole data set with num_slices, and the
// usage errors of every call argument (each followed by a call that works).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/call/call_plan.h"
#include "synk/synk.h"
#include "runtime/testing.h"

using namespace synk;
using namespace synk::testing;   // the runtime test helpers (runtime/testing.h)

namespace {

double f64(const Array& a, int64_t i = 0) {
  double v = 0;
  rt::visit_dtype(a.dtype, [&]<class T>() { v = double(a.data<T>()[i]); });
  return v;
}

// --- The introductory example: z = mean(x @ y, axis=0) -----------------------------------------

std::shared_ptr<rt::CompiledFunction> intro_function() {
  rt::FunctionSignature sig;
  sig.name = "intro";
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, DType::F32, {sym(0), fixed(10)}),
                input("y", rt::Role::Broadcast, DType::F32, {fixed(10)})};
  sig.outputs = {output("z", ReduceMode::Avg, DType::F32, {})};
  return std::make_shared<LambdaFunction>(sig, [](auto in, auto, auto out, auto) {
    const float* x = ptr<float>(in[0]);
    const float* y = ptr<float>(in[1]);
    int64_t n = in[0].shape[0];
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < 10; ++k) total += double(x[i * 10 + k]) * y[k];
    out[0].resize(DType::F32, {});
    *out[0].template data<float>() = float(total / double(n));
  });
}

// --- A multi-output function with updates --------------------------------------------------------
// x: f64[n, 3] scattered, w: f64[3] broadcast, m: i64[n] minibatch; shareds acc, avgv: f64[3].

double dot3(const double* x, const double* w) { return x[0] * w[0] + x[1] * w[1] + x[2] * w[2]; }

std::shared_ptr<rt::CompiledFunction> multi_function() {
  rt::FunctionSignature sig;
  sig.name = "multi";
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, DType::F64, {sym(0), fixed(3)}),
                input("w", rt::Role::Broadcast, DType::F64, {fixed(3)}),
                input("m", rt::Role::Minibatch, DType::I64, {sym(0)})};
  sig.outputs = {output("mean", ReduceMode::Avg, DType::F64, {}),
                 output("colsum", ReduceMode::Sum, DType::F64, {fixed(3)}),
                 output("mx", ReduceMode::Max, DType::F64, {}),
                 output("mn", ReduceMode::Min, DType::F64, {}),
                 output("proj", ReduceMode::Gather, DType::F64, {sym(0)}),
                 output("count", ReduceMode::Sum, DType::I64, {}),
                 output("prod", ReduceMode::Prod, DType::F64, {}),
                 output("first", ReduceMode::None, DType::F64, {fixed(3)})};
  sig.shareds_read = {0, 1};
  sig.updates = {rt::UpdateSpec{0, ReduceMode::Sum}, rt::UpdateSpec{1, ReduceMode::Avg}};
  return std::make_shared<LambdaFunction>(sig, [](auto in, auto sh, auto out, auto upd) {
    const double* x = ptr<double>(in[0]);
    const double* w = ptr<double>(in[1]);
    const int64_t* m = ptr<int64_t>(in[2]);
    int64_t n = in[0].shape[0];
    if (in[2].shape[0] != n) throw std::runtime_error("minibatch rows do not pair with x rows");
    for (auto& o : out) o.bytes.clear();
    out[0].resize(DType::F64, {});
    out[1].resize(DType::F64, {3});
    out[2].resize(DType::F64, {});
    out[3].resize(DType::F64, {});
    out[4].resize(DType::F64, {n});
    out[5].resize(DType::I64, {});
    out[6].resize(DType::F64, {});
    out[7].resize(DType::F64, {3});
    double sum = 0, mx = -INFINITY, mn = INFINITY, prod = 1, col[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      double d = dot3(x + 3 * i, w);
      sum += d;
      mx = std::max(mx, d);
      mn = std::min(mn, d);
      prod *= 1 + 0.01 * d;
      out[4].template data<double>()[i] = d + double(m[i]);
      for (int k = 0; k < 3; ++k) col[k] += x[3 * i + k];
    }
    *out[0].template data<double>() = sum / double(n);
    std::copy(col, col + 3, out[1].template data<double>());
    *out[2].template data<double>() = mx;
    *out[3].template data<double>() = mn;
    *out[5].template data<int64_t>() = n;
    *out[6].template data<double>() = prod;
    for (int k = 0; k < 3; ++k) out[7].template data<double>()[k] = n ? x[k] : 0;
    upd[0].resize(DType::F64, {3});
    upd[1].resize(DType::F64, {3});
    for (int k = 0; k < 3; ++k) {
      upd[0].template data<double>()[k] = ptr<double>(sh[0])[k] + col[k];
      upd[1].template data<double>()[k] = ptr<double>(sh[1])[k] + col[k] / double(n);
    }
  });
}

rt::ModuleSpec multi_module() {
  rt::ModuleSpec spec;
  spec.shareds = {shared("acc", DType::F64, {fixed(3)}, rt::InitSpec{rt::InitSpec::Kind::Constant, 1.0}),
                  shared("avgv", DType::F64, {fixed(3)}, rt::InitSpec{rt::InitSpec::Kind::Uniform, 0, 1, 3})};
  return spec;
}

struct Registered {
  Module empty, shared_example, multi;
  Function intro, f, multi_fn;
};

// Everything is registered once, before the first fork, as a program would.
Registered& functions() {
  static Registered r = [] {
    Registered x;
    x.empty = synk::module({});
    rt::ModuleSpec s;
    s.shareds = {shared("s", DType::F32, {fixed(2)}, rt::InitSpec{rt::InitSpec::Kind::Ones})};
    x.shared_example = synk::module(s);
    x.multi = synk::module(multi_module());
    x.intro = synk::function(intro_function(), x.empty);
    x.f = synk::function(shared_example_function(), x.shared_example);
    x.multi_fn = synk::function(multi_function(), x.multi);
    return x;
  }();
  return r;
}

}  // namespace

TEST(Examples, IntroductoryExampleOnOneToFourRanks) {
  Registered& reg = functions();
  for (int64_t rows : {100, 7, 3}) {
    std::vector<float> xv = random_values<float>(size_t(rows) * 10), yv = random_values<float>(10);
    Data x = synk::data<float>(xv, {rows, 10}, {.name = "x"});
    Data y = synk::data<float>(yv, {10}, {.name = "y"});
    double expect = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int k = 0; k < 10; ++k) expect += double(xv[size_t(i * 10 + k)]) * yv[size_t(k)];
    expect /= double(rows);
    // The single-device result: the compiled function run directly on every row.
    Array direct = reg.intro.run_local({x, y})[0];
    EXPECT_NEAR(f64(direct), expect, 1e-5);
    for (int n = 1; n <= 4; ++n) {
      synk::fork(n);
      Outputs r = reg.intro({x, y});
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].dtype, DType::F32);
      EXPECT_EQ(r[0].shape, std::vector<int64_t>{});
      EXPECT_NEAR(f64(r.get("z")), expect, 1e-5 * (1 + std::abs(expect))) << n << " ranks, " << rows << " rows";
      EXPECT_NEAR(f64(r[0]), f64(direct), 1e-5 * (1 + std::abs(expect)));
      synk::close();
    }
  }
}

TEST(Examples, SharedVariableExample) {
  Registered& reg = functions();
  Data x = synk::data<float>({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}, {.name = "x_dat"});
  Module& m = reg.shared_example;
  // As one device (the seeds' f.as_theano): s = [1+2+3+4] * 1 = [10, 10].
  reg.f.run_local({x});
  EXPECT_EQ(synk::to_vector<float>(m.get_value("s")), (std::vector<float>{10, 10}));
  m.set_value("s", std::vector<float>{1, 1}, {2});
  synk::fork(2);
  reg.f({x});
  // The seeds print "local s after reset and Synkhronos call: [3. 3.]" and gathered [[3 3] [7 7]].
  EXPECT_EQ(synk::to_vector<float>(m.get_value("s")), (std::vector<float>{3, 3}));
  EXPECT_EQ(synk::to_vector<float>(m.get_value(1, "s")), (std::vector<float>{7, 7}));
  synk::close();
  for (int n : {1, 3, 4}) {
    m.set_value("s", std::vector<float>{1, 1}, {2});
    synk::fork(n);
    reg.f({x});
    for (int r = 0; r < n; ++r) {
      auto [lo, hi] = rt::split_range(4, n, r);
      float expect = 0;
      for (int64_t i = lo; i < hi; ++i) expect += float(i + 1);
      // A rank with no rows runs nothing and keeps its s.
      if (hi == lo) expect = 1;
      EXPECT_EQ(synk::to_vector<float>(m.get_value(r, "s")), (std::vector<float>{expect, expect}))
          << "rank " << r << " of " << n;
    }
    synk::close();
  }
}

namespace {

// The reference for `multi` on one call: `sel` maps positions to rows of x, positions index m.
void check_multi(const Outputs& r, const std::vector<double>& x, const std::vector<double>& w,
                 const std::vector<int64_t>& m, const std::vector<int64_t>& sel, int n, int64_t slices,
                 const std::vector<double>& acc0, const std::vector<double>& avg0, Module& mod,
                 const std::string& what) {
  SCOPED_TRACE(what + ", " + std::to_string(n) + " ranks, " + std::to_string(slices) + " slices");
  int64_t P = int64_t(sel.size());
  double sum = 0, mx = -INFINITY, mn = INFINITY, prod = 1, col[3] = {0, 0, 0};
  std::vector<double> proj;
  for (int64_t p = 0; p < P; ++p) {
    const double* row = &x[size_t(sel[size_t(p)]) * 3];
    double d = dot3(row, w.data());
    sum += d;
    mx = std::max(mx, d);
    mn = std::min(mn, d);
    prod *= 1 + 0.01 * d;
    proj.push_back(d + double(m[size_t(p)]));
    for (int k = 0; k < 3; ++k) col[k] += row[k];
  }
  EXPECT_NEAR(f64(r.get("mean")), sum / double(P), 1e-12);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(f64(r.get("colsum"), k), col[k], 1e-12);
  EXPECT_EQ(f64(r.get("mx")), mx);
  EXPECT_EQ(f64(r.get("mn")), mn);
  EXPECT_NEAR(f64(r.get("prod")), prod, 1e-12);
  EXPECT_EQ(f64(r.get("count")), double(P));
  ASSERT_EQ(r.get("proj").shape, std::vector<int64_t>{P});
  for (int64_t p = 0; p < P; ++p) EXPECT_NEAR(f64(r.get("proj"), p), proj[size_t(p)], 1e-12) << "position " << p;
  // none: the master's own last slice; its first row.
  auto [lo0, hi0] = rt::split_range(P, n, 0);
  int64_t last_lo = lo0;
  for (int64_t s = 0; s < slices; ++s) {
    auto [a, b] = rt::split_range(hi0 - lo0, slices, s);
    if (b > a) last_lo = lo0 + a;
  }
  for (int k = 0; k < 3; ++k) EXPECT_EQ(f64(r.get("first"), k), x[size_t(sel[size_t(last_lo)]) * 3 + size_t(k)]);
  // Updates, per rank: every slice from the starting values, accumulated (sum / weighted avg).
  for (int rank = 0; rank < n; ++rank) {
    auto [lo, hi] = rt::split_range(P, n, rank);
    int64_t nonempty = 0;
    for (int64_t s = 0; s < slices; ++s) {
      auto [a, b] = rt::split_range(hi - lo, slices, s);
      nonempty += b > a;
    }
    double rc[3] = {0, 0, 0};
    for (int64_t p = lo; p < hi; ++p)
      for (int k = 0; k < 3; ++k) rc[k] += x[size_t(sel[size_t(p)]) * 3 + size_t(k)];
    Array acc = mod.get_value(rank, "acc"), avg = mod.get_value(rank, "avgv");
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(f64(acc, k), double(nonempty) * acc0[size_t(k)] + rc[k], 1e-12) << "rank " << rank;
      double expect_avg = hi > lo ? avg0[size_t(k)] + rc[k] / double(hi - lo) : avg0[size_t(k)];
      EXPECT_NEAR(f64(avg, k), expect_avg, 1e-12) << "rank " << rank;
    }
  }
}

}  // namespace

TEST(Examples, MultiOutputWithSlicingBatchesAndMinibatches) {
  Registered& reg = functions();
  const int64_t L = 10;
  std::vector<double> xv = random_values<double>(L * 3), wv = random_values<double>(3);
  std::vector<int64_t> mv(L);
  std::iota(mv.begin(), mv.end(), 100);
  Data x = synk::data<double>(xv, {L, 3}, {.name = "x"});
  Data w = synk::data<double>(wv, {3}, {.name = "w"});
  Data m = synk::data<int64_t>(mv, {L}, {.name = "m"});
  std::vector<int64_t> dup_list = {5, 1, 1, 9, 0, 5, 3};
  Data index_data = synk::data<int32_t>({9, 9, 2, 0, 7}, {5}, {.name = "idx"});
  struct Case {
    std::string name;
    Batch batch;
    std::vector<int64_t> sel;
  };
  std::vector<int64_t> all(L), first7(7), range29(7);
  std::iota(all.begin(), all.end(), 0);
  std::iota(first7.begin(), first7.end(), 0);
  std::iota(range29.begin(), range29.end(), 2);
  std::vector<Case> cases = {{"no batch", Batch(), all},
                             {"count 7", Batch(7), first7},
                             {"range [2, 9)", Batch(Range{2, 9}), range29},
                             {"list with duplicates", Batch(dup_list), dup_list},
                             {"index Data", Batch(index_data), {9, 9, 2, 0, 7}}};
  Module& mod = reg.multi;
  for (int n = 1; n <= 4; ++n) {
    synk::fork(n);
    for (int64_t slices : {1, 3}) {
      for (const Case& c : cases) {
        std::vector<double> acc0 = {1.5, -2, 0.25}, avg0 = random_values<double>(3);
        for (int r = 0; r < n; ++r) {
          mod.set_value(r, "acc", acc0, {3});
          mod.set_value(r, "avgv", avg0, {3});
        }
        Outputs out = reg.multi_fn({x, w, m}, {.batch = c.batch, .num_slices = slices});
        check_multi(out, xv, wv, mv, c.sel, n, slices, acc0, avg0, mod, c.name);
      }
    }
    synk::close();
  }
  std::vector<std::string> expect = {x.segment_name(), w.segment_name(), m.segment_name(), index_data.segment_name()};
  std::vector<std::string> left = leftover_segments();
  std::sort(expect.begin(), expect.end());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, expect) << "only the four Data remain after close()";
}

TEST(Examples, OutputSubsetAndDataFlaggedMinibatch) {
  Registered& reg = functions();
  std::vector<double> xv = random_values<double>(30), wv = random_values<double>(3);
  Data x = synk::data<double>(xv, {10, 3});
  Data w = synk::data<double>(wv, {3});
  Data m = synk::data<int64_t>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {10});
  synk::fork(3);
  std::vector<Data> built = reg.multi_fn.build_inputs({x.ref(), w.ref(), m.ref()});
  EXPECT_EQ(built[0].name(), "x");
  EXPECT_TRUE(built[2].minibatch());
  EXPECT_EQ(f64(reg.multi_fn(built).get("count")), 10);
  EXPECT_HAS(usage_error_of([&] { reg.multi_fn.build_inputs({x.ref()}); }), "build_inputs: multi has 3 inputs, received 1 values");
  Outputs out = reg.multi_fn({x, w, m}, {.output_subset = {"count", "proj"}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.names(), (std::vector<std::string>{"count", "proj"}));
  EXPECT_EQ(f64(out[0]), 10);
  EXPECT_EQ(out[1].shape, std::vector<int64_t>{10});
  EXPECT_HAS(usage_error_of([&] { out.get("mean"); }), "no output named 'mean' in this result (it has: count, proj)");
  // x flagged minibatch: read by position, so batch [4, 8) reads x rows 0..3.
  Data y = synk::data<float>(random_values<float>(10), {10});
  std::vector<float> xr = random_values<float>(80);
  Data xm = synk::data<float>(xr, {8, 10}, {.minibatch = true});
  Data xfull = synk::data<float>(std::vector<float>(xr.begin(), xr.begin() + 40), {4, 10});
  synk::close();
  synk::fork(2);
  // With no batch, both forms see the same rows; a range on a minibatch Data reads positions.
  Outputs a = reg.intro({xfull, y});
  Outputs b = reg.intro({xm, y}, {.batch = Range{4, 8}});
  EXPECT_NEAR(f64(a[0]), f64(b[0]), 1e-6);
  synk::close();
}

// --- batch_s over a sliceable shared variable scattered over ranks --------------------------------

namespace {

std::shared_ptr<rt::CompiledFunction> sliced_data_function() {
  rt::FunctionSignature sig;
  sig.name = "score";
  sig.shareds_read = {0, 1};
  sig.symbols = {"k"};
  sig.outputs = {output("avg", ReduceMode::Avg, DType::F64, {}), output("rows", ReduceMode::Gather, DType::F32, {sym(0)})};
  return std::make_shared<LambdaFunction>(sig, [](auto, auto sh, auto out, auto) {
    const float* d = ptr<float>(sh[0]);
    const float* w = ptr<float>(sh[1]);
    int64_t n = sh[0].shape[0];
    out[0].resize(DType::F64, {});
    out[1].resize(DType::F32, {n});
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      float s = 0;
      for (int k = 0; k < 4; ++k) s += d[i * 4 + k] * w[k];
      out[1].template data<float>()[i] = s;
      total += s;
    }
    *out[0].template data<double>() = total / double(n);
  });
}

}  // namespace

TEST(Examples, BatchSOnAScatteredSliceableSharedVariable) {
  rt::ModuleSpec spec;
  spec.symbols = {"r"};
  spec.shareds = {shared("data", DType::F32, {sym(0), fixed(4)}, {}, true),
                  shared("w", DType::F32, {fixed(4)}, rt::InitSpec{rt::InitSpec::Kind::Normal, 0, 1, 11})};
  Module mod = synk::module(spec);
  Function score = synk::function(sliced_data_function(), mod);
  for (int n = 1; n <= 4; ++n) {
    synk::fork(n);
    std::vector<std::vector<float>> per_rank;
    for (int r = 0; r < n; ++r) {
      per_rank.push_back(random_values<float>(size_t(3 + r) * 4));
      mod.set_value(r, "data", per_rank.back(), {3 + r, 4});
    }
    std::vector<float> w = synk::to_vector<float>(mod.get_value("w"));
    auto row_score = [&](int r, int64_t i) {
      float s = 0;
      for (int k = 0; k < 4; ++k) s += per_rank[size_t(r)][size_t(i * 4 + k)] * w[size_t(k)];
      return s;
    };
    struct Case {
      std::string name;
      BatchS batch_s;
      std::function<std::vector<int64_t>(int)> rows;
    };
    std::vector<Case> cases = {
        {"all rows", BatchS(), [](int r) { std::vector<int64_t> v(size_t(3 + r)); std::iota(v.begin(), v.end(), 0); return v; }},
        {"one range", BatchS(Range{1, 3}), [](int) { return std::vector<int64_t>{1, 2}; }},
        {"one list", BatchS({2, 0, 2}), [](int) { return std::vector<int64_t>{2, 0, 2}; }},
        {"per rank", BatchS(), [](int r) { return std::vector<int64_t>(size_t(r % 2 + 1), int64_t(r)); }}};
    std::vector<Rows> per;
    for (int r = 0; r < n; ++r) per.push_back(Rows(std::vector<int64_t>(size_t(r % 2 + 1), int64_t(r))));
    cases[3].batch_s = BatchS::per_rank(per);
    for (const Case& c : cases)
      for (int64_t slices : {1, 2}) {
        SCOPED_TRACE(c.name + ", " + std::to_string(n) + " ranks, " + std::to_string(slices) + " slices");
        Outputs out = score({}, {.batch_s = c.batch_s, .num_slices = slices});
        std::vector<float> expect_rows;
        double total = 0;
        for (int r = 0; r < n; ++r)
          for (int64_t i : c.rows(r)) {
            expect_rows.push_back(row_score(r, i));
            total += row_score(r, i);
          }
        ASSERT_EQ(out.get("rows").shape, std::vector<int64_t>{int64_t(expect_rows.size())});
        for (size_t k = 0; k < expect_rows.size(); ++k) EXPECT_FLOAT_EQ(out.get("rows").data<float>()[k], expect_rows[k]);
        EXPECT_NEAR(f64(out.get("avg")), total / double(expect_rows.size()), 1e-5);
      }
    std::string msg = usage_error_of([&] { score({}, {.batch_s = Range{0, 4}}); });
    EXPECT_HAS(msg, "batch_s: range [0, 4) ends past the 3 rows of shared variable 'data' on rank 0");
    if (n > 1) {
      msg = usage_error_of([&] { score({}, {.batch_s = BatchS::per_rank({Rows(Range{0, 1})})}); });
      EXPECT_HAS(msg, "batch_s: expected a list of exactly " + std::to_string(n) + " selections (one per rank), received a list of 1");
      msg = usage_error_of([&] { score({}, {.batch_s = BatchS({0, int64_t(3 + n - 1)})}); });
      EXPECT_HAS(msg, "is out of range for shared variable 'data' on rank 0 with 3 rows");
    }
    EXPECT_EQ(score({}, {.batch_s = Range{0, 1}}).get("rows").shape, std::vector<int64_t>{n});
    synk::close();
  }
}

// --- Validation of a whole data set with num_slices -----------------------------------------------

TEST(Examples, ValidationOfAWholeDataSetWithSlices) {
  rt::FunctionSignature sig;
  sig.name = "validate";
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, DType::F32, {sym(0), fixed(5)}),
                input("label", rt::Role::Scatter, DType::I64, {sym(0)})};
  sig.outputs = {output("loss", ReduceMode::Avg, DType::F64, {}), output("correct", ReduceMode::Sum, DType::I64, {})};
  Function validate = synk::function(std::make_shared<LambdaFunction>(sig, [](auto in, auto, auto out, auto) {
    const float* x = ptr<float>(in[0]);
    const int64_t* label = ptr<int64_t>(in[1]);
    int64_t n = in[0].shape[0];
    double loss = 0;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = x + 5 * i;
      double s = 0;
      for (int k = 0; k < 5; ++k) s += row[k];
      loss += s * s;
      correct += (std::max_element(row, row + 5) - row) == label[i];
    }
    out[0].resize(DType::F64, {});
    *out[0].template data<double>() = loss / double(n);
    out[1].resize(DType::I64, {});
    *out[1].template data<int64_t>() = correct;
  }), synk::module({}));
  const int64_t L = 103;
  std::vector<float> xv = random_values<float>(L * 5);
  std::vector<int64_t> lv(L);
  for (int64_t i = 0; i < L; ++i) lv[size_t(i)] = int64_t(synk::testing::rng()() % 5);
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < L; ++i) {
    const float* row = &xv[size_t(i * 5)];
    double s = 0;
    for (int k = 0; k < 5; ++k) s += row[k];
    loss += s * s;
    correct += (std::max_element(row, row + 5) - row) == lv[size_t(i)];
  }
  loss /= double(L);
  Data x = synk::data<float>(xv, {L, 5}), labels = synk::data<int64_t>(lv, {L});
  for (int n = 1; n <= 4; ++n) {
    synk::fork(n);
    for (int64_t slices : {1, 4, 10, 200}) {
      Outputs out = validate({x, labels}, {.num_slices = slices});
      EXPECT_NEAR(f64(out.get("loss")), loss, 1e-9 * loss) << n << " ranks, " << slices << " slices";
      EXPECT_EQ(f64(out.get("correct")), double(correct));
    }
    synk::close();
  }
}

// --- Usage errors through the API -----------------------------------------------------------------

TEST(Errors, EveryCallArgumentAndTheNextCallWorks) {
  Registered& reg = functions();
  Data x = synk::data<float>(random_values<float>(60), {6, 10}, {.name = "x"});
  Data y = synk::data<float>(random_values<float>(10), {10}, {.name = "y"});
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}); }), "intro: no process group is running; call synk::fork() first");
  synk::fork(2);
  auto works = [&] { EXPECT_TRUE(std::isfinite(f64(reg.intro({x, y})[0]))); };
  Data x64 = synk::data<double>(std::vector<double>(60, 1.0), {6, 10}, {.name = "x64"});
  EXPECT_HAS(usage_error_of([&] { reg.intro({x64, y}); }),
             "input 'x' (argument 1 of intro): expected dtype f32, received Data 'x64' of dtype f64");
  works();
  Data x1 = synk::data<float>(std::vector<float>(10, 1.0f), {10}, {.name = "flat"});
  EXPECT_HAS(usage_error_of([&] { reg.intro({x1, y}); }),
             "input 'x' (argument 1 of intro): expected 2 dimensions (f32[n, 10]), received Data 'flat' of shape [10]");
  Data x9 = synk::data<float>(std::vector<float>(18, 1.0f), {2, 9}, {.name = "narrow"});
  EXPECT_HAS(usage_error_of([&] { reg.intro({x9, y}); }), "expected shape f32[n, 10], received Data 'narrow' of shape [2, 9] (axis 1 must be 10)");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x}); }), "intro: expected 2 inputs (x, y), received 1");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, Data()}); }), "input 'y' (argument 2 of intro): expected a synk::Data, received an empty handle");
  works();
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch = 7}); }), "batch: count 7 is larger than the 6 rows of input 'x'");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch = -1}); }), "batch: a count must be >= 0, received -1");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch = Range{2, 7}}); }), "batch: range [2, 7) ends past the 6 rows");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch = {0, 6}}); }),
             "batch: index 6 at position 1 is out of range for input 'x' with 6 rows (valid indices are 0..5)");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch = {-1}}); }), "batch: index -1 at position 0 is negative");
  Data float_index = synk::data<float>({1, 2}, {2}, {.name = "fidx"});
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch = float_index}); }),
             "batch: an index array must be a 1-D integer Data (i64, i32 or u8), received Data 'fidx' of dtype f32 and shape [2]");
  Data bad_index = synk::data<int64_t>({0, 1, 99}, {3}, {.name = "idx"});
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch = bad_index}); }), "batch: index 99 at position 2 is out of range");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.num_slices = 0}); }), "num_slices: must be >= 1, received 0");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.output_subset = {"w"}}); }), "output_subset: intro has no output 'w' (its outputs: z)");
  EXPECT_HAS(usage_error_of([&] { reg.intro({x, y}, {.batch_s = Range{0, 1}}); }), "batch_s: intro reads no sliceable shared variable");
  works();
  double local = f64(reg.intro.run_local({x, y}, {.batch = {5, 5, 0}})[0]);
  EXPECT_NEAR(f64(reg.intro({x, y}, {.batch = {5, 5, 0}})[0]), local, 1e-6 * (1 + std::abs(local)));
  synk::close();
  x = Data(), y = Data(), x64 = Data(), x1 = Data(), x9 = Data(), float_index = Data(), bad_index = Data();
  EXPECT_TRUE(leftover_segments().empty());
}

TEST(Examples, NothingScatteredEveryRankWeighsTheSame) {
  rt::ModuleSpec spec;
  spec.shareds = {shared("v", DType::F64, {})};
  Module mod = synk::module(spec);
  rt::FunctionSignature sig;
  sig.name = "read_v";
  sig.shareds_read = {0};
  sig.outputs = {output("mean", ReduceMode::Avg, DType::F64, {}), output("all", ReduceMode::Gather, DType::F64, {}),
                 output("runs", ReduceMode::Sum, DType::I64, {})};
  Function read_v = synk::function(std::make_shared<LambdaFunction>(sig, [](auto, auto sh, auto out, auto) {
    out[0].resize(DType::F64, {});
    out[1].resize(DType::F64, {});
    out[2].resize(DType::I64, {});
    *out[0].template data<double>() = *out[1].template data<double>() = *ptr<double>(sh[0]);
    *out[2].template data<int64_t>() = 1;
  }), mod);
  for (int n = 1; n <= 4; ++n) {
    synk::fork(n);
    for (int r = 0; r < n; ++r) mod.set_value(r, "v", std::vector<double>{double(r * r)}, {});
    Outputs out = read_v({}, {.num_slices = 3});   // slicing has nothing to split: one run per rank
    double mean = 0;
    for (int r = 0; r < n; ++r) mean += double(r * r) / n;
    EXPECT_DOUBLE_EQ(f64(out.get("mean")), mean);
    EXPECT_EQ(out.get("all").shape, std::vector<int64_t>{n});
    for (int r = 0; r < n; ++r) EXPECT_EQ(f64(out.get("all"), r), double(r * r));
    EXPECT_EQ(f64(out.get("runs")), double(n));
    synk::close();
  }
}

TEST(Examples, EmptySelectionRunsOnceOnZeroRowsLikeOneDevice) {
  Registered& reg = functions();
  Data x = synk::data<float>(random_values<float>(50), {5, 10});
  Data y = synk::data<float>(random_values<float>(10), {10});
  std::vector<double> xv = random_values<double>(15), wv = random_values<double>(3);
  Data xm = synk::data<double>(xv, {5, 3}), w = synk::data<double>(wv, {3});
  Data m = synk::data<int64_t>({1, 2, 3, 4, 5}, {5});
  for (int n : {1, 3}) {
    synk::fork(n);
    // mean over zero rows is 0/0, exactly what the function gives on one device.
    EXPECT_TRUE(std::isnan(f64(reg.intro({x, y}, {.batch = 0})[0])));
    EXPECT_TRUE(std::isnan(f64(reg.intro({x, y}, {.batch = std::vector<int64_t>{}})[0])));
    Outputs out = reg.multi_fn({xm, w, m}, {.batch = Range{2, 2}, .output_subset = {"count", "proj", "colsum"}});
    EXPECT_EQ(f64(out.get("count")), 0);
    EXPECT_EQ(out.get("proj").shape, std::vector<int64_t>{0});
    EXPECT_EQ(f64(out.get("colsum"), 2), 0);
    // Fewer rows than ranks: some ranks have nothing to do, the result is still exact.
    Outputs two = reg.multi_fn({xm, w, m}, {.batch = Range{1, 3}, .output_subset = {"mean", "count"}});
    EXPECT_NEAR(f64(two.get("mean")), (dot3(&xv[3], wv.data()) + dot3(&xv[6], wv.data())) / 2, 1e-12);
    EXPECT_EQ(f64(two.get("count")), 2);
    synk::close();
  }
}
