// all_reduce bandwidth and latency against OpenMPI, measured in the same run.
//
// For each rank count (default 2 and 4) and each size from 1 KiB to 256 MiB (x4 steps), float32,
// sum: synk::all_reduce of one shared variable against MPI_Allreduce in place (collectives_mpi,
// run with mpirun over the vader shared-memory transport). Both are timed the same way: the median
// over short batches of back-to-back calls (robust to preemption on a shared machine), the slowest
// rank counting. Algorithmic bandwidth = bytes / seconds per call. Also the latency of a
// one-float all_reduce. Every figure is taken in --groups fresh process groups (synk: a new fork
// with new segments; OpenMPI: a new mpirun), alternating the two, because one group can run a
// different program from the next (a bimodal result must show, not hide behind a median): the
// summary gives, per size, the slowest, median and fastest group of each, the worst ratio of a
// synk group to the OpenMPI group run just before it, and the spread (fastest / slowest synk
// group). Writes a CSV row per group and size, and draws a PNG (median and min-max over the
// groups) with bench/plot_collectives.py when /usr/bin/python3 has matplotlib.
//
// Usage: collectives_bench [--ranks 2,4] [--groups 8] [--min-bytes 1024] [--max-bytes 268435456] [--reps 9]
//                          [--algorithm rsag|hierarchical] [--chunk-bytes 0] [--staging-bytes 8388608]
//                          [--yield-ns -1]
//                          [--csv FILE] [--png FILE]
//                          [--no-mpi]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench/bench_timing.h"
#include "bench/cpu_probe.h"
#include "runtime/testing.h"
#include "synk/synk.h"

using namespace synk;
using Clock = std::chrono::steady_clock;

namespace {

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Seconds per call of all_reduce, timed as collectives_mpi times MPI's. synk's master returns when
// every rank is done, so a batch's time is the slowest rank's.
double time_all_reduce(const Var& v, int reps, const CollectiveOptions& options) {
  return bench::seconds_per_call(reps, [&] { synk::all_reduce(v, Op::Sum, options); });
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

struct MpiResult {
  std::map<size_t, double> seconds;
  double latency = 0;
  std::string error;
};

MpiResult run_mpi(const std::string& binary, int ranks, size_t min_bytes, size_t max_bytes, int reps) {
  MpiResult out;
  std::string cmd = fmt::format("mpirun --allow-run-as-root --oversubscribe -np {} --mca btl self,vader "
                                "--mca oob_tcp_if_include lo {} {} {} {} 2>&1",
                                ranks, binary, min_bytes, max_bytes, reps);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    out.error = "popen failed";
    return out;
  }
  char line[512];
  std::string all;
  while (fgets(line, sizeof line, p)) {
    all += line;
    std::istringstream in(line);
    std::string first;
    double s;
    if (!(in >> first >> s)) continue;
    if (first == "latency") out.latency = s;
    else if (std::isdigit(static_cast<unsigned char>(first[0]))) out.seconds[std::stoull(first)] = s;
  }
  int rc = pclose(p);
  if (rc != 0 || out.seconds.empty()) out.error = fmt::format("'{}' failed (status {}):\n{}", cmd, rc, all);
  return out;
}

std::string human(size_t bytes) {
  if (bytes >= (size_t(1) << 20)) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"all_reduce bandwidth and latency, synk against OpenMPI in the same run"};
  std::vector<int> rank_counts = {2, 4};
  size_t min_bytes = 1024, max_bytes = size_t(256) << 20;
  int reps = 9;
  std::string algorithm = "rsag", csv_path = "collectives_bench.csv", png_path = "collectives_bench.png";
  int64_t chunk_bytes = 0;
  size_t staging_bytes = ForkOptions{}.collective_staging_bytes;
  int64_t yield_ns = -1;
  bool no_mpi = false;
  int groups = 8;
  app.add_option("--ranks", rank_counts, "rank counts")->delimiter(',');
  app.add_option("--groups", groups, "fresh process groups (and mpirun launches) per rank count")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-bytes", min_bytes);
  app.add_option("--max-bytes", max_bytes);
  app.add_option("--reps", reps);
  app.add_option("--algorithm", algorithm)->check(CLI::IsMember({"rsag", "hierarchical"}));
  app.add_option("--chunk-bytes", chunk_bytes);
  app.add_option("--staging-bytes", staging_bytes, "GroupOptions::collective_staging_bytes");
  app.add_option("--yield-ns", yield_ns, "GroupOptions::yield_ns (-1: the default)");
  app.add_option("--csv", csv_path);
  app.add_option("--png", png_path);
  app.add_flag("--no-mpi", no_mpi);
  CLI11_PARSE(app, argc, argv);

  const std::string mpi_binary = SYNK_BENCH_BIN_DIR "/collectives_mpi";
  CollectiveOptions options{.algorithm = algorithm == "rsag" ? Algorithm::Rsag : Algorithm::Hierarchical,
                            .chunk_bytes = chunk_bytes};
  rt::ModuleSpec spec;
  spec.symbols = {"n"};
  spec.shareds = {synk::testing::shared("x", DType::F32, {synk::testing::sym(0)})};
  Module m = synk::module(spec);
  Var x = m.var("x");

  std::printf("collectives_bench: all_reduce float32 sum, algorithm %s, load average at start %s, %ld CPUs\n",
              algorithm.c_str(), load_average().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  std::ofstream csv(csv_path);
  csv << "ranks,group,bytes,synk_seconds,mpi_seconds,synk_gbps,mpi_gbps,ratio,probe_ns,probe_before_ns\n";
  for (int n : rank_counts) {
    // [group] -> seconds per call by size (4 bytes: the one-float latency)
    std::vector<std::map<size_t, double>> synk_s(static_cast<size_t>(groups)), mpi_s(static_cast<size_t>(groups));
    std::vector<std::string> singles;
    std::vector<double> probe_ns(static_cast<size_t>(groups)), probe_after_ns(static_cast<size_t>(groups));
    for (int g = 0; g < groups; ++g) {
      probe_ns[size_t(g)] = bench::cache_line_round_trip_ns(0, 1);
      if (!no_mpi) {
        MpiResult mpi = run_mpi(mpi_binary, n, min_bytes, max_bytes, reps);
        if (!mpi.error.empty()) std::printf("OpenMPI baseline unavailable: %s\n", mpi.error.c_str());
        mpi_s[size_t(g)] = mpi.seconds;
        mpi_s[size_t(g)][4] = mpi.latency;
      }
      synk::fork(n, Backend::Cpu, {.yield_ns = yield_ns, .collective_staging_bytes = staging_bytes});
      for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
        std::vector<float> ones(bytes / sizeof(float), 1.0f);
        synk::broadcast(x, ArrayRef{ones.data(), DType::F32, {int64_t(ones.size())}});
        std::vector<float>().swap(ones);
        synk_s[size_t(g)][bytes] = time_all_reduce(x, reps, options);
      }
      // One float: the average of back-to-back calls (as for MPI) and the distribution of single calls.
      synk::broadcast(x, synk::testing::make_array<float>({1}, {1.0f}));
      synk_s[size_t(g)][4] = time_all_reduce(x, reps, options);
      std::vector<double> single;
      for (int i = 0; i < 20000; ++i) {
        Clock::time_point t0 = Clock::now();
        synk::all_reduce(x, Op::Sum, options);
        single.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      singles.push_back(fmt::format("p50 {:.2f}, p90 {:.2f}, p99 {:.2f}", percentile(single, 0.5) * 1e6,
                                    percentile(single, 0.9) * 1e6, percentile(single, 0.99) * 1e6));
      synk::close();
      probe_after_ns[size_t(g)] = bench::cache_line_round_trip_ns(0, 1);
      std::printf("%d ranks, group %d of %d: one float %.2f us, %s GB/s at the largest size; CPU 0 <-> 1 cache-line "
                  "round trip before / after the group %.0f / %.0f ns (load %s)\n", n, g + 1, groups, synk_s[size_t(g)][4] * 1e6,
                  fmt::format("{:.2f}", double(synk_s[size_t(g)].rbegin()->first) / synk_s[size_t(g)].rbegin()->second / 1e9).c_str(),
                  probe_ns[size_t(g)], probe_after_ns[size_t(g)], load_average().c_str());
      std::fflush(stdout);
    }
    std::printf("\n%d ranks%s, %d fresh groups each: GB/s slowest / median / fastest group\n%10s %26s %26s %13s %8s\n", n,
                n > sysconf(_SC_NPROCESSORS_ONLN) ? " (more ranks than CPUs)" : "", groups, "size", "synk",
                "OpenMPI", "worst ratio", "spread");
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      std::vector<double> s_gbps, m_gbps, ratios;
      for (int g = 0; g < groups; ++g) {
        const double ss = synk_s[size_t(g)][bytes], ms = mpi_s[size_t(g)].count(bytes) ? mpi_s[size_t(g)][bytes] : 0;
        s_gbps.push_back(double(bytes) / ss / 1e9);
        if (ms > 0) m_gbps.push_back(double(bytes) / ms / 1e9), ratios.push_back(ms / ss);
        csv << n << "," << g << "," << bytes << "," << ss << "," << ms << "," << double(bytes) / ss / 1e9 << ","
            << (ms > 0 ? double(bytes) / ms / 1e9 : 0) << "," << (ms > 0 ? ms / ss : 0) << "," << probe_after_ns[size_t(g)]
            << "," << probe_ns[size_t(g)] << "\n";
      }
      auto three = [](const std::vector<double>& v) {
        if (v.empty()) return std::string("-");
        return fmt::format("{:.3f} / {:.3f} / {:.3f}", percentile(v, 0), percentile(v, 0.5), percentile(v, 1));
      };
      std::printf("%10s %26s %26s %13s %8s\n", human(bytes).c_str(), three(s_gbps).c_str(), three(m_gbps).c_str(),
                  ratios.empty() ? "-" : fmt::format("x{:.2f}", percentile(ratios, 0)).c_str(),
                  fmt::format("{:.2f}", percentile(s_gbps, 1) / percentile(s_gbps, 0)).c_str());
    }
    std::vector<double> lat;
    for (int g = 0; g < groups; ++g) {
      lat.push_back(synk_s[size_t(g)][4] * 1e6);
      const double ms = mpi_s[size_t(g)].count(4) ? mpi_s[size_t(g)][4] : 0;
      csv << n << "," << g << ",4," << synk_s[size_t(g)][4] << "," << ms << ",0,0,"
          << (ms > 0 ? ms / synk_s[size_t(g)][4] : 0) << "," << probe_after_ns[size_t(g)] << "," << probe_ns[size_t(g)]
          << "\n";
    }
    std::printf("one-float all_reduce, us per call over the groups: slowest %.2f, median %.2f, fastest %.2f "
                "(timed alone, group by group: %s)\n",
                percentile(lat, 1), percentile(lat, 0.5), percentile(lat, 0), fmt::format("{}", fmt::join(singles, "; ")).c_str());
  }
  csv.close();
  std::printf("\nload average at end %s; CSV: %s\n", load_average().c_str(), csv_path.c_str());
  std::string plot = fmt::format("/usr/bin/python3 {}/bench/plot_collectives.py {} {}", SYNK_SOURCE_DIR, png_path, csv_path);
  if (std::system(plot.c_str()) == 0) std::printf("plot: %s\n", png_path.c_str());
  else std::printf("plot not drawn (needs /usr/bin/python3 with matplotlib): %s\n", plot.c_str());
  return 0;
}
