// One launch of the multi-node benchmark (bench/multinode_bench.py starts several under mpirun
// and reports their spread): on K nodes of R ranks, synk's all_reduce (float32 sum) of one shared
// variable from 1 KiB to 256 MiB against MPI_Allreduce among the same leader processes, and an
// empty call of a tiny function against an MPI_Barrier round trip, and get_value of a rank on
// the last node (16 bytes) against an MPI_Bcast of 16 bytes from that node, in the same run. Each
// batch is timed by its slowest leader (the median over batches, bench_timing.h). Node 0 prints:
//   allreduce BYTES SYNK_SECONDS MPI_SECONDS
//   call SYNK_SECONDS BARRIER_SECONDS
//   get_value SYNK_SECONDS BCAST_SECONDS
//
//   mpirun -np K multinode_bench RANKS_PER_NODE [MAX_BYTES] [REPS]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_timing.h"
#include "runtime/testing.h"
#include "synk/jit.h"

using namespace synk;

namespace {

// Seconds of `calls` calls of `one`, the slowest leader's.
template <class F>
double slowest(int calls, F&& one) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < calls; ++i) one();
  double mine = MPI_Wtime() - t0, worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const int local = argc > 1 ? std::atoi(argv[1]) : 1;
  const size_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : size_t(256) << 20;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  rt::ModuleSpec spec;
  spec.symbols = {"n"};
  spec.shareds = {synk::testing::shared("x", rt::DType::F32, {synk::testing::sym(0)})};
  Module m = synk::module(spec);
  Var x = m.var("x");
  jit::Module tiny = jit::compile_string("fn tiny(bcast y: f32[4]) {\n  out z: sum = sum(y);\n}\n");
  Function call = tiny.function("tiny");
  synk::fork(local);   // initialises MPI under mpirun (synk's plugin); this program then uses it too
  const bool speaker = synk::node() == 0;
  std::vector<float> buf;
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    buf.assign(bytes / sizeof(float), 1.0f);
    synk::broadcast(x, ArrayRef{buf.data(), rt::DType::F32, {int64_t(buf.size())}});
    const double s = bench::median_seconds_per_call(reps, [&](int calls) {
      return slowest(calls, [&] { synk::all_reduce(x, Op::Sum); });
    });
    const double mpi = bench::median_seconds_per_call(reps, [&](int calls) {
      return slowest(calls, [&] {
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(buf.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      });
    });
    if (speaker) std::printf("allreduce %zu %.9e %.9e\n", bytes, s, mpi);
    std::fflush(stdout);
  }
  std::vector<float> ones(4, 1.0f);
  Data y = data<float>(ones, {4});
  const double s = bench::median_seconds_per_call(reps, [&](int calls) { return slowest(calls, [&] { call({y}); }); });
  const double barrier = bench::median_seconds_per_call(
      reps, [&](int calls) { return slowest(calls, [&] { MPI_Barrier(MPI_COMM_WORLD); }); });
  if (speaker) std::printf("call %.9e %.9e\n", s, barrier);
  // get_value of the last rank (on the last node): its node's leader broadcasts 16 bytes.
  buf.assign(4, 2.0f);
  synk::broadcast(x, ArrayRef{buf.data(), rt::DType::F32, {4}});
  const int last = synk::size() - 1, last_node = synk::nodes() - 1;
  const double get = bench::median_seconds_per_call(
      reps, [&](int calls) { return slowest(calls, [&] { (void)synk::get_value(last, x); }); });
  const double bcast = bench::median_seconds_per_call(reps, [&](int calls) {
    return slowest(calls, [&] { MPI_Bcast(buf.data(), 4, MPI_FLOAT, last_node, MPI_COMM_WORLD); });
  });
  if (speaker) std::printf("get_value %.9e %.9e\n", get, bcast);
  synk::close();
  return 0;
}
