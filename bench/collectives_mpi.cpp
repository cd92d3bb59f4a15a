// The baseline of collectives_bench: OpenMPI's MPI_Allreduce (in place, float32, sum) over its
// shared-memory transport, timed the same way as synk's all_reduce (the median over short batches
// of back-to-back calls, the slowest rank counts). Run by collectives_bench through
//   mpirun --allow-run-as-root --oversubscribe -np N --mca btl self,vader collectives_mpi MIN MAX REPS
// Prints one line per size on rank 0: "bytes seconds_per_call", then "latency seconds" for one float.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_timing.h"

namespace {

// Seconds per call of an in-place all-reduce of `count` floats, timed as collectives_bench times
// synk's, each batch by its slowest rank.
double time_allreduce(std::vector<float>& buf, size_t count, int reps) {
  return synk::bench::median_seconds_per_call(reps, [&](int calls) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < calls; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = MPI_Wtime() - t0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
  });
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t min_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  size_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : size_t(256) << 20;
  int reps = argc > 3 ? std::atoi(argv[3]) : 9;
  std::vector<float> buf(max_bytes / sizeof(float), 1.0f);
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    double s = time_allreduce(buf, bytes / sizeof(float), reps);
    if (rank == 0) std::printf("%zu %.9e\n", bytes, s);
  }
  double latency = time_allreduce(buf, 1, reps);
  if (rank == 0) std::printf("latency %.9e\n", latency);
  MPI_Finalize();
  return 0;
}
