// Compiles and runs the example of docs/api.md (extracted verbatim, main renamed), so the
// documentation cannot drift from the API.
#include <gtest/gtest.h>

static float g_z = 0, g_part = 0;

#include "runtime/synk.h"

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
