// The consumer's driver: fresh random inputs (seed from the command line), score() and two
// step() calls on RANKS ranks; prints z and w with all digits, and checks both against a float64
// reference computed here. Built twice: against the AOT module's header, and with USE_JIT
// through synk::jit (with the new include paths, and with OLD_INCLUDE_PATHS with 0.1's); run-consumer.sh
// compares the outputs for one seed.
// Usage: app RANKS SEED
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#if defined(USE_JIT) && defined(OLD_INCLUDE_PATHS)
#include "compiler/synk_jit.h"  // the 0.1 path: a forwarding header for one release
#include "runtime/synk.h"
#elif defined(USE_JIT)
#include "synk/jit.h"
#else
#include "model.h"
#endif

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  int ranks = std::atoi(argv[1]);
  std::mt19937 rng(unsigned(std::atoi(argv[2])));
  std::normal_distribution<float> normal;
  int64_t rows = 5 + int64_t(rng() % 40);
  std::vector<float> xs(size_t(rows) * 3), ys(3);
  for (float& v : xs) v = normal(rng);
  for (float& v : ys) v = normal(rng);
#ifdef USE_JIT
  synk::jit::Module model = synk::jit::load_file(MODEL_PATH);
  synk::Function score = model.function("score"), step = model.function("step");
  auto w_values = [&] { return model.shared("w").values<float>(); };
#else
  synk::Function score = model::score(), step = model::step();
  auto w_values = [] { return model::shared("w").values<float>(); };
#endif
  synk::fork(ranks);
  synk::Data x = synk::data<float>(xs, {rows, 3}), y = synk::data<float>(ys, {3});
  float z = synk::to_vector<float>(score({x, y}).get("z"))[0];
  step({x});
  step({x});
  std::vector<float> w = w_values();

  double z_ref = 0;
  std::vector<double> col(3, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int k = 0; k < 3; ++k) {
      z_ref += double(xs[size_t(i * 3 + k)]) * ys[size_t(k)] / double(rows);
      col[size_t(k)] += double(xs[size_t(i * 3 + k)]);
    }
  int failures = std::fabs(z - z_ref) > 1e-4 * (1 + std::fabs(z_ref));
  // step() on R ranks: each rank adds the mean of its own rows to its own copy of w (no reduce),
  // so only the 1-rank value has a closed form.
  if (ranks == 1)
    for (int k = 0; k < 3; ++k) {
      double ref = 1 + 2 * col[size_t(k)] / double(rows);
      failures += std::fabs(w[size_t(k)] - ref) > 1e-4 * (1 + std::fabs(ref));
    }
  std::printf("z = %.9g (float64 %.9g)\nw = %.9g %.9g %.9g\n%s\n", z, z_ref, w[0], w[1], w[2],
              failures ? "MISMATCH" : "matches the float64 reference");
  synk::close();
  return failures ? 1 : 0;
}
