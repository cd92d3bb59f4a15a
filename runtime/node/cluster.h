// Several machines ("nodes") under MPI: one leader process per node (the master of its node's
// process group) talks to the other leaders; workers never touch MPI. This header is the whole
// contract between the runtime and the MPI transport, which lives in a plugin (libsynk_mpi.so,
// mpi_cluster.cpp) loaded with dlopen only when the program was started by mpirun, so a program
// run without mpirun loads no MPI library at all.
//
// Model (docs/multinode.md): `mpirun -np K app` starts K leaders; each forks its R local ranks
// (synk::fork) and only then initialises MPI (OpenMPI warns against fork() after MPI_Init).
// Global rank = node * R + local rank; every node must fork the same R. Leaders run the same
// program (SPMD): each cross-node step is a collective among the leaders in program order.
//
// Errors: a peer that stops answering, or a local group that fails in the middle of a cross-node
// step, cannot be reported through MPI (its collectives have no timeout and cannot be cancelled),
// so the leader prints the error naming its node and rank and aborts the whole job
// (MPI_Abort), which makes mpirun end every other leader, whose signal handlers remove their
// workers and shared memory (runtime/group/cleanup.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace synk::rt {

// The transport between node leaders (implemented by the MPI plugin). Every call is collective
// over the leaders: all of them make it, in the same order. Waits poll: between tests of a
// pending request the transport calls `poll`, which may throw to give up (the caller then aborts
// the job, see above).
// What a transfer throws when a peer sent another number of bytes than this leader exchanges:
// the leaders passed different lengths, because a value has another shape on another node or
// because the leaders are not in the same collective.
struct LengthMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The reductions the transport does; avg is the caller's sum then a division.
enum class NodeOp : uint8_t { Sum, Prod, Max, Min };

class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual int node() const = 0;     // this leader's index, 0..nodes()-1 (its MPI rank)
  virtual int nodes() const = 0;
  virtual std::string host() const = 0;
  // Whether a thread other than the main one may make the calls, one thread at a time (MPI
  // granted MPI_THREAD_SERIALIZED): the overlapped gradient all-reduce's helper needs it.
  virtual bool serialized_threads() const = 0;
  // Every node's bytes in node order (lengths may differ).
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // `bytes` of node `root` on every node (any length).
  virtual void broadcast(std::string& bytes, int root) = 0;
  // Node `root` holds one message per node (`parts`, nodes() of them; ignored elsewhere); every
  // node gets its own.
  virtual std::string scatter(const std::vector<std::string>& parts, int root) = 0;
  // Every node's `bytes` bytes in node order into `all` (nodes() * bytes): every node passes the
  // same length, and one that passed another is an error on the nodes that see it.
  virtual void all_gather_equal(const void* mine, size_t bytes, void* all) = 0;
  // Whether gathering `bytes` from every node (all_gather_equal) and reducing locally is faster
  // than the transport's all_reduce of them.
  virtual bool gather_beats_all_reduce(size_t bytes) const = 0;
  // In place over the leaders, element-wise. F16/BF16 are not supported (the caller converts).
  virtual void all_reduce(void* data, size_t count, DType dtype, NodeOp op) = 0;
  // A buffer of `bytes` split into one part per node, node n's part being bytes [bounds[n],
  // bounds[n+1]) (nodes() + 1 bounds, the same on every node): whether the transport moves such
  // parts (exchange_parts, all_gather_parts) for this length and node count.
  virtual bool splits_over_nodes(size_t bytes) const = 0;
  // Every node's part node() of `data`, in node order, into `gathered` (nodes() times this node's
  // part). A peer whose part has another length is an error on the nodes that see it.
  virtual void exchange_parts(const void* data, std::span<const size_t> bounds, void* gathered) = 0;
  // In place: every node's part of `data` from that node to every node.
  virtual void all_gather_parts(void* data, std::span<const size_t> bounds) = 0;
  // Whether a float sum of `bytes` over the nodes (reduce_over_nodes) adds element i as
  // x_0[i] + x_1[i] + ... in node order whatever the length, so that a buffer reduced in pieces
  // gets the bits of the whole: between 2 nodes always (two operands add the same in either
  // order), on more when the parts are split over the nodes.
  bool sums_in_node_order(size_t bytes) const { return nodes() == 2 || splits_over_nodes(bytes); }
  // Before abort(): tells every other leader why the job ends (they raise it from the exchange
  // they wait in, print it and end too), and waits, at most `wait_s`, until each has answered
  // with its own notice, so that every leader that can still speak has said why before mpirun
  // ends the processes. A leader stuck in a blocking transfer never answers.
  virtual void announce_abort(const std::string& message, double wait_s) = 0;
  [[noreturn]] virtual void abort(int code) = 0;
  // The last exchange, made by synk::close() before finalize(): returns when every leader is
  // closing, and throws when another leader is still making calls. all_gather, met by a closing
  // leader's agree_to_close, throws too, naming it: a leader that closed early is an error on
  // every leader at once instead of a wait for SYNK_NODE_TIMEOUT_S.
  virtual void agree_to_close() = 0;
  virtual void finalize() = 0;   // MPI_Finalize; idempotent

  std::function<void()> poll;
  // The current step's deadline (steady clock, ns; 0: none), and what runs, on another thread,
  // when a step that cannot poll (a blocking transfer) passes it: it must end the process
  // without MPI (the signal path of runtime/group/cleanup.h), and mpirun then ends the job.
  std::atomic<int64_t> deadline_ns{0};
  void (*on_stuck)() = nullptr;
};

// Whether this process was started by an MPI launcher (mpirun/mpiexec of OpenMPI or a PMIx
// launcher): the environment says so. SYNK_MPI=0 ignores the launcher (one node).
bool started_by_mpi_launcher();

// Loads the plugin, initialises MPI and checks that every leader forked `local_ranks` ranks on
// the same backend (a UsageError on every leader naming the nodes that differ). Call after the
// local workers were forked; `check_local` throws when a local worker died (polled while
// waiting). SYNK_MPI_PLUGIN overrides the plugin's path.
void start_cluster(int local_ranks, const std::string& backend_name, std::function<void()> check_local);
// Finalises MPI (after the local group closed). The process cannot start a cluster again.
void stop_cluster();
bool cluster_finalized();

// The running cluster, or null (one node).
Cluster* cluster();
int cluster_node();            // 0 without a cluster
int cluster_nodes();           // 1 without a cluster
int cluster_local_ranks();     // ranks per node (the local group's size)

// Runs `step` (a cross-node exchange); if it throws, prints the error naming this node and
// aborts the whole job (see above): a leader cannot leave its peers waiting in a collective.
void cross_node(const char* what, const std::function<void()>& step);
// cross_node for a thread other than the main one (the overlapped gradient all-reduce's helper),
// while the main thread makes no cross-node call: `poll` stands in, while the step waits, for the
// local group's checks, which only the main thread may run. An exception thrown by `poll` leaves
// the step and reaches the caller without ending the job (the main thread is ending it already,
// naming the cause); any other error ends the job as in cross_node.
void cross_node_off_main(const char* what, const std::function<void()>& step, void (*poll)());
// Prints `message` naming this node and ends every process of the job (MPI_Abort).
[[noreturn]] void abort_job(const std::string& message);

}  // namespace synk::rt
