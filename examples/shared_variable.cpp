// The shared-variable example of the Synkhronos guide, step by step, through synk's JIT API and
// collectives: each rank updates its own copy of s from its own rows; gather, reduce, broadcast
// and all_reduce then combine the copies. It prints what the guide prints (CHECK lines below).
// Usage: example_shared_variable [RANKS] (default 2, as in the guide), from the source directory.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "synk/jit.h"

namespace {

std::string text(const synk::Array& a) {
  std::vector<float> v = synk::to_vector<float>(a);
  if (a.shape.size() == 1) return fmt::format("[{}]", fmt::join(v, ", "));
  std::vector<std::string> rows;
  for (int64_t r = 0; r < a.shape[0]; ++r)
    rows.push_back(fmt::format("[{}]", fmt::join(v.begin() + r * a.shape[1], v.begin() + (r + 1) * a.shape[1], ", ")));
  return fmt::format("[{}]", fmt::join(rows, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  synk::fork(argc > 1 ? std::atoi(argv[1]) : 2);
  synk::jit::Module mod = synk::jit::load_file("examples/shared_variable.synk");
  synk::Function f = mod.function("f");
  synk::jit::Shared s = mod.shared("s");
  const std::vector<float> s_init = {1, 1};
  synk::Data x = synk::data<float>({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}, {.name = "x"});

  fmt::print("s initial: {}\n", text(s.get_value()));
  f.run_local({x});                                   // the guide's f.as_theano: one device
  fmt::print("s after a call on one device: {}\n", text(s.get_value()));

  s.set_value(s_init, {2});
  f({x});
  fmt::print("local s after reset and a synk call: {}\n", text(s.get_value()));
  fmt::print("gathered s: {}\n", text(synk::gather(s.var(), /*nd_up=*/1)));
  synk::reduce(s.var(), "sum");
  fmt::print("local s after in-place reduce: {}\n", text(s.get_value()));
  fmt::print("gathered s after reduce: {}\n", text(synk::gather(s.var(), 1)));

  synk::Array ones;
  ones.resize(synk::DType::F32, {2});
  ones.data<float>()[0] = ones.data<float>()[1] = 1;
  synk::broadcast(s.var(), ones);
  f({x});
  synk::all_reduce(s.var(), "sum");
  fmt::print("gathered s after reset broadcast, synk call, and all-reduce: {}\n", text(synk::gather(s.var(), 1)));
  synk::close();
}

// CHECK:      s initial: [1, 1]
// CHECK-NEXT: s after a call on one device: [10, 10]
// CHECK-NEXT: local s after reset and a synk call: [3, 3]
// CHECK-NEXT: gathered s: {{\[}}[3, 3], [7, 7]]
// CHECK-NEXT: local s after in-place reduce: [10, 10]
// CHECK-NEXT: gathered s after reduce: {{\[}}[10, 10], [7, 7]]
// CHECK-NEXT: gathered s after reset broadcast, synk call, and all-reduce: {{\[}}[10, 10], [10, 10]]
