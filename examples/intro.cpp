// The introductory example of the Synkhronos guide through synk's JIT API (docs/jit.md shows
// this program verbatim): compile examples/intro.synk at run time, fork the ranks, call the
// function on shared-memory Data, and check the data-parallel result against a serial one.
// Usage: example_intro [RANKS] (default: one rank per CPU core), from the source directory.
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include "synk/jit.h"

int main(int argc, char** argv) try {
  int ranks = 0;                                      // 0: one rank per CPU core
  if (argc > 2 || (argc == 2 && (std::sscanf(argv[1], "%d", &ranks) != 1 || ranks < 0))) {
    std::fprintf(stderr, "usage: example_intro [RANKS >= 0], from the source directory\n");
    return 2;
  }
  synk::fork(ranks);                                  // this process is rank 0; workers never return
  synk::jit::Module mod = synk::jit::load_file("examples/intro.synk");
  synk::Function f = mod.function("f");              // compiled now, or found in the kernel cache

  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  std::vector<float> xs(100 * 10), ys(10);
  for (float& v : xs) v = normal(rng);
  for (float& v : ys) v = normal(rng);
  synk::Data x = synk::data<float>(xs, {100, 10}, {.name = "x"});
  synk::Data y = synk::data<float>(ys, {10}, {.name = "y"});

  synk::Outputs r = f({x, y});                       // x split by rows over the ranks, y whole
  float z = synk::to_vector<float>(r.get("z"))[0];

  double serial = 0;                                  // the same computation on one device
  for (int i = 0; i < 100; ++i)
    for (int k = 0; k < 10; ++k) serial += double(xs[i * 10 + k]) * ys[k] / 100;
  std::printf("z = %.5f on %d ranks (serial: %.5f)\n", z, synk::size(), serial);
  if (std::fabs(z - serial) > 1e-5 * (1 + std::fabs(serial))) return 1;
  std::printf("All assertions passed.\n");
  synk::close();
  return 0;
} catch (const std::exception& e) {                   // a synk error says what was wrong and where
  std::fprintf(stderr, "example_intro: %s\n", e.what());
  return 1;
}

// CHECK: z = [[Z:[-0-9.]+]] on 2 ranks (serial: [[Z]])
// CHECK-NEXT: All assertions passed.
