// The helpers the master's side of the collectives shares between its two files
// (collectives.cpp: reductions, broadcast, one rank's values; collectives_rows.cpp: scatter,
// gather, all_gather, shapes): option and argument checks, and running one collective's
// descriptor on the group. Not part of the public API.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/call/registry.h"
#include "runtime/coll/exec.h"
#include "runtime/group/process_group.h"
#include "synk/collectives.h"

namespace synk::collectives_internal {

// A shared variable a collective names: where the runtime keeps it and its declaration.
struct Target {
  rt::CollVar cv;
  rt::ModuleEntry* module = nullptr;
  const rt::SharedSpec* spec = nullptr;
  const std::string& name() const { return spec->name; }
};

CollectiveOptions merged(const char* what, const CollectiveOptions& o);
rt::ProcessGroup& group_for(const char* what);   // UsageError when no group runs
int ranks_now();                                  // global ranks (1 without a group)
bool across_nodes(const char* what);              // whether the collective spans nodes
std::vector<Target> targets(const char* what, const std::vector<Var>& vars);
// Rank `rank`'s shape of `t` (the master's record of the workers' shapes).
const std::vector<int64_t>& shape_on(rt::ProcessGroup* g, const Target& t, int rank);
void require_equal_shapes(const char* what, rt::ProcessGroup& g, const Target& t, const char* instead);
void require_rows(const char* what, rt::ProcessGroup& g, const Target& t);
void require_length_allowed(const char* what, const Target& t, int64_t rows, int rank);
rt::Array conform(const char* what, const Target& t, const Value& v, size_t index, bool force_cast = false);
void check_value_count(const char* what, const std::vector<Target>& ts, const Values& values);

void fill_descriptor(rt::CollDescriptor& d, const std::vector<Target>& ts, const CollectiveOptions& o);
rt::CollDescriptor& descriptor();   // the calling thread's, cleared
// The start of most collectives: the options merged with the defaults, the group, the checked
// variables, and a fresh descriptor of `kind` for them.
struct Setup {
  CollectiveOptions o;
  rt::ProcessGroup& g;
  std::vector<Target> ts;
  rt::CollDescriptor& d;
};
Setup setup(const char* what, rt::CollKind kind, const Vars& vars, const CollectiveOptions& options);
// Runs `d` on every rank of `g`; errors become exceptions naming `what`.
void run(const char* what, rt::ProcessGroup& g, rt::CollDescriptor& d, const std::vector<Target>& ts,
         rt::MasterIO& io);
// The master's values of `vars` to every rank of this node.
void broadcast_local(const char* what, const Vars& vars, const CollectiveOptions& options);

// Across nodes, node 0 alone checks the values of some collectives (the others' are ignored)
// and sends its error, if any, in place of them: `status_array` carries it (empty: none) as the
// first array of the message, and `throw_node_zero_error` raises it on the other leaders.
rt::Array status_array(const std::string& error);
void throw_node_zero_error(const std::vector<rt::Array>& message);

// SYNK_CHECK_NODES=1 (docs/multinode.md): before a collective's first cross-node step the leaders
// compare what each is about to do (the collective, its variables, and their shapes where they
// must be equal), in one small all-gather. Leaders that differ get a UsageError naming every
// node's collective. When one leader's own checks refuse it, the others get that leader's error
// at once, instead of waiting for it until SYNK_NODE_TIMEOUT_S. Off by default, because the round
// costs as much as an all-reduce of 1 KiB.
// Use: `return node_checked(what, [&] { ...; NodeCheck::agree([&] { return detail; }); ... })`, with
// agree before the body's first cross-node step, on every path that crosses nodes.
class NodeCheck {
 public:
  explicit NodeCheck(const char* what);   // the outermost scope of a thread owns the check
  NodeCheck(const NodeCheck&) = delete;
  NodeCheck& operator=(const NodeCheck&) = delete;
  ~NodeCheck();
  // The leaders compare this collective (`detail()` says what it does to which variables); once
  // per scope, a no-op when the check is off or the job has one node.
  static void agree(const std::function<std::string()>& detail);
  // This leader refused the collective before agree: the others learn it (then rethrow).
  void refused(const std::exception& e);
  // An InternalError when the collective ended without agree (a path that forgot it).
  void finished() const;
  static bool enabled();

 private:
  bool owner_ = false;
};

// "'w' f32[10, 5], 'b' f32[5]" (`shapes`: the master's shapes too) for NodeCheck::agree.
std::string describe_targets(rt::ProcessGroup* g, const std::vector<Target>& ts, bool shapes);

template <class Body>
decltype(auto) node_checked(const char* what, Body&& body) {
  NodeCheck check(what);
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      check.finished();
    } else {
      auto result = body();
      check.finished();
      return result;
    }
  } catch (const std::exception& e) {
    check.refused(e);
    throw;
  }
}

}  // namespace synk::collectives_internal
