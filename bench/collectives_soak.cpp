// Soak test (scripts/soak.sh; not in CI): a long run of calls and collectives on one process group,
// reporting at intervals every rank's resident memory (VmRSS), its open file descriptors and the
// group's /dev/shm entries, so that a leak shows as a number that keeps growing. Each iteration
// makes one data-parallel call and one collective (cycling through all_reduce, reduce, broadcast,
// gather, scatter, all_gather, set_value/get_value on a worker), and checks the results.
// Exits non-zero if a result is wrong or if any figure grew between the first and last report by
// more than the tolerance (RSS 10 MiB, 0 file descriptors, 0 segments).
//
// Usage: collectives_soak [--iterations 1000000] [--reports 10] [--ranks 2]
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "synk/synk.h"
#include "runtime/testing.h"

using namespace synk;

namespace {

int64_t rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      f >> kib;
      return kib;
    }
    std::getline(f, key);
  }
  return -1;
}

int count_entries(const std::string& dir, const std::string& prefix = "") {
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.compare(0, prefix.size(), prefix) == 0) ++n;
  }
  closedir(d);
  return n;
}

struct Report {
  std::vector<int64_t> rss;   // per rank, KiB
  std::vector<int> fds;       // per rank
  int segments = 0;
};

Report report(int n) {
  Report r;
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = synk::worker_pid(rank);
    r.rss.push_back(rss_kib(pid));
    r.fds.push_back(count_entries("/proc/" + std::to_string(pid) + "/fd"));
  }
  r.segments = count_entries("/dev/shm", rt::shm::session_prefix());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"soak: many calls and collectives on one group, with memory and descriptor counts"};
  int64_t iterations = 1'000'000;
  int reports = 10, n = 2;
  app.add_option("--iterations", iterations);
  app.add_option("--reports", reports);
  app.add_option("--ranks", n);
  CLI11_PARSE(app, argc, argv);

  rt::ModuleSpec spec;
  spec.symbols = {"k"};
  spec.shareds = {synk::testing::shared("s", DType::F64, {}),
                  synk::testing::shared("w", DType::F32, {synk::testing::fixed(1000)}),
                  synk::testing::shared("rows", DType::F32, {synk::testing::sym(0), synk::testing::fixed(4)})};
  Module m = synk::module(spec);
  Function f = synk::function(synk::testing::counting_function(1), m);
  synk::fork(n);
  Var s = m.var("s"), w = m.var("w"), rows = m.var("rows");
  Data x = synk::testing::rows_data(std::vector<float>(64, 1.0f));
  std::vector<float> table(37 * 4);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(i);
  Array ones = synk::testing::make_array<float>({1000}, std::vector<float>(1000, 1.0f));
  synk::broadcast(w, ones);

  std::printf("soak: %lld iterations (one call + one collective each) on %d ranks\n", (long long)iterations, n);
  std::printf("%12s %10s %s %s %9s\n", "iteration", "seconds", fmt::format("{:>{}}", "RSS KiB per rank", 12 * n).c_str(),
              fmt::format("{:>{}}", "fds per rank", 6 * n).c_str(), "segments");
  auto start = std::chrono::steady_clock::now();
  std::vector<Report> all;
  const int64_t every = std::max<int64_t>(1, iterations / std::max(reports, 1));
  int failures = 0;
  for (int64_t i = 0; i <= iterations; ++i) {
    if (i % every == 0 || i == iterations) {
      Report r = report(n);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::string rss, fds;
      for (int k = 0; k < n; ++k) {
        rss += fmt::format("{:>12}", r.rss[size_t(k)]);
        fds += fmt::format("{:>6}", r.fds[size_t(k)]);
      }
      std::printf("%12lld %10.1f %s %s %9d\n", (long long)i, sec, rss.c_str(), fds.c_str(), r.segments);
      std::fflush(stdout);
      all.push_back(r);
      if (i == iterations) break;
    }
    int64_t count = *f({x})[0].data<int64_t>();
    if (count != 64) ++failures;
    switch (i % 8) {
      case 0: synk::all_reduce(w, Op::Avg); break;
      case 1: synk::all_reduce({s, w}, Op::Max, {.num_packs = 2}); break;
      case 2: synk::reduce(w, Op::Sum, false); break;
      case 3: synk::broadcast(w, ones); break;
      case 4: synk::scatter(rows, ArrayRef{table.data(), DType::F32, {37, 4}}); break;
      case 5: {
        Array g = synk::gather(rows, 0);
        if (g.shape[0] != 37 || g.data<float>()[100] != 100.0f) ++failures;
        break;
      }
      case 6: synk::all_gather(rows); break;
      case 7: {
        synk::set_value(n - 1, s, synk::testing::make_array<double>({}, {double(i)}));
        if (*synk::get_value(n - 1, s).data<double>() != double(i)) ++failures;
        break;
      }
    }
  }
  synk::close();
  const Report &first = all[1 < all.size() ? 1 : 0], &last = all.back();   // after warm-up
  bool grew = last.segments > first.segments;
  for (int k = 0; k < n; ++k) {
    grew |= last.rss[size_t(k)] - first.rss[size_t(k)] > 10 * 1024;
    grew |= last.fds[size_t(k)] > first.fds[size_t(k)];
  }
  std::printf("wrong results: %d; growth from the second report to the last: %s\n", failures, grew ? "YES" : "none");
  return failures == 0 && !grew ? 0 : 1;
}
