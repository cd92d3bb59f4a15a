// Arrays across nodes: the pieces of the collectives on shared variables that the leaders
// exchange in multi-node runs (synk/collectives.cpp, exec.cpp), on top of the byte-level Cluster
// (runtime/node/cluster.h). Each is collective over the leaders and aborts the job when a leader stops
// answering (cross_node).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/call/descriptor.h"
#include "runtime/coll/ops.h"
#include "runtime/node/cluster.h"

namespace synk::rt {

// The transport's reduction for `op` (avg travels as a sum).
NodeOp node_op(CollOp op);

// In place on every leader: `count` elements reduced over the leaders with `op` (avg: the sum).
// Where the transport says it is faster (small ones), every node's elements are gathered and
// reduced here in node order (the same bits on every leader and every run); otherwise by the
// transport's all_reduce. Call inside cross_node.
void reduce_over_nodes(void* data, size_t count, DType dtype, CollOp op);
// In place on every leader: the reduction over the leaders of each array (equal shapes and
// dtypes everywhere); avg is the sum divided by the node count. F16/BF16 are reduced in float32
// and rounded back once.
void all_reduce_across_nodes(std::vector<Array>& arrays, CollOp op, const char* what);
// The same on the values of shared variables (32- and 64-bit or 8-bit elements; `names` name
// them), in one cross-node step. MPI cannot tell a leader that another one passed a different
// length, so a failed transfer ends the job with this node's shapes and that likely cause.
void all_reduce_values_across_nodes(std::span<Array* const> arrays, std::span<const std::string* const> names,
                                    CollOp op, const char* what);
// Node `root`'s arrays (dtype, shape and values) on every leader.
void broadcast_across_nodes(std::vector<Array>& arrays, int root, const char* what);
// Node `root` holds one list of arrays per node (`per_node`, ignored elsewhere); each leader
// gets its own list.
std::vector<Array> scatter_across_nodes(const std::vector<std::vector<Array>>& per_node, int root, const char* what);
// Every leader's arrays, in node order ([node][array]).
std::vector<std::vector<Array>> all_gather_across_nodes(const std::vector<Array>& mine, const char* what);
// Each array concatenated along axis 0 over the nodes, in node order, on every leader (a
// UsageError on every leader when two nodes' arrays differ past axis 0; `names` name them).
std::vector<Array> concat_across_nodes(const std::vector<Array>& mine, const std::vector<std::string>& names,
                                       const char* what);

}  // namespace synk::rt
