// Compiles and runs the examples of docs/api.md (extracted verbatim, main renamed), so the
// documentation cannot drift from the API.
#include <gtest/gtest.h>

static float g_z = 0, g_part = 0;
static std::vector<int64_t> g_lengths;
static std::vector<float> g_all, g_stacked, g_summed;

#include "synk/synk.h"

// z = mean(x @ y, axis=0), written by hand here; synkc / the JIT produce such functions from
// `fn f(scatter x: f32[n, 10], bcast y: f32[10]) { out z: avg = mean(x @ y, axis=0); }`.
class Intro : public synk::rt::CompiledFunction {
 public:
  Intro() {
    using namespace synk::rt;
    sig_.name = "intro";
    sig_.symbols = {"n"};
    sig_.inputs = {{{"x", DType::F32, {{0, 0}, {10, -1}}}, Role::Scatter},
                   {{"y", DType::F32, {{10, -1}}}, Role::Broadcast}};
    sig_.outputs = {{{"z", DType::F32, {}}, ReduceMode::Avg}};
  }
  const synk::rt::FunctionSignature& signature() const override { return sig_; }
  void run(std::span<const synk::rt::ArrayRef> in, std::span<const synk::rt::ArrayRef>,
           std::span<synk::rt::Array> out, std::span<synk::rt::Array>) override {
    auto* x = static_cast<const float*>(in[0].data);
    auto* y = static_cast<const float*>(in[1].data);
    int64_t n = in[0].shape[0];
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < 10; ++k) total += x[i * 10 + k] * y[k];
    out[0].resize(synk::DType::F32, {});
    *out[0].data<float>() = float(total / n);
  }
 private:
  synk::rt::FunctionSignature sig_;
};

void example_main() {
  synk::Module module = synk::module({});                       // no shared variables
  synk::Function f = synk::function(std::make_shared<Intro>(), module);
  synk::fork();                                                  // one rank per CPU core

  std::vector<float> xs(100 * 10), ys(10);                       // ... fill them ...
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 13) - 6;
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = float(i) / 10;
  synk::Data x = synk::data<float>(xs, {100, 10}, {.name = "x"});
  synk::Data y = synk::data<float>(ys, {10}, {.name = "y"});

  synk::Outputs r = f({x, y});                                   // every rank, reduced
  float z = *r.get("z").data<float>();
  synk::Outputs part = f({x, y}, {.batch = synk::Range{0, 50}, .num_slices = 2});
  synk::close();
  g_z = z;
  g_part = *part.get("z").data<float>();
}

TEST(ApiDoc, ExampleRunsAndMatchesASerialComputation) {
  example_main();
  double total = 0, half = 0;
  for (int i = 0; i < 100; ++i)
    for (int k = 0; k < 10; ++k) {
      double v = (float((i * 10 + k) % 13) - 6) * (float(k) / 10);
      total += v;
      if (i < 50) half += v;
    }
  EXPECT_NEAR(g_z, total / 100, 1e-4);
  EXPECT_NEAR(g_part, half / 50, 1e-4);
  EXPECT_FALSE(synk::forked());
}

// The collectives example of docs/api.md, verbatim.
void collectives_example() {
  synk::rt::ModuleSpec spec;
  spec.symbols = {"n"};
  spec.shareds = {{{"w", synk::DType::F32, {{3, -1}}}},               // w: f32[3]
                  {{"rows", synk::DType::F32, {{0, 0}, {2, -1}}}}};   // rows: f32[n, 2]
  synk::Module m = synk::module(spec);
  synk::fork(2);
  synk::Var w = m.var("w"), rows = m.var("rows");

  // Each rank holds its own w (a training step would compute it; here the master sets them).
  std::vector<float> w0 = {1, 2, 3}, w1 = {3, 4, 5};
  synk::set_value(0, w, synk::ArrayRef{w0.data(), synk::DType::F32, {3}});
  synk::set_value(1, w, synk::ArrayRef{w1.data(), synk::DType::F32, {3}});
  synk::all_reduce(w, "avg");                                    // every rank: {2, 3, 4}

  std::vector<float> table = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};      // 5 rows of 2
  synk::scatter(rows, synk::ArrayRef{table.data(), synk::DType::F32, {5, 2}});   // 2 and 3 rows
  std::vector<int64_t> lengths = synk::get_lengths(rows);         // {2, 3}
  synk::Array all = synk::gather(rows, /*nd_up=*/0);              // the 5 rows, in rank order
  synk::Array stacked = synk::gather(w, /*nd_up=*/1);             // shape [2, 3]
  synk::reduce({w}, synk::Op::Sum, /*in_place=*/true, {.algorithm = synk::Algorithm::Hierarchical});
  synk::Array summed = m.get_value("w");                          // the master's: {4, 6, 8}
  synk::close();
  g_lengths = lengths;
  g_all = synk::to_vector<float>(all);
  g_stacked = synk::to_vector<float>(stacked);
  g_summed = synk::to_vector<float>(summed);
}

TEST(ApiDoc, CollectivesExample) {
  collectives_example();
  EXPECT_EQ(g_lengths, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g_all, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(g_stacked, (std::vector<float>{2, 3, 4, 2, 3, 4}));
  EXPECT_EQ(g_summed, (std::vector<float>{4, 6, 8}));
}
