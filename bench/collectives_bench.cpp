// all_reduce bandwidth and latency against OpenMPI, measured in the same run.
//
// For each rank count (default 2 and 4) and each size from 1 KiB to 256 MiB (x4 steps), float32,
// sum: synk::all_reduce of one shared variable against MPI_Allreduce in place (collectives_mpi,
// run with mpirun over the vader shared-memory transport). Both are timed the same way: the median
// over short batches of back-to-back calls (robust to preemption on a shared machine), the slowest
// rank counting. Algorithmic bandwidth = bytes / seconds per call. Also the latency of a
// one-float all_reduce. Prints a table of ratios, writes a CSV, and draws a PNG with
// bench/plot_collectives.py when /usr/bin/python3 has matplotlib.
//
// Usage: collectives_bench [--ranks 2,4] [--min-bytes 1024] [--max-bytes 268435456] [--reps 9]
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

#include "bench/bench_timing.h"
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
  return bench::median_seconds_per_call(reps, [&](int calls) {
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < calls; ++i) synk::all_reduce(v, Op::Sum, options);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  });
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
  app.add_option("--ranks", rank_counts, "rank counts")->delimiter(',');
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
  csv << "ranks,bytes,synk_seconds,mpi_seconds,synk_gbps,mpi_gbps,ratio\n";
  for (int n : rank_counts) {
    MpiResult mpi;
    if (!no_mpi) {
      mpi = run_mpi(mpi_binary, n, min_bytes, max_bytes, reps);
      if (!mpi.error.empty()) std::printf("OpenMPI baseline unavailable: %s\n", mpi.error.c_str());
    }
    synk::fork(n, Backend::Cpu, {.yield_ns = yield_ns, .collective_staging_bytes = staging_bytes});
    std::printf("\n%d ranks%s\n%10s %14s %14s %8s\n", n, n > sysconf(_SC_NPROCESSORS_ONLN) ? " (more ranks than CPUs)" : "",
                "size", "synk GB/s", "OpenMPI GB/s", "ratio");
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      std::vector<float> ones(bytes / sizeof(float), 1.0f);
      synk::broadcast(x, ArrayRef{ones.data(), DType::F32, {int64_t(ones.size())}});
      std::vector<float>().swap(ones);
      double s = time_all_reduce(x, reps, options);
      double synk_gbps = double(bytes) / s / 1e9;
      auto it = mpi.seconds.find(bytes);
      double mpi_s = it == mpi.seconds.end() ? 0 : it->second;
      double mpi_gbps = mpi_s > 0 ? double(bytes) / mpi_s / 1e9 : 0;
      std::printf("%10s %14.3f %14.3f %8s\n", human(bytes).c_str(), synk_gbps, mpi_gbps,
                  mpi_gbps > 0 ? fmt::format("x{:.2f}", synk_gbps / mpi_gbps).c_str() : "-");
      csv << n << "," << bytes << "," << s << "," << mpi_s << "," << synk_gbps << "," << mpi_gbps << ","
          << (mpi_gbps > 0 ? synk_gbps / mpi_gbps : 0) << "\n";
      std::fflush(stdout);
    }
    // One float: the average of back-to-back calls (as for MPI) and the distribution of single calls.
    synk::broadcast(x, synk::testing::make_array<float>({1}, {1.0f}));
    double avg = time_all_reduce(x, reps, options);
    std::vector<double> single;
    for (int i = 0; i < 20000; ++i) {
      Clock::time_point t0 = Clock::now();
      synk::all_reduce(x, Op::Sum, options);
      single.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("one-float all_reduce: synk %.2f us per call (timed alone: p50 %.2f, p90 %.2f, p99 %.2f us); "
                "OpenMPI %.2f us%s\n",
                avg * 1e6, percentile(single, 0.5) * 1e6, percentile(single, 0.9) * 1e6, percentile(single, 0.99) * 1e6,
                mpi.latency * 1e6, mpi.latency > 0 ? fmt::format(" (x{:.2f})", mpi.latency / avg).c_str() : "");
    csv << n << ",4," << avg << "," << mpi.latency << ",0,0," << (avg > 0 && mpi.latency > 0 ? mpi.latency / avg : 0) << "\n";
    synk::close();
  }
  csv.close();
  std::printf("\nload average at end %s; CSV: %s\n", load_average().c_str(), csv_path.c_str());
  std::string plot = fmt::format("/usr/bin/python3 {}/bench/plot_collectives.py {} {}", SYNK_SOURCE_DIR, png_path, csv_path);
  if (std::system(plot.c_str()) == 0) std::printf("plot: %s\n", png_path.c_str());
  else std::printf("plot not drawn (needs /usr/bin/python3 with matplotlib): %s\n", plot.c_str());
  return 0;
}
