// The introductory example of the Synkhronos guide, compiled ahead of time: examples/intro.synk
// goes through synkc at build time (synk_add_module in CMakeLists.txt), and this driver calls the
// typed entry point intro::f() from the generated header. No compiler runs when it starts; the
// binary does not link LLVM. Checks the data-parallel result against a serial one.
// The artifact holds GPU code too (synkc's default --cuda-arch: CUBINs for sm_80 and sm_90, PTX
// for newer GPUs): with BACKEND auto (the default) it runs on the GPU when one is usable and on
// the CPU otherwise, from the same binary; neither NVRTC nor LLVM is needed at run time.
// Usage: example_aot_intro [RANKS [cpu|gpu|auto]] (default: one rank per CPU core, auto).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "intro.h"

int main(int argc, char** argv) {
  const char* requested = argc > 2 ? argv[2] : "auto";
  const synk::Backend backend = std::strcmp(requested, "cpu") == 0   ? synk::Backend::Cpu
                                : std::strcmp(requested, "gpu") == 0 ? synk::Backend::Gpu
                                                                     : synk::Backend::Auto;
  synk::fork(argc > 1 ? std::atoi(argv[1]) : 0, backend);   // this process is rank 0; workers never return
  synk::Function f = intro::f();                     // built from the linked kernels on first use

  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  std::vector<float> xs(100 * 10), ys(10);
  for (float& v : xs) v = normal(rng);
  for (float& v : ys) v = normal(rng);
  synk::Data x = synk::data<float>(xs, {100, 10}, {.name = "x"});
  synk::Data y = synk::data<float>(ys, {10}, {.name = "y"});

  synk::Outputs r = f({x, y});
  float z = synk::to_vector<float>(r.get("z"))[0];

  double serial = 0;
  for (int i = 0; i < 100; ++i)
    for (int k = 0; k < 10; ++k) serial += double(xs[i * 10 + k]) * ys[k] / 100;
  std::printf("z = %.5f on %d ranks (serial: %.5f), ahead of time, on the %s\n", z, synk::size(), serial,
              synk::backend() == synk::Backend::Gpu ? "GPU" : "CPU");
  if (std::fabs(z - serial) > 1e-5 * (1 + std::fabs(serial))) return 1;
  std::printf("All assertions passed.\n");
  synk::close();
}

// CHECK: z = [[Z:[-0-9.]+]] on 2 ranks (serial: [[Z]]), ahead of time, on the {{CPU|GPU}}
// CHECK-NEXT: All assertions passed.
