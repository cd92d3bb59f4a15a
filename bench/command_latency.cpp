// Where a small collective's time goes: in each of several fresh process groups, the machine's
// cache-line round trip between CPUs 0 and 1 (bench/cpu_probe.h), then, timed the same way
// (median over short batches of back-to-back calls), the group's empty command (the command
// protocol alone: the master's release of the workers and their completion), a command whose every
// rank meets the others at the group's barrier once, synk::all_reduce of one float, and
// synk::broadcast of one float (the inline path) and of 16 floats (64 bytes: the staging path). Each
// figure is also given in probe round trips, the unit that does not move when the host moves the
// vCPUs (docs/performance/collectives.md, "Where one float goes"). Writes a CSV row per group and
// draws a PNG with bench/plot_command_latency.py when /usr/bin/python3 has matplotlib.
//
// Usage: command_latency [--ranks 2] [--groups 8] [--reps 9] [--csv FILE] [--png FILE]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/bench_timing.h"
#include "bench/cpu_probe.h"
#include "runtime/group/process_group.h"
#include "runtime/testing.h"
#include "synk/core.h"
#include "synk/synk.h"

using namespace synk;

namespace {

void meet_at_barrier(rt::RankContext& ctx, std::string_view) { ctx.barrier(); }
const rt::CommandKind kBarrierCommand = rt::register_command("bench barrier", meet_at_barrier);

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the command protocol's latency, a barrier's, and a one-float all_reduce's, in fresh groups"};
  int ranks = 2, groups = 8, reps = 9;
  std::string csv_path = "command_latency.csv", png_path = "command_latency.png";
  app.add_option("--ranks", ranks)->check(CLI::Range(2, 1024));
  app.add_option("--groups", groups)->check(CLI::PositiveNumber);
  app.add_option("--reps", reps)->check(CLI::PositiveNumber);
  app.add_option("--csv", csv_path);
  app.add_option("--png", png_path);
  CLI11_PARSE(app, argc, argv);

  rt::ModuleSpec spec;
  spec.shareds = {synk::testing::shared("x", DType::F32, {synk::testing::fixed(1)}),
                  synk::testing::shared("x16", DType::F32, {synk::testing::fixed(16)})};
  Module m = synk::module(spec);
  Var x = m.var("x"), x16 = m.var("x16");
  std::ofstream csv(csv_path);
  csv << "ranks,group,probe_ns,command_us,barrier_us,all_reduce_us,broadcast_us,broadcast64_us\n";
  std::printf("%d ranks, %d fresh groups; us per call (in probe round trips)\n%6s %9s %15s %15s %15s %15s %15s\n",
              ranks, groups, "group", "probe ns", "empty command", "barrier", "all_reduce 4 B", "broadcast 4 B",
              "broadcast 64 B");
  for (int g = 0; g < groups; ++g) {
    const double probe = bench::cache_line_round_trip_ns(0, 1);
    synk::fork(ranks, Backend::Cpu);
    rt::ProcessGroup& group = *current_group();
    synk::broadcast(x, synk::testing::make_array<float>({1}, {1.0f}));
    const double command = bench::seconds_per_call(reps, [&] { group.run(rt::CommandKind::Ping, {}, nullptr); });
    const double barrier = bench::seconds_per_call(reps, [&] {
      group.run(kBarrierCommand, {}, [&group] { group.master_context().barrier(); });
    });
    const double reduce = bench::seconds_per_call(reps, [&] { synk::all_reduce(x, Op::Sum); });
    synk::broadcast(x16, synk::testing::make_array<float>({16}, std::vector<float>(16, 1.0f)));
    const double bcast = bench::seconds_per_call(reps, [&] { synk::broadcast(x); });
    const double bcast64 = bench::seconds_per_call(reps, [&] { synk::broadcast(x16); });
    synk::close();
    auto cell = [probe](double s) {
      return probe > 0 ? fmt::format("{:.2f} ({:.1f})", s * 1e6, s * 1e9 / probe) : fmt::format("{:.2f}", s * 1e6);
    };
    std::printf("%6d %9.0f %15s %15s %15s %15s %15s\n", g + 1, probe, cell(command).c_str(), cell(barrier).c_str(),
                cell(reduce).c_str(), cell(bcast).c_str(), cell(bcast64).c_str());
    std::fflush(stdout);
    csv << ranks << "," << g << "," << probe << "," << command * 1e6 << "," << barrier * 1e6 << "," << reduce * 1e6
        << "," << bcast * 1e6 << "," << bcast64 * 1e6 << "\n";
  }
  csv.close();
  std::printf("CSV: %s\n", csv_path.c_str());
  const std::string plot =
      fmt::format("/usr/bin/python3 {}/bench/plot_command_latency.py {} {}", SYNK_SOURCE_DIR, png_path, csv_path);
  if (std::system(plot.c_str()) == 0) std::printf("plot: %s\n", png_path.c_str());
  else std::printf("plot not drawn (needs /usr/bin/python3 with matplotlib): %s\n", plot.c_str());
  return 0;
}
