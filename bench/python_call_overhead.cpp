// The C++ half of bench/python_call_overhead.py: the same tiny calls that the Python half makes,
// made from C++ through the public API, timed one by one. The Python script runs this program,
// reads its lines, and compares (target: a call from Python costs at most 10 us more).
//
// Cases (bench/call_overhead.synk, compiled by the JIT; 2 ranks by default):
//   call        tiny(x, y) on two Data inputs (8 rows of 4 floats, 4 floats), one output
//   call_batch  the same with batch = 8 row indices (a std::vector, as Python passes an array)
//   all_reduce  all_reduce(avg) of a 4-float shared variable
// Output: one line per case, "case,median_us,mean_us,p90_us", after a header line.
// Usage: python_call_overhead_cpp [--calls N] [--ranks N] [--synk FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "synk/jit.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median = 0, mean = 0, p90 = 0;
};

Stats time_calls(int calls, const std::function<void()>& call) {
  for (int i = 0; i < std::max(100, calls / 10); ++i) call();   // warm up
  std::vector<double> us(size_t(calls), 0.0);
  for (int i = 0; i < calls; ++i) {
    auto t = Clock::now();
    call();
    us[size_t(i)] = std::chrono::duration<double, std::micro>(Clock::now() - t).count();
  }
  Stats s;
  s.mean = std::accumulate(us.begin(), us.end(), 0.0) / double(calls);
  std::sort(us.begin(), us.end());
  s.median = us[us.size() / 2];
  s.p90 = us[std::min(us.size() - 1, us.size() * 9 / 10)];
  return s;
}

}  // namespace

int main(int argc, char** argv) try {
  int calls = 20000, ranks = 2;
  std::string source = SYNK_SOURCE_DIR "/bench/call_overhead.synk";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--calls") calls = std::stoi(argv[i + 1]);
    else if (a == "--ranks") ranks = std::stoi(argv[i + 1]);
    else if (a == "--synk") source = argv[i + 1];
    else {
      std::fprintf(stderr, "python_call_overhead_cpp: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (calls < 1 || ranks < 1) {
    std::fprintf(stderr, "python_call_overhead_cpp: --calls and --ranks must be >= 1\n");
    return 2;
  }
  synk::jit::Module mod = synk::jit::load_file(source);
  synk::Function tiny = mod.function("tiny");
  synk::Var s = mod.shared("s").var();
  synk::fork(ranks);
  std::vector<float> xs(8 * 4, 0.5f), ys(4, 2.0f);
  synk::Data x = synk::data<float>(xs, {8, 4}, {.name = "x"});
  synk::Data y = synk::data<float>(ys, {4}, {.name = "y"});
  const std::vector<int64_t> rows = {7, 1, 3, 5, 0, 2, 6, 4};

  std::printf("case,median_us,mean_us,p90_us\n");
  auto report = [](const char* name, const Stats& st) {
    std::printf("%s,%.3f,%.3f,%.3f\n", name, st.median, st.mean, st.p90);
  };
  report("call", time_calls(calls, [&] { tiny({x, y}); }));
  report("call_batch", time_calls(calls, [&] { tiny({x, y}, {.batch = rows}); }));
  report("all_reduce", time_calls(calls, [&] { synk::all_reduce(s, synk::Op::Avg); }));
  synk::close();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "python_call_overhead_cpp: %s\n", e.what());
  return 1;
}
