// Runtime benchmarks, each with a baseline measured in the same run:
//  1. round trip of an (almost) empty call on 2 ranks, against a raw busy-wait ping-pong and a
//     futex ping-pong between two processes;
//  2. per-rank row gather (batch = a random index list) in GB/s, against memcpy and a
//     single-process gather of the same rows;
//  3. a compute-bound function (matrix products, OpenBLAS single-threaded per rank) on 1 rank
//     and on N ranks.
// Usage: runtime_bench [--calls N] [--rows N] [--ranks N] [--groups 8] [--csv FILE] [--png FILE]
//        (defaults suit a 2-core machine; on a many-core machine --ranks 16 gives the scaling curve)
// Every figure also goes to a CSV (default runtime_bench.csv in the current directory); the
// matmul scaling curve is drawn by bench/plot_runtime.py into a PNG when /usr/bin/python3 has
// matplotlib.
#include <cblas.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "runtime/group/futex.h"
#include "runtime/group/shm.h"
#include "synk/synk.h"
#include "runtime/testing.h"
#include "bench/cpu_probe.h"

using namespace synk;
using Clock = std::chrono::steady_clock;
using namespace synk::testing;   // the runtime test helpers (runtime/testing.h)

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The shortest of `reps` runs of f, in seconds.
template <class F>
double best_of(int reps, F f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    f();
    best = std::min(best, seconds_since(t));
  }
  return best;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

// Median round trip (µs) of a ping-pong between this process and a forked child through two
// words in shared memory; spin_ns = 0 makes every wait sleep on the futex.
double ping_pong_us(int rounds, int64_t spin_ns) {
  rt::shm::Segment seg = rt::shm::Segment::create(rt::shm::unique_name(rt::shm::process_prefix(), "pp"), 4096);
  struct Words { rt::WaitWord ping, pong; };
  auto* w = new (seg.data()) Words();
  rt::WaitPolicy policy{spin_ns, 100'000'000};
  pid_t pid = ::fork();
  if (pid == 0) {
    for (int i = 1; i <= rounds; ++i) {
      rt::wait_until(w->ping, [i](uint32_t v) { return v == uint32_t(i); }, policy, [] {});
      w->pong.store(uint32_t(i));
    }
    _exit(0);
  }
  std::vector<double> times;
  for (int i = 1; i <= rounds; ++i) {
    auto t = Clock::now();
    w->ping.store(uint32_t(i));
    rt::wait_until(w->pong, [i](uint32_t v) { return v == uint32_t(i); }, policy, [] {});
    times.push_back(seconds_since(t) * 1e6);
  }
  waitpid(pid, nullptr, 0);
  return percentile(times, 0.5);
}

Function tiny_function(const Module& m) {
  rt::FunctionSignature sig;
  sig.name = "tiny";
  sig.outputs = {output("one", ReduceMode::Sum, DType::I64, {})};
  return synk::function(std::make_shared<LambdaFunction>(sig, [](auto, auto, auto out, auto) {
    out[0].resize(DType::I64, {});
    *out[0].template data<int64_t>() = 1;
  }), m);
}

Function count_rows_function(const Module& m, int64_t cols) {
  rt::FunctionSignature sig;
  sig.name = "touch";
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, DType::F32, {sym(0), fixed(cols)})};
  sig.outputs = {output("rows", ReduceMode::Sum, DType::I64, {})};
  return synk::function(std::make_shared<LambdaFunction>(sig, [](auto in, auto, auto out, auto) {
    out[0].resize(DType::I64, {});
    *out[0].template data<int64_t>() = in[0].shape[0];
  }), m);
}

// relu(x @ W) summed: x f32[n, k] scattered, W f32[k, k] broadcast; one sgemm per slice.
Function matmul_function(const Module& m, int64_t k) {
  rt::FunctionSignature sig;
  sig.name = "matmul";
  sig.symbols = {"n"};
  sig.inputs = {input("x", rt::Role::Scatter, DType::F32, {sym(0), fixed(k)}),
                input("W", rt::Role::Broadcast, DType::F32, {fixed(k), fixed(k)})};
  sig.outputs = {output("act", ReduceMode::Sum, DType::F64, {})};
  return synk::function(std::make_shared<LambdaFunction>(sig, [k](auto in, auto, auto out, auto) {
    int64_t n = in[0].shape[0];
    static thread_local std::vector<float> y;
    y.resize(size_t(n * k));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(k), int(k), 1.0f,
                static_cast<const float*>(in[0].data), int(k), static_cast<const float*>(in[1].data), int(k),
                0.0f, y.data(), int(k));
    double s = 0;
    for (float v : y) s += v > 0 ? v : 0;
    out[0].resize(DType::F64, {});
    *out[0].template data<double>() = s;
  }), m);
}

// 1. Round trips: an empty call on 2 ranks against a busy-wait and a futex ping-pong, in `groups`
// fresh groups (a new fork each; the baselines are fresh process pairs already), each beside the
// machine's bare cache-line round trip between CPU 0 and 1 (bench/cpu_probe.h), so that a group
// that differs shows whether the machine changed with it.
void bench_round_trips(Function& tiny, int calls, int groups, std::FILE* csv) {
  std::printf("%-8s %12s %12s %12s %12s %12s %10s\n", "group", "spin pp us", "futex pp us", "synk p50 us",
              "synk p90 us", "synk p99 us", "probe ns");
  std::vector<double> medians, ratios;
  for (int g = 0; g < groups; ++g) {
    const double probe = synk::bench::cache_line_round_trip_ns(0, 1);
    const double spin_pp = ping_pong_us(calls, 1'000'000'000);
    const double futex_pp = ping_pong_us(std::min(calls, 5000), 0);
    synk::fork(2);
    for (int i = 0; i < 1000; ++i) tiny({});
    std::vector<double> t_calls;
    for (int i = 0; i < calls; ++i) {
      auto t = Clock::now();
      tiny({});
      t_calls.push_back(seconds_since(t) * 1e6);
    }
    synk::close();
    const double p50 = percentile(t_calls, 0.5), p90 = percentile(t_calls, 0.9), p99 = percentile(t_calls, 0.99);
    std::printf("%-8d %12.2f %12.2f %12.2f %12.2f %12.2f %10.0f\n", g + 1, spin_pp, futex_pp, p50, p90, p99, probe);
    std::fprintf(csv, "round_trip_group%d,2,median_us,%g,%g\nround_trip_group%d,2,p90_us,%g,%g\n"
                 "round_trip_group%d,2,p99_us,%g,%g\nround_trip_group%d,2,probe_ns,%g,0\n",
                 g, p50, spin_pp, g, p90, spin_pp, g, p99, spin_pp, g, probe);
    medians.push_back(p50);
    ratios.push_back(p50 / spin_pp);
  }
  std::printf("synk empty call, 2 ranks, median per group over %d fresh groups: slowest %.2f, median %.2f, "
              "fastest %.2f us (spread x%.2f); x the busy-wait ping-pong of the same group: %.2f-%.2f\n\n",
              groups, percentile(medians, 1), percentile(medians, 0.5), percentile(medians, 0),
              percentile(medians, 1) / percentile(medians, 0), percentile(ratios, 0), percentile(ratios, 1));
}

// 2. Row gather bandwidth: a batch of every row in random order, per rank and in aggregate,
// against memcpy and a one-process gather.
void bench_row_gather(Function& touch, int64_t rows, int64_t cols, int ranks, std::FILE* csv) {
  std::vector<float> host(size_t(rows * cols));
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i % 977);
  Data x = synk::data<float>(host, {rows, cols}, {.name = "x"});
  std::vector<int64_t> perm(static_cast<size_t>(rows));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(1));
  const double bytes = double(rows * cols * 4);
  std::vector<float> dst(host.size());
  double t_memcpy = best_of(5, [&] { std::memcpy(dst.data(), x.raw(), size_t(bytes)); });
  double t_gather1 = best_of(5, [&] {
    const char* src = static_cast<const char*>(x.raw());
    char* out = reinterpret_cast<char*>(dst.data());
    for (int64_t p = 0; p < rows; ++p) std::memcpy(out + p * cols * 4, src + perm[size_t(p)] * cols * 4, cols * 4);
  });
  std::printf("%-46s %10s %10s %10s\n", ("row gather (" + std::to_string(rows) + " rows of 1 KiB)").c_str(), "ms", "GB/s",
              "x memcpy");
  std::printf("%-46s %10.2f %10.2f %10.2f\n", "baseline: memcpy, 1 process", t_memcpy * 1e3, bytes / t_memcpy / 1e9, 1.0);
  std::printf("%-46s %10.2f %10.2f %10.2f\n", "baseline: gather by index list, 1 process", t_gather1 * 1e3,
              bytes / t_gather1 / 1e9, t_memcpy / t_gather1);
  for (int n : {1, ranks}) {
    synk::fork(n);
    touch({x}, {.batch = perm});
    double t_list = best_of(5, [&] { touch({x}, {.batch = perm}); });
    double t_range = best_of(5, [&] { touch({x}); });
    synk::close();
    // Each rank gathers bytes / n; the call lasts as long as the slowest rank.
    std::printf("%-46s %10.2f %10.2f %10.2f\n", ("synk call, batch = index list, " + std::to_string(n) + " rank(s), per rank").c_str(),
                t_list * 1e3, bytes / n / t_list / 1e9, (bytes / n / t_list) / (bytes / t_memcpy));
    std::printf("%-46s %10.2f %10.2f %10.2f\n", ("synk call, aggregate over " + std::to_string(n) + " rank(s)").c_str(),
                t_list * 1e3, bytes / t_list / 1e9, (bytes / t_list) / (bytes / t_memcpy));
    std::fprintf(csv, "gather,%d,per_rank_GBps,%g,%g\ngather,%d,aggregate_GBps,%g,%g\n", n, bytes / n / t_list / 1e9,
                 bytes / t_memcpy / 1e9, n, bytes / t_list / 1e9, bytes / t_memcpy / 1e9);
    std::printf("%-46s %10.3f %10s %10s\n", ("synk call, no batch (rows in place), " + std::to_string(n) + " rank(s)").c_str(),
                t_range * 1e3, "-", "-");
  }
  x = Data();
  std::printf("\n");
}

// 3. Compute-bound scaling: matrix products on 1 to `ranks` ranks.
void bench_matmul(Function& mm, int64_t k, int ranks, std::FILE* csv) {
  const int64_t n_rows = 8192;
  std::vector<float> xv(size_t(n_rows * k)), wv(size_t(k * k));
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : xv) v = dist(gen);
  for (float& v : wv) v = dist(gen) * 0.05f;
  Data xm = synk::data<float>(xv, {n_rows, k}), wm = synk::data<float>(wv, {k, k});
  std::string title = "matmul " + std::to_string(n_rows) + "x" + std::to_string(k) + " @ " + std::to_string(k) + "x" +
                      std::to_string(k);
  std::printf("%-46s %10s %10s %10s\n", title.c_str(), "ms", "GFLOP/s", "speedup");
  double t1 = 0;
  for (int n = 1; n <= ranks; ++n) {
    synk::fork(n);
    mm({xm, wm});
    double t = best_of(5, [&] { mm({xm, wm}); });
    synk::close();
    if (n == 1) t1 = t;
    std::printf("%-46s %10.2f %10.1f %10.2f\n", (std::to_string(n) + " rank(s)").c_str(), t * 1e3,
                2.0 * double(n_rows) * k * k / t / 1e9, t1 / t);
    std::fprintf(csv, "matmul,%d,ms,%g,%g\n", n, t * 1e3, t1 * 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 20000;
  int64_t rows = 65536;
  int ranks = 2, groups = 8;
  std::string csv_path = "runtime_bench.csv", png_path = "runtime_bench.png";
  const char* usage = "usage: runtime_bench [--calls N] [--rows N] [--ranks N] [--groups N] [--csv FILE] [--png FILE]\n";
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "runtime_bench: option '%s' needs a value\n%s", a.c_str(), usage);
      return 2;
    }
    try {
      if (a == "--calls") calls = std::stoi(argv[i + 1]);
      else if (a == "--rows") rows = std::stoll(argv[i + 1]);
      else if (a == "--ranks") ranks = std::stoi(argv[i + 1]);
      else if (a == "--groups") groups = std::stoi(argv[i + 1]);
      else if (a == "--csv") csv_path = argv[i + 1];
      else if (a == "--png") png_path = argv[i + 1];
      else {
        std::fprintf(stderr, "runtime_bench: unknown option '%s'\n%s", a.c_str(), usage);
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "runtime_bench: %s needs a number, got '%s'\n", a.c_str(), argv[i + 1]);
      return 2;
    }
  }
  if (ranks < 1 || groups < 1) {
    std::fprintf(stderr, "runtime_bench: --ranks and --groups must be >= 1\n");
    return 2;
  }
  std::FILE* csv = std::fopen(csv_path.c_str(), "w");
  if (!csv) {
    std::fprintf(stderr, "runtime_bench: cannot write %s\n", csv_path.c_str());
    return 2;
  }
  std::fprintf(csv, "section,ranks,metric,value,baseline\n");
  Module none = synk::module({});
  Function tiny = tiny_function(none);
  const int64_t cols = 256;   // 1 KiB rows
  Function touch = count_rows_function(none, cols);
  const int64_t k = 512;
  Function mm = matmul_function(none, k);

  std::printf("synk runtime benchmarks (%ld online CPUs)\n\n", sysconf(_SC_NPROCESSORS_ONLN));

  bench_round_trips(tiny, calls, groups, csv);
  bench_row_gather(touch, rows, cols, ranks, csv);
  bench_matmul(mm, k, ranks, csv);
  std::fclose(csv);
  std::printf("\nCSV: %s\n", csv_path.c_str());
  if (ranks > 1 && std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0) {
    std::string cmd = "/usr/bin/python3 " SYNK_SOURCE_DIR "/bench/plot_runtime.py '" + png_path + "' '" + csv_path + "'";
    if (std::system(cmd.c_str()) == 0) std::printf("plot: %s\n", png_path.c_str());
  }
  return 0;
}
