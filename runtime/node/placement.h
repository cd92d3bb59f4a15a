// Where a node's ranks run when mpirun started the leader. OpenMPI binds each process it starts:
// to one core when it starts two or fewer, to a package when more. synk's leader forks the
// node's ranks after that, and they inherit the binding, so `mpirun -np 2 app` without
// `--bind-to none` would put every rank of a node on one core, and `synk::fork(0)` (one rank per
// CPU this process may use) would start one. claim_node_cpus undoes the launcher's *default*
// binding (and places `--bind-to none`) before the fork: a leader alone on its host takes every
// CPU the host lets it use; several leaders on one host (a test of several "nodes" on one
// machine) take equal consecutive shares, so that their ranks never meet on a CPU. A binding the
// user asked for (`--bind-to core`, `socket`, ...) is kept.
#pragma once

#include <string>

namespace synk::rt {

// Call before forking the node's ranks, only under an MPI launcher. Returns what it did, for
// SYNK_VERBOSE ("" when it left the binding alone).
std::string claim_node_cpus();

}  // namespace synk::rt
