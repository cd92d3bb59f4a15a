// A driver for examples/intro.synk built by `synkc --main`: draws fresh random x and y (seed from
// the command line or std::random_device), saves them as DIR/x.npy and DIR/y.npy so that
// `synkc run` can be given the same inputs, calls intro::f on RANKS ranks and prints the output
// in `synkc run`'s format ("z: f32[] = ..."), so the two outputs can be compared with diff.
// Usage: app RANKS DIR
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "intro.h"
#include "runtime/data/npy.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RANKS DIR\n", argv[0]);
    return 2;
  }
  int ranks = std::atoi(argv[1]);
  std::string dir = argv[2];
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal;
  int64_t rows = 7 + int64_t(rng() % 50);
  std::vector<float> xs(size_t(rows) * 10), ys(10);
  for (float& v : xs) v = normal(rng);
  for (float& v : ys) v = normal(rng);
  synk::rt::npy::write(dir + "/x.npy", synk::ArrayRef{xs.data(), synk::DType::F32, {rows, 10}});
  synk::rt::npy::write(dir + "/y.npy", synk::ArrayRef{ys.data(), synk::DType::F32, {10}});

  synk::fork(ranks);
  synk::Function f = intro::f();     // built after the fork: workers rebuild it from the linked table
  synk::Outputs r = f({synk::data<float>(xs, {rows, 10}), synk::data<float>(ys, {10})});
  fmt::print("z: f32[] = {}\n", synk::to_vector<float>(r.get("z"))[0]);
  synk::close();
}
