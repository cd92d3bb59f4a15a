// Prints where synk placed this node's ranks under mpirun: the rank count fork(0) chose (one per
// CPU the leader may use) and the CPU the leader's rank 0 is pinned to. placement.sh checks them
// against the host's CPUs for mpirun's default binding, --bind-to none and --bind-to core
// (runtime/node/placement.h).
#include <sched.h>

#include <cstdio>

#include "synk/synk.h"

int main() {
  try {
    synk::fork(0);
    cpu_set_t mask;
    CPU_ZERO(&mask);
    sched_getaffinity(0, sizeof mask, &mask);
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
      if (CPU_ISSET(c, &mask)) first = c;
    std::printf("node %d local_size %d cpu %d\n", synk::node(), synk::local_size(), first);
    synk::close();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "placement: %s\n", e.what());
    return 1;
  }
}
