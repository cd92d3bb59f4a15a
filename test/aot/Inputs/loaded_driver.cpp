// A driver for test/aot/Inputs/loaded.synk: prints the initial value of w (from load()) and f's
// result for x = [1, 1, 1] on one rank; a synk error goes to stderr with exit status 1.
#include <cstdio>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "loaded.h"

int main() {
  try {
    fmt::print("w = [{}]\n", fmt::join(loaded::shared("w").values<float>(), ", "));
    synk::fork(1);
    synk::Outputs out = loaded::f()({synk::data<float>(std::vector<float>{1, 1, 1}, {3})});
    fmt::print("y = [{}]\n", fmt::join(synk::to_vector<float>(out.get("y")), ", "));
    synk::close();
  } catch (const synk::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
