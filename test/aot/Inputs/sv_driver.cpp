// A driver for examples/shared_variable.synk linked against `synkc -o libsv.a --header`: draws a
// fresh random x (saved as DIR/x.npy for `synkc run`), calls shared_variable::f on RANKS ranks
// (registered before the fork, so workers inherit it) and prints the master's updated s in
// `synkc run`'s format ("shared s: f32[2] = [a, b]"). With a third argument it also calls the
// intro module (a second AOT module in the same binary, whose function is also named f).
// Usage: app RANKS DIR [with-intro]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/data/npy.h"
#include "shared_variable.h"
#ifdef WITH_INTRO
#include "intro.h"
#endif

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s RANKS DIR [with-intro]\n", argv[0]);
    return 2;
  }
  int ranks = std::atoi(argv[1]);
  std::string dir = argv[2];
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal;
  int64_t rows = 4 + int64_t(rng() % 20);
  std::vector<float> xs(size_t(rows) * 2);
  for (float& v : xs) v = normal(rng);
  synk::rt::npy::write(dir + "/x.npy", synk::ArrayRef{xs.data(), synk::DType::F32, {rows, 2}});

  shared_variable::load_all();   // before the fork: workers inherit the function
  synk::fork(ranks);
  shared_variable::f()({synk::data<float>(xs, {rows, 2})});
  fmt::print("shared s: f32[2] = [{}]\n", fmt::join(shared_variable::shared("s").values<float>(), ", "));
#ifdef WITH_INTRO
  std::vector<float> ys(2 * 10, 1.0f), y(10, 0.5f);
  synk::Outputs r = intro::f()({synk::data<float>(ys, {2, 10}), synk::data<float>(y, {10})});
  fmt::print("intro z: f32[] = {}\n", synk::to_vector<float>(r.get("z"))[0]);
#endif
  synk::close();
}
