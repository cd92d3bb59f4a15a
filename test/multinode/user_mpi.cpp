// A program that uses MPI itself beside synk (2 leaders x 1 rank, run_multinode.sh's launch):
// each leader posts a receive for any tag from any node on MPI_COMM_WORLD, then makes synk calls
// and collectives whose leaders exchange point-to-point messages, then sends its own message to
// the other leader. synk talks on a communicator of its own, so the user's receive gets the
// user's message and synk's messages reach synk (sharing MPI_COMM_WORLD, the receive took synk's
// first message and synk waited for it until SYNK_NODE_TIMEOUT_S).
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "synk/jit.h"

using namespace synk;

int main() {
  try {
    jit::Module m = jit::compile_string(
        "shared v: f32[k];\nfn total(scatter x: f32[n]) {\n  out s: sum = sum(x);\n}\n");
    Function total = m.function("total");
    synk::fork(1);
    if (synk::nodes() != 2) {
      std::fprintf(stderr, "user_mpi: run me on 2 nodes under mpirun\n");
      return 2;
    }
    const int me = synk::node(), other = 1 - me;
    char inbox[64] = {};
    MPI_Request user_receive;
    MPI_Irecv(inbox, sizeof inbox, MPI_CHAR, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &user_receive);

    std::vector<float> xs(100, 1.0f);
    const float s = total({data<float>(xs, {100})})[0].data<float>()[0];
    Var v = m.runtime_module().var("v");
    std::vector<float> mine(2048, float(me + 1));   // 8 KB: the direct exchange between 2 leaders
    set_value(me, v, ArrayRef{mine.data(), rt::DType::F32, {2048}});
    set_value(other, v, ArrayRef{mine.data(), rt::DType::F32, {2048}});
    all_reduce(v, "sum");
    const Array got = get_value(1, v);   // node 1's rank: a broadcast from node 1

    const std::string note = "user message from node " + std::to_string(me);
    MPI_Send(note.c_str(), int(note.size() + 1), MPI_CHAR, other, 7, MPI_COMM_WORLD);
    MPI_Status status;
    MPI_Wait(&user_receive, &status);
    const std::string expected = "user message from node " + std::to_string(other);
    const bool ok = s == 100.0f && got.data<float>()[0] == 3.0f && got.data<float>()[2047] == 3.0f &&
                    expected == inbox && status.MPI_TAG == 7;
    std::printf("node %d: call %g, all_reduce %g, user inbox '%s' (tag %d): %s\n", me, s, got.data<float>()[0], inbox,
                status.MPI_TAG, ok ? "PASS" : "FAIL");
    synk::close();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "user_mpi (node %d): %s\n", synk::node(), e.what());
    return 1;
  }
}
